"""``tracefence plan FILE|-``: plan the traces in a file and print them."""

from __future__ import annotations

import argparse
import sys

from otel_tracefence.config import TraceFenceConfig
from otel_tracefence.model import ReplayClass, TracePlan
from otel_tracefence.pipeline import group_request, plan_spans, plan_steps
from otel_tracefence.readers.detect import FORMATS, detect_format
from otel_tracefence.readers.errors import InputError, UnreadableInput, decode_utf8
from otel_tracefence.readers.otlp_json import read_otlp_json
from otel_tracefence.readers.rows import read_rows
from otel_tracefence.schema import plan_to_json
from otel_tracefence.cli import table

EXIT_OK, EXIT_FAIL_ON, EXIT_REJECTED = 0, 1, 2


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="plan the traces in a file",
        description="Plan every trace in FILE (OTLP/JSON, JSON rows, NDJSON rows or CSV rows; - for standard input). "
        "Exit 0 on success, 1 when --fail-on is met, 2 when the input is rejected.",
    )
    parser.add_argument("file", help="input file, or - for standard input")
    parser.add_argument("--input-format", choices=("auto", *FORMATS), default="auto", help="input format (default: auto-detect)")
    parser.add_argument("--format", choices=("json", "table"), default="json", help="json: one TracePlan per line (canonical protobuf JSON); table: for people")
    parser.add_argument("--fail-on", choices=[c.value for c in ReplayClass if c is not ReplayClass.DYNAMIC], help="exit 1 when any trace's class is at or past this one")
    parser.add_argument(
        "--on-malformed",
        choices=("reject", "review"),
        default="reject",
        help="reject (default): exit 2 naming each bad row or span; review: plan them as review steps, as the processor does",
    )
    parser.set_defaults(run=run)


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as handle:
        return handle.read()


def plan_text(text: str, input_format: str, config: TraceFenceConfig) -> tuple[list[TracePlan], list[InputError]]:
    """Plans for every trace in ``text`` (sorted by trace id), and the rows or spans rejected.

    Raises :class:`UnreadableInput` when the text as a whole cannot be read, or is empty.
    """
    if not text.strip():
        raise UnreadableInput("the input is empty: no rows or spans to plan")
    fmt = detect_format(text) if input_format == "auto" else input_format
    if fmt == "otlp-json":
        read = read_otlp_json(text)
        errors = list(read.errors)
        plans = []
        for trace_id, views in sorted(group_request(read.request).items()):
            planned = plan_spans(trace_id, views, config)
            plans.append(planned.plan)
            for d in planned.plan.steps:
                errors.extend(
                    InputError(read.span_lines.get(d.step.span_id, 0), f.field, f.message, d.step.span_id, planned=True)
                    for f in d.step.malformed
                )
        return plans, errors
    rows = read_rows(text, fmt, config)
    return [plan_steps(trace_id, steps, config) for trace_id, steps in sorted(rows.steps.items())], rows.errors


def run(args: argparse.Namespace, config: TraceFenceConfig) -> int:
    text = decode_utf8(_read(args.file))
    plans, errors = plan_text(text, args.input_format, config)
    if errors:
        for error in sorted(errors, key=lambda e: (e.line, e.span_id)):
            print(f"tracefence plan: {args.file}: {error}", file=sys.stderr)
        # A row or span that could not be read at all is missing from the plans: planning the
        # rest would hide it (a dropped write could leave its trace "dynamic"), so always reject.
        if args.on_malformed == "reject" or not all(e.planned for e in errors):
            print(f"tracefence plan: {args.file}: rejected, {len(errors)} error(s); nothing was planned", file=sys.stderr)
            return EXIT_REJECTED
    if args.format == "json":
        for plan in plans:
            print(plan_to_json(plan))
    else:
        print(table.render(plans))
    if args.fail_on:
        threshold = ReplayClass(args.fail_on).rank
        if any(p.replay_class is not None and p.replay_class.rank >= threshold for p in plans):
            return EXIT_FAIL_ON
    return EXIT_OK
