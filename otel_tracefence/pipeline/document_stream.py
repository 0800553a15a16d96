"""An OTLP/JSON Lines input planned a trace at a time (``tracefence plan --stream``).

For files whose traces each sit whole on consecutive lines, as ``tracefence serve``'s output file and the SDK's
file exporters write them (one ``ExportTraceServiceRequest`` per line, a trace's spans on one line or on lines
next to each other): a trace's plan is made as soon as a line of another trace begins, so only the lines of the
traces being read are held (docs/decisions/inputs-outputs.md 891).

The lines read and not yet planned form one *part*: a line joins the part when it names a trace the part names
(or none at all), and a line naming only other traces closes it. A part is planned as :func:`plan_document` plans
a whole file (the same reader, planner, write index and messages), and the parts of a file share one write index,
so a retry meets the write it repeats in an earlier part. A trace that comes again after its part was planned is
not whole on consecutive lines: its plan, made of the part it had, may be safer than the whole trace's, so the
input is refused there, naming the trace and the line (fail closed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.schema import looks_like_plan_json
from otel_tracefence.otlp.json_reader import OtlpRead, read_otlp_json_line
from otel_tracefence.pipeline.documents import PlanOutcome, outcome, plan_read
from otel_tracefence.pipeline.write_index import MemoryWriteIndex
from otel_tracefence.readers.detect import detect_format
from otel_tracefence.readers.errors import InputError, UnreadableInput

STREAM_FORMAT = "otlp-json"


@dataclass(frozen=True)
class StreamPart:
    """One part of the input planned: its lines (``first_line`` to ``last_line``, 1-based), the traces it holds
    (hex trace ids) and what :func:`~otel_tracefence.pipeline.documents.plan_document` would make of them."""

    first_line: int
    last_line: int
    trace_ids: frozenset[str]
    outcome: PlanOutcome


def _trace_ids(read: OtlpRead) -> set[str]:
    ids = {span.trace_id.hex() for resource in read.request.resource_spans for scope in resource.scope_spans for span in scope.spans}
    ids.update(error.trace_id for error in read.errors if error.trace_id)
    return ids


def _first_line_readable(number: int, line: str) -> None:
    """Refuse an input --stream does not read, from its first line: saved plans, rows or CSV."""
    if looks_like_plan_json(line):
        raise UnreadableInput(f"line {number}: a file of saved plans: --stream reads OTLP/JSON lines; read saved plans without --stream")
    fmt = detect_format(line)
    if fmt != STREAM_FORMAT:
        raise UnreadableInput(f"line {number}: reads as {fmt}, not OTLP/JSON lines (one ExportTraceServiceRequest per line): plan it without --stream")


class _Part:
    """The lines read and not planned yet."""

    def __init__(self) -> None:
        self.read = OtlpRead()
        self.trace_ids: set[str] = set()
        self.first = self.last = 0
        self.size = 0

    def add(self, number: int, line: str, read: OtlpRead, trace_ids: set[str]) -> None:
        self.read.request.resource_spans.extend(read.request.resource_spans)
        self.read.errors.extend(read.errors)
        self.read.span_lines.update(read.span_lines)
        self.trace_ids |= trace_ids
        self.first = self.first or number
        self.last = number
        self.size += len(line)

    def empty(self) -> bool:
        return not self.first


def plan_lines(
    lines: Iterable[tuple[int, str]],
    config: TraceFenceConfig,
    *,
    on_malformed: str = "review",
    max_part_bytes: int | None = None,
) -> Iterator[StreamPart]:
    """The parts of ``lines`` (``(line number, text)`` of an OTLP/JSON Lines input, in order), each planned as soon as
    the line after it begins another trace, the last when ``lines`` ends. A part whose outcome is ``rejected`` ends
    the input: nothing after it is read.

    ``on_malformed``: ``review`` or ``reject``, as ``tracefence plan --on-malformed``. ``max_part_bytes`` (default
    ``limits.max_input_bytes``): the most characters one part may hold. Raises :class:`UnreadableInput` for an input
    that is empty or not OTLP/JSON lines (judged from its first line), a line that is not one JSON object, a part
    larger than ``max_part_bytes``, and a trace that comes again after its part was planned.
    """
    limit = max_part_bytes if max_part_bytes is not None else config.limits.max_input_bytes
    index = MemoryWriteIndex(config.write_index_max_entries)
    planned: set[str] = set()
    part = _Part()
    seen_any = False
    for number, line in lines:
        if not line.strip():
            continue
        if not seen_any:
            _first_line_readable(number, line)
            seen_any = True
        read = read_otlp_json_line(number, line)
        ids = _trace_ids(read)
        if not part.empty() and ids and part.trace_ids and not ids & part.trace_ids:  # the part before this line ended
            done = _planned(part, config, index, on_malformed)
            yield done
            if done.outcome.rejected:
                return
            planned |= part.trace_ids
            part = _Part()
        again = ids & planned
        if again:  # after the part that ended here was printed: its plan stands
            raise UnreadableInput(
                f"line {number}: trace {min(again)} comes again after its plan was printed: its spans are not on "
                "consecutive lines, so --stream cannot plan it whole; plan the input without --stream"
            )
        part.add(number, line, read, ids)
        if part.size > limit:
            raise UnreadableInput(
                f"lines {part.first}-{number}: one trace is larger than limits.max_input_bytes ({limit} bytes) and is not "
                "held; raise the limit"
            )
    if not seen_any:
        raise UnreadableInput("the input is empty: no rows or spans to plan")
    if not part.empty():
        yield _planned(part, config, index, on_malformed)


def _planned(part: _Part, config: TraceFenceConfig, index: MemoryWriteIndex, on_malformed: str) -> StreamPart:
    warnings: list[InputError] = []
    plans, errors = plan_read(part.read, config, warnings=warnings, index=index)
    return StreamPart(part.first, part.last, frozenset(part.trace_ids), outcome(plans, errors, warnings, on_malformed))
