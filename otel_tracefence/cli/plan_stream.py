"""``tracefence plan --stream FILE...``: OTLP/JSON lines planned a trace at a time, each trace's plan printed as soon as
the next trace begins (:func:`otel_tracefence.pipeline.document_stream.plan_lines`).

What differs from ``tracefence plan`` without it: plans come in the order their traces are in the input (not sorted
by trace id), each printed, and standard output flushed, as it is made; ``--format table`` prints one table per part
of the input (a trace, or the traces that share its lines). A file that is refused part-way (a line that is not
JSON, a malformed span with ``--on-malformed reject``, a trace that comes again) ends the run there with exit 2:
what was printed before stays printed, and standard error says where it stopped. ``--fail-on`` names each trace that
meets it as it is printed and exits 1 at the end. On a terminal, standard error shows the bytes read and the traces
planned.
"""

from __future__ import annotations

import argparse
import sys

from otel_tracefence.cli import table
from otel_tracefence.cli.inputs import input_lines
from otel_tracefence.cli.plan_common import EXIT_FAIL_ON, EXIT_OK, EXIT_REJECTED, fail_on_line, meets_fail_on, reading_progress
from otel_tracefence.cli.plan_common import say as _say
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.pipeline.document_stream import plan_lines
from otel_tracefence.pipeline.documents import PlanOutcome
from otel_tracefence.readers.errors import UnreadableInput


def run_stream(args: argparse.Namespace, config: TraceFenceConfig) -> int:
    """Plan ``args.files`` one after another with ``--stream``; the exit code as ``tracefence plan`` gives it."""
    if args.input_format not in ("auto", "otlp-json"):
        _say(", ".join(args.files), f"--stream reads OTLP/JSON lines, not --input-format {args.input_format}; nothing was planned")
        return EXIT_REJECTED
    met = planned = 0
    for path in args.files:
        try:
            with reading_progress(path) as bar:
                lines = input_lines(path, config.limits.max_input_bytes, bar.update if bar is not None else None)
                for part in plan_lines(lines, config, on_malformed=args.on_malformed or "review"):
                    for message in part.outcome.messages:
                        _say(path, message)
                    if part.outcome.rejected:
                        _say(path, f"stopped at lines {part.first_line}-{part.last_line}: the plans printed before stand; nothing after was read")
                        return EXIT_REJECTED
                    _print(part.outcome, args.format)
                    planned += len(part.outcome.plans)
                    if bar is not None:
                        bar.set_postfix_str(f"{planned} trace(s) planned", refresh=False)
                    if args.fail_on:
                        for plan in part.outcome.plans:
                            if meets_fail_on(plan, args.fail_on):
                                met += 1
                                _say(path, fail_on_line(plan, args.fail_on))
        except UnreadableInput as exc:
            _say(path, f"{exc}; nothing after it was planned")
            return EXIT_REJECTED
        except BrokenPipeError:  # the reader of standard output went away (| head): the command line ends quietly
            raise
        except OSError as exc:
            _say(path, f"{exc.strerror or exc}; nothing was planned")
            return EXIT_REJECTED
    if args.fail_on and not planned:
        _say(", ".join(args.files), f"--fail-on {args.fail_on}: nothing to check, so the gate does not pass")
        return EXIT_REJECTED
    return EXIT_FAIL_ON if met else EXIT_OK


def _print(outcome: PlanOutcome, fmt: str) -> None:
    if fmt == "json":
        sys.stdout.write(outcome.json_lines())
    elif outcome.plans:
        print(table.render(outcome.plans) + "\n")
    sys.stdout.flush()
