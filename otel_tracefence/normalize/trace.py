"""A whole trace's spans to its tool steps: nesting, dispatch attempts, requested calls, what no convention reads.

The parts each have a module of their own: which tool spans are attempts of another (``attempts.py``), the HTTP
requests below a step (``dispatches.py``), writes with no result in a run that failed (``failed_runs.py``), requested calls matched to the spans that ran them
(``request_matching.py``), the steps standing for what no convention reads (``unread.py``); this module runs them
over one trace in order."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

import cython

from otel_tracefence.core import reasons
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import MalformedField, ToolStep, step_order
from otel_tracefence.core.value_text import showing_values, stop_showing
from otel_tracefence.normalize import haystack
from otel_tracefence.normalize.activity import asked_for_tools, model_span, tool_activity_sign
from otel_tracefence.normalize.attempts import nest
from otel_tracefence.normalize.config_reading import ConfigReading, read_config
from otel_tracefence.normalize.conventions import (
    CALL_REFERENCE_KEYS, EXECUTE_TOOL_OPERATIONS, GEN_AI_OPERATION, HANDOFF_OPERATION, LANGSMITH_KIND_KEY, OPENLLMETRY_MODEL_SPAN_KEY, RESULT_KEYS, TOOL_MARKER_KEYS,
)
from otel_tracefence.normalize.span_kinds import agent_name, call_id as tool_call_id, is_tool_invoker, tool_name
from otel_tracefence.normalize.read_keys import misread_message, misread_own_key

from otel_tracefence.normalize.dispatches import http_dispatches
from otel_tracefence.normalize.evidence import hidden_output, paused_run, run_output_unrecorded
from otel_tracefence.normalize.failed_runs import hold_writes_of_failed_runs
from otel_tracefence.normalize.http import REQUEST_KEYS as HTTP_REQUEST_KEYS
from otel_tracefence.normalize.pending import folded, superseded
from otel_tracefence.normalize.request_matching import request_order, unrecorded_requests
from otel_tracefence.normalize.requested import REQUEST_KEYS as REQUESTED_KEYS, RequestedCall, Unread, has_indexed_call_keys, requested_calls
from otel_tracefence.normalize.span_tree import ancestors_of, below_any, distinct_spans
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.normalize.step import span_to_step
from otel_tracefence.normalize.summary import summary_spans
from otel_tracefence.normalize.unread import dropped_step, unread_requests, unrecognized_step
from otel_tracefence.normalize.values import span_arguments


@dataclass(slots=True)
class NormalizedTrace:
    """A trace's steps, and for each dispatch-attempt span the span id of the step it belongs to."""

    steps: list[ToolStep] = field(default_factory=list)
    attempt_of: dict[str, str] = field(default_factory=dict)


# The keys the tool-span, Haystack ToolInvoker, requested-call and HTTP readers look for first (each reader's own set).
_READER_KEYS = TOOL_MARKER_KEYS | REQUESTED_KEYS | HTTP_REQUEST_KEYS
# Where a span records an output a reader reads (the requested-call readers' keys but those naming a kind alone, and
# the result keys): an agent run with one of these recorded its output, whatever its convention's own key (1010).
_OUTPUT_KEYS = (REQUESTED_KEYS - {"openinference.span.kind", OPENLLMETRY_MODEL_SPAN_KEY, LANGSMITH_KIND_KEY}) | frozenset(RESULT_KEYS)


@cython.ccall
def quiet(span: SpanView) -> bool:
    """True when none of the readers that look for tool calls and requests can find anything in ``span``:
    it is readable, has no events, its operation is not ``execute_tool``, no key of it is an indexed key that may
    hold a call (``requested.has_indexed_call_keys``), and it holds none of the keys those readers look for first
    (``span_kinds.is_tool_span`` and ``is_tool_invoker``,
    ``requested.requested_calls``, ``http.http_request``, each returning at its first test on such a span).
    Such a span is no step, no ToolInvoker, asks for no call and is no request: :func:`normalize_trace`
    reads it only as every stepless span is read beside those (its name and kind, its parents), without
    calling them. Most spans of an agent trace (chat, agent, plain spans) are quiet.
    tests/normalize/test_quiet_spans.py checks each reader on every span of every OTLP case against it."""
    if span.unreadable is not None or span.events:
        return False
    attributes = span.attributes
    # ``in`` then ``[]``: two C-level mapping operations, cheaper than a ``get`` method call
    operation = attributes[GEN_AI_OPERATION] if GEN_AI_OPERATION in attributes else None
    if (isinstance(operation, str) and operation in EXECUTE_TOOL_OPERATIONS) or not _READER_KEYS.isdisjoint(attributes):
        return False
    return not has_indexed_call_keys(attributes)  # calls in indexed keys, on a span of any kind (DECISIONS 440)


def normalize_trace(spans: Sequence[SpanView], config: TraceFenceConfig | ConfigReading) -> NormalizedTrace:
    """The tool steps of one trace's spans (DESIGN.md, "Normalized step"; docs/CONVENTIONS.md).

    A tool span inside another tool span (no agent or model span between) is a
    dispatch attempt of the outer step, which counts its attempts; so are HTTP
    client requests with one unsafe method and URL below a step. A Haystack
    ``ToolInvoker`` span gives one step per call it ran. Requested calls no span
    records are steps, and so is tool activity no convention reads
    (``unrecognized_tool_span``). A pending record a later run of its call supersedes
    (``pending.py``) is no step. Never raises for any span; the order of ``spans``
    does not matter. A span given twice counts once; different spans sharing one
    span id each become a step of their own, malformed (field ``span_id``), neither
    an attempt nor holding any. ``config`` is read once, for the whole trace (``config_reading.py``).
    """
    config = read_config(config)  # read once for the whole trace (config_reading.py)
    # The values its messages quote: described, unless the redaction policy keeps raw values (core/value_text.py).
    token = showing_values(config.redaction if config.store_raw_values else None)
    try:
        return _normalize_trace(spans, config)
    finally:
        stop_showing(token)


@dataclass(slots=True)
class _Spans:
    """A trace's spans by what the normalizer does with them: the step each tool span makes alone (``own_steps``,
    by span id), the steps of spans sharing one span id (``clashing_steps``), the spans that are no step
    (``stepless``: where unread tool activity is looked for; ``talking``: those of them that are not quiet, where
    requested calls and HTTP requests are looked for) and Haystack's ToolInvoker spans (``invokers``)."""

    own_steps: dict[str, ToolStep] = field(default_factory=dict)
    clashing_steps: list[ToolStep] = field(default_factory=list)
    stepless: list[SpanView] = field(default_factory=list)
    talking: list[SpanView] = field(default_factory=list)
    invokers: list[SpanView] = field(default_factory=list)


@dataclass(slots=True)
class _Unread:
    """What the last pass asks of each stepless span (:func:`_unread_step`): the trace's spans by id, its tool span
    ids, the talking spans, the spans whose requested calls were read (``asking``) and those whose output holds calls
    that could not be read (``lost``), the span ids at or above a step (``covered``) and whether the trace has a tool
    span at all. Spans are known by the span itself (``id``), not their span id: spans sharing one span id are each
    their own (DECISIONS 360, 692)."""

    by_id: dict[str, SpanView]
    tool_ids: set[str]
    talking: set[int]
    asking: set[int]
    lost: dict[int, list[Unread]]
    covered: set[str]
    any_tool_span: bool
    last_step_start: int = 0  # the latest start of a tool step (Unix nanoseconds), 0 with none
    call_ids: frozenset = frozenset()  # the call ids the trace's steps and requests name (DECISIONS 959)
    waiting: bool = False  # a requested call no span ran is a step already (DECISIONS 958)


def _normalize_trace(spans: Sequence[SpanView], config: ConfigReading) -> NormalizedTrace:
    by_id = {s.span_id: s for s in spans}  # for a clashing id, the last of its spans in content order
    clashing: dict[str, int] = {}
    if len(by_id) != len(spans):  # not the common case of every id once
        spans, clashing = distinct_spans(spans)
        by_id = {s.span_id: s for s in spans}
    found = _sort_spans(spans, clashing, config)
    own_steps = found.own_steps
    if own_steps:  # a framework's summary of parallel calls is no call (summary.py, docs/DECISIONS.md 441)
        for sid in summary_spans(own_steps, by_id, config):
            del own_steps[sid]
    # No early return when no span is a tool span: a call the model requested is a step
    # even when no tool span records it (the process may have died before exporting one).
    tool_ids = set(own_steps)
    nesting = nest(own_steps, by_id)
    root_steps = nesting.steps
    if root_steps and found.talking:  # HTTP requests are in spans that are not quiet
        http_dispatches(root_steps, found.talking, by_id, tool_ids, nesting.root_of)
    if root_steps:
        hold_writes_of_failed_runs(root_steps, by_id)  # a write with no result in a run that failed (DECISIONS 957)
    result = NormalizedTrace(attempt_of=nesting.attempt_of)
    result.steps.extend(root_steps.values())
    result.steps.extend(found.clashing_steps)
    above_steps = ancestors_of(tool_ids | {invoker.span_id for invoker in found.invokers}, by_id)
    requests, lost = _requests(found.talking, config)
    result.steps.extend(_invoker_steps(found.invokers, above_steps, requests, config))
    if len(root_steps) > 1:  # a call held for approval, and its run after the resume (pending.py, docs/DECISIONS.md 600)
        resumed = superseded(root_steps, by_id, requests)
        if resumed:
            result.steps = folded(result.steps, root_steps, resumed)
    if requests:
        # In trace order, not input order: the first request of a call id is the one that becomes its step.
        requests.sort(key=request_order)
        agents, handoffs = _agents(found.stepless)
        result.steps.extend(unrecorded_requests(result.steps, requests, config, agents, by_id, handoffs))
    reading = _Unread(
        by_id, tool_ids, {id(span) for span in found.talking}, {id(r.span) for r in requests}, lost, tool_ids | above_steps, bool(own_steps),
        max((step.start_time_unix_nano or 0 for step in root_steps.values()), default=0),
        frozenset(step.call_id for step in result.steps if not step.call_id_from_span) | {r.call_id for r in requests if r.call_id},
        any(step.requested_only for step in result.steps),
    )
    for span in found.stepless:
        step = _unread_step(span, config, reading)
        if step is not None:
            result.steps.append(step)
    if not result.steps:  # a trace planned tool-free, unless what its agent runs asked for is in no span (DECISIONS 1010)
        result.steps.extend(_unrecorded_runs(found.stepless, spans, config))
    result.steps.sort(key=step_order)
    return result


def _sort_spans(spans: Sequence[SpanView], clashing: dict[str, int], config: ConfigReading) -> _Spans:
    """The spans by what is done with them (:class:`_Spans`); a step whose span id several different spans carry
    (``clashing``: id -> how many) is malformed (field ``span_id``)."""
    found = _Spans()
    for span in spans:
        if quiet(span):
            found.stepless.append(span)
            continue
        if is_tool_invoker(span.attributes):
            found.invokers.append(span)
            continue
        step = span_to_step(span, config)
        if step is None:
            found.stepless.append(span)
            found.talking.append(span)
        elif span.span_id in clashing:
            bad = MalformedField("span_id", f"span id {span.span_id} is carried by {clashing[span.span_id]} spans of the trace that are not all the same")
            found.clashing_steps.append(replace(step, malformed=step.malformed + (bad,)))
        else:
            found.own_steps[span.span_id] = step
    return found


def _requests(talking: list[SpanView], config: ConfigReading) -> tuple[list[RequestedCall], dict[int, list[Unread]]]:
    """The calls the talking spans requested, and per span (``id``) the calls its output holds that could not be
    read. A quiet span holds no requested call (:func:`quiet`)."""
    requests: list[RequestedCall] = []
    lost_by_span: dict[int, list[Unread]] = {}
    for span in talking:
        lost: list[Unread] = []
        requests.extend(requested_calls(span, config.limits, lost))
        if lost:
            lost_by_span[id(span)] = lost
    return requests, lost_by_span


def _invoker_steps(invokers: list[SpanView], above_steps: set[str], requests: list[RequestedCall], config: ConfigReading) -> list[ToolStep]:
    """The steps of Haystack ToolInvoker spans: one per call it ran, or its calls are ``requests`` (appended) when
    they ran as tool spans of their own below it; a ToolInvoker whose calls cannot be read is held."""
    steps: list[ToolStep] = []
    for invoker in invokers:
        views = haystack.tool_calls(invoker)
        if invoker.span_id in above_steps:  # its calls ran as tool spans of their own: they are requests
            for index, call in enumerate(views):
                tool = tool_name(call.attributes, call.name) or ""
                requests.append(RequestedCall(tool_call_id(call.attributes), tool, span_arguments(call.attributes, config.limits), invoker, index))
        elif views:
            ran = [step for view in views if (step := span_to_step(view, config)) is not None]
            if haystack.labels_are_ambiguous(invoker, views):
                why = MalformedField("effect", f"the ToolInvoker span {invoker.span_id} ran {len(views)} calls and carries one set of tracefence.* labels: "
                                     "which call they label cannot be known (label these tools with tool_rules)")
                ran = [replace(step, malformed=step.malformed + (why,)) for step in ran]
            steps.extend(ran)
        else:
            steps.append(unrecognized_step(invoker, "a Haystack ToolInvoker whose input records no readable tool call", config))
    return steps


def _agents(stepless: list[SpanView]) -> tuple[dict[str, list[str]], list[int]]:
    """The agent spans by agent name (name -> span ids), and how many handoff spans (openai-agents) the trace holds,
    as a one-element count :func:`~otel_tracefence.normalize.request_matching.unrecorded_requests` decrements."""
    agents: dict[str, list[str]] = {}
    handoffs = [0]
    for span in stepless:
        if name := agent_name(span.attributes, span.name):
            agents.setdefault(name, []).append(span.span_id)
        if span.attributes.get(GEN_AI_OPERATION) == HANDOFF_OPERATION:
            handoffs[0] += 1
    return agents, handoffs


def _unread_step(span: SpanView, config: ConfigReading, reading: _Unread) -> ToolStep | None:
    """The ``review`` step standing for what a stepless span holds and no reader understood, or ``None``: data it
    dropped (DECISIONS 252), a ``tracefence.*`` key not understood wherever the span is (DECISIONS 250, 356),
    requested calls it holds that could not be read, or tool activity of no known convention outside every step."""
    held = dropped_step(span, config)  # it may have lost what marks a tool call
    if held is not None:
        return held
    own_key = misread_own_key(span.attributes)
    if own_key is not None:
        return unrecognized_step(span, misread_message(*own_key), config)
    # A quiet span recorded no output and holds no requested call: nothing of it can be unread. A model span whose
    # enclosing step span recorded its turn's calls asked for those (Mastra's chat span under agent_step, DECISIONS 959).
    parent = reading.by_id.get(span.parent_span_id) if span.parent_span_id else None
    own = id(span)
    asking = own in reading.asking
    read_any = asking or (parent is not None and id(parent) in reading.asking)
    if own in reading.talking:
        why = unread_requests(span, reading.lost.get(own, ()), read_any)
        if why is not None:  # wherever the span is, whatever else the trace holds
            return unrecognized_step(span, why, config, reasons.REQUESTED_CALL_UNREAD)
        paused = paused_run(span.attributes) if not reading.waiting else None
        if paused is not None and reading.last_step_start < (span.end_time_unix_nano or span.start_time_unix_nano):  # DECISIONS 958
            why = f"its output is {paused}'s text for a run paused with tool calls waiting, and no tool step came after it: which calls cannot be read"
            return unrecognized_step(span, why, config, reasons.REQUESTED_CALL_UNREAD)
    if asking or span.span_id in reading.covered:
        return None
    sign, reason = tool_activity_sign(span), reasons.UNRECOGNIZED_TOOL_SPAN
    if sign is None and not reading.any_tool_span:
        sign, reason = _unread_in_a_toolless_trace(span, reading, read_any)
    if sign is not None and not below_any(span, reading.by_id, reading.tool_ids) and not _names_known_call(span, reading.call_ids):
        return unrecognized_step(span, sign, config, reason)
    return None


def _unread_in_a_toolless_trace(span: SpanView, reading: _Unread, read_any: bool) -> tuple[str | None, str]:
    """``(why, reason)`` a span of a trace with no tool span stands as a held step: a finish reason asking for tool
    calls none of which was read (188), an output that is its producer's stand-in for a hidden value (952), an agent
    run that recorded its input and no output where no request was read (987); ``(None, ...)`` for none."""
    if not read_any and asked_for_tools(span):
        return "its finish reason says the model asked for tool calls, and none could be read", reasons.UNRECOGNIZED_TOOL_SPAN
    if hidden_output(span.attributes):
        return "its recorded output is its producer's stand-in for a hidden value: whether the model asked for tool calls cannot be read", reasons.UNRECOGNIZED_TOOL_SPAN
    if not reading.asking and run_output_unrecorded(span.attributes):
        return "an agent run that recorded its input and no output, in a trace with no tool span: what it asked for is in no span", reasons.REQUESTED_CALL_UNREAD
    return None, reasons.UNRECOGNIZED_TOOL_SPAN


def _unrecorded_runs(stepless: list[SpanView], spans: Sequence[SpanView], config: ConfigReading) -> list[ToolStep]:
    """The held steps of a trace that would plan tool-free (no step): each agent run that recorded neither its input
    nor its output (``evidence.run_output_unrecorded``, and no key of ``_OUTPUT_KEYS``) where no span of the trace is a
    model call's (``activity.model_span``) or recorded an output a reader reads (``_OUTPUT_KEYS``): what the runs asked
    for is in no span (docs/DECISIONS.md 1010)."""
    runs = [span for span in stepless if run_output_unrecorded(span.attributes) is False and _OUTPUT_KEYS.isdisjoint(span.attributes)]
    if not runs or any(model_span(span) or not _OUTPUT_KEYS.isdisjoint(span.attributes) for span in spans):
        return []
    why = "an agent run that recorded no output, in a trace with no tool span and no model span: what it asked for is in no span"
    return [unrecognized_step(span, why, config, reasons.REQUESTED_CALL_UNREAD) for span in runs]


def _names_known_call(span: SpanView, call_ids: frozenset) -> bool:
    """True when an attribute of ``span`` whose key ends in a call-reference name (``conventions.CALL_REFERENCE_KEYS``:
    ``mastra.metadata.toolCallId``, ``tool_call_id``) names a call a step or a request of the trace names: the span is a
    record of that call (a stream chunk), not tool activity of its own (docs/DECISIONS.md 959)."""
    if not call_ids:
        return False
    for key, value in span.attributes.items():
        if isinstance(value, str) and value in call_ids and key.rpartition(".")[2] in CALL_REFERENCE_KEYS:
            return True
    return False
