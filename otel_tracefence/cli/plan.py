"""``tracefence plan FILE|-``: plan the traces in a file and print them."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from otel_tracefence.config import TraceFenceConfig
from otel_tracefence.model import Effect, MalformedField, ReplayClass, ToolStatus, ToolStep, TracePlan
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
        default=None,
        help="review (default for OTLP/JSON): plan a span that cannot be read whole as a review step, as the processor "
        "and the service do, with a warning naming it; reject (default for rows): exit 2 naming each bad row or span",
    )
    parser.set_defaults(run=run)


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as handle:
        return handle.read()


def unreadable_span_step(error: InputError) -> ToolStep:
    """The ``review`` step standing for an OTLP span that could not be parsed, in the trace its
    trace id names: it may have been a tool call, so its trace never passes without it."""
    return ToolStep(
        trace_id=error.trace_id,
        call_id=error.span_id,
        tool="",
        effect=Effect.UNKNOWN,
        status=ToolStatus.UNKNOWN,
        sequence=error.line,
        malformed=(MalformedField(error.field, f"span {error.span_id} could not be read: {error.message}"),),
    )


def plan_text(text: str, input_format: str, config: TraceFenceConfig) -> tuple[list[TracePlan], list[InputError]]:
    """Plans for every trace in ``text`` (sorted by trace id), and the rows or spans rejected.

    Raises :class:`UnreadableInput` when the text as a whole cannot be read, or is empty.
    """
    if not text.strip():
        raise UnreadableInput("the input is empty: no rows or spans to plan")
    fmt = detect_format(text) if input_format == "auto" else input_format
    if fmt == "otlp-json":
        read = read_otlp_json(text)
        errors = [replace(e, planned=True) if e.trace_id else e for e in read.errors]
        traces = group_request(read.request)
        unreadable: dict[str, list[ToolStep]] = {}
        for error in errors:
            if error.trace_id:
                traces.setdefault(error.trace_id, [])
                unreadable.setdefault(error.trace_id, []).append(unreadable_span_step(error))
        plans = []
        for trace_id, views in sorted(traces.items()):
            planned = plan_spans(trace_id, views, config, extra_steps=unreadable.get(trace_id, ()))
            plans.append(planned.plan)
            for d in planned.plan.steps:
                errors.extend(
                    InputError(read.span_lines.get(d.step.span_id, 0), f.field, f.message, d.step.span_id, planned=True)
                    for f in d.step.malformed
                    if d.step.span_id  # an unreadable span's step: its error is listed already
                )
        return plans, errors
    rows = read_rows(text, fmt, config)
    return [plan_steps(trace_id, steps, config) for trace_id, steps in sorted(rows.steps.items())], rows.errors


def on_malformed_default(fmt: str) -> str:
    """What a malformed span or row does by default: an OTLP/JSON file is telemetry, planned as the
    processor and the service plan it (the span's step held for review); rows are the seed's own
    input format, whose malformed rows are rejected (docs/DECISIONS.md)."""
    return "review" if fmt == "otlp-json" else "reject"


def run(args: argparse.Namespace, config: TraceFenceConfig) -> int:
    text = decode_utf8(_read(args.file))
    fmt = detect_format(text) if args.input_format == "auto" and text.strip() else args.input_format
    on_malformed = args.on_malformed or on_malformed_default(fmt)
    plans, errors = plan_text(text, fmt, config)
    if errors:
        # A row or span that could not be read at all is missing from the plans: planning the
        # rest would hide it (a dropped write could leave its trace "dynamic"), so always reject.
        rejected = on_malformed == "reject" or not all(e.planned for e in errors)
        label = "" if rejected else "warning: "
        for error in sorted(errors, key=lambda e: (e.line, e.span_id)):
            print(f"tracefence plan: {args.file}: {label}{error}", file=sys.stderr)
        if rejected:
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
