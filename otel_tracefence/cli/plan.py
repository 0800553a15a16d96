"""``tracefence plan FILE|-``: plan the traces in a file and print them."""

from __future__ import annotations

import argparse
import sys
from typing import Iterable, Sequence, TypeVar

from otel_tracefence.cli import table
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import Decision, ReplayClass, TracePlan
from otel_tracefence.core.reasons import RESULT_NOT_RECORDED
from otel_tracefence.pipeline.annotate import REPLAY_CLASS
from otel_tracefence.pipeline.documents import plan_document
from otel_tracefence.readers.detect import FORMATS
from otel_tracefence.readers.errors import UnreadableInput, decode_utf8

EXIT_OK, EXIT_FAIL_ON, EXIT_REJECTED = 0, 1, 2
T = TypeVar("T")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="plan the traces in a file",
        description="Plan every trace in FILE (OTLP/JSON, JSON rows, NDJSON rows or CSV rows; - for standard input); "
        "a file of plans this command wrote (--format json, either schema) is read back as written. "
        "Exit 0 on success, 1 when --fail-on is met, 2 when the input is rejected.",
    )
    parser.add_argument("file", help="input file, or - for standard input")
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


def _read(path: str, limit: int) -> bytes:
    """The bytes of ``path`` (``-``: standard input), at most ``limit`` (``limits.max_input_bytes``): one byte more
    is read to see there are more, never the rest. Raises :class:`UnreadableInput` for a larger (or endless) input,
    naming the limit (docs/DECISIONS.md 504), and ``OSError`` for a file that cannot be opened."""
    if path == "-":
        data = sys.stdin.buffer.read(limit + 1)
    else:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    if len(data) > limit:
        raise UnreadableInput(f"the input is larger than limits.max_input_bytes ({limit} bytes): not read; raise the limit or split the input")
    return data


def terminal_progress(items: Sequence[T], total: int) -> Iterable[T]:
    """``items`` with a progress bar on standard error (tqdm) when it is a terminal; quiet otherwise.

    The bar is cleared when done. The ``TQDM_*`` variables tune it (``TQDM_DELAY=2``: only past 2 s).
    """
    if not sys.stderr.isatty():
        return items
    from tqdm import tqdm

    return tqdm(items, total=total, desc="tracefence plan", unit="trace", file=sys.stderr, leave=False, dynamic_ncols=True)


def run(args: argparse.Namespace, config: TraceFenceConfig) -> int:
    text = decode_utf8(_read(args.file, config.limits.max_input_bytes))
    outcome = plan_document(text, args.input_format, config, on_malformed=args.on_malformed, progress=terminal_progress)
    for message in outcome.messages:
        print(f"tracefence plan: {args.file}: {message}", file=sys.stderr)
    if outcome.rejected:
        return EXIT_REJECTED
    plans = outcome.plans
    if args.fail_on and not plans:
        # A gate that passes on nothing fails open: an empty export is an input to fix (docs/DECISIONS.md 206).
        print(f"tracefence plan: {args.file}: --fail-on {args.fail_on}: nothing to check, so the gate does not pass; nothing was planned", file=sys.stderr)
        return EXIT_REJECTED
    if args.format == "json":
        sys.stdout.write(outcome.json_lines())
    else:
        print(table.render(plans))
    if args.fail_on:
        met = [p for p in plans if meets_fail_on(p, args.fail_on)]
        for plan in met:
            print(f"tracefence plan: {args.file}: {fail_on_line(plan, args.fail_on)}", file=sys.stderr)
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
