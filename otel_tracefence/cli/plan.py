"""``tracefence plan FILE...``: plan the traces in each file (``-``: standard input; gzip read as such) and print them.

Each file is planned alone, in the order given, and the plans are printed in that order; a file that cannot be
read or is rejected rejects the run (exit 2, nothing printed on standard output), each such file named with its
reason. A trace split across two files is planned in each as the part it has there (partial: a span names a parent
the file lacks); ``cat`` the files into one to plan it whole (docs/DECISIONS.md 655)."""

from __future__ import annotations

import argparse
import sys
from typing import Iterable, Sequence, TypeVar

from otel_tracefence.cli import table
from otel_tracefence.cli.inputs import STDIN, read_input
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import Decision, ReplayClass, TracePlan
from otel_tracefence.core.reasons import RESULT_NOT_RECORDED
from otel_tracefence.pipeline.annotate import REPLAY_CLASS
from otel_tracefence.pipeline.documents import plan_document
from otel_tracefence.readers.detect import FORMATS
from otel_tracefence.readers.errors import UnreadableInput, decode_text_file

EXIT_OK, EXIT_FAIL_ON, EXIT_REJECTED = 0, 1, 2
T = TypeVar("T")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="plan the traces in one or more files",
        description="Plan every trace in each FILE (OTLP/JSON, JSON rows, NDJSON rows or CSV rows; - for standard input; "
        "gzip-compressed files, such as *.gz, are decompressed), each file alone, in the order given; "
        "a file of plans this command wrote (--format json, either schema) is read back as written, each class checked against its own steps (never safer than they plan). "
        "Exit 0 on success, 1 when --fail-on is met, 2 when the input is rejected.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="input files (plain or gzip), or - for standard input")
    parser.add_argument("--input-format", choices=("auto", *FORMATS), default="auto", help="input format (default: auto-detect)")
    parser.add_argument("--format", choices=("json", "table"), default="json", help="json: one TracePlan per line (enum values as words: review, skip; plan JSON schema 2); table: for people")
    parser.add_argument("--fail-on", choices=[c.value for c in ReplayClass if c is not ReplayClass.DYNAMIC], help="exit 1 when any trace's class is at or past this one, or any trace is partial (steps may be missing)")
    parser.add_argument(
        "--on-malformed",
        choices=("reject", "review"),
        default=None,
        help="review (default for OTLP/JSON): plan a span that cannot be read whole as a review step, as the processor "
        "and the service do, with a warning naming it; reject (default for rows): exit 2 naming each bad row or span",
    )
    parser.set_defaults(run=run)


def terminal_progress(items: Sequence[T], total: int) -> Iterable[T]:
    """``items`` with a progress bar on standard error (tqdm) when it is a terminal; quiet otherwise.

    The bar is cleared when done. The ``TQDM_*`` variables tune it (``TQDM_DELAY=2``: only past 2 s).
    """
    if not sys.stderr.isatty():
        return items
    from tqdm import tqdm

    return tqdm(items, total=total, desc="tracefence plan", unit="trace", file=sys.stderr, leave=False, dynamic_ncols=True)


def _say(path: str, message: str) -> None:
    print(f"tracefence plan: {path}: {message}", file=sys.stderr)


def run(args: argparse.Namespace, config: TraceFenceConfig) -> int:
    if args.files.count(STDIN) > 1:
        _say(STDIN, "standard input given more than once: it can be read once; nothing was planned")
        return EXIT_REJECTED
    planned: list[tuple[str, TracePlan]] = []
    json_parts: list[str] = []
    rejected = False
    for path in args.files:
        try:
            text = decode_text_file(read_input(path, config.limits.max_input_bytes))
            outcome = plan_document(text, args.input_format, config, on_malformed=args.on_malformed, progress=terminal_progress)
        except UnreadableInput as exc:
            _say(path, f"{exc}; nothing was planned")
            rejected = True
            continue
        except OSError as exc:
            _say(path, f"{exc.strerror or exc}; nothing was planned")
            rejected = True
            continue
        for message in outcome.messages:
            _say(path, message)
        rejected = rejected or outcome.rejected
        planned.extend((path, plan) for plan in outcome.plans)
        json_parts.append(outcome.json_lines())
    if rejected:
        if len(args.files) > 1:
            print("tracefence plan: a file was rejected: nothing was printed", file=sys.stderr)
        return EXIT_REJECTED
    if args.fail_on and not planned:
        # A gate that passes on nothing fails open: an empty export is an input to fix (docs/DECISIONS.md 206).
        _say(", ".join(args.files), f"--fail-on {args.fail_on}: nothing to check, so the gate does not pass; nothing was planned")
        return EXIT_REJECTED
    if args.format == "json":
        sys.stdout.write("".join(json_parts))
    else:
        print(table.render([plan for _, plan in planned]))
    if args.fail_on:
        met = [(path, plan) for path, plan in planned if meets_fail_on(plan, args.fail_on)]
        for path, plan in met:
            _say(path, fail_on_line(plan, args.fail_on))
        if met:
            return EXIT_FAIL_ON
    return EXIT_OK


FAIL_ON_REASONS = 3


def meets_fail_on(plan: TracePlan, fail_on: str) -> bool:
    """True when ``plan`` fails the ``--fail-on`` gate ``fail_on`` (a :class:`ReplayClass` value past ``dynamic``):
    its class is at or past ``fail_on``, or the plan is partial, whatever its class (none too). A partial plan is
    one :func:`~otel_tracefence.pipeline.documents.incomplete` flags (a span names a parent the trace in the file lacks; a ``tracefence.trace.partial``,
    ``.late`` or ``.reasons`` value that is not ``false``): steps may be missing, so no gate passes it, as the
    replay guard refuses it (docs/DECISIONS.md 287, 300)."""
    if plan.partial:
        return True
    return plan.replay_class is not None and plan.replay_class.rank >= ReplayClass(fail_on).rank


PARTIAL_CAUSE = "partial (decided before it was complete, or not whole in this file: steps may be missing)"


def fail_on_line(plan: TracePlan, fail_on: str) -> str:
    """Why ``plan`` met ``--fail-on``: its trace id, class, and the first reasons (with a call id
    each) of the steps that put it in that class, e.g.
    ``fail-on review: trace t1: class review: write_timeout (call c3), +1 more``; a partial plan whose class
    alone would not meet it gives :data:`PARTIAL_CAUSE` instead
    (``fail-on static: trace t1: class injected (partial): partial (...)``; ``class none`` with no tool step)."""
    cls = plan.replay_class
    partial = " (partial)" if plan.partial else ""
    lead = f"fail-on {fail_on}: trace {table.cell(plan.trace_id) if plan.trace_id else '(none)'}: class {cls.value if cls else 'none'}{partial}"
    if cls is None or cls.rank < ReplayClass(fail_on).rank:
        return f"{lead}: {PARTIAL_CAUSE}"
    if cls is ReplayClass.REVIEW:
        causes = [(d.reasons[0] if d.reasons else d.decision.value, d.step.call_id) for d in plan.steps if d.decision in (Decision.REVIEW, Decision.CONFLICT)]
    elif cls is ReplayClass.STATIC:
        causes = [(RESULT_NOT_RECORDED, d.step.call_id) for d in plan.steps if d.decision is Decision.SKIP and not d.step.result_recorded]
    else:
        causes = [(d.reasons[0] if d.reasons else d.decision.value, d.step.call_id) for d in plan.steps if d.decision is Decision.SKIP]
    firsts: dict[str, str] = {}
    for code, call_id in causes:
        firsts.setdefault(code, call_id)
    shown = [f"{code} (call {table.cell(call_id)})" for code, call_id in list(firsts.items())[:FAIL_ON_REASONS]]
    if len(firsts) > FAIL_ON_REASONS:
        shown.append(f"+{len(firsts) - FAIL_ON_REASONS} more")
    if not shown:  # no step puts it there: its spans record the class (recorded_class)
        shown.append(f"recorded by the door that wrote the file ({REPLAY_CLASS})")
    return f"{lead}: {', '.join(shown)}"
