"""Requested calls matched to the tool spans that ran them: a call the model asked for that no span records is a
step of its own (``requested_not_recorded``), in time and when its span comes late (docs/DECISIONS.md 187, 347,
442-444)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Iterable, Sequence

from otel_tracefence.core import reasons
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import STATUS_UNKNOWN, ToolStep
from otel_tracefence.core.textfold import folded_word
from otel_tracefence.normalize.config_reading import ConfigReading, read_config
from otel_tracefence.normalize.conventions import HANDOFF_TOOL_PREFIX, OUTPUT_TOOLS_KEY
from otel_tracefence.normalize.effect import resolve_effect
from otel_tracefence.normalize.requested import RequestedCall, Unread, output_tools, requested_calls
from otel_tracefence.normalize.span_tree import ancestors_of
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.normalize.tokens import value_tokens
from otel_tracefence.normalize.unread import unread_requests, unrecognized_step
from otel_tracefence.normalize.values import bare_value_sha256, kept_arguments


def unrecorded_requests(
    steps: list[ToolStep], requests: list[RequestedCall], config: TraceFenceConfig | ConfigReading, agents: dict[str, list[str]],
    spans_by_id: dict[str, SpanView], handoffs: list[int] | None = None,
) -> list[ToolStep]:
    """Requested calls no tool span records, each a step of its own (``requested_not_recorded``).

    ``requests`` are in trace order. One request recorded in several spans (a model span and
    the agent span that echoes its output) is one request: same call id, tool and arguments.
    A request is matched to one tool span: by call id and tool (the same arguments first),
    else, where tool spans carry no call id, by tool name and canonical arguments. Two
    requests sharing one call id need two spans: the one left over stays a step. A request
    no tool span ran, named after an agent whose span the trace holds (``agents``: agent name
    to its spans' ids; a smolagents managed agent called as a tool), was run by that agent:
    the sub-agent's own tool calls are steps of the trace. An agent span that is the requesting
    span or one of its ancestors cannot have run the request (it was running when the model
    asked): it never accounts for one (docs/DECISIONS.md 187). A request named ``transfer_to_<agent>`` (openai-agents'
    handoff tool) was run as a handoff when the trace holds a handoff span not matched yet (``handoffs``: a
    one-element count, decremented) and a span of that agent that may have run it (docs/DECISIONS.md 347).
    """
    pools = _Pools(s for s in steps if not s.requested_only)
    requests = _as_recorded(requests, pools.ran)
    left = [request for request in _distinct(requests, steps, spans_by_id) if not pools.take_exact(request)]  # first: the span that ran exactly this call
    extra = []
    uncompared: list[RequestedCall] = []  # matched last, by tool only, where one side recorded no arguments
    for request in left:
        if pools.take_by_content(request, config) or _run_by_agent(request, agents, spans_by_id, handoffs):
            continue
        if request.tool in pools.ran:
            uncompared.append(request)
        else:
            extra.append(_requested_step(request, config))
    # After every other match (DECISIONS 443): a request whose arguments were not recorded was run by a span of its
    # tool no request took; one whose arguments were, by such a span that recorded none and no call id either.
    extra.extend(_requested_step(request, config) for request in uncompared if not pools.take_by_tool(request))
    return extra


def late_requests(span: SpanView, steps: Sequence[ToolStep], config: TraceFenceConfig | ConfigReading) -> list[ToolStep]:
    """For a span that arrived after its trace was decided: the steps its requested calls add beside ``steps`` (the
    trace's remembered ones), as :func:`otel_tracefence.normalize.trace.normalize_trace` makes them: each requested
    call no step records (nor requests already), ``requested_only``; and the ``requested_call_unread`` step when its
    recorded output holds calls that cannot be read. The trace's agent spans are not known here: a request named after
    a sub-agent that ran it stays a step (fail closed). ``[]`` for a span that requests nothing new."""
    config = read_config(config)
    lost: list[Unread] = []
    requests = sorted(requested_calls(span, config.limits, lost), key=request_order)
    known = {(s.call_id, s.tool, s.arguments_sha256) for s in steps if s.requested_only}
    added = [s for s in unrecorded_requests(list(steps), requests, config, {}, {span.span_id: span}) if (s.call_id, s.tool, s.arguments_sha256) not in known]
    why = unread_requests(span, lost, bool(requests))
    if why is not None:
        added.append(unrecognized_step(span, why, config, reasons.REQUESTED_CALL_UNREAD))
    return added


def request_order(request: RequestedCall) -> tuple:
    """The sort key that puts requests in trace order (the requesting span's end, then its place and the call's)."""
    span = request.span
    when = span.end_time_unix_nano or span.start_time_unix_nano  # the requested-only step's start time
    return (when, span.sequence, span.span_id, request.index, request.call_id or "", request.tool, request.arguments.sha256 or "")


def _distinct(requests: list[RequestedCall], steps: Sequence[ToolStep], by_id: dict[str, SpanView]) -> list[RequestedCall]:
    """``requests`` less the model's structured answers (a tool its span declares an output tool, DECISIONS 444) and
    the repeats of one request recorded in several spans (same call id, tool and arguments, or same call id and tool
    where a record names no arguments, as a paused run's record of its waiting call does: DECISIONS 959; for a
    framework's output fields, which carry no id, :func:`_one_turn`)."""
    distinct: list[RequestedCall] = []
    seen: set[tuple] = set()
    with_arguments = {(r.call_id, r.tool) for r in requests if r.call_id is not None and r.arguments.sha256 is not None}
    echoes: dict[tuple, list[RequestedCall]] = {}  # (tool, arguments) -> the output-field records kept
    around_steps: set[str] | None = None
    answers: dict[int, frozenset] = {}  # per requesting span: the output tools it declares
    for request in requests:
        if OUTPUT_TOOLS_KEY in request.span.attributes:
            declared = answers.get(id(request.span))
            if declared is None:
                declared = answers[id(request.span)] = output_tools(request.span)
            if request.tool in declared:  # the model's structured answer: no tool runs for it
                continue
        if request.call_id is not None:
            identity = (request.call_id, request.tool, request.arguments.sha256)
            if identity in seen or (request.arguments.sha256 is None and identity[:2] in with_arguments):
                continue
            seen.add(identity)
        elif request.echoed:
            kept = echoes.setdefault((request.tool, request.arguments.sha256), [])
            if kept and around_steps is None:
                around_steps = _around_steps(steps, by_id)
            if any(_one_turn(earlier.span, request.span, by_id, around_steps or set()) for earlier in kept):
                continue
            kept.append(request)
        distinct.append(request)
    return distinct


def _around_steps(steps: Sequence[ToolStep], by_id: dict[str, SpanView]) -> set[str]:
    """The span ids of the tool steps' spans and of every span above one."""
    ids = {step.span_id for step in steps if not step.requested_only and step.span_id}
    return ids | ancestors_of(ids, by_id)


def _one_turn(first: SpanView, second: SpanView, by_id: dict[str, SpanView], around_steps: set[str]) -> bool:
    """True when two spans' records of one call (no call id; the same tool and arguments) are one model turn's
    (docs/DECISIONS.md 963): different spans whose nearest common span (one of them, when one is above the other) is
    known and is neither a tool step's span nor above one. A framework's modules record the prediction again above
    the model's span, and an adapter's second attempt asks the model again under the same module; two turns of an
    agent that ran a tool between them meet at or above the span that holds that tool's."""
    if first is second or first.span_id == second.span_id:
        return False
    chain = _chain(first, by_id)
    common = next((span_id for span_id in _chain(second, by_id) if span_id in chain), None)
    return common is not None and common not in around_steps


def _chain(span: SpanView, by_id: dict[str, SpanView]) -> list[str]:
    """The span's id and its ancestors' up the trace, bounded by the number of spans (a parent cycle ends it)."""
    chain = [span.span_id]
    parent_id = span.parent_span_id
    for _ in range(len(by_id)):
        if not parent_id or parent_id not in by_id or parent_id in chain:
            break
        chain.append(parent_id)
        parent_id = by_id[parent_id].parent_span_id
    return chain


def _as_recorded(requests: list[RequestedCall], recorded: Counter) -> list[RequestedCall]:
    """``requests`` with each tool name no recorded step has renamed to the one recorded name it folds to
    (``textfold.folded_word``: case and separators), when exactly one does: a framework hands the model a sanitized form
    of a tool's name (CrewAI's ``sanitize_tool_name``: ``Search the internet`` is ``search_the_internet``) while the tool
    span records the name itself, and the two are one tool (docs/DECISIONS.md 982)."""
    if not requests or all(request.tool in recorded for request in requests):
        return requests
    by_fold: dict[str, set[str]] = {}
    for name in recorded:
        by_fold.setdefault(folded_word(name), set()).add(name)
    renamed = []
    for request in requests:
        names = by_fold.get(folded_word(request.tool), ()) if request.tool not in recorded else ()
        renamed.append(replace(request, tool=next(iter(names))) if len(names) == 1 else request)
    return renamed


class _Pools:
    """The recorded tool steps a request may be matched to, counted by what each can be matched on; each match takes
    one step out of the pools it is in (docs/DECISIONS.md 442, 443)."""

    def __init__(self, recorded: Iterable[ToolStep]) -> None:
        steps = list(recorded)
        self.exact = Counter((s.call_id, s.tool, s.arguments_sha256) for s in steps if not s.call_id_from_span)
        self.by_id = Counter((s.call_id, s.tool) for s in steps if not s.call_id_from_span)
        self.unlabeled = Counter((s.tool, s.arguments_sha256) for s in steps if s.call_id_from_span and s.arguments_sha256 is not None)
        self.by_content = Counter((s.tool, s.arguments_sha256) for s in steps if s.arguments_sha256 is not None)
        self.ran = Counter(s.tool for s in steps)
        self.blank = Counter(s.tool for s in steps if s.call_id_from_span and s.arguments_sha256 is None)  # matched by tool alone
        self.by_result: dict[tuple, list] = {}  # (call id its result names, tool) -> the arguments' SHA-256 of such spans
        for s in steps:
            if s.call_id_from_span and s.result_call_id is not None:
                self.by_result.setdefault((s.result_call_id, s.tool), []).append(s.arguments_sha256)
        self.matched: Counter = Counter()  # requests matched to a tool span, by tool

    def take_exact(self, request: RequestedCall) -> bool:
        """Match the span that ran exactly this call: its call id, tool and arguments; or a span of no call id whose
        result names this call (DECISIONS 443), taken out of the pools of content too."""
        if request.call_id is None:
            return False
        key = (request.call_id, request.tool, request.arguments.sha256)
        named = self.by_result.get((request.call_id, request.tool))
        if self.exact[key] > 0:
            self.exact[key] -= 1
            self.by_id[(request.call_id, request.tool)] -= 1
        elif named:
            sha = named.pop()
            if sha is None:
                self.blank[request.tool] -= 1
            else:
                self.unlabeled[(request.tool, sha)] -= 1
                self.by_content[(request.tool, sha)] -= 1
        else:
            return False
        self.matched[request.tool] += 1
        return True

    def take_by_content(self, request: RequestedCall, config: TraceFenceConfig | ConfigReading) -> bool:
        """Match by call id and tool, else by tool and arguments (their one value recorded bare counts, DECISIONS 442):
        a request with a call id among the spans of none, one without among them all."""
        sha = request.arguments.sha256
        content = (request.tool, sha) if sha is not None else None
        bare = bare_value_sha256(request.arguments, config.limits) if sha is not None else None
        bare_content = (request.tool, bare) if bare is not None else None
        if request.call_id is not None:
            found = self._take(((self.by_id, (request.call_id, request.tool)), (self.unlabeled, content), (self.unlabeled, bare_content)))
        else:
            found = self._take(((self.by_content, content), (self.by_content, bare_content)))
        if found:
            self.matched[request.tool] += 1
        return found

    def take_by_tool(self, request: RequestedCall) -> bool:
        """Match, after every other match, a span of the request's tool that no request took: any such span for a
        request whose arguments were not recorded, one that recorded neither arguments nor call id for one whose were."""
        tool, sha = request.tool, request.arguments.sha256
        if self.ran[tool] <= self.matched[tool] or (sha is not None and self.blank[tool] <= 0):
            return False
        self.matched[tool] += 1
        if sha is not None:
            self.blank[tool] -= 1
        return True

    @staticmethod
    def _take(candidates: tuple) -> bool:
        """Take one from the first ``(pool, key)`` whose key is given and counted; False when none is."""
        for pool, key in candidates:
            if key is not None and pool[key] > 0:
                pool[key] -= 1
                return True
        return False


def _run_by_agent(request: RequestedCall, agents: dict[str, list[str]], by_id: dict[str, SpanView], handoffs: list[int] | None) -> bool:
    """True when an agent span the request names (a managed agent called as a tool), or a handoff's target agent, may
    have run it; that agent span, and the handoff, are then taken (docs/DECISIONS.md 187, 347)."""
    runner = _agent_that_may_have_run(request, agents.get(request.tool), by_id)
    if runner is not None:
        agents[request.tool].remove(runner)
        return True
    target = _handoff_target(request.tool, agents) if handoffs and handoffs[0] > 0 else None
    runner = _agent_that_may_have_run(request, agents[target], by_id) if target is not None else None
    if runner is None or target is None or handoffs is None:
        return False
    agents[target].remove(runner)
    handoffs[0] -= 1
    return True


def _requested_step(request: RequestedCall, config: TraceFenceConfig | ConfigReading) -> ToolStep:
    """The ``requested_only`` step of a request no span records; its call id the request's, or
    ``<requesting span id>/<index>`` where it names none."""
    effect, source, _ = resolve_effect(None, request.tool, {}, config)
    when = request.span.end_time_unix_nano or request.span.start_time_unix_nano
    return ToolStep(
        trace_id=request.span.trace_id,
        call_id=request.call_id or f"{request.span.span_id}/{request.index}",
        tool=request.tool,
        effect=effect,
        effect_source=source,
        status=STATUS_UNKNOWN,
        arguments_json=kept_arguments(request.arguments, config),
        arguments_sha256=request.arguments.sha256,
        arguments_unavailable=request.arguments.unavailable if request.arguments.malformed is None else reasons.ARGUMENTS_NOT_RECORDED,
        start_time_unix_nano=when,
        sequence=request.span.sequence,
        requested_only=True,
        argument_tokens=value_tokens(request.arguments.value, config.limits.max_tokens_per_value),
    )


def _handoff_target(tool: str, agents: dict[str, list[str]]) -> str | None:
    """The agent a requested ``transfer_to_<agent>`` hands off to, among ``agents`` (names compared as
    ``textfold.folded_word`` compares them: openai-agents writes the name in snake case), or ``None``."""
    if not tool.lower().startswith(HANDOFF_TOOL_PREFIX):
        return None
    folded = folded_word(tool)
    return next((name for name in agents if folded_word(HANDOFF_TOOL_PREFIX + name) == folded), None)


def _agent_that_may_have_run(request: RequestedCall, candidates: list[str] | None, by_id: dict[str, SpanView]) -> str | None:
    """The first of ``candidates`` (agent span ids) that is neither the requesting span nor above it, or ``None``."""
    if not candidates:
        return None
    enclosing = ancestors_of((request.span.span_id,), by_id) | {request.span.span_id}
    return next((span_id for span_id in candidates if span_id not in enclosing), None)
