"""A whole document planned: OTLP/JSON or rows as text, every trace's plan and the messages ``tracefence plan``
prints. The one function behind the command line, the inspector page (``tracefence ui``) and the replay guard's
``from_file``, so all give the same plans (docs/DECISIONS.md 205, 287, 355)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Sequence, TypeVar

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import SCHEMA_VERSION, ReplayClass, TracePlan
from otel_tracefence.core.reasons import TRACE_ROOT_MISSING
from otel_tracefence.core.schema import PLAN_JSON_SCHEMA_VERSION, looks_like_plan_json, plan_from_json, plan_from_proto, plan_to_json
from otel_tracefence.normalize import SpanView
from otel_tracefence.otlp.json_reader import OtlpRead, read_otlp_json
from otel_tracefence.pipeline.annotate import PLAN_SCHEMA_VERSION, REPLAY_CLASS, TRACE_LATE, TRACE_PARTIAL, TRACE_REASONS
from otel_tracefence.pipeline.plan import group_request, plan_spans, plan_steps
from otel_tracefence.pipeline.write_index import MemoryWriteIndex
from otel_tracefence.planner import plan_trace
from otel_tracefence.planner.replay_class import replay_class
from otel_tracefence.readers.detect import detect_format
from otel_tracefence.readers.errors import InputError, UnreadableInput
from otel_tracefence.readers.rows import read_rows

T = TypeVar("T")


def _no_progress(items: Sequence[T], total: int) -> Iterable[T]:
    return items


def plan_text(
    text: str,
    input_format: str,
    config: TraceFenceConfig,
    *,
    warnings: list[InputError] | None = None,
    progress: Callable[[Sequence[Any], int], Iterable[Any]] = _no_progress,
    reading: Callable[[int], None] | None = None,
    index: MemoryWriteIndex | None = None,
) -> tuple[list[TracePlan], list[InputError]]:
    """Plans for every trace in ``text`` (sorted by trace id), and the rows or spans rejected.

    ``warnings``, when given, receives what was read but ignored (a row column that is no field).
    ``progress`` wraps the traces as they are planned (``progress(traces, count)``), e.g.
    :func:`~otel_tracefence.cli.plan_common.terminal_progress`; ``reading``, when given, is called with the characters of each OTLP/JSON request
    (line) once it is read, before planning begins. ``index``: the write index the traces meet, in the order they
    ended (a new one when ``None``; ``tracefence plan`` passes one to every file of a run, DECISIONS 996). Raises
    :class:`UnreadableInput` when the text as a whole cannot be read, or is empty.
    """
    if not text.strip():
        raise UnreadableInput("the input is empty: no rows or spans to plan")
    fmt = detect_format(text) if input_format == "auto" else input_format
    if fmt == "otlp-json":
        return plan_read(read_otlp_json(text, reading), config, warnings=warnings, progress=progress, index=index)
    rows = read_rows(text, fmt, config)
    if warnings is not None:
        warnings.extend(rows.warnings)
    index = index if index is not None else MemoryWriteIndex(config.write_index_max_entries)
    plans = [
        index.plan_against(plan_steps(trace_id, steps, config), config.limits.max_related_call_ids)
        for trace_id, steps in progress(sorted(rows.steps.items(), key=_row_trace_ended), len(rows.steps))
    ]
    return sorted(plans, key=_trace_id), rows.errors


def plan_read(
    read: OtlpRead,
    config: TraceFenceConfig,
    *,
    warnings: list[InputError] | None = None,
    progress: Callable[[Sequence[Any], int], Iterable[Any]] = _no_progress,
    index: MemoryWriteIndex | None = None,
) -> tuple[list[TracePlan], list[InputError]]:
    """Plans for every trace of the OTLP/JSON ``read`` (sorted by trace id), and the spans rejected, as
    :func:`plan_text` gives them for OTLP/JSON text. ``index``: the write index the traces meet, in the order they
    ended (a new one when ``None``; ``tracefence plan --stream`` passes one index to every part of a file)."""
    errors = [replace(e, planned=True) if e.trace_id else e for e in read.errors]
    traces = group_request(read.request)
    for error in errors:
        if error.trace_id:  # it may have been a tool call: it stands in its trace as a review step
            view = SpanView(error.trace_id, error.span_id, "", {}, sequence=error.line, unreadable=(error.field, error.message))
            traces.setdefault(error.trace_id, []).append(view)
    plans = []
    notes = warnings if warnings is not None else []
    index = index if index is not None else MemoryWriteIndex(config.write_index_max_entries)
    for trace_id, views in progress(sorted(traces.items(), key=_ended), len(traces)):
        planned = plan_spans(trace_id, views, config, partial=incomplete(views))
        plan = index.plan_against(planned.plan, config.limits.max_related_call_ids)
        plans.append(_bound_by_record(plan, views, read.span_lines, notes))
        for d in planned.plan.steps:
            errors.extend(
                InputError(read.span_lines.get(d.step.span_id, 0), f.field, f.message, d.step.span_id, planned=True)
                for f in d.step.malformed
                # an unreadable span's step: its error is listed already; a rootless trace is no error of the file (301)
                if d.step.span_id and f.reason != TRACE_ROOT_MISSING
            )
    return sorted(plans, key=_trace_id), errors


def _trace_id(plan: TracePlan) -> str:
    return plan.trace_id


def _ended(item: tuple[str, Sequence[SpanView]]) -> tuple[int, str]:
    """Traces are planned in the order they ended (their last span's end, nanoseconds), as a door that
    watches them live plans them, so the write index meets a retry after what it retries; ties by trace id."""
    trace_id, views = item
    return (max((v.end_time_unix_nano or v.start_time_unix_nano or 0 for v in views), default=0), trace_id)


def _row_trace_ended(item: tuple[str, Sequence[Any]]) -> tuple[int, str]:
    """Rows have no end times: a trace of rows is placed by its latest step's start (nanoseconds)."""
    trace_id, steps = item
    return (max((s.start_time_unix_nano for s in steps), default=0), trace_id)


def incomplete(views: Sequence[SpanView]) -> bool:
    """True when the file shows the trace in ``views`` is not whole, so its plan is flagged partial
    (``TracePlan.partial``, the flag the service and the processor set on a trace decided before its root
    came): a span names a parent span id no other span of the trace has (its root or a span between is missing;
    a span naming itself as its parent has none), or a span carries ``tracefence.trace.partial``,
    ``tracefence.trace.late`` (any value but ``false``: a value not understood fails closed) or
    ``tracefence.trace.reasons`` (a file a door wrote: what it said of the trace is kept). docs/DECISIONS.md 205, 287.
    A trace whose parents form a cycle is flagged partial by :func:`~otel_tracefence.pipeline.plan.plan_spans`, at
    every door (506)."""
    ids = {view.span_id for view in views}
    for view in views:
        parent = view.parent_span_id
        if parent and (parent not in ids or parent == view.span_id):
            return True
        attributes = view.attributes
        if attributes and any(key in attributes and attributes[key] is not False for key in FLAGS_OF_AN_INCOMPLETE_TRACE):
            return True
    return False


FLAGS_OF_AN_INCOMPLETE_TRACE = (TRACE_PARTIAL, TRACE_LATE, TRACE_REASONS)
_CLASS_VALUES = frozenset(c.value for c in ReplayClass)


def recorded_class(views: Sequence[SpanView]) -> tuple[ReplayClass, SpanView, str] | None:
    """The most restrictive class a door recorded on the trace in ``views`` (a file the service, the processor or the
    exporter wrote), with the first span recording it and why, as a message; ``None`` when no span records one.

    A span's ``tracefence.replay.class`` is its class; a value that is no class (``"REVIEW"``, ``["review"]``, ``3``)
    reads as ``review``, and so does any ``tracefence.plan.schema_version`` but this version's (a plan written by a
    schema this version does not know: its annotations cannot be read). The one rule behind ``tracefence plan`` and
    :meth:`otel_tracefence.agent.replay.ReplayGuard.from_file` (docs/DECISIONS.md 287, 355).
    """
    found: tuple[ReplayClass, SpanView, str] | None = None
    for view in views:
        attributes = view.attributes
        if not attributes:
            continue
        if PLAN_SCHEMA_VERSION in attributes and attributes[PLAN_SCHEMA_VERSION] != SCHEMA_VERSION:
            said = (ReplayClass.REVIEW, view, f"its spans record {PLAN_SCHEMA_VERSION}={attributes[PLAN_SCHEMA_VERSION]!r}, "
                    f"a plan schema this version (schema {SCHEMA_VERSION}) does not know, so what they record cannot be read")
        elif REPLAY_CLASS in attributes:
            value = attributes[REPLAY_CLASS]
            cls = ReplayClass(value) if isinstance(value, str) and value in _CLASS_VALUES else ReplayClass.REVIEW
            said = (cls, view, f"its spans record the class {cls.value} ({REPLAY_CLASS}={value!r})")
        else:
            continue
        if found is None or said[0].rank > found[0].rank:
            found = said
    return found


def _bound_by_record(plan: TracePlan, views: Sequence[SpanView], lines: dict[str, int], notes: list[InputError]) -> TracePlan:
    """``plan`` with the class its spans record (:func:`recorded_class`) when that is more restrictive than its own,
    and a note saying so in ``notes``: the door that wrote the file planned the trace with what the file may not hold
    (a span it refused, late spans, a review item), so a re-plan never passes it as safer (docs/DECISIONS.md 355)."""
    recorded = recorded_class(views)
    if recorded is None:
        return plan
    cls, view, why = recorded
    if plan.replay_class is not None and cls.rank <= plan.replay_class.rank:
        return plan
    own = plan.replay_class.value if plan.replay_class is not None else "none (no tool step)"
    message = (f"trace {plan.trace_id}: {why}; its steps here give {own}: planned {cls.value}, as the door that wrote "
               f"the file planned it (see its review item)")
    notes.append(InputError(lines.get(view.span_id, 0), REPLAY_CLASS, message, view.span_id, planned=True))
    return replace(plan, replay_class=cls)


def on_malformed_default(fmt: str) -> str:
    """What a malformed span or row does by default: an OTLP/JSON file is telemetry, planned as the
    processor and the service plan it (the span's step held for review); rows are the seed's own
    input format, whose malformed rows are rejected (docs/DECISIONS.md)."""
    return "review" if fmt == "otlp-json" else "reject"


@dataclass(frozen=True)
class PlanOutcome:
    """What ``tracefence plan`` makes of one input, before anything is printed.

    ``plans``: every trace's plan, sorted by trace id (empty when ``rejected``).
    ``messages``: the standard-error lines, each without the ``tracefence plan: FILE: ``
    lead the command line puts before it (``warning: ...``, ``line 3: effect: ...``,
    ``rejected, 2 error(s); nothing was planned``). ``rejected``: nothing was planned
    (exit 2).
    """

    plans: list[TracePlan]
    messages: list[str]
    rejected: bool

    def json_lines(self) -> str:
        """The ``--format json`` output: one ``TracePlan`` per line (``core.schema.plan_to_json``: enum values as words), each ending in ``\\n``
        (``""`` when rejected or when no trace has a plan)."""
        return "".join(plan_to_json(plan) + "\n" for plan in self.plans)


def plan_document(
    text: str,
    input_format: str,
    config: TraceFenceConfig,
    *,
    on_malformed: str | None = None,
    progress: Callable[[Sequence[Any], int], Iterable[Any]] = _no_progress,
    reading: Callable[[int], None] | None = None,
    index: MemoryWriteIndex | None = None,
) -> PlanOutcome:
    """Plan ``text`` as ``tracefence plan`` does: the one function behind the command line and the
    inspector page (``tracefence ui``), so both give the same plans and messages.

    ``input_format``: ``auto`` or one of :data:`~otel_tracefence.readers.detect.FORMATS`.
    ``on_malformed``: ``reject`` or ``review``; ``None`` for :func:`on_malformed_default`. ``progress``,
    ``reading`` and ``index``: as :func:`plan_text` takes them.
    Raises :class:`UnreadableInput` when the text as a whole cannot be read, or is empty.
    """
    if input_format == "auto" and looks_like_plan_json(text.lstrip().partition("\n")[0]):
        return saved_plans(text)
    fmt = detect_format(text) if input_format == "auto" and text.strip() else input_format
    warnings: list[InputError] = []
    plans, errors = plan_text(text, fmt, config, warnings=warnings, progress=progress, reading=reading, index=index)
    return outcome(plans, errors, warnings, on_malformed or on_malformed_default(fmt))


def outcome(plans: list[TracePlan], errors: list[InputError], warnings: list[InputError], on_malformed: str) -> PlanOutcome:
    """The :class:`PlanOutcome` of ``plans`` and the ``errors`` and ``warnings`` met making them (:func:`plan_text`,
    :func:`plan_read`): rejected when a row or span could not be read at all, or any was malformed and
    ``on_malformed`` is ``reject``."""
    messages = [f"warning: {warning}" for warning in warnings]
    if errors:
        # A row or span that could not be read at all is missing from the plans: planning the
        # rest would hide it (a dropped write could leave its trace "dynamic"), so always reject.
        rejected = on_malformed == "reject" or not all(e.planned for e in errors)
        label = "" if rejected else "warning: "
        listed = [error for error in errors if not error.repeat]  # a span standing in two traces is one error
        messages.extend(f"{label}{error}" for error in sorted(listed, key=lambda e: (e.line, e.span_id)))
        if rejected:
            messages.append(f"rejected, {len(listed)} error(s); nothing was planned")
            return PlanOutcome([], messages, True)
    if not plans:
        messages.append(f"warning: {NO_SPANS}")
    return PlanOutcome(plans, messages, False)


NO_SPANS = "no spans read: the input holds no span or row"


def saved_plans(text: str) -> PlanOutcome:
    """The plans ``tracefence plan --format json`` wrote (one per line, plan JSON schema ``"1"`` or ``"2"``), read
    back as written, not planned again: ``tracefence plan saved.json`` prints them in today's spelling, as a table,
    or through ``--fail-on``. A line that is no plan this version reads rejects the whole file, naming the line
    (fail closed: a plan left out could hide a trace's class)."""
    plans: list[TracePlan] = []
    errors: list[str] = []
    versions: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            plans.append(plan_from_proto(plan_from_json(data)))
            versions.add(str(data.get("schemaVersion")))
        except ValueError as exc:
            errors.append(f"line {number}: not a saved plan this version reads: {exc}")
    if errors:
        return PlanOutcome([], [*errors, f"rejected, {len(errors)} error(s); nothing was planned"], True)
    plans.sort(key=lambda p: p.trace_id)
    checked = [_checked_saved_plan(plan) for plan in plans]
    plans = [plan for plan, _ in checked]
    distrusted = [warning for _, warning in checked if warning]
    note = (f"warning: read {len(plans)} saved plan(s) back as written (plan JSON schema {', '.join(sorted(versions))}; "
            f"this version writes {PLAN_JSON_SCHEMA_VERSION}); nothing was planned again")
    return PlanOutcome(plans, [note, *distrusted], False)


def _checked_saved_plan(plan: TracePlan) -> tuple[TracePlan, str]:
    """A saved plan as read, unless a class more restrictive than its own is what its steps give: the class its
    step decisions make (:func:`~otel_tracefence.planner.replay_class.replay_class`), or the one its steps planned
    again give (the planner, on the saved steps' tool, effect, status, idempotency key and arguments). Then that
    class, with a warning naming the trace and both classes (DECISIONS 696): an edited or inconsistent file never
    passes ``--fail-on`` as safer than its own steps. A class more restrictive than its steps give is kept (a
    cross-trace reason, such as a retry of a held write, is not in the steps)."""
    if plan.replay_class is None or not plan.steps:
        return plan, ""
    replanned = plan_trace(plan.trace_id, [decision.step for decision in plan.steps], partial=plan.partial)
    candidates = [c for c in (replay_class(plan.steps), replanned.replay_class) if c is not None]
    worst = max(candidates, key=lambda c: c.rank, default=plan.replay_class)
    if worst.rank <= plan.replay_class.rank:
        return plan, ""
    warning = (f"warning: trace {plan.trace_id}: the saved plan says {plan.replay_class.value}, its steps plan as {worst.value}; "
               f"read as {worst.value}")
    return replace(plan, replay_class=worst), warning
