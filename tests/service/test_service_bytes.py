"""The service's data path on bytes (issue 10, item 2): spans held as their encoding, annotated by splicing,
forwarded without being parsed, against the message path it replaced (parse, ``set_attributes``, serialize)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from case_spans import otlp_fixtures
from service_helpers import raw_request, raw_span, raw_tool_span
from tests.faults.test_fuzz import _SPAN_ID_POOL, CONFIGS as FUZZ_CONFIGS, FAST, examples, otlp_spans, tool_like_spans
from otel_tracefence.pipeline import annotate
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.normalize import conventions as cv, read_keys
from otel_tracefence.normalize import from_otlp
from otel_tracefence.normalize.span_view import from_otlp_head
from otel_tracefence.pipeline.plan import plan_spans
from otel_tracefence.otlp.json_reader import read_otlp_json
from otel_tracefence.service.otlp_bytes import LazyRequest, SpanHead, encoded_span_count, lazy_spans, span_key
from otel_tracefence.service.otlp_spans import (
    OtlpItem, annotated, held_view, holds_a_key, invalid_reason, needs_full_view, planning_view, read_request, set_attributes, split_request,
    to_request, view_of,
)


def _reference_annotation(span: Span, extra: dict) -> Span:
    """Today's path before issue 10's item 2: the parsed span changed with ``set_attributes``."""
    copy = Span()
    copy.CopyFrom(span)
    set_attributes(copy, extra)
    return copy


def _otlp_fixtures() -> list[Path]:
    """Every OTLP/JSON file under tests/, and ../shared/cases' when that folder is there."""
    return [path for _, path in otlp_fixtures()]


def _fixture_spans() -> list[Span]:
    spans: list[Span] = []
    for path in _otlp_fixtures():
        read = read_otlp_json(path.read_text(encoding="utf-8"))
        spans += [s for rs in read.request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    return spans


EXTRAS = [
    {"tracefence.replay.class": "safe_to_retry", "tracefence.trace.partial": False},
    {"tracefence.replay.class": "review", "tracefence.step.reasons": ["unknown_effect", "no_idempotency_key"], "tracefence.step.index": 3},
    {"tracefence.replay.class": "review", "tracefence.step.ratio": 0.5, "tracefence.step.flag": True},
]


def test_there_are_fixture_spans_to_compare():
    assert len(_fixture_spans()) >= 20


@pytest.mark.parametrize("extra", EXTRAS)
def test_a_spliced_annotation_parses_to_what_set_attributes_gave(extra):
    for span in _fixture_spans():
        spliced = annotated(span.SerializeToString(), extra)
        assert Span.FromString(spliced) == _reference_annotation(span, extra), span.name
        # The second time the same attribute set is spliced from the cache, and gives the same.
        assert annotated(span.SerializeToString(), extra) == spliced


def test_true_and_one_are_not_one_cached_encoding():
    span = raw_span(b"\x01" * 16, b"\x02" * 8).SerializeToString()
    with_true = Span.FromString(annotated(span, {"tracefence.x": True}))
    with_one = Span.FromString(annotated(span, {"tracefence.x": 1}))
    assert with_true.attributes[-1].value.WhichOneof("value") == "bool_value"
    assert with_one.attributes[-1].value.WhichOneof("value") == "int_value"


def test_a_span_that_passed_another_fence_has_its_annotations_replaced_not_repeated():
    """Two fences: the span carries ``tracefence.*`` already; the second fence's values replace the first's."""
    span = raw_tool_span(b"\x01" * 16, b"\x02" * 8, "search")
    first = Span.FromString(annotated(span.SerializeToString(), EXTRAS[1]))
    second_extra = {"tracefence.replay.class": "safe_to_retry", "tracefence.step.reasons": ["idempotency_key"]}
    twice = Span.FromString(annotated(first.SerializeToString(), second_extra))
    assert twice == _reference_annotation(first, second_extra)
    keys = [a.key for a in twice.attributes]
    assert keys.count("tracefence.replay.class") == 1 and keys.count("tracefence.step.reasons") == 1
    assert keys.count("tracefence.step.index") == 1  # not set by the second fence: kept
    values = {a.key: a.value for a in twice.attributes}
    assert values["tracefence.replay.class"].string_value == "safe_to_retry"
    assert [v.string_value for v in values["tracefence.step.reasons"].array_value.values] == ["idempotency_key"]


def test_a_producer_label_under_tracefence_is_kept_beside_the_annotation():
    span = raw_span(b"\x01" * 16, b"\x02" * 8, **{"tracefence.effect": "read"})
    out = Span.FromString(annotated(span.SerializeToString(), EXTRAS[0]))
    assert out == _reference_annotation(span, EXTRAS[0])
    assert [a.key for a in out.attributes] == ["tracefence.effect", "tracefence.replay.class", "tracefence.trace.partial"]


_KEY_PARTS = st.sampled_from(["tracefence.", "tracefence.step.", "tracefence.replay.class", "tracefence.step.reasons", "class", "step", "x", ".", ""])


@settings(max_examples=400, deadline=None)
@given(
    text=st.lists(st.one_of(_KEY_PARTS, st.binary(max_size=6).map(lambda b: b.decode("latin-1"))), max_size=8).map("".join),
    keys=st.lists(st.lists(_KEY_PARTS, min_size=1, max_size=3).map("".join).filter(bool), min_size=1, max_size=5, unique=True),
)
def test_holds_a_key_is_each_key_searched_for(text, keys):
    """One search for the prefix, then the keys compared where it occurs (docs/DECISIONS.md, 223), says what a search
    for each key says: whether any key's bytes occur in the span (keys with and without the prefix, overlapping
    occurrences, a key's text in a value or a name)."""
    extra = dict.fromkeys(keys, "v")
    for span in (raw_span(b"\x01" * 16, b"\x02" * 8, name=text).SerializeToString(),
                 raw_span(b"\x01" * 16, b"\x02" * 8, **{text or "k": text}).SerializeToString()):
        assert holds_a_key(span, extra) == any(key.encode() in span for key in keys)


def test_a_request_read_as_bytes_and_rebuilt_is_the_request_as_received():
    spans = _fixture_spans()[:12]
    request = raw_request(*spans[:7])
    other = raw_request(*spans[7:], service_name="other")
    other.resource_spans[0].schema_url = "https://opentelemetry.io/schemas/1.26.0"
    other.resource_spans[0].scope_spans[0].schema_url = "https://opentelemetry.io/schemas/1.25.0"
    request.resource_spans.extend(other.resource_spans)
    lazy = LazyRequest.FromString(request.SerializeToString())
    assert encoded_span_count(request.SerializeToString()) == 12
    items, refused = read_request(lazy)
    assert refused == [] and len(items) == 12
    assert [item.origin.service_name for item in items] == ["raw-agent"] * 7 + ["other"] * 5
    rebuilt, count = to_request(items)
    assert count == 12
    assert ExportTraceServiceRequest.FromString(rebuilt.SerializeToString()) == request
    assert [span_key(s) for s in lazy_spans(rebuilt)] == [s.trace_id + s.span_id for s in spans]


def test_refused_ids_are_reported_as_the_message_path_reported_them():
    good = raw_span(b"\x01" * 16, b"\x02" * 8, "ok")
    bad_span = raw_span(b"\x01" * 16, b"\x00" * 8, "zero span id")
    bad_trace = raw_span(b"\x00" * 16, b"\x03" * 8, "zero trace id")
    bad_parent = raw_span(b"\x01" * 16, b"\x04" * 8, "short parent", parent=b"\x05")
    items, refused = read_request(LazyRequest.FromString(raw_request(good, bad_span, bad_trace, bad_parent).SerializeToString()))
    assert [Span.FromString(i.span) for i in items] == [good]
    assert [error for error, _ in refused] == [
        "span 0000000000000000: span_id must be 8 bytes and not all zero",
        "span 0303030303030303: trace_id must be 16 bytes and not all zero",
        "span 0404040404040404: parent_span_id must be empty or 8 bytes",
    ]
    stand_ins = [view for _, view in refused]
    assert stand_ins[1] is None  # no trace id: nothing to stand in
    assert (stand_ins[0].trace_id, stand_ins[0].span_id, stand_ins[0].name, stand_ins[0].unreadable) == (
        "01" * 16, "0000000000000000", "zero span id", ("span_id", "span_id must be 8 bytes and not all zero"))
    assert stand_ins[2].unreadable == ("parent_span_id", "parent_span_id must be empty or 8 bytes")


def test_a_request_split_on_bytes_keeps_each_spans_origin_and_drops_the_oversized():
    big = raw_span(b"\x01" * 16, b"\x09" * 8, "big", payload="x" * 5000)
    spans = [raw_span(b"\x01" * 16, bytes([0] * 7 + [i]), f"s{i}", n=i) for i in range(1, 9)]
    request = raw_request(*spans[:4], big)
    request.resource_spans.extend(raw_request(*spans[4:], service_name="other").resource_spans)
    pieces, oversized = split_request(LazyRequest.FromString(request.SerializeToString()), max_bytes=1000, max_spans=3)
    assert [Span.FromString(s) for s in oversized] == [big]
    full = [ExportTraceServiceRequest.FromString(p.SerializeToString()) for p, _, _ in pieces]
    assert [n for _, n, _ in pieces] == [3, 3, 2]
    assert all(p.ByteSize() <= size <= 1000 for p, (_, _, size) in zip(full, pieces))
    got = [(rs.resource, s) for r in full for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert [s for _, s in got] == spans
    services = [next(a.value.string_value for a in resource.attributes if a.key == "service.name") for resource, _ in got]
    assert services == ["raw-agent"] * 4 + ["other"] * 4


def test_forwarded_batches_are_concatenated_encodings_the_upstream_reads_as_one_request(upstream):
    """Merged forward batches are joined encodings: the upstream parses one request holding every span, in order."""
    from otel_tracefence.core.config import UpstreamSettings
    from otel_tracefence.service.forward import Forwarder, UpstreamTarget

    forwarder = Forwarder(UpstreamTarget(UpstreamSettings(endpoint=f"http://127.0.0.1:{upstream.port}", timeout_s=5)), max_spans=10_000, batch_wait_s=30.0)
    sent = []
    for n in range(1, 6):
        spans = [raw_span(n.to_bytes(16, "big"), (n * 8 + i).to_bytes(8, "big"), f"op {i}", **{"tracefence.replay.class": "review"}) for i in range(2)]
        sent += spans
        forwarder.put(raw_request(*spans).SerializeToString(), 2)
    assert forwarder.drain(10)
    assert len(upstream.requests) == 1
    assert [s for rs in upstream.requests[0].resource_spans for ss in rs.scope_spans for s in ss.spans] == sent
    assert forwarder.sent_spans == 10


def test_an_item_holds_bytes_not_a_message():
    items, _ = read_request(LazyRequest.FromString(raw_request(raw_span(b"\x01" * 16, b"\x02" * 8)).SerializeToString()))
    assert isinstance(items[0], OtlpItem) and type(items[0].span) is bytes
    assert not hasattr(items[0], "__dict__")  # slotted: a held span costs its bytes and two references
    assert sorted(OtlpItem.__slots__) == ["full", "ids", "origin", "sequence", "span"]  # no parsed message kept while queued (DECISIONS 157)


def test_an_item_keeps_its_ids_while_queued_and_none_once_held():
    """read_request keeps the ids it read (bytes, no parsed message) for held_view, which drops them: a held span keeps
    no ids (docs/DECISIONS.md 320). An item read no other way has none, and held_view reads its head."""
    span = raw_span(b"\x01" * 16, b"\x02" * 8, parent=b"\x03" * 8)
    items, _ = read_request(LazyRequest.FromString(raw_request(span).SerializeToString()))
    assert items[0].ids == (b"\x01" * 16, b"\x02" * 8, b"\x03" * 8)
    held = held_view(items[0], 7)
    assert (held.trace_id, held.span_id, held.parent_span_id, items[0].sequence) == ("01" * 16, "02" * 8, "03" * 8, 7)
    assert items[0].ids is None
    unread = OtlpItem(items[0].origin, span.SerializeToString())
    assert unread.ids is None and held_view(unread, 7) == held


# -- light views (issue 10, item 2.2): only spans holding a marker are read in full --------------------------------


def _planned(trace_id: str, views: list, config: TraceFenceConfig) -> tuple:
    planned = plan_spans(trace_id, views, config)
    plan = planned.plan
    steps = [(s.step.call_id, s.step.tool, s.decision.value, s.reasons, s.related_call_ids) for s in plan.steps]
    annotations = (annotate.span_attributes(planned), annotate.trace_attributes(plan)) if plan.replay_class is not None else None
    return plan.replay_class, plan.partial, steps, annotations, plan


CONFIGS = [TraceFenceConfig(), TraceFenceConfig(decision_wait_ms=0)]


def _with_plain_spans(spans: list[Span]) -> list[Span]:
    """The trace with a plain span (no marker: read without attributes) put between every span and its parent,
    and a plain leaf under every span: parent chains, agent boundaries and roots then pass through light views."""
    out: list[Span] = []
    for index, span in enumerate(spans):
        middle = Span(trace_id=span.trace_id, span_id=bytes([0xEE, index % 256]) + span.span_id[2:], parent_span_id=span.parent_span_id,
                      name=f"step {index}", start_time_unix_nano=span.start_time_unix_nano, end_time_unix_nano=span.end_time_unix_nano)
        middle.attributes.extend([_string("thread.name", "main"), _string("service.version", "1.2")])
        middle.events.add(name="log").attributes.append(_string("message", "went on"))
        changed = Span()
        changed.CopyFrom(span)
        changed.parent_span_id = middle.span_id
        leaf = Span(trace_id=span.trace_id, span_id=bytes([0xDD, index % 256]) + span.span_id[2:], parent_span_id=span.span_id,
                    name="render answer", start_time_unix_nano=span.start_time_unix_nano, end_time_unix_nano=span.end_time_unix_nano, kind=3)
        leaf.status.code = 2
        leaf.status.message = "boom"
        out += [middle, changed, leaf]
    return out


def _assert_same_plans(trace_id: str, spans: list[bytes], what: str) -> tuple[int, int]:
    full_views = [from_otlp(Span.FromString(s), i) for i, s in enumerate(spans)]
    service_views = [view_of(s, i) for i, s in enumerate(spans)]
    # As the buffer reads them: it keeps no view of a held span and asks planning_view(None, item).
    items = [OtlpItem(None, s) for s in spans]  # type: ignore[arg-type]
    held = [held_view(item, i) for i, item in enumerate(items)]
    assert [planning_view(None, item) for item in items] == service_views
    # As the service reads them: read_request (its id checks: the right lengths, not all zero), then held_view.
    request = LazyRequest()
    request.resource_spans.add(resource=b"").scope_spans.add(scope=b"").spans.extend(spans)
    received, refused = read_request(request)
    accepted = [i for i, s in enumerate(spans) if invalid_reason(SpanHead.FromString(s)) is None]
    assert len(received) == len(accepted) and len(refused) == len(spans) - len(accepted), what
    assert [held_view(item, i) for i, item in zip(accepted, received)] == [held[i] for i in accepted], what
    assert [(item.span, item.full, item.sequence) for item in received] == [(items[i].span, items[i].full, i) for i in accepted]
    assert [planning_view(None, item) for item in received] == [service_views[i] for i in accepted], what
    for config in CONFIGS:
        assert _planned(trace_id, service_views, config) == _planned(trace_id, full_views, config), f"{what}: trace {trace_id}"
    light = sum(1 for s in spans if not needs_full_view(s))
    return light, len(spans) - light


def test_light_views_give_the_plans_full_views_give_on_every_case_and_fixture():
    """Every trace of every OTLP case and fixture planned twice: every span in full, and every span read the
    service's way (without attributes and events when it holds no marker). Same class, steps, decisions,
    reasons, related calls and annotations, and the same TracePlan. Each trace also with plain spans put
    into every parent chain and under every span."""
    light = full = traces = 0
    for path in _otlp_fixtures():
        read = read_otlp_json(path.read_text(encoding="utf-8"))
        by_trace: dict[str, list[Span]] = {}
        for rs in read.request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    by_trace.setdefault(span.trace_id.hex(), []).append(span)
        for trace_id, spans in by_trace.items():
            for variant in (spans, _with_plain_spans(spans)):
                traces += 1
                counted = _assert_same_plans(trace_id, [s.SerializeToString() for s in variant], path.name)
                light, full = light + counted[0], full + counted[1]
    assert traces >= 26 and light >= 50 and full >= 50, (traces, light, full)  # the comparison covers both kinds


def _span(name: str = "work", attributes=(), events=()) -> Span:
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, parent_span_id=b"\x03" * 8, name=name, kind=Span.SPAN_KIND_CLIENT,
                start_time_unix_nano=10, end_time_unix_nano=20, flags=0x300)
    span.status.code = 2
    span.status.message = "boom"
    span.attributes.extend(attributes)
    for event_name, event_attributes in events:
        span.events.add(name=event_name, time_unix_nano=15).attributes.extend(event_attributes)
    return span


def _string(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def test_a_span_with_no_marker_is_read_without_attributes_and_events_and_nothing_else_differs():
    span = _span(attributes=[_string("thread.name", "main"), _string("service.version", "1.2"), _string("thread.name", "again")],
                 events=[("log", [_string("message", "started")])])
    data = span.SerializeToString()
    assert not needs_full_view(data)
    light, reference = view_of(data, 7), from_otlp(span, 7)
    assert (light.attributes, light.events, light.duplicate_keys) == ({}, (), ())
    reference.attributes, reference.events, reference.duplicate_keys = light.attributes, (), ()
    assert light == reference
    assert (light.kind, light.status_code, light.status_message, light.parent_is_remote, light.end_time_unix_nano) == ("client", "error", "boom", True, 20)


def test_an_unknown_kind_or_status_code_reads_as_the_full_view_reads_it():
    span = _span()
    span.kind = 9
    span.status.code = 7
    head = from_otlp_head(SpanHead.FromString(span.SerializeToString()))
    assert (head.kind, head.status_code) == (from_otlp(span).kind, from_otlp(span).status_code) == ("unspecified", "error")


@pytest.mark.parametrize(
    "span",
    [
        # a marker key only inside a kvlist value
        _span(attributes=[KeyValue(key="payload", value=AnyValue(kvlist_value=KeyValueList(values=[_string("gen_ai.operation.name", "execute_tool")])))]),
        # only in an event's name, or only in an event's attribute key
        _span(events=[("exception", [])]),
        _span(events=[("note", [_string("gen_ai.tool.message", "{}")])]),
        # only in the span's name
        _span(name="Tool: search"),
        _span(name="functionCall"),
        # in another case than the normalizer's
        _span(attributes=[_string("GEN_AI.Tool.Name", "x")]),
        _span(attributes=[_string("myToolCall", "x")]),
        # only in a value (a key ending in "kind" whose value holds a tool token)
        _span(attributes=[_string("component.kind", "ToolInvoker")]),
        # a key the normalizer reads outside the conventions table
        _span(attributes=[_string("db.system", "postgresql")]),
        _span(attributes=[_string("error.type", "timeout")]),
    ],
    ids=["kvlist", "event-name", "event-key", "name", "name-camel", "upper-case", "camel-key", "value", "db", "error-type"],
)
def test_a_marker_anywhere_in_the_span_gets_a_full_view(span):
    data = span.SerializeToString()
    assert needs_full_view(data)
    assert view_of(data) == from_otlp(span)


def test_every_key_the_conventions_name_is_a_marker():
    """Each key of the conventions' tables, each key read elsewhere and each event name holds a marker."""
    keys = [*cv.TOOL_NAME_KEYS, *cv.CALL_ID_KEYS, *cv.ARGUMENT_KEYS, *cv.RESULT_KEYS, *cv.TOOL_PRESENCE_MARKERS, *cv.TRACEFENCE_INPUTS,
            *(k for k, _ in cv.TOOL_KIND_MARKERS), *cv.AGENT_BOUNDARY_KINDS, *cv.HTTP_METHOD_KEYS, *cv.HTTP_URL_KEYS, *cv.HTTP_STATUS_KEYS,
            *(k for part in cv.HTTP_URL_PART_KEYS for k in part if k), *read_keys.OTHER_READ_KEYS, *cv.MCP_READ_ONLY_HINT_KEYS, *cv.AGENT_NAME_KEYS,
            *(name for name, _ in cv.TOOL_ARGUMENT_EVENTS + cv.TOOL_RESULT_EVENTS + cv.OUTPUT_EVENTS), cv.GEN_AI_OPERATION,
            cv.RPC_SYSTEM_KEY, cv.CODE_PARAMETER_PREFIX + "x.value", "traceloop.entity.name", "exception"]
    for key in keys:
        assert needs_full_view(_span(attributes=[_string(key, "v")]).SerializeToString()), key


_PLAIN_KEYS = ["thread.name", "service.version", "payload.size", "retry.count", "note"]


@st.composite
def plain_spans(draw) -> Span:
    """A span with no marker: what an application's own spans (validation, rendering, queries) look like."""
    span = Span(
        trace_id=draw(st.sampled_from([b"\x01" * 16, b"\x02" * 16])),
        span_id=draw(st.sampled_from(_SPAN_ID_POOL)),
        parent_span_id=draw(st.sampled_from([b"", *_SPAN_ID_POOL])),
        name=draw(st.sampled_from(["validate output", "render answer", "step", "SELECT", ""])),
        kind=draw(st.integers(0, 6)),
        flags=draw(st.sampled_from([0, 0x100, 0x300])),
        start_time_unix_nano=draw(st.integers(0, 3)),
        end_time_unix_nano=draw(st.sampled_from([0, 5])),
        status=Status(code=draw(st.sampled_from([0, 1, 2])), message=draw(st.sampled_from(["", "deadline exceeded", "cancelled"]))),
    )
    span.attributes.extend(_string(k, draw(st.sampled_from(["a", "b", "x y"]))) for k in draw(st.lists(st.sampled_from(_PLAIN_KEYS), max_size=3)))
    if draw(st.booleans()):
        span.events.add(name="log").attributes.append(_string("message", "m"))
    return span


@settings(max_examples=examples(250), **FAST)
@given(st.lists(st.one_of(otlp_spans(), tool_like_spans(), plain_spans(), plain_spans()), max_size=8), FUZZ_CONFIGS)
def test_light_views_give_the_plans_full_views_give_on_generated_traces(spans, config):
    """Generated traces mixing tool-like, arbitrary and plain spans: planned from full views and from the
    service's views, the same plan."""
    valid = [s for s in spans if invalid_reason(s) is None]
    by_trace: dict[str, list[bytes]] = {}
    for span in valid:
        by_trace.setdefault(span.trace_id.hex(), []).append(span.SerializeToString())
    for trace_id, encoded in by_trace.items():
        full_views = [from_otlp(Span.FromString(s), i) for i, s in enumerate(encoded)]
        service_views = [view_of(s, i) for i, s in enumerate(encoded)]
        assert _planned(trace_id, service_views, config) == _planned(trace_id, full_views, config)


def test_one_span_id_on_spans_differing_only_where_no_convention_reads_plans_alike_from_light_and_full_views():
    """Hypothesis found it: four spans under one span id, a tool span and three plain ones, two of which differ
    only in an attribute no convention reads. Light views cannot tell those two apart, full views can; the plan,
    its reasons and the malformed span id's message (it counts every span carrying the id) are the same."""
    tool = _span(name="execute_tool pay", attributes=[_string("gen_ai.operation.name", "execute_tool"), _string("gen_ai.tool.name", "pay")])
    plain = [_span(), _span(attributes=[_string("thread.name", "a")]), _span(attributes=[_string("thread.name", "b")])]
    encoded = [s.SerializeToString() for s in (tool, *plain)]
    full_views = [from_otlp(Span.FromString(s), i) for i, s in enumerate(encoded)]
    service_views = [view_of(s, i) for i, s in enumerate(encoded)]
    trace_id = (b"\x01" * 16).hex()
    for config in CONFIGS:
        assert _planned(trace_id, service_views, config) == _planned(trace_id, full_views, config)
    (step,) = plan_spans(trace_id, service_views, CONFIGS[0]).plan.steps
    (bad,) = [m for m in step.step.malformed if m.field == "span_id"]
    assert bad.message == f"span id {'02' * 8} is carried by 4 spans of the trace that are not all the same"


def test_a_span_sharing_the_id_of_one_whose_requested_call_is_unread_is_no_step_of_it():
    """Hypothesis found it: two spans under span id 0101..., a tool-named span whose OpenInference call arguments key
    holds an empty value (a requested call with no name: unread) and a plain span with a log event. The unread call is
    the first span's alone (DECISIONS 360, 692): the plain span, which requested nothing, is no step, from full views
    (which read its event, so it was not quiet, and took the other span's unread call by the id) as from light views."""
    requester = Span(trace_id=b"\x02" * 16, span_id=b"\x01" * 8, name="execute_tool pay", status=Status())
    requester.attributes.add(key="llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments", value=AnyValue())
    plain = Span(trace_id=b"\x02" * 16, span_id=b"\x01" * 8, name="validate output", status=Status())
    plain.events.add(name="log").attributes.append(_string("message", "m"))
    encoded = [requester.SerializeToString(), plain.SerializeToString()]
    trace_id = (b"\x02" * 16).hex()
    for config in CONFIGS:
        full = _planned(trace_id, [from_otlp(Span.FromString(s), i) for i, s in enumerate(encoded)], config)
        assert _planned(trace_id, [view_of(s, i) for i, s in enumerate(encoded)], config) == full
        assert full[0] == "review" and full[2] == [("01" * 8, "pay", "review", ("requested_call_unread", "effect_unknown", "arguments_not_recorded"), ())]


def test_a_trace_with_a_clashing_span_id_plans_alike_in_any_thread():
    """Round 5's second trial: with the compiled engine, Cython's generated ``repr`` of its dataclasses raised
    ``AttributeError`` outside the thread that imported them, and ordering spans under one id sorts by ``repr``:
    in the service's intake thread the trace was not planned at all. Now the same plan in any thread, and the
    engine's dataclasses give the same ``repr`` there as in the main thread (otel_tracefence/core/reprs.py)."""
    from concurrent.futures import ThreadPoolExecutor

    write = _span(name="execute_tool pay", attributes=[_string("gen_ai.operation.name", "execute_tool"), _string("gen_ai.tool.name", "pay"),
                                                       _string("tracefence.effect", "write")])
    other = _span(name="execute_tool refund", attributes=[_string("gen_ai.operation.name", "execute_tool"), _string("gen_ai.tool.name", "refund")])
    trace_id = (b"\x01" * 16).hex()

    def planned() -> tuple:
        views = [view_of(s.SerializeToString(), i) for i, s in enumerate((write, other))]
        result = _planned(trace_id, views, CONFIGS[0])
        plan = result[-1]
        return result[:-1], [repr(x) for x in (views[0], plan, plan.steps[0], plan.steps[0].step)]

    here = planned()
    with ThreadPoolExecutor(1) as pool:
        there = pool.submit(planned).result()
    assert there == here
    (replay_class, partial, steps, _), _ = here
    assert (replay_class.value, partial) == ("review", False)
    assert sorted((tool, decision) for _, tool, decision, _, _ in steps) == [("pay", "review"), ("refund", "review")]
    assert all("malformed_span_id" in step_reasons for _, _, _, step_reasons, _ in steps)


def test_the_full_view_from_span_bytes_equals_from_otlp_also_when_its_attributes_come_from_the_cache():
    """full_view (SpanBody, attributes converted once per encoding) gives from_otlp's view field for field: repeated keys
    (last value, listed), kvlist, array and bytes values, events; a second read (cache hits) the same, and a list value
    is never shared between two views."""
    from otel_tracefence.service.otlp_spans import full_view

    listed = AnyValue()
    listed.array_value.values.extend([AnyValue(string_value="a"), AnyValue(int_value=2)])
    nested = AnyValue(kvlist_value=KeyValueList(values=[_string("city", "Oslo")]))
    span = _span(name="execute_tool pay", attributes=[
        _string("gen_ai.tool.name", "pay"), KeyValue(key="n", value=AnyValue(int_value=3)), KeyValue(key="flag", value=AnyValue(bool_value=True)),
        KeyValue(key="x", value=AnyValue(double_value=1.5)), KeyValue(key="raw", value=AnyValue(bytes_value=b"\x00\x01")),
        KeyValue(key="list", value=listed), KeyValue(key="gen_ai.tool.call.arguments", value=nested), KeyValue(key="empty"),
        _string("gen_ai.tool.name", "refund"), _string("n", "again"),
    ], events=[("gen_ai.tool.message", [_string("gen_ai.tool.call.arguments", "{}")]), ("exception", [])])
    data = span.SerializeToString()
    first, second = full_view(data, 4), full_view(data, 4)
    assert first == second == from_otlp(span, 4)
    assert first.duplicate_keys == ("gen_ai.tool.name", "n") and first.attributes["gen_ai.tool.name"] == "refund"
    assert first.attributes["list"] == ["a", 2] and first.attributes["list"] is not second.attributes["list"]
    assert first.attributes["gen_ai.tool.call.arguments"] is not second.attributes["gen_ai.tool.call.arguments"]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80), st.sampled_from(sorted(read_keys.READ_MARKERS)), st.booleans(), st.binary(max_size=40))
def test_the_one_pass_marker_search_finds_exactly_what_looking_for_each_marker_finds(before, marker, put, after):
    """needs_full_view (one regular expression for every marker) agrees with looking for each of READ_MARKERS in
    the lower-cased bytes, on random bytes with and without a marker (in random case) inside."""
    text = marker.encode()
    text = bytes(c ^ 0x20 if 97 <= c <= 122 and (i + len(before)) % 2 else c for i, c in enumerate(text))  # mixed case
    data = before + (text if put else b"") + after
    assert needs_full_view(data) == any(m.encode() in data.lower() for m in read_keys.READ_MARKERS)
