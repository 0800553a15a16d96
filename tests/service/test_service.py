"""``TraceFenceService`` in process, with real parts: the SDK's ``OTLPSpanExporter`` as the client,
a real gRPC ``TraceService`` as the upstream, a real SQLite review queue."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace.export import SpanExportResult

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence._proto.tracefence.v1 import tracefence_pb2_grpc as pb_grpc
from otel_tracefence.core.config import ServiceSettings, TraceFenceConfig, UpstreamSettings
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.service.server import REVIEW_SERVICE, TRACE_SERVICE, TraceFenceService
from service_helpers import (
    BIG,
    EXPORT_METHOD,
    Client,
    RecordingUpstream,
    agent_trace,
    attrs,
    clean_env,
    free_port,
    make_certificate,
    raw_request,
    raw_span,
    raw_tool_span,
    read,
    request_with_a_span_not_utf8,
    tf_attrs,
    timed_out_write,
    trace_stub,
    wait_for,
)

SCHEMA = "1"
OUR_KEYS = ("tracefence.replay.class", "tracefence.plan.schema_version", "tracefence.step.", "tracefence.trace.")


def common(replay_class: str, **extra: Any) -> dict[str, Any]:
    return {"tracefence.replay.class": replay_class, "tracefence.plan.schema_version": SCHEMA, **extra}


def step(replay_class: str, decision: str, reasons: list[str], effect: str, status: str, **extra: Any) -> dict[str, Any]:
    return {
        **common(replay_class, **extra),
        "tracefence.step.decision": decision,
        "tracefence.step.reasons": reasons,
        "tracefence.step.related_call_ids": [],
        "tracefence.step.effect": effect,
        "tracefence.step.status": status,
    }


def ours(span) -> dict[str, Any]:
    """The attributes the service wrote (not the producer's own ``tracefence.effect`` and such)."""
    return {k: v for k, v in tf_attrs(span).items() if k.startswith(OUR_KEYS)}


@pytest.fixture
def serve(tmp_path, upstream):
    """``serve(**service_settings)``: a started service forwarding to ``upstream`` (or ``upstream_port``)."""
    services: list[TraceFenceService] = []

    def make(*, upstream_port: int | None = None, top: dict[str, Any] | None = None, **settings: Any) -> TraceFenceService:
        settings.setdefault("endpoint", "127.0.0.1:0")
        settings.setdefault("http_endpoint", "")  # the OTLP/HTTP receiver has tests of its own (test_otlp_http.py)
        settings.setdefault("decision_wait_ms", 100)
        settings.setdefault("max_wait_ms", 10_000)
        settings.setdefault("drain_timeout_s", 2)
        settings.setdefault("upstreams", [UpstreamSettings(endpoint=f"http://127.0.0.1:{upstream_port or upstream.port}", timeout_s=2)])
        config = TraceFenceConfig(review_db=str(tmp_path / "r.db"), service=ServiceSettings(**settings), **(top or {}))
        service = TraceFenceService(config)
        service.start()
        services.append(service)
        return service

    yield make
    for service in services:
        service.stop(grace_s=0)


@pytest.fixture
def clients():
    made: list[Client] = []

    def make(*args: Any, **kwargs: Any) -> Client:
        client = Client(*args, **kwargs)
        made.append(client)
        return client

    yield make
    for client in made:
        client.shutdown()


def review_rows(path: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT trace_id, replay_class FROM review_items ORDER BY trace_id").fetchall()


def stored_items(path: Path) -> dict[str, pb.ReviewItem]:
    with SQLiteReviewStore(path, create=False) as store:
        items, _ = store.list(page_size=1000)
    return {item.trace_id: item for item in items}


def sent_as_otlp(client: Client) -> dict[str, tuple[Any, Any, Any]]:
    """What the client sent, as OTLP protobuf, by span id: (resource, scope, span)."""
    request = encode_spans(client.sent.get_finished_spans())
    return {span.span_id.hex(): (rs.resource, ss.scope, span) for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans}


def assert_forwarded_exactly(received: list, client: Client, expected: dict[str, dict[str, Any]]) -> None:
    """Each span the client sent reached upstream once: byte for byte the same span, resource and scope,
    with exactly ``expected[(trace id, span name)]`` (or ``expected[span name]``) added as attributes, after the span's own."""
    sent = sent_as_otlp(client)
    got = {r.span_id: r for r in received if r.span_id in sent}
    assert len([r for r in received if r.span_id in sent]) == len(sent) == len(got), "every span once"
    for span_id, (resource, scope, original) in sent.items():
        r = got[span_id]
        assert r.resource == resource
        assert r.scope == scope
        added = list(r.span.attributes)[len(original.attributes) :]
        assert list(r.span.attributes)[: len(original.attributes)] == list(original.attributes), r.name
        want = expected.get((original.trace_id.hex(), original.name), expected.get(original.name))
        assert attrs(added) == want, original.name
        bare = type(r.span)()
        bare.CopyFrom(r.span)
        del bare.attributes[:]
        stripped = type(original)()
        stripped.CopyFrom(original)
        del stripped.attributes[:]
        assert bare == stripped, original.name


# -- the data path ---------------------------------------------------------------------------


def test_agent_traces_reach_upstream_annotated_with_resource_and_scope_intact(serve, upstream, clients, tmp_path):
    service = serve()
    client = clients(service.port, "billing-agent")
    review_trace = agent_trace(client, review=True)
    injected_trace = agent_trace(client, review=False)
    with client.tracer.start_as_current_span("chat gpt-4o", attributes={"gen_ai.operation.name": "chat"}):
        pass  # a trace with no tool step: passed through untouched
    received = upstream.wait_spans(7)
    by_trace = {r.trace_id for r in received}
    assert len(by_trace) == 3
    expected_review = {
        "invoke_agent billing": common("review"),
        "execute_tool accounts.get_balance": step("review", "replay", ["declared_read"], "read", "ok"),
        "execute_tool payments.charge": step("review", "review", ["write_timeout"], "write", "timeout"),
    }
    expected_injected = {
        "invoke_agent billing": common("injected"),
        "execute_tool accounts.get_balance": step("injected", "replay", ["declared_read"], "read", "ok"),
        "execute_tool invoice.create": step("injected", "skip", ["write_committed"], "write", "ok"),
    }
    names = lambda trace_id: {r.name: r for r in upstream.trace(trace_id)}  # noqa: E731
    for trace_id, expected in ((review_trace, expected_review), (injected_trace, expected_injected)):
        got = names(trace_id)
        assert set(got) == set(expected)
        for name, want in expected.items():
            assert ours(got[name].span) == want, name
    chat = next(r for r in received if r.name == "chat gpt-4o")
    assert ours(chat.span) == {}
    # Byte for byte: each span as sent, resource (service.name, deployment.environment, SDK attributes) and
    # scope (name, version) intact, with exactly the design's annotations added.
    assert_forwarded_exactly(
        received,
        client,
        {
            **{(review_trace, name): want for name, want in expected_review.items()},
            **{(injected_trace, name): want for name, want in expected_injected.items()},
            "chat gpt-4o": {},
        },
    )
    assert {r.service_name for r in received} == {"billing-agent"}
    assert {(r.scope.name, r.scope.version) for r in received} == {("agent.loop", "1.2.3"), ("otel_tracefence.agent.instrument", "")}
    # Exactly one review item, for the review-class trace only.
    assert review_rows(tmp_path / "r.db") == [(review_trace, pb.REPLAY_CLASS_REVIEW)]
    item = stored_items(tmp_path / "r.db")[review_trace]
    assert item.service_name == "billing-agent" and item.state == pb.REVIEW_STATE_OPEN and not item.plan.partial
    assert [(d.step.tool, d.decision) for d in item.plan.steps] == [
        ("accounts.get_balance", pb.DECISION_REPLAY),
        ("payments.charge", pb.DECISION_REVIEW),
    ]
    assert all(not d.step.arguments_json for d in item.plan.steps)  # hashes only by default


def test_one_review_item_per_review_trace_even_when_redelivered(serve, upstream, clients, tmp_path):
    service = serve()
    client = clients(service.port, "support-agent", batch=True)
    review_traces = sorted(agent_trace(client, review=True) for _ in range(3))
    agent_trace(client, review=False)
    assert client.send() is SpanExportResult.SUCCESS  # one Export call, four traces
    upstream.wait_spans(12)
    wait_for(lambda: len(review_rows(tmp_path / "r.db")) == 3, what="three review items")
    # The collector retries a batch whose answer it lost: the review traces' spans again.
    client.exporter.export([s for s in client.sent.get_finished_spans() if format(s.context.trace_id, "032x") in review_traces])
    late = upstream.wait_spans(21)[12:]
    assert {r.trace_id for r in late} == set(review_traces)
    assert all(ours(r.span)["tracefence.trace.late"] is True and r.tf["tracefence.replay.class"] == "review" for r in late)
    assert review_rows(tmp_path / "r.db") == [(t, pb.REPLAY_CLASS_REVIEW) for t in review_traces]


def test_a_redelivered_span_is_not_a_second_execution(serve, upstream, clients, tmp_path):
    service = serve()
    client = clients(service.port, "support-agent", batch=True)
    trace_id = agent_trace(client, review=False)
    assert client.send() is SpanExportResult.SUCCESS
    upstream.wait_spans(3)
    client._batch_from = 0
    assert client.send() is SpanExportResult.SUCCESS  # the same three spans again
    late = upstream.wait_spans(6)[3:]
    assert {r.tf["tracefence.replay.class"] for r in late} == {"injected"}
    assert review_rows(tmp_path / "r.db") == []
    assert trace_id


def test_spans_of_one_trace_from_several_calls_and_clients_are_decided_together(serve, upstream, clients, tmp_path):
    service = serve()
    planner = clients(service.port, "planner-agent")  # one Export call per span
    worker = clients(service.port, "payments-worker")
    root = planner.tracer.start_span("invoke_agent planner", attributes={"gen_ai.operation.name": "invoke_agent"})
    context = trace.set_span_in_context(root)
    with trace.use_span(root, end_on_exit=False):
        read(planner)
    # The worker gets the trace context (as W3C traceparent would carry it) and does the write in its own process.
    with worker.tracer.start_as_current_span("handle payment", context=context):
        timed_out_write(worker)
    root.end()
    trace_id = format(root.get_span_context().trace_id, "032x")
    received = upstream.wait_spans(4, trace_id)
    by_name = {r.name: r for r in received}
    # The planner's read is in a review trace because of the worker's write: one plan for both.
    assert ours(by_name["execute_tool accounts.get_balance"].span) == step("review", "replay", ["declared_read"], "read", "ok")
    assert ours(by_name["execute_tool payments.charge"].span) == step("review", "review", ["write_timeout"], "write", "timeout")
    assert ours(by_name["invoke_agent planner"].span) == common("review")
    assert ours(by_name["handle payment"].span) == common("review")
    assert {name: r.service_name for name, r in by_name.items()} == {
        "execute_tool accounts.get_balance": "planner-agent",
        "invoke_agent planner": "planner-agent",
        "handle payment": "payments-worker",
        "execute_tool payments.charge": "payments-worker",
    }
    assert_forwarded_exactly(received, planner, {
        "invoke_agent planner": common("review"),
        "execute_tool accounts.get_balance": step("review", "replay", ["declared_read"], "read", "ok"),
    })
    assert_forwarded_exactly(received, worker, {
        "handle payment": common("review"),
        "execute_tool payments.charge": step("review", "review", ["write_timeout"], "write", "timeout"),
    })
    items = stored_items(tmp_path / "r.db")
    assert list(items) == [trace_id]
    assert [d.step.tool for d in items[trace_id].plan.steps] == ["accounts.get_balance", "payments.charge"]


def test_late_spans_are_forwarded_at_once_flagged_with_the_remembered_class(serve, upstream, clients, tmp_path):
    service = serve()
    client = clients(service.port, "billing-agent")
    root = client.tracer.start_span("invoke_agent billing")
    with trace.use_span(root, end_on_exit=False):
        timed_out_write(client)
    root.end()
    trace_id = format(root.get_span_context().trace_id, "032x")
    upstream.wait_spans(2, trace_id)
    assert review_rows(tmp_path / "r.db") == [(trace_id, pb.REPLAY_CLASS_REVIEW)]
    # After the decision: a model call and a read of the same trace arrive.
    context = trace.set_span_in_context(root)
    started = time.monotonic()
    with client.tracer.start_as_current_span("chat gpt-4o", context=context):
        pass
    with trace.use_span(root, end_on_exit=False):
        read(client)
    received = upstream.wait_spans(4, trace_id)
    assert time.monotonic() - started < 1.0  # not held for a decision wait
    by_name = {r.name: r for r in received}
    assert ours(by_name["chat gpt-4o"].span) == common("review", **{"tracefence.trace.late": True})
    # A late tool step: the trace was decided without it, so it fails closed (issue 14).
    assert ours(by_name["execute_tool accounts.get_balance"].span) == step(
        "review", "review", ["decided_before_complete"], "read", "ok", **{"tracefence.trace.partial": True, "tracefence.trace.late": True}
    )
    assert "tracefence.trace.late" not in ours(by_name["invoke_agent billing"].span)
    # The late read updated the trace's one item: never a second one.
    assert review_rows(tmp_path / "r.db") == [(trace_id, pb.REPLAY_CLASS_REVIEW)]
    item = stored_items(tmp_path / "r.db")[trace_id]
    assert [d.step.tool for d in item.plan.steps] == ["payments.charge", "accounts.get_balance"]


def test_past_max_traces_the_oldest_is_decided_partial(serve, upstream, clients, tmp_path):
    service = serve(max_wait_ms=60_000, top={"max_traces": 2})
    client = clients(service.port, "billing-agent")
    traces = [agent_trace(client, end_root=False) for _ in range(3)]  # roots never end: nothing is complete
    first = upstream.wait_spans(2, traces[0])
    for r in first:
        assert r.tf["tracefence.trace.partial"] is True
        assert r.tf["tracefence.replay.class"] == "review"
    assert len(service.fence.buffer) == 2
    assert upstream.trace(traces[1]) == [] and upstream.trace(traces[2]) == []
    assert [t for t, _ in review_rows(tmp_path / "r.db")] == [traces[0]]
    service.stop(grace_s=0)  # the others are decided at shutdown, partial too, and forwarded
    for trace_id in traces[1:]:
        assert {r.tf.get("tracefence.trace.partial") for r in upstream.trace(trace_id)} == {True}
    items = stored_items(tmp_path / "r.db")
    assert sorted(items) == sorted(traces) and all(i.plan.partial for i in items.values())


def test_a_trace_whose_root_never_comes_is_decided_partial_at_max_wait(serve, upstream, clients):
    service = serve(max_wait_ms=400)
    client = clients(service.port, "billing-agent")
    started = time.monotonic()
    trace_id = agent_trace(client, review=False, end_root=False)
    received = upstream.wait_spans(2, trace_id)
    assert time.monotonic() - started >= 0.35
    for r in received:
        assert ours(r.span)["tracefence.trace.partial"] is True
        # No root span came: its write cannot be judged (docs/DECISIONS.md 301; it was `injected` before).
        assert r.tf["tracefence.replay.class"] == "review"
    (write,) = [r for r in received if r.name.endswith("invoice.create")]
    assert (write.tf["tracefence.step.decision"], write.tf["tracefence.step.reasons"]) == ("review", ["trace_root_missing"])


# -- forwarding --------------------------------------------------------------------------------


def test_upstream_down_then_back_loses_nothing_within_the_queue_bound(serve, clients):
    port = free_port()
    service = serve(upstream_port=port)
    client = clients(service.port, "billing-agent")
    traces = [agent_trace(client, review=i % 2 == 0) for i in range(3)]
    forwarder = service.forwarders[0]
    wait_for(lambda: forwarder.failures >= 1 and forwarder.depth == 9, what="a failed forward attempt with 9 spans queued")
    late_upstream = RecordingUpstream()
    late_upstream.start(port)
    try:
        received = late_upstream.wait_spans(9, timeout=20)
        assert sorted(r.span_id for r in received) == sorted(sent for sent in sent_as_otlp(client))
        assert {r.trace_id for r in received} == set(traces)
        assert all("tracefence.replay.class" in r.tf for r in received)
        wait_for(lambda: forwarder.depth == 0)
        assert (forwarder.sent_spans, forwarder.dropped_spans) == (9, 0)
    finally:
        late_upstream.stop()


def test_past_the_queue_bound_the_oldest_are_dropped_and_counted_exactly(serve, clients):
    port = free_port()
    service = serve(upstream_port=port, forward_queue_spans=3, backpressure_ratio=1.0)
    client = clients(service.port, "billing-agent", batch=True)
    traces = [agent_trace(client) for _ in range(4)]  # 3 spans each
    assert client.send() is SpanExportResult.SUCCESS  # one Export call: no refusal can interleave
    forwarder = service.forwarders[0]
    # Four decided traces of 3 spans in a queue of 3: the three oldest are dropped (a batch dropped
    # while being sent is counted once that attempt fails).
    wait_for(lambda: forwarder.dropped_spans == 9, what=f"9 dropped spans (have {forwarder.dropped_spans})")
    assert forwarder.depth == 3
    late_upstream = RecordingUpstream()
    late_upstream.start(port)
    try:
        received = late_upstream.wait_spans(3, timeout=20)
        wait_for(lambda: forwarder.depth == 0 and not forwarder._busy)
        assert {r.trace_id for r in late_upstream.spans()} == {traces[-1]}
        assert len(late_upstream.spans()) == 3
        assert (forwarder.sent_spans, forwarder.dropped_spans) == (3, 9)
        assert all(r.tf["tracefence.replay.class"] == "review" for r in received)
    finally:
        late_upstream.stop()


def test_backpressure_answers_unavailable_with_retry_info_and_clients_retry(serve, clients, monkeypatch):
    refusals: list[str] = []
    refuse = TraceFenceService._refuse

    def counting_refuse(self):
        reason = refuse(self)
        if reason is not None:
            refusals.append(reason)
        return reason

    monkeypatch.setattr(TraceFenceService, "_refuse", counting_refuse)
    port = free_port()
    service = serve(upstream_port=port, forward_queue_spans=10, backpressure_ratio=0.5, retry_delay_s=1.5)
    client = clients(service.port, "billing-agent", batch=True)
    for _ in range(2):
        agent_trace(client)
    assert client.send() is SpanExportResult.SUCCESS
    forwarder = service.forwarders[0]
    wait_for(lambda: forwarder.depth == 6, what="6 spans queued")  # 6 >= 0.5 * 10: refuse
    tid = bytes.fromhex("ab" * 16)
    channel, stub = trace_stub(f"127.0.0.1:{service.port}")
    with channel:
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(raw_request(raw_tool_span(tid, b"\x01" * 8, "search")), timeout=5)
        error = refused.value
        assert error.code() == grpc.StatusCode.UNAVAILABLE
        assert "forward queue" in error.details() and "6/10" in error.details()
        # RetryInfo in the trailer the SDK exporters read, and in the status details (OTLP specification).
        trailer = dict(error.trailing_metadata())["google.rpc.retryinfo-bin"]
        assert error_details_pb2.RetryInfo.FromString(trailer).retry_delay.ToNanoseconds() == 1_500_000_000
        info = error_details_pb2.RetryInfo()
        assert rpc_status.from_call(error).details[0].Unpack(info) and info.retry_delay.ToNanoseconds() == 1_500_000_000
        assert len(service.fence.buffer) == 0  # nothing of a refused call is held
        # The real exporter, refused, waits the delay it was given and tries again: it gets through
        # once the upstream is back and the queue has drained.
        agent_trace(client)
        result: list[Any] = []
        sender = threading.Thread(target=lambda: result.append(client.send()))
        sender.start()
        wait_for(lambda: len(refusals) >= 2, what="the exporter refused")
        late_upstream = RecordingUpstream()
        late_upstream.start(port)
        try:
            sender.join(timeout=20)
            assert result == [SpanExportResult.SUCCESS]
            late_upstream.wait_spans(9, timeout=15)
            assert forwarder.dropped_spans == 0
            assert not stub.Export(raw_request(raw_tool_span(tid, b"\x01" * 8, "search")), timeout=5).HasField("partial_success")
            late_upstream.wait_spans(10)
        finally:
            late_upstream.stop()


# -- bad requests ---------------------------------------------------------------------------


def _length_delimited(field: int, payload: bytes) -> bytes:
    """One protobuf length-delimited field on the wire: tag, varint length, payload."""
    size, varint = len(payload), b""
    while True:
        byte, size = size & 0x7F, size >> 7
        varint += bytes([byte | (0x80 if size else 0)])
        if not size:
            return bytes([field << 3 | 2]) + varint + payload


def test_garbage_bytes_are_refused_and_the_service_keeps_serving(serve, upstream):
    service = serve()
    channel = grpc.insecure_channel(f"127.0.0.1:{service.port}")
    with channel:
        export_raw = channel.unary_unary(EXPORT_METHOD, request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.RpcError) as bad:
            export_raw(b"\xff\x00garbage", timeout=5)
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # permanent: OTLP clients do not retry it
        assert "not an ExportTraceServiceRequest" in bad.value.details()
        # A span nested past protobuf's recursion limit cannot be decoded: that span alone is refused, in the
        # partial success, and stands in its trace as a review step (test_undecodable_spans_*).
        request = _length_delimited(1, _length_delimited(2, _length_delimited(2, _too_deep_span(bytes.fromhex("ce" * 16), b"\x03" * 8))))
        too_deep = trace_service_pb2.ExportTraceServiceResponse.FromString(export_raw(request, timeout=5))
        assert too_deep.partial_success.rejected_spans == 1
        assert "span 0303030303030303: span: does not decode as an OTLP Span" in too_deep.partial_success.error_message
        stub = health_pb2_grpc.HealthStub(channel)
        assert stub.Check(health_pb2.HealthCheckRequest(service=TRACE_SERVICE), timeout=5).status == health_pb2.HealthCheckResponse.SERVING
        _, trace_stub_ = trace_stub(f"127.0.0.1:{service.port}")
        tid = bytes.fromhex("cd" * 16)
        response = trace_stub_.Export(raw_request(raw_tool_span(tid, b"\x02" * 8, "search")), timeout=5)
        assert not response.HasField("partial_success")
    received = upstream.wait_spans(1, tid.hex())
    assert received[0].tf["tracefence.replay.class"] == "dynamic"


def _too_deep_span(trace_id: bytes, span_id: bytes) -> bytes:
    """An encoded tool span with an attribute nested past protobuf's recursion limit (100) once in a request."""
    deep = AnyValue(string_value="leaf")
    for _ in range(40):
        wrapped = AnyValue()
        wrapped.kvlist_value.values.add(key="k").value.CopyFrom(deep)
        deep = wrapped
    attribute = b"\x0a\x04deep" + _length_delimited(2, deep.SerializeToString())  # KeyValue{key, value}
    # protobuf itself refuses to build a message this deep: the attribute is appended on the wire.
    return raw_tool_span(trace_id, span_id, "search").SerializeToString() + _length_delimited(9, attribute)


@pytest.mark.parametrize("where", ["span", "resource"])
def test_undecodable_spans_are_refused_alone_and_stand_in_their_trace(serve, upstream, where):
    # A string that is not UTF-8 (proto3 refuses it) in one span, or in its resource, refused the whole request
    # (INVALID_ARGUMENT, never retried), losing the timed-out write of another trace beside it. Now that span alone
    # is refused in the partial success; its trace is planned with a review step for it; the rest is kept.
    service = serve()
    kept, bad = bytes.fromhex("c1" * 16), bytes.fromhex("c2" * 16)
    channel = grpc.insecure_channel(f"127.0.0.1:{service.port}")
    with channel:
        export_raw = channel.unary_unary(EXPORT_METHOD, request_serializer=None, response_deserializer=None)
        response = trace_service_pb2.ExportTraceServiceResponse.FromString(export_raw(request_with_a_span_not_utf8(kept, bad, where=where), timeout=5))
    what = "Span" if where == "span" else "Resource (the span's resource)"
    assert (response.partial_success.rejected_spans, response.partial_success.error_message) == (
        1, f"1 span(s) rejected; first: span 0202020202020202: {where}: does not decode as an OTLP {what} (a string that is not UTF-8, "
           "or nesting past protobuf's recursion limit of 100)",
    )  # fmt: skip
    (received,) = upstream.wait_spans(1, kept.hex())
    assert (received.tf["tracefence.replay.class"], received.tf["tracefence.step.decision"]) == ("review", "review")
    item = wait_for(lambda: service.store.get(bad.hex()), what="the bad span's trace's review item")
    assert [(s.step.call_id, list(s.reasons)) for s in item.plan.steps] == [("0202020202020202", [f"malformed_{where}", "effect_unknown", "arguments_not_recorded"])]
    assert wait_for(lambda: service.store.get(kept.hex()), what="the kept trace's review item").plan.replay_class == pb.REPLAY_CLASS_REVIEW
    time.sleep(0.3)
    assert [r.span_id for r in upstream.spans()] == ["0101010101010101"]  # the refused span is never forwarded


def test_spans_with_bad_ids_are_rejected_and_the_rest_of_the_batch_kept_and_held(serve, upstream):
    # A refused span whose trace id can be read may have been a tool call of that trace: the trace is
    # planned with a review step standing for it, as `tracefence plan` plans the same file; it is never forwarded.
    service = serve()
    good_trace = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
    spans = [
        raw_tool_span(good_trace, bytes.fromhex("b7ad6b7169203331"), "search"),
        raw_tool_span(good_trace, b"", "no-span-id"),
        raw_tool_span(b"\x01" * 8, b"\x03" * 8, "short-trace-id"),
        raw_tool_span(b"", b"\x04" * 8, "no-trace-id"),
        raw_tool_span(b"\x00" * 16, b"\x05" * 8, "zero-trace-id"),
        raw_tool_span(good_trace, b"\x06" * 8, "bad-parent", parent=b"\x07" * 3),
        raw_span(good_trace, bytes.fromhex("00f067aa0ba902b7"), "chat", parent=bytes.fromhex("b7ad6b7169203331")),
    ]
    channel, stub = trace_stub(f"127.0.0.1:{service.port}")
    with channel:
        response = stub.Export(raw_request(*spans), timeout=5)
    assert response.partial_success.rejected_spans == 5
    assert "rejected" in response.partial_success.error_message
    received = upstream.wait_spans(2, good_trace.hex())
    assert sorted(r.name for r in received) == ["chat", "execute_tool search"]
    assert all(r.tf["tracefence.replay.class"] == "review" for r in received)
    wait_for(lambda: service.forwarders[0].sent_spans == 2 and service.forwarders[0].depth == 0)
    assert len(upstream.spans()) == 2 and len(service.fence.buffer) == 0
    item = wait_for(lambda: service.store.get(good_trace.hex()), what="the review item")
    assert sorted((s.step.call_id, list(s.reasons)[0]) for s in item.plan.steps) == [
        ("(none)", "malformed_span_id"),
        ("0606060606060606", "malformed_parent_span_id"),
        ("b7ad6b7169203331", "declared_read"),
    ]


def test_a_span_refused_for_its_trace_id_holds_the_trace_of_the_parent_it_names(serve, upstream):
    # s21 trial 5 (DECISIONS 207): the refused span stands in no trace of its own, but its parent's trace may have
    # lost a tool call: planned review (child_span_unread), not forwarded as the dynamic trace it seems.
    service = serve()
    trace = bytes.fromhex("0af7651916cd43dd8448eb211c80319d")
    agent, lookup = bytes.fromhex("a1" * 8), bytes.fromhex("a2" * 8)
    spans = [
        raw_span(trace, agent, "invoke_agent a", **{"gen_ai.operation.name": "invoke_agent"}),
        raw_tool_span(trace, lookup, "lookup", parent=agent),
        raw_tool_span(b"\x01" * 15, b"\x0c" * 8, "payments.charge", effect="write", parent=agent),  # its trace id cut short
        raw_tool_span(b"", b"\x0d" * 8, "orphan", parent=b"\x0e" * 8),  # its parent is in no trace here: stands in none
    ]
    channel, stub = trace_stub(f"127.0.0.1:{service.port}")
    with channel:
        response = stub.Export(raw_request(*spans), timeout=5)
    assert response.partial_success.rejected_spans == 2
    received = upstream.wait_spans(2, trace.hex())
    assert {r.tf["tracefence.replay.class"] for r in received} == {"review"}
    item = wait_for(lambda: service.store.get(trace.hex()), what="the review item")
    assert [(s.step.call_id, s.step.tool, pb.Decision.Name(s.decision), list(s.reasons), [m.message for m in s.step.malformed]) for s in item.plan.steps] == [
        ("0c0c0c0c0c0c0c0c", "execute_tool payments.charge", "DECISION_REVIEW", ["child_span_unread", "effect_unknown", "arguments_not_recorded"],
         ["span 0c0c0c0c0c0c0c0c could not be read: trace_id must be 16 bytes and not all zero, and it names span a1a1a1a1a1a1a1a1 "
          "of this trace as its parent: this trace may have lost a tool call"]),
        ("a2a2a2a2a2a2a2a2", "lookup", "DECISION_REPLAY", ["declared_read", "arguments_not_recorded"], []),
    ]
    assert service.store.list()[0] == [item]  # the orphan's trace id names no trace


def test_huge_attributes_are_accepted_and_oversized_arguments_reported(serve, upstream, clients):
    # The test's upstream takes 64 MiB requests, and is configured so (the default is 4 MiB, gRPC's own).
    service = serve(upstreams=[UpstreamSettings(endpoint=f"http://127.0.0.1:{upstream.port}", timeout_s=2, max_message_bytes=BIG)])
    client = clients(service.port, "etl-agent")
    blob = "x" * (5 * 1024 * 1024)
    root = client.tracer.start_span("invoke_agent etl", attributes={"agent.notes": blob})
    with trace.use_span(root, end_on_exit=False):
        with client.tool("files.upload", effect="write", idempotency_key="up-1", arguments={"content": blob}, call_id="c1"):
            pass
    root.end()
    trace_id = format(root.get_span_context().trace_id, "032x")
    received = {r.name: r for r in upstream.wait_spans(2, trace_id, timeout=20)}
    assert ours(received["execute_tool files.upload"].span) == step(
        "static", "skip", ["write_committed", "result_not_recorded", "arguments_too_large"], "write", "ok"
    )
    assert attrs(received["invoke_agent etl"].span.attributes)["agent.notes"] == blob
    assert attrs(received["execute_tool files.upload"].span.attributes)["gen_ai.tool.call.arguments"] == json.dumps({"content": blob})


def test_a_request_above_max_message_bytes_is_resource_exhausted(serve, upstream):
    service = serve(max_message_bytes=1024 * 1024)
    tid = bytes.fromhex("ef" * 16)
    channel, stub = trace_stub(f"127.0.0.1:{service.port}")
    with channel:
        with pytest.raises(grpc.RpcError) as too_big:
            stub.Export(raw_request(raw_tool_span(tid, b"\x01" * 8, "search", blob="y" * (2 * 1024 * 1024))), timeout=5)
        assert too_big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert stub.Export(raw_request(raw_tool_span(tid, b"\x02" * 8, "search")), timeout=5) is not None
    assert [r.span_id for r in upstream.wait_spans(1, tid.hex())] == ["02" * 8]


# -- security ------------------------------------------------------------------------------


def health_status(channel: grpc.Channel, service: str = "", metadata=()) -> int:
    return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=5, metadata=metadata).status


def test_bearer_token(serve, upstream, clients):
    service = serve(bearer_token="s3cret", review_token="r3view")
    tid = bytes.fromhex("12" * 16)
    request = raw_request(raw_tool_span(tid, b"\x01" * 8, "search"))
    channel, stub = trace_stub(f"127.0.0.1:{service.port}")
    with channel:
        for metadata in ((), (("authorization", "Bearer nope"),), (("authorization", "s3cret"),)):
            with pytest.raises(grpc.RpcError) as denied:
                stub.Export(request, metadata=metadata, timeout=5)
            assert denied.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert len(service.fence.buffer) == 0
        stub.Export(request, metadata=(("authorization", "Bearer s3cret"),), timeout=5)
        assert health_status(channel) == health_pb2.HealthCheckResponse.SERVING  # no token needed
        # The review API takes its own token; the ingest token never opens it, nor the review token Export.
        review = pb_grpc.ReviewServiceStub(channel)
        for metadata in ((), (("authorization", "Bearer s3cret"),)):
            for call, request_ in ((review.ListReviewItems, pb.ListReviewItemsRequest()), (review.ResolveReviewItem, pb.ResolveReviewItemRequest(trace_id="f" * 32, resolved_by="x"))):
                with pytest.raises(grpc.RpcError) as denied:
                    call(request_, metadata=metadata, timeout=5)
                assert denied.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert review.ListReviewItems(pb.ListReviewItemsRequest(), metadata=(("authorization", "Bearer r3view"),), timeout=5).items == []
        with pytest.raises(grpc.RpcError) as denied:
            stub.Export(request, metadata=(("authorization", "Bearer r3view"),), timeout=5)
        assert denied.value.code() == grpc.StatusCode.UNAUTHENTICATED
    upstream.wait_spans(1, tid.hex())
    # The real exporter with the token in its headers.
    client = clients(service.port, "billing-agent", headers={"authorization": "Bearer s3cret"})
    trace_id = agent_trace(client)
    upstream.wait_spans(3, trace_id)


def test_tls_with_a_test_certificate(serve, upstream, clients, tmp_path):
    cert, key = make_certificate(tmp_path)
    service = serve(tls_certificate_file=str(cert), tls_key_file=str(key), bearer_token="s3cret", review_token="r3view")
    credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
    # The real exporter over TLS (hostname checked against the certificate's subjectAltName).
    client = clients(
        service.port,
        "billing-agent",
        endpoint=f"https://localhost:{service.port}",
        credentials=credentials,
        headers={"authorization": "Bearer s3cret"},
    )
    trace_id = agent_trace(client)
    assert {r.tf["tracefence.replay.class"] for r in upstream.wait_spans(3, trace_id)} == {"review"}
    with grpc.secure_channel(f"127.0.0.1:{service.port}", credentials) as channel:
        assert health_status(channel, TRACE_SERVICE) == health_pb2.HealthCheckResponse.SERVING
    with grpc.insecure_channel(f"127.0.0.1:{service.port}") as plaintext:
        with pytest.raises(grpc.RpcError) as refused:
            health_status(plaintext)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    # `tracefence review --endpoint` over TLS with the review token; without it, or with the ingest token, a clear refusal.
    endpoint = f"localhost:{service.port}"
    ok, from_env, no_token, wrong_token, no_ca = run_all(
        ["review", "list", "--endpoint", endpoint, "--ca-file", str(cert), "--token", "r3view", "--format", "json"],
        (["review", "show", trace_id, "--ca-file", str(cert), "--format", "json"], {"OTEL_TRACEFENCE_REVIEW_ENDPOINT": endpoint, "OTEL_TRACEFENCE_REVIEW_TOKEN": "r3view"}),
        ["review", "--endpoint", endpoint, "--ca-file", str(cert), "show", trace_id],
        ["review", "--endpoint", endpoint, "--ca-file", str(cert), "--token", "s3cret", "show", trace_id],  # the ingest token
        ["review", "--endpoint", endpoint, "--token", "r3view", "show", trace_id],  # plaintext against TLS
    )
    assert ok.returncode == 0, ok.stderr
    assert [json.loads(line)["traceId"] for line in ok.stdout.splitlines()] == [trace_id]
    assert from_env.returncode == 0, from_env.stderr
    assert from_env.stdout == ok.stdout
    assert_clean_failure(no_token, f"tracefence review show: {endpoint}: not authenticated", "--token")
    assert_clean_failure(wrong_token, "not authenticated", "the token was refused")
    assert_clean_failure(no_ca, "review API unavailable", "--ca-file")


# -- health ----------------------------------------------------------------------------------


def test_health_serving_then_not_serving_after_stop(serve):
    service = serve()
    channel = grpc.insecure_channel(f"127.0.0.1:{service.port}")
    with channel:
        for name in ("", TRACE_SERVICE, REVIEW_SERVICE):
            assert health_status(channel, name) == health_pb2.HealthCheckResponse.SERVING
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=TRACE_SERVICE), timeout=10)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        stopper = threading.Thread(target=service.stop)
        stopper.start()
        assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
        watch.cancel()
        stopper.join(timeout=10)
        assert not stopper.is_alive()
    for name in ("", TRACE_SERVICE):
        assert service.health.Check(health_pb2.HealthCheckRequest(service=name), None).status == health_pb2.HealthCheckResponse.NOT_SERVING
    with grpc.insecure_channel(f"127.0.0.1:{service.port}") as after:
        with pytest.raises(grpc.RpcError) as gone:
            health_status(after)
        assert gone.value.code() == grpc.StatusCode.UNAVAILABLE


# -- the review API -----------------------------------------------------------------------------


def run_all(*commands: list[str] | tuple[list[str], dict[str, str]], **env: str) -> list[subprocess.CompletedProcess]:
    """Run ``tracefence`` commands as subprocesses at the same time (each starts a Python); a command
    given as ``(args, env)`` gets those variables too."""
    procs = []
    for c in commands:
        args, extra = c if isinstance(c, tuple) else (c, {})
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "otel_tracefence", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(**env, **extra)
            )
        )
    out = []
    for command, proc in zip(commands, procs):
        stdout, stderr = proc.communicate(timeout=60)
        out.append(subprocess.CompletedProcess(command, proc.returncode, stdout, stderr))
    return out


def assert_clean_failure(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2, proc
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, proc.stderr


def test_review_api_list_get_resolve(serve, upstream, clients, tmp_path):
    service = serve()
    client = clients(service.port, "billing-agent", batch=True)
    review_traces = [agent_trace(client) for _ in range(2)]
    agent_trace(client, review=False)
    client.send()
    db = tmp_path / "r.db"
    wait_for(lambda: len(review_rows(db)) == 2, what="two review items")
    with grpc.insecure_channel(f"127.0.0.1:{service.review_port}") as channel:
        stub = pb_grpc.ReviewServiceStub(channel)
        listed = stub.ListReviewItems(pb.ListReviewItemsRequest(state=pb.REVIEW_STATE_OPEN), timeout=5)
        assert sorted(i.trace_id for i in listed.items) == sorted(review_traces) and listed.next_page_token == ""
        assert stub.ListReviewItems(pb.ListReviewItemsRequest(replay_classes=[pb.REPLAY_CLASS_STATIC]), timeout=5).items == []
        page = stub.ListReviewItems(pb.ListReviewItemsRequest(page_size=1), timeout=5)
        assert len(page.items) == 1 and page.next_page_token
        rest = stub.ListReviewItems(pb.ListReviewItemsRequest(page_size=1, page_token=page.next_page_token), timeout=5)
        assert [i.trace_id for i in [*page.items, *rest.items]] == [i.trace_id for i in listed.items]
        item = stub.GetReviewItem(pb.GetReviewItemRequest(trace_id=review_traces[0]), timeout=5)
        assert item == stored_items(db)[review_traces[0]]
        for call, request in (
            (stub.GetReviewItem, pb.GetReviewItemRequest(trace_id="f" * 32)),
            (stub.ResolveReviewItem, pb.ResolveReviewItemRequest(trace_id="f" * 32, resolved_by="ada", note="x")),
        ):
            with pytest.raises(grpc.RpcError) as missing:
                call(request, timeout=5)
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        for request in (pb.ResolveReviewItemRequest(trace_id=review_traces[0], resolved_by=" ", note="x"), pb.ListReviewItemsRequest(page_token="junk")):
            with pytest.raises(grpc.RpcError) as bad:
                (stub.ResolveReviewItem if isinstance(request, pb.ResolveReviewItemRequest) else stub.ListReviewItems)(request, timeout=5)
            assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        resolved = stub.ResolveReviewItem(pb.ResolveReviewItemRequest(trace_id=review_traces[0], resolved_by="ada", note="one charge in the ledger"), timeout=5)
        assert resolved.state == pb.REVIEW_STATE_RESOLVED and resolved == stored_items(db)[review_traces[0]]
        assert [i.trace_id for i in stub.ListReviewItems(pb.ListReviewItemsRequest(state=pb.REVIEW_STATE_OPEN), timeout=5).items] == [review_traces[1]]


def test_review_cli_against_the_api_prints_what_the_file_mode_prints(serve, upstream, clients, tmp_path):
    service = serve()
    client = clients(service.port, "billing-agent", batch=True)
    review_traces = [agent_trace(client) for _ in range(2)]
    client.send()
    db = tmp_path / "r.db"
    wait_for(lambda: len(review_rows(db)) == 2, what="two review items")
    endpoint = f"127.0.0.1:{service.port}"
    first = review_traces[0]
    api_json, db_json, api_table, db_table, api_show, db_show, unknown, unavailable, both, token_without_api = run_all(
        ["review", "list", "--endpoint", endpoint, "--format", "json", "--state", "all"],
        ["review", "list", "--db", str(db), "--format", "json", "--state", "all"],
        ["review", "list"],  # endpoint from the environment
        ["review", "list", "--db", str(db)],
        ["review", "--endpoint", endpoint, "show", first],
        ["review", "show", first, "--db", str(db)],
        ["review", "show", "f" * 32, "--endpoint", endpoint],
        ["review", "list", "--endpoint", f"127.0.0.1:{free_port()}"],
        ["review", "list", "--endpoint", endpoint, "--db", str(db)],
        ["review", "list", "--db", str(db), "--token", "s3cret"],
        OTEL_TRACEFENCE_REVIEW_ENDPOINT=endpoint,
    )
    for proc in (api_json, db_json, api_table, db_table, api_show, db_show):
        assert proc.returncode == 0, proc.stderr
    assert api_json.stdout == db_json.stdout and len(api_json.stdout.splitlines()) == 2
    assert api_table.stdout == db_table.stdout and api_table.stdout.startswith("trace ")
    assert api_show.stdout == db_show.stdout and f"trace        {first}" in api_show.stdout
    assert_clean_failure(unknown, f"tracefence review show: {endpoint}: no review item for trace id '{'f' * 32}'")
    assert_clean_failure(unavailable, "review API unavailable")
    assert_clean_failure(both, "not both")
    assert_clean_failure(token_without_api, "--token and --ca-file are for the review API")
    resolve, gone = run_all(
        ["review", "resolve", first, "--endpoint", endpoint, "--by", "ada", "--note", "checked the ledger", "--format", "json"],
        ["review", "resolve", "f" * 32, "--endpoint", endpoint, "--by", "ada", "--note", "x"],
    )
    assert resolve.returncode == 0, resolve.stderr
    stored = stored_items(db)[first]
    assert stored.state == pb.REVIEW_STATE_RESOLVED and (stored.resolved_by, stored.resolution_note) == ("ada", "checked the ledger")
    assert json.loads(resolve.stdout)["state"] == "REVIEW_STATE_RESOLVED"
    assert_clean_failure(gone, "no review item for trace id")


def test_review_api_on_its_own_address(serve, upstream):
    service = serve(review_endpoint="127.0.0.1:0")
    assert service.review_port not in (0, service.port)
    request = raw_request(raw_tool_span(bytes.fromhex("34" * 16), b"\x01" * 8, "search"))
    with grpc.insecure_channel(f"127.0.0.1:{service.review_port}") as review_channel, grpc.insecure_channel(f"127.0.0.1:{service.port}") as main_channel:
        assert pb_grpc.ReviewServiceStub(review_channel).ListReviewItems(pb.ListReviewItemsRequest(), timeout=5).items == []
        assert health_status(review_channel) == health_pb2.HealthCheckResponse.SERVING
        assert health_status(main_channel, TRACE_SERVICE) == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as absent:
            pb_grpc.ReviewServiceStub(main_channel).ListReviewItems(pb.ListReviewItemsRequest(), timeout=5)
        assert absent.value.code() == grpc.StatusCode.UNIMPLEMENTED
        with pytest.raises(grpc.RpcError) as absent:
            trace_stub(f"127.0.0.1:{service.review_port}")[1].Export(request, timeout=5)
        assert absent.value.code() == grpc.StatusCode.UNIMPLEMENTED
        trace_stub(f"127.0.0.1:{service.port}")[1].Export(request, timeout=5)
    upstream.wait_spans(1)


def test_tls_half_configured_fails_closed_and_health_lists_only_what_is_served(tmp_path, upstream):
    cert, _ = make_certificate(tmp_path)
    upstreams = [UpstreamSettings(endpoint=f"http://127.0.0.1:{upstream.port}")]
    half = TraceFenceService(TraceFenceConfig(review_db="", service=ServiceSettings(endpoint="127.0.0.1:0", http_endpoint="", tls_certificate_file=str(cert), upstreams=upstreams)))
    try:
        with pytest.raises(OSError, match="tls_certificate_file is set but tls_key_file is not"):
            half.start()  # never plaintext when TLS was asked for
    finally:
        half.stop(0)
    no_queue = TraceFenceService(TraceFenceConfig(review_db="", service=ServiceSettings(endpoint="127.0.0.1:0", http_endpoint="", upstreams=upstreams)))
    no_queue.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{no_queue.port}") as channel:
            assert health_status(channel, TRACE_SERVICE) == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.RpcError) as unknown:
                health_status(channel, REVIEW_SERVICE)  # no review database: no review API to report on
            assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        no_queue.stop(0)


class _GatedTarget:
    """A forward target whose sends wait for the test: each send takes the next answer from ``answers``."""

    name = "gated"

    def __init__(self) -> None:
        self.sending = threading.Event()
        self.answers: list[bool] = []
        self.gate = threading.Semaphore(0)
        self.sent: list[Any] = []

    def send(self, request) -> bool:
        self.sending.set()
        self.gate.acquire()
        ok = self.answers.pop(0)
        if ok:
            self.sent.append(request)
        return ok

    def close(self) -> None:
        pass


@pytest.mark.parametrize("delivered", [True, False])
def test_a_batch_dropped_while_being_sent_is_counted_by_its_outcome(delivered):
    from otel_tracefence.service.forward import Forwarder

    target = _GatedTarget()
    forwarder = Forwarder(target, max_spans=3)
    first, second = raw_request(), raw_request()
    forwarder.put(first, 3)
    assert target.sending.wait(5)  # the worker is sending `first`
    forwarder.put(second, 3)  # over the bound: `first` leaves the queue while in flight
    assert forwarder.depth == 3 and forwarder.dropped_spans == 0
    target.answers += [delivered, True]
    target.gate.release()
    target.gate.release()
    wait_for(lambda: forwarder.sent_spans + forwarder.dropped_spans == 6 and forwarder.depth == 0)
    # Delivered: sent, not dropped. Failed: dropped (never retried), and `second` still goes.
    assert (forwarder.sent_spans, forwarder.dropped_spans) == ((6, 0) if delivered else (3, 3))
    assert [r is second for r in target.sent] == ([False, True] if delivered else [True])
    assert forwarder.drain(2)


# -- intake bounds that hold for any input (issue 9) ------------------------------------------------------------


def tiny_spans(trace_byte: int, count: int) -> list:
    tid = bytes([trace_byte]) * 16
    return [raw_span(tid, (i + 1).to_bytes(8, "big"), "t") for i in range(count)]


def test_one_request_alone_past_the_intake_bound_is_resource_exhausted_naming_the_limit(serve, upstream):
    service = serve(intake_queue_spans=1000, intake_queue_bytes=256 * 1024)
    channel, stub = trace_stub(f"127.0.0.1:{service.port}")
    with channel:
        many = raw_request(*tiny_spans(0x61, 5000))  # 5,000 tiny spans (~230 KB): under the bytes bound, past the spans bound
        assert many.ByteSize() < 256 * 1024
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(many, timeout=5)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "5000 spans" in refused.value.details() and "service.intake_queue_spans = 1000" in refused.value.details()
        assert "google.rpc.retryinfo-bin" not in dict(refused.value.trailing_metadata())  # OTLP: not retryable
        big = raw_request(*tiny_spans(0x62, 10), service_name="x" * (300 * 1024))  # few spans, past the bytes bound
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(big, timeout=5)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert f"{big.ByteSize()} bytes" in refused.value.details() and "service.intake_queue_bytes = 262144" in refused.value.details()
        assert (service.intake.depth, service.intake.depth_bytes, len(service.fence.buffer)) == (0, 0, 0)  # nothing held
        # Exactly at the bound is accepted.
        stub.Export(raw_request(*tiny_spans(0x63, 1000)), timeout=5)
    upstream.wait_spans(1000, (b"\x63" * 16).hex(), timeout=15)
    assert not upstream.trace((b"\x61" * 16).hex()) and not upstream.trace((b"\x62" * 16).hex())


def test_the_intake_bound_counts_the_request_being_accepted_and_answers_unavailable_with_retry_info(serve, upstream, monkeypatch):
    from otel_tracefence.service.intake import Intake

    gate = threading.Event()
    hold = Intake._hold

    def gated_hold(self, items):  # the intake worker is busy (a slow planner, a loaded machine)
        gate.wait(10)
        hold(self, items)

    monkeypatch.setattr(Intake, "_hold", gated_hold)
    service = serve(intake_queue_spans=1000, retry_delay_s=0.2)
    channel, stub = trace_stub(f"127.0.0.1:{service.port}")
    try:
        with channel:
            stub.Export(raw_request(*tiny_spans(0x71, 600)), timeout=5)  # accepted: 600 of 1000
            wait_for(lambda: service.intake.depth == 600)
            # 600 + 600 > 1000: refused for now, although the queue is not full yet.
            with pytest.raises(grpc.RpcError) as refused:
                stub.Export(raw_request(*tiny_spans(0x72, 600)), timeout=5)
            error = refused.value
            assert error.code() == grpc.StatusCode.UNAVAILABLE
            assert "600/1000 spans" in error.details() and "request of 600 spans" in error.details()
            trailer = dict(error.trailing_metadata())["google.rpc.retryinfo-bin"]
            assert error_details_pb2.RetryInfo.FromString(trailer).retry_delay.ToNanoseconds() == 200_000_000
            assert service.intake.depth == 600  # the refused request took no room
            stub.Export(raw_request(*tiny_spans(0x73, 400)), timeout=5)  # 600 + 400 = 1000: fits
            assert service.intake.depth == 1000
            gate.set()
            wait_for(lambda: service.intake.depth == 0, what="the intake drained")
            stub.Export(raw_request(*tiny_spans(0x72, 600)), timeout=5)  # room again
    finally:
        gate.set()
    for trace_byte, count in ((0x71, 600), (0x72, 600), (0x73, 400)):
        upstream.wait_spans(count, (bytes([trace_byte]) * 16).hex(), timeout=15)


def test_a_real_exporter_refused_for_intake_room_retries_and_gets_through(serve, upstream, clients, monkeypatch):
    from otel_tracefence.service.intake import Intake

    gate = threading.Event()
    hold = Intake._hold
    monkeypatch.setattr(Intake, "_hold", lambda self, items: (gate.wait(10), hold(self, items)))
    first = raw_request(*tiny_spans(0x74, 40))
    service = serve(intake_queue_bytes=first.ByteSize() + 200, retry_delay_s=0.3)  # room left: 200 bytes
    channel, stub = trace_stub(f"127.0.0.1:{service.port}")
    with channel:
        stub.Export(first, timeout=5)
    client = clients(service.port, "billing-agent", batch=True)
    trace_id = agent_trace(client)
    result: list[Any] = []
    sender = threading.Thread(target=lambda: result.append(client.send()))
    sender.start()
    try:
        time.sleep(0.5)  # refused meanwhile: an agent trace is more than 200 bytes
        assert result == []
    finally:
        gate.set()
    sender.join(timeout=15)
    assert result == [SpanExportResult.SUCCESS]
    upstream.wait_spans(3, trace_id, timeout=15)


@pytest.mark.parametrize("parent_trace", ["held", "decided"])
def test_a_span_refused_for_its_trace_id_holds_the_trace_of_a_parent_sent_earlier(serve, upstream, parent_trace):
    # s21 trial T2 (DECISIONS 296): the parent came in an earlier request; its trace is still held (decision wait
    # 300 ms, as the trial's serve) or was decided already. Before, the refused write stood in no trace and the
    # trace was handed on (static here, injected in the trial) with no item; now it stands in the trace holding its parent (child_span_unread).
    service = serve(decision_wait_ms=300)
    trace_id = bytes.fromhex("a1" * 16)
    agent, create = bytes.fromhex("a0" * 7 + "01"), bytes.fromhex("a0" * 7 + "02")
    early = [
        raw_span(trace_id, agent, "invoke_agent a", **{"gen_ai.operation.name": "invoke_agent"}),
        raw_tool_span(trace_id, create, "invoice.create", effect="write", parent=agent),
    ]
    orphan = raw_tool_span(b"\x01" * 15, bytes.fromhex("a0" * 7 + "03"), "payments.charge", effect="write", status="error", parent=create)
    channel, stub = trace_stub(f"127.0.0.1:{service.port}")
    with channel:
        assert not stub.Export(raw_request(*early), timeout=5).HasField("partial_success")
        if parent_trace == "decided":
            assert {r.tf["tracefence.replay.class"] for r in upstream.wait_spans(2, trace_id.hex())} == {"static"}
        response = stub.Export(raw_request(orphan), timeout=5)
    assert response.partial_success.rejected_spans == 1
    received = upstream.wait_spans(2, trace_id.hex())
    item = wait_for(lambda: service.store.get(trace_id.hex()), what="the review item")
    assert pb.ReplayClass.Name(item.plan.replay_class) == "REPLAY_CLASS_REVIEW"
    fenced = ["effect_unknown", "decided_before_complete"] if parent_trace == "decided" else ["effect_unknown"]
    assert sorted((s.step.call_id, pb.Decision.Name(s.decision), list(s.reasons), [m.message for m in s.step.malformed]) for s in item.plan.steps) == [
        ("a0a0a0a0a0a0a002", "DECISION_SKIP", ["write_committed", "result_not_recorded", "arguments_not_recorded"], []),
        ("a0a0a0a0a0a0a003", "DECISION_REVIEW", ["child_span_unread", *fenced, "arguments_not_recorded"],
         ["span a0a0a0a0a0a0a003 could not be read: trace_id must be 16 bytes and not all zero, and it names span a0a0a0a0a0a0a002 "
          "of this trace as its parent: this trace may have lost a tool call"]),
    ]
    if parent_trace == "held":
        assert {r.tf["tracefence.replay.class"] for r in received} == {"review"}
