"""Issue 28, part 1: ``tracefence serve`` forwards over OTLP/HTTP (``upstream_protocol: http/protobuf``).

A real service forwarding into a second real service's OTLP/HTTP receiver, and into a recording OTLP/HTTP
upstream (tests/http_upstream.py) that answers 503/429 with ``Retry-After``, 400, 413 and partial success: the
same retry, pause, split and drop rules as over gRPC (``otel_tracefence.service.forward``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterator

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from http_upstream import RecordingHttpUpstream
from otel_tracefence.cli.serve import upstream_transport
from otel_tracefence.core.config import ConfigError, ServiceSettings, UpstreamSettings, load_config
from otel_tracefence.service.forward import Forwarder, UpstreamTarget
from otel_tracefence.service.server import TraceFenceService
from otel_tracefence.service.upstream_http import HttpUpstreamTarget, classify_http, http_url, upstream_target
from service_helpers import Client, RecordingUpstream, agent_trace, raw_request, raw_span, service_config, tracefence, wait_for


@pytest.fixture
def http_upstream() -> Iterator[RecordingHttpUpstream]:
    up = RecordingHttpUpstream()
    up.start()
    yield up
    up.stop()


def _trace(n: int, spans: int = 3):
    tid = n.to_bytes(16, "big")
    return raw_request(*(raw_span(tid, (n * 8 + i + 1).to_bytes(8, "big"), f"op {i}") for i in range(spans)))


def _target(up: RecordingHttpUpstream, **settings) -> HttpUpstreamTarget:
    return HttpUpstreamTarget(UpstreamSettings(endpoint=up.url(), protocol="http/protobuf", timeout_s=settings.pop("timeout_s", 5), **settings))


def test_serve_forwards_over_http_into_a_second_serve(tmp_path: Path, upstream: RecordingUpstream):
    second = TraceFenceService(service_config(upstream, tmp_path / "second.db", http_endpoint="127.0.0.1:0"))
    second.start()
    first = None
    try:
        hop = UpstreamSettings(endpoint=f"http://127.0.0.1:{second.http_port}", timeout_s=2)
        first = TraceFenceService(service_config(upstream, tmp_path / "first.db", upstreams=[hop], upstream_protocol="http/protobuf"))
        first.start()
        client = Client(first.port)
        trace_id = agent_trace(client)
        client.shutdown()
        spans = {s.name: s for s in upstream.wait_spans(3, trace_id)}
        assert set(spans) == {"invoke_agent billing", "execute_tool accounts.get_balance", "execute_tool payments.charge"}
        assert spans["execute_tool payments.charge"].tf["tracefence.step.decision"] == "review"
        assert spans["execute_tool payments.charge"].tf["tracefence.step.reasons"] == ["write_timeout"]
        assert {s.tf["tracefence.replay.class"] for s in spans.values()} == {"review"}
        assert [f.target.name for f in first.forwarders] == [f"http://127.0.0.1:{second.http_port}"]
        assert first.forwarders[0].sent_spans == 3 and first.forwarders[0].dropped_spans == 0
    finally:
        if first is not None:
            first.stop(0)
        second.stop(0)


def test_serve_answered_503_with_retry_after_retries_and_delivers(tmp_path: Path, http_upstream: RecordingHttpUpstream):
    http_upstream.script(503, retry_after="1")
    hop = UpstreamSettings(endpoint=http_upstream.url(), timeout_s=5, headers={"authorization": "Bearer up-token"})
    service = TraceFenceService(service_config(http_upstream, tmp_path / "r.db", upstreams=[hop], upstream_protocol="http/protobuf"))
    service.start()
    try:
        client = Client(service.port)
        agent_trace(client)
        client.shutdown()
        wait_for(lambda: http_upstream.requests(status=200), what="the retried request delivered")
    finally:
        service.stop(0)
    refused, delivered = http_upstream.requests()
    assert (refused.status, delivered.status) == (503, 200)
    assert refused.body == delivered.body and delivered.span_count() == 3
    assert delivered.headers["authorization"] == "Bearer up-token"
    assert delivered.headers["content-type"] == "application/x-protobuf"
    assert service.forwarders[0].sent_spans == 3 and service.forwarders[0].dropped_spans == 0


def test_a_retry_after_past_the_exporters_deadline_is_the_forwarders_pause(http_upstream, caplog):
    # Retry-After 2 s does not fit the exporter's 1 s deadline: it gives up, and the batch waits 2 s at the head.
    http_upstream.script(429, retry_after="2")
    forwarder = Forwarder(_target(http_upstream, timeout_s=1), max_spans=1000)
    with caplog.at_level(logging.WARNING, logger="otel_tracefence.service"):
        forwarder.put(_trace(1), 3)
        wait_for(lambda: http_upstream.requests(status=200), timeout=15, what="the batch sent after the pause")
    assert forwarder.drain(5)
    assert [p.status for p in http_upstream.requests()] == [429, 200]
    assert forwarder.sent_spans == 3 and forwarder.failures == 1 and forwarder.dropped_spans == 0
    pauses = [r.getMessage() for r in caplog.records if "failed (1 in a row)" in r.getMessage()]
    assert pauses == [f"forwarding 3 spans to {http_upstream.url()} failed (1 in a row); they stay queued (3/1000 spans) and are tried again in 2.0s"]


def test_a_permanent_status_drops_the_batch_and_counts_it(http_upstream):
    http_upstream.script(400, body=b"bad request")
    drops: list[tuple[int, str]] = []
    forwarder = Forwarder(_target(http_upstream), max_spans=1000, on_drop=lambda n, reason: drops.append((n, reason)))
    forwarder.put(_trace(1), 3)
    forwarder.put(_trace(2), 3)
    assert forwarder.drain(10)
    assert [p.status for p in http_upstream.requests()] == [400]  # both traces in one batch, refused once, not retried
    assert drops == [(6, "rejected")] and forwarder.sent_spans == 0


def test_a_batch_refused_as_too_large_is_split_down_to_what_fits(http_upstream):
    http_upstream.script(413, times=10, when=lambda posted: posted.span_count() > 2)
    forwarder = Forwarder(_target(http_upstream), max_spans=1000, batch_wait_s=5.0)
    forwarder.put(_trace(1, spans=4), 4)
    forwarder.put(_trace(2, spans=4), 4)
    assert forwarder.drain(10)
    sizes = [(p.status, p.span_count()) for p in http_upstream.requests()]
    assert sizes == [(413, 8), (413, 4), (200, 2), (200, 2), (413, 4), (200, 2), (200, 2)]
    assert forwarder.sent_spans == 8 and forwarder.dropped_spans == 0


def test_partial_success_counts_the_spans_the_upstream_refused(http_upstream):
    answer = ExportTraceServiceResponse()
    answer.partial_success.rejected_spans = 1
    answer.partial_success.error_message = "span too old"
    http_upstream.script(200, body=answer.SerializeToString())
    drops: list[tuple[int, str]] = []
    forwarder = Forwarder(_target(http_upstream), max_spans=1000, on_drop=lambda n, reason: drops.append((n, reason)))
    forwarder.put(_trace(1), 3)
    assert forwarder.drain(10)
    assert forwarder.sent_spans == 2 and drops == [(1, "upstream_rejected")]


def test_no_answer_is_retried_until_the_upstream_comes(tmp_path):
    up = RecordingHttpUpstream()
    up.start()
    port = up.port
    up.stop()  # nobody listens on the port now
    forwarder = Forwarder(HttpUpstreamTarget(UpstreamSettings(endpoint=f"http://127.0.0.1:{port}", timeout_s=0.5)), max_spans=1000)
    forwarder.put(_trace(1), 3)
    wait_for(lambda: forwarder.failures >= 1, what="a failed attempt")
    assert forwarder.depth == 3 and forwarder.dropped_spans == 0  # kept at the head, not dropped
    assert forwarder.drain(0.2) is False
    assert forwarder.dropped_spans == 3  # counted at shutdown, as over gRPC


@pytest.mark.parametrize(
    "status, retry_after, kind",
    [(None, None, "retry"), (429, 3.0, "retry"), (502, None, "retry"), (503, 1.5, "retry"), (504, None, "retry"),
     (413, None, "too_large"), (400, None, "rejected"), (401, None, "rejected"), (404, None, "rejected"), (500, None, "rejected")],
)
def test_http_statuses_are_classified_as_the_otlp_specification_says(status, retry_after, kind):
    outcome = classify_http(status, retry_after, "why")
    assert (outcome.kind, outcome.retry_after_s) == (kind, retry_after if kind == "retry" else None)


@pytest.mark.parametrize(
    "endpoint, insecure, url",
    [
        ("http://127.0.0.1:4318", None, "http://127.0.0.1:4318/v1/traces"),
        ("collector:4318", None, "https://collector:4318/v1/traces"),
        ("collector:4318", True, "http://collector:4318/v1/traces"),
        ("https://cloud.example.com/api/public/otel", None, "https://cloud.example.com/api/public/otel/v1/traces"),
        ("https://cloud.example.com/api/public/otel/", None, "https://cloud.example.com/api/public/otel/v1/traces"),
        ("https://intake.example.com/v1/traces", None, "https://intake.example.com/v1/traces"),
    ],
)
def test_the_http_url_of_an_upstream(endpoint, insecure, url):
    assert http_url(UpstreamSettings(endpoint=endpoint, insecure=insecure)) == url


def test_the_protocol_setting_flag_and_variable(monkeypatch, tmp_path):
    assert ServiceSettings().upstream_protocol == "grpc"
    settings = ServiceSettings(upstream_protocol="http/protobuf", upstreams=[{"endpoint": "http://a:4318"}, {"endpoint": "http://b:4317", "protocol": "grpc"}])
    assert [settings.protocol_of(u) for u in settings.upstreams] == ["http/protobuf", "grpc"]
    assert [type(upstream_target(u, settings.protocol_of(u))) for u in settings.upstreams] == [HttpUpstreamTarget, UpstreamTarget]
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__UPSTREAM_PROTOCOL", "http/protobuf")
    assert load_config().service.upstream_protocol == "http/protobuf"
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__UPSTREAM_PROTOCOL", "http/json")
    with pytest.raises(ConfigError, match="upstream_protocol"):
        load_config()
    # A URL with a path is an OTLP/HTTP address: refused for a gRPC upstream, with the fix named.
    with pytest.raises(ValueError, match="a path or a default port is for OTLP/HTTP upstreams"):
        ServiceSettings(upstreams=[{"endpoint": "https://cloud.example.com/api/public/otel"}])
    assert upstream_transport(UpstreamSettings(endpoint="collector:4318"), {}, protocol="http/protobuf") == (
        True, "no scheme: TLS is the default; write http://collector:4318 for plaintext")
    assert upstream_transport(UpstreamSettings(endpoint="collector:4318", insecure=True), {}, protocol="http/protobuf") == (False, "insecure: true")


def test_the_upstream_protocol_flag(tmp_path):
    bad = tracefence("serve", "--upstream-protocol", "http/json", "--upstream", "http://127.0.0.1:1", cwd=tmp_path, timeout=30)
    assert bad.returncode == 2
    assert "argument --upstream-protocol: invalid choice: 'http/json'" in bad.stderr  # the choices' quoting differs by Python version
    path = tracefence("serve", "--upstream", "https://cloud.example.com/api/public/otel", "--review-db", str(tmp_path / "r.db"), cwd=tmp_path, timeout=30)
    assert path.returncode != 0
    assert "a path or a default port is for OTLP/HTTP upstreams (protocol: http/protobuf)" in path.stderr
