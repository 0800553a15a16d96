"""Issue 15: the OTLP/HTTP receiver of ``tracefence serve`` (``POST /v1/traces``), with real clients.

A real ``TraceFenceService`` (gRPC and uvicorn on loopback ports picked by the OS), a real
upstream gRPC ``TraceService`` recording what it gets, and real clients: the Python SDK's
``opentelemetry-exporter-otlp-proto-http`` and ``-grpc`` exporters, and ``requests`` for the
bodies no SDK sends (garbage, gzip bombs, OTLP/JSON). The Node.js SDK and rotel over HTTP are
in ``tests/service/test_interop.py``.
"""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path
from typing import Any, Iterator

import grpc
import pytest
import requests
from google.protobuf import json_format
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export import SpanExportResult

from otel_tracefence.core.config import ConfigError, ServiceSettings, load_config
from otel_tracefence.otlp.json_writer import request_to_json
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.service.asgi_server import AsgiServer
from otel_tracefence.service.server import TraceFenceService
from service_helpers import Client, RecordingUpstream, agent_trace, make_certificate, raw_request, raw_span, raw_tool_span, service_config, trace_stub, wait_for

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
TRACE = bytes.fromhex("5b8efff798038103d269b633813fc60c")


@pytest.fixture
def serve(tmp_path: Path, upstream: RecordingUpstream) -> Iterator[Any]:
    """``serve(**settings)``: a started service with the OTLP/HTTP receiver on a free port, and its metric reader."""
    made: list[TraceFenceService] = []

    def make(*, refuse_first: int = 0, **settings: Any) -> TraceFenceService:
        settings.setdefault("http_endpoint", "127.0.0.1:0")
        reader = InMemoryMetricReader()
        service = TraceFenceService(service_config(upstream, tmp_path / f"r{len(made)}.db", **settings), meter_provider=MeterProvider(metric_readers=[reader]))
        service.metrics = reader  # type: ignore[attr-defined]
        if refuse_first:  # the service's own back-pressure answer, for the first calls only
            real, refused = service._refuse, []

            def refuse() -> str | None:
                if len(refused) < refuse_first:
                    refused.append(1)
                    return "intake queue is full; retry later"
                return real()

            service._refuse = refuse  # type: ignore[method-assign]
            service.refused = refused  # type: ignore[attr-defined]
        made.append(service)
        service.start()
        return service

    yield make
    for service in made:
        service.stop(0)


def url(service: TraceFenceService, scheme: str = "http", path: str = "/v1/traces") -> str:
    return f"{scheme}://127.0.0.1:{service.http_port}{path}"


def post(service: TraceFenceService, body: bytes, content_type: str = PROTOBUF, **headers: str) -> requests.Response:
    return requests.post(url(service), data=body, headers={"Content-Type": content_type, **headers}, timeout=10)


def status_of(response: requests.Response) -> status_pb2.Status:
    """The ``google.rpc.Status`` body, read in the response's own encoding (which must be the request's)."""
    if response.headers["content-type"] == JSON:
        return json_format.Parse(response.text, status_pb2.Status())
    assert response.headers["content-type"] == PROTOBUF
    return status_pb2.Status.FromString(response.content)


def metric(service: TraceFenceService, name: str, **attributes: Any) -> float | None:
    data = service.metrics.get_metrics_data()  # type: ignore[attr-defined]
    total = None
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for point in m.data.data_points if m.name == name else ():
                    if all(point.attributes.get(k) == v for k, v in attributes.items()):
                        total = (total or 0) + point.value
    return total


def review_items(service: TraceFenceService) -> list[Any]:
    with SQLiteReviewStore(service.config.review_db, create=False) as store:
        items, _ = store.list(page_size=100)
    return items


# -- the same trace over gRPC and over HTTP -----------------------------------------------------


def agent_spans() -> list[Any]:
    """One agent turn made by the real SDK (a read, a timed-out write: review), kept as ReadableSpans so the very
    same spans can be sent by every client."""
    client = Client(1, "billing-agent", batch=True)  # batch: its gRPC exporter is never called
    agent_trace(client)
    spans = list(client.sent.get_finished_spans())
    client.shutdown()
    return spans


def send(service: TraceFenceService, spans: list[Any], how: str) -> None:
    if how == "grpc":
        exporter: Any = GrpcSpanExporter(endpoint=f"http://127.0.0.1:{service.port}", insecure=True, timeout=10)
    elif how in ("http/protobuf", "http/protobuf+gzip"):
        exporter = HttpSpanExporter(endpoint=url(service), timeout=10, compression=Compression.Gzip if how.endswith("gzip") else Compression.NoCompression)
    else:  # OTLP/JSON, as the project writes it; ids in upper case for one (OTLP/JSON: hex, case-insensitive)
        body = request_to_json(encode_spans(spans))
        if how == "http/json+uppercase-ids":
            data = json.loads(body)
            for span in (s for rs in data["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = span[key].upper()
            body = json.dumps(data)
        response = post(service, body.encode(), JSON)
        assert (response.status_code, response.headers["content-type"], response.json()) == (200, JSON, {})
        return
    try:
        assert exporter.export(spans) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()


def delivered(tmp_path: Path, spans: list[Any], how: str) -> tuple[dict[str, Any], list[Any]]:
    """The spans as the upstream got them (by span id) and the review items, after sending ``spans`` ``how``."""
    upstream = RecordingUpstream()
    upstream.start()
    service = TraceFenceService(service_config(upstream, tmp_path / f"{how.replace('/', '-')}.db", http_endpoint="127.0.0.1:0"))
    service.start()
    try:
        send(service, spans, how)
        got = upstream.wait_spans(len(spans))
        items = wait_for(lambda: review_items(service), what="the review item")
    finally:
        service.stop(0)
        upstream.stop()
    return {r.span_id: r.span for r in got}, items


@pytest.mark.parametrize("how", ["http/protobuf", "http/protobuf+gzip", "http/json", "http/json+uppercase-ids"])
def test_the_same_trace_over_grpc_and_http_gives_the_same_annotations_and_review_item(tmp_path: Path, how: str) -> None:
    spans = agent_spans()
    over_grpc, grpc_items = delivered(tmp_path, spans, "grpc")
    over_http, http_items = delivered(tmp_path, spans, how)
    # Byte for byte the same spans upstream: the producer's fields and the same annotations.
    assert over_http == over_grpc
    write = next(s for s in over_http.values() if s.name == "execute_tool payments.charge")
    tf = {kv.key: json_format.MessageToDict(kv.value) for kv in write.attributes if kv.key.startswith("tracefence.step.") or kv.key == "tracefence.replay.class"}
    assert tf == {
        "tracefence.replay.class": {"stringValue": "review"},
        "tracefence.step.decision": {"stringValue": "review"},
        "tracefence.step.reasons": {"arrayValue": {"values": [{"stringValue": "write_timeout"}]}},
        "tracefence.step.related_call_ids": {"arrayValue": {}},
        "tracefence.step.effect": {"stringValue": "write"},
        "tracefence.step.status": {"stringValue": "timeout"},
    }
    # The same review item (its times aside).
    strip = lambda item: (item.trace_id, item.service_name, item.state, item.plan)  # noqa: E731
    assert [strip(i) for i in http_items] == [strip(i) for i in grpc_items]
    assert [(i.trace_id, i.service_name) for i in http_items] == [(format(spans[0].context.trace_id, "032x"), "billing-agent")]


# -- back-pressure --------------------------------------------------------------------------------


def test_back_pressure_is_503_with_retry_after_and_the_python_exporter_waits_that_long(serve, upstream, caplog) -> None:
    service = serve(retry_delay_s=2, refuse_first=2)
    body = raw_request(raw_tool_span(TRACE, b"\x01" * 8, "customer.lookup")).SerializeToString()
    refused = post(service, body)
    assert (refused.status_code, refused.headers["retry-after"], refused.headers["content-type"]) == (503, "2", PROTOBUF)
    status = status_of(refused)
    assert (status.code, status.message) == (code_pb2.UNAVAILABLE, "intake queue is full; retry later")
    retry_info = error_details_pb2.RetryInfo()
    assert len(status.details) == 1 and status.details[0].Unpack(retry_info)
    assert retry_info.retry_delay.ToNanoseconds() == 2_000_000_000
    assert upstream.spans() == [] and service.intake.handed_spans == 0  # refused before it was read

    # The SDK's OTLP/HTTP exporter is refused once more, waits Retry-After (2 s, not its own backoff of 1 s ± 20 %), resends.
    caplog.set_level(logging.WARNING)
    spans = agent_spans()
    exporter = HttpSpanExporter(endpoint=url(service), timeout=10)
    try:
        assert exporter.export(spans) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert len(service.refused) == 2  # type: ignore[attr-defined]
    retries = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Transient error")]
    assert retries == ["Transient error Service Unavailable encountered while exporting spans batch, retrying in 2.00s."]
    assert len(upstream.wait_spans(len(spans), format(spans[0].context.trace_id, "032x"))) == len(spans)


# -- bodies: gzip, garbage, oversized -------------------------------------------------------------


def test_gzip_garbage_and_oversized_bodies(serve, upstream) -> None:
    service = serve(max_message_bytes=4096, intake_queue_bytes=2048, decision_wait_ms=0)
    good = raw_request(raw_tool_span(TRACE, b"\x01" * 8, "customer.lookup"), raw_span(TRACE, b"\x02" * 8, "invoke_agent"))
    as_json = request_to_json(good).encode()

    # gzip, protobuf and JSON: accepted, answered in the request's encoding.
    ok = post(service, gzip.compress(good.SerializeToString()), PROTOBUF, **{"Content-Encoding": "gzip"})
    assert (ok.status_code, ok.headers["content-type"], ExportTraceServiceResponse.FromString(ok.content)) == (200, PROTOBUF, ExportTraceServiceResponse())
    ok = post(service, gzip.compress(as_json), JSON, **{"Content-Encoding": "gzip"})
    assert (ok.status_code, ok.headers["content-type"], ok.json()) == (200, JSON, {})
    two_members = gzip.compress(as_json[:40]) + gzip.compress(as_json[40:])  # RFC 1952: members concatenated
    assert post(service, two_members, JSON, **{"Content-Encoding": "gzip"}).status_code == 200
    assert len(upstream.wait_spans(6, TRACE.hex())) == 6

    def refused(response: requests.Response, status: int, code: int, content_type: str) -> str:
        assert (response.status_code, response.headers["content-type"]) == (status, content_type), response.content
        body = status_of(response)
        assert body.code == code
        assert "retry-after" not in response.headers
        return body.message

    # Garbage: 400 with a BadRequest detail, in the request's encoding.
    message = refused(post(service, b"\xff\xfe garbage"), 400, code_pb2.INVALID_ARGUMENT, PROTOBUF)
    assert message == (  # the client's message named, not the service's own lazy reader's type
        "not an ExportTraceServiceRequest: Error parsing message with type "
        "'opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest': Wire format was corrupt"
    ), message
    response = post(service, b'{"resourceSpans": [', JSON)
    assert refused(response, 400, code_pb2.INVALID_ARGUMENT, JSON) == (
        "not an OTLP/JSON ExportTraceServiceRequest: not JSON: Expecting value (line 1, column 20)"
    )
    bad_request = error_details_pb2.BadRequest()
    assert status_of(response).details[0].Unpack(bad_request)
    assert [(v.field, v.description) for v in bad_request.field_violations] == [("body", "not JSON: Expecting value (line 1, column 20)")]
    assert refused(post(service, b"\x00\x01", JSON), 400, code_pb2.INVALID_ARGUMENT, JSON) == (
        "not an OTLP/JSON ExportTraceServiceRequest: not JSON: Expecting value (line 1, column 1)"
    )
    assert refused(post(service, b"[]", JSON), 400, code_pb2.INVALID_ARGUMENT, JSON) == (
        "not an OTLP/JSON ExportTraceServiceRequest: line 1: not an ExportTraceServiceRequest object"
    )
    message = refused(post(service, b"not gzip", PROTOBUF, **{"Content-Encoding": "gzip"}), 400, code_pb2.INVALID_ARGUMENT, PROTOBUF)
    assert message.startswith("the gzip body does not decompress: Error -3 while decompressing data")
    cut = gzip.compress(good.SerializeToString())[:-12]
    assert refused(post(service, cut, PROTOBUF, **{"Content-Encoding": "gzip"}), 400, code_pb2.INVALID_ARGUMENT, PROTOBUF) == "the gzip body is cut short"

    # Oversized: 413, as sent, once decompressed (a gzip bomb is never inflated past the limit), and past the intake bound.
    assert refused(post(service, b"\x00" * 5000), 413, code_pb2.RESOURCE_EXHAUSTED, PROTOBUF) == (
        "the request body is 5000 bytes, past the limit of 4096 bytes (service.max_message_bytes); send it in smaller batches"
    )
    chunked = requests.post(url(service), data=iter([b"\x00" * 3000, b"\x00" * 3000]), headers={"Content-Type": PROTOBUF}, timeout=10)
    assert refused(chunked, 413, code_pb2.RESOURCE_EXHAUSTED, PROTOBUF) == (
        "the request body is more than 4096 bytes, past the limit of 4096 bytes (service.max_message_bytes); send it in smaller batches"
    )
    bomb = gzip.compress(b"\x00" * 1_000_000)
    assert len(bomb) < 4096
    assert refused(post(service, bomb, JSON, **{"Content-Encoding": "gzip"}), 413, code_pb2.RESOURCE_EXHAUSTED, JSON) == (
        "the request body is more than 4096 bytes once decompressed, past the limit of 4096 bytes (service.max_message_bytes); "
        "send it in smaller batches"
    )
    big = raw_request(raw_span(TRACE, b"\x03" * 8, "x" * 3000)).SerializeToString()
    assert 2048 < len(big) <= 4096
    assert refused(post(service, big), 413, code_pb2.RESOURCE_EXHAUSTED, PROTOBUF) == (
        f"the request is {len(big)} bytes, more than the whole intake queue holds (service.intake_queue_bytes = 2048); send it in smaller batches"
    )
    # The same request over gRPC: the same refusal in gRPC's words. Counted by transport; nothing refused reached the fence.
    channel, stub = trace_stub(f"127.0.0.1:{service.port}")
    with channel, pytest.raises(grpc.RpcError) as exhausted:
        stub.Export(ExportTraceServiceRequest.FromString(big), timeout=5)
    assert (exhausted.value.code(), exhausted.value.details()) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        f"the request is {len(big)} bytes, more than the whole intake queue holds (service.intake_queue_bytes = 2048); send it in smaller batches",
    )
    assert metric(service, "tracefence.requests.refused", transport="http", reason="too_large") == 4
    assert metric(service, "tracefence.requests.refused", transport="grpc", reason="too_large") == 1
    assert service.intake.handed_spans == 6


def test_partial_success_and_stand_ins_in_the_requests_encoding(serve, upstream) -> None:
    service = serve(decision_wait_ms=0)
    # Protobuf: a span with an all-zero span id is rejected, the rest kept; its trace plans a review step for it.
    request = raw_request(
        raw_span(TRACE, b"\x02" * 8, "invoke_agent"),
        raw_tool_span(TRACE, b"\x00" * 8, "payments.charge", effect="write", parent=b"\x02" * 8),
    )
    response = post(service, request.SerializeToString())
    assert (response.status_code, response.headers["content-type"]) == (200, PROTOBUF)
    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    assert (partial.rejected_spans, partial.error_message) == (1, "1 span(s) rejected; first: span 0000000000000000: span_id must be 8 bytes and not all zero")

    # OTLP/JSON: a span whose attributes do not parse is rejected; its trace id reads, so it stands in its trace.
    other = "a1" * 16
    body = {"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "json-agent"}}]}, "scopeSpans": [{"spans": [
        {"traceId": other, "spanId": "b1" * 8, "name": "invoke_agent", "startTimeUnixNano": "1", "endTimeUnixNano": "2"},
        {"traceId": other, "spanId": "b2" * 8, "parentSpanId": "b1" * 8, "name": "execute_tool x", "attributes": 5},
    ]}]}]}  # fmt: skip
    response = post(service, json.dumps(body).encode(), JSON)
    assert (response.status_code, response.headers["content-type"]) == (200, JSON)
    assert response.json() == {
        "partialSuccess": {"rejectedSpans": "1", "errorMessage": "1 span(s) rejected; first: span b2b2b2b2b2b2b2b2: attributes: repeated field attributes must be in [] which is 5 at Span"}
    }
    assert metric(service, "tracefence.spans.rejected", transport="http") == 2

    # Only the valid spans are forwarded; both traces hold a review step for the refused span.
    assert sorted(r.span_id for r in upstream.wait_spans(2)) == ["0202020202020202", "b1b1b1b1b1b1b1b1"]
    items = wait_for(lambda: len(review_items(service)) == 2 and review_items(service), what="two review items")
    assert sorted((i.trace_id, i.service_name) for i in items) == sorted([(TRACE.hex(), "raw-agent"), (other, "json-agent")])
    for item in items:
        (step,) = item.plan.steps
        call_id = "0000000000000000" if item.trace_id == TRACE.hex() else "b2b2b2b2b2b2b2b2"
        assert (step.decision, step.step.call_id, step.step.span_id) == (3, call_id, "")  # review; no span of ours to annotate

    # Anything wrong outside a span refuses the request: which spans it held cannot be known.
    hidden = {"resourceSpans": [{"scopeSpans": [{"spans": [], "spanz": [{"traceId": other}]}]}]}
    response = post(service, json.dumps(hidden).encode(), JSON)
    assert response.status_code == 400
    assert status_of(response).message == (
        "not an OTLP/JSON ExportTraceServiceRequest: line 1: spanz: scopeSpans has a key OTLP/JSON does not define, "
        "holding an array: spans under it would be missed"
    )


# -- token, TLS, media types ----------------------------------------------------------------------


def test_bearer_token_tls_and_media_types(serve, tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    service = serve(bearer_token="s3cret", tls_certificate_file=str(cert), tls_key_file=str(key))
    body = raw_request(raw_tool_span(TRACE, b"\x01" * 8, "customer.lookup")).SerializeToString()

    def call(headers: dict[str, str], data: bytes = body, path: str = "/v1/traces", method: str = "POST") -> requests.Response:
        return requests.request(method, url(service, "https", path), data=data, headers=headers, verify=str(cert), timeout=10)

    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}, {"Authorization": "Basic s3cret"}, {"Authorization": "Bearers3cret"}):
        denied = call({"Content-Type": PROTOBUF, **headers})
        assert (denied.status_code, denied.headers["www-authenticate"]) == (401, "Bearer")
        assert (status_of(denied).code, status_of(denied).message) == (code_pb2.UNAUTHENTICATED, "missing or wrong bearer token")
    assert service.intake.handed_spans == 0
    token = {"Authorization": "Bearer s3cret"}
    ok = call({"Content-Type": PROTOBUF, **token})
    assert (ok.status_code, ok.content) == (200, b"")
    ok = call({"Content-Type": PROTOBUF, "Authorization": "bearer s3cret"})  # the scheme is case-insensitive (RFC 7235)
    assert (ok.status_code, ok.content) == (200, b"")
    ok = call({"Content-Type": "application/json; charset=utf-8", **token}, request_to_json(ExportTraceServiceRequest.FromString(body)).encode())
    assert (ok.status_code, ok.headers["content-type"], ok.text) == (200, JSON, "{}")

    wrong_type = call({"Content-Type": "text/plain", **token})  # in neither encoding: the message as text, for curl
    assert (wrong_type.status_code, wrong_type.headers["content-type"], wrong_type.text) == (
        415, "text/plain; charset=utf-8", "Content-Type must be application/x-protobuf or application/json, not 'text/plain'\n")
    wrong_coding = call({"Content-Type": JSON, "Content-Encoding": "br", **token})
    assert (wrong_coding.status_code, status_of(wrong_coding).message) == (415, "Content-Encoding must be gzip or none, not 'br'")
    assert call(token, method="GET").status_code == 405
    assert call({"Content-Type": PROTOBUF, **token}, path="/v1/metrics").status_code == 404
    # TLS only: a plaintext request to the TLS port gets no OTLP answer.
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.post(url(service), data=body, headers={"Content-Type": PROTOBUF, **token}, timeout=10)


# -- the setting ------------------------------------------------------------------------------------


def test_http_endpoint_setting(monkeypatch, serve) -> None:
    assert ServiceSettings().http_endpoint == "127.0.0.1:4318"
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__HTTP_ENDPOINT", "none")
    assert load_config().service.http_endpoint == ""
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__HTTP_ENDPOINT", "0.0.0.0:4318")
    assert load_config().service.http_endpoint == "0.0.0.0:4318"
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__HTTP_ENDPOINT", "127.0.0.1:4317")
    with pytest.raises(ConfigError) as error:
        load_config()
    assert str(error.value) == (
        "configuration (OTEL_TRACEFENCE_* variables): service: Value error, http_endpoint 127.0.0.1:4317 is the endpoint 127.0.0.1:4317: "
        "give the OTLP/HTTP receiver a port of its own, or turn it off with http_endpoint: none"
    )
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__HTTP_ENDPOINT", "127.0.0.1:70000")
    with pytest.raises(ConfigError, match="http_endpoint"):
        load_config()
    off = serve(http_endpoint="")
    assert off.http_port == 0 and off.port > 0
    # A taken HTTP port fails the start with the address, as a taken gRPC port does (`serve` exits 2 with it).
    first = serve()
    with pytest.raises(OSError, match=f"^cannot listen on 127.0.0.1:{first.http_port}: Address already in use$"):
        serve(http_endpoint=f"127.0.0.1:{first.http_port}")


def test_asgi_server_binds_serves_and_stops(tmp_path: Path) -> None:
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"hello"})

    server = AsgiServer(app, "127.0.0.1:0", name="test")
    server.start()
    try:
        assert server.port > 0
        assert requests.get(f"http://127.0.0.1:{server.port}/", timeout=5).text == "hello"
        # A second server on the taken port fails at once, naming the address.
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{server.port}: Address already in use"):
            AsgiServer(app, f"127.0.0.1:{server.port}").start()
    finally:
        assert server.stop(2.0) is True
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"http://127.0.0.1:{server.port}/", timeout=5)
    with pytest.raises(OSError, match="tls_certificate_file is set but tls_key_file is not"):
        AsgiServer(app, "127.0.0.1:0", tls_certificate_file=str(tmp_path / "cert.pem"))
    with pytest.raises(OSError, match="cannot listen on 127.0.0.1:99999: Port out of range"):
        AsgiServer(app, "127.0.0.1:99999").start()


def test_cors_answers_only_the_allowed_origins(serve) -> None:
    closed = serve()
    preflight = {"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    assert requests.options(url(closed), headers=preflight, timeout=5).status_code == 405  # no CORS unless asked for
    service = serve(http_cors_allowed_origins=["https://app.example.com"], bearer_token="s3cret")
    allowed = requests.options(url(service), headers=preflight, timeout=5)
    assert (allowed.status_code, allowed.headers["access-control-allow-origin"], allowed.headers["access-control-allow-methods"]) == (
        200, "https://app.example.com", "POST",
    )  # fmt: skip
    other = requests.options(url(service), headers={**preflight, "Origin": "https://evil.example"}, timeout=5)
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    body = raw_request(raw_tool_span(TRACE, b"\x01" * 8, "customer.lookup")).SerializeToString()
    # The POST itself still needs the token; its answer is readable by the allowed page.
    denied = post(service, body, Origin="https://app.example.com")
    assert (denied.status_code, denied.headers["access-control-allow-origin"]) == (401, "https://app.example.com")
    ok = post(service, body, Origin="https://app.example.com", Authorization="Bearer s3cret")
    assert (ok.status_code, ok.headers["access-control-allow-origin"]) == (200, "https://app.example.com")


def test_a_json_span_whose_trace_id_cannot_be_read_holds_the_trace_of_the_parent_it_names(serve, upstream) -> None:
    """s21 trial 5 (DECISIONS 207), the OTLP/JSON path: the span is rejected in the partial success and stands, in
    the trace of the parent span it names, as a review step ``child_span_unread``."""
    service = serve(decision_wait_ms=0)
    trace = "c1" * 16
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": trace, "spanId": "d1" * 8, "name": "invoke_agent", "startTimeUnixNano": "1", "endTimeUnixNano": "3",
         "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}]},
        {"traceId": "not-a-trace-id", "spanId": "d2" * 8, "parentSpanId": "d1" * 8, "name": "execute_tool charge", "startTimeUnixNano": "2"},
    ]}]}]}  # fmt: skip
    response = post(service, json.dumps(body).encode(), JSON)
    assert (response.status_code, response.json()["partialSuccess"]["rejectedSpans"]) == (200, "1")
    assert [r.span_id for r in upstream.wait_spans(1)] == ["d1d1d1d1d1d1d1d1"]
    item = wait_for(lambda: service.store.get(trace), what="the review item")
    assert [(s.step.call_id, s.decision, list(s.reasons)) for s in item.plan.steps] == [
        ("d2d2d2d2d2d2d2d2", 3, ["child_span_unread", "effect_unknown", "arguments_not_recorded"])]  # 3: review
    assert "it names span d1d1d1d1d1d1d1d1 of this trace as its parent" in item.plan.steps[0].step.malformed[0].message


def test_a_json_span_whose_trace_id_cannot_be_read_holds_the_trace_of_a_parent_sent_earlier(serve, upstream) -> None:
    """s21 trial T2 (DECISIONS 296), the OTLP/JSON path: the parent came in the request before, its trace still held
    (decision wait 300 ms); the refused span stands in that trace as ``child_span_unread``, not in none."""
    service = serve(decision_wait_ms=300)
    trace = "c2" * 16
    parent = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": trace, "spanId": "d1" * 8, "name": "invoke_agent", "startTimeUnixNano": "1", "endTimeUnixNano": "3",
         "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}]}]}]}]}
    orphan = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "zz" + trace[2:], "spanId": "d2" * 8, "parentSpanId": "d1" * 8, "name": "execute_tool charge", "startTimeUnixNano": "2"}]}]}]}  # fmt: skip
    assert post(service, json.dumps(parent).encode(), JSON).status_code == 200
    response = post(service, json.dumps(orphan).encode(), JSON)
    assert (response.status_code, response.json()["partialSuccess"]["rejectedSpans"]) == (200, "1")
    assert [r.tf["tracefence.replay.class"] for r in upstream.wait_spans(1)] == ["review"]
    item = wait_for(lambda: service.store.get(trace), what="the review item")
    assert [(s.step.call_id, s.decision, list(s.reasons)) for s in item.plan.steps] == [
        ("d2d2d2d2d2d2d2d2", 3, ["child_span_unread", "effect_unknown", "arguments_not_recorded"])]  # 3: review


def test_json_bodies_with_misspelt_or_doubled_keys_are_refused_or_held(serve, upstream) -> None:
    """Round 5 trial (DECISIONS 180, 181): a container OTLP/JSON does not define, or given in both spellings, refuses
    the body (400, naming it) instead of 200 {}; a span giving its trace id twice stands in both traces, one span rejected."""
    service = serve(decision_wait_ms=0)
    span = {"traceId": "b" * 32, "spanId": "1000000000000003", "name": "execute_tool charge", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}
    for body, message in (
        ({"resourceSpan": [{"scopeSpans": [{"spans": [span]}]}]}, "line 1: resourceSpan: the request has a key OTLP/JSON does not define, holding an array"),
        (
            {"resourceSpans": [], "resource_spans": [{"scopeSpans": [{"spans": [span]}]}]},
            "line 1: a JSON object gives resourceSpans and resource_spans, one field in both spellings",
        ),
    ):
        response = post(service, json.dumps(body).encode(), JSON)
        assert response.status_code == 400
        assert status_of(response).message.startswith(f"not an OTLP/JSON ExportTraceServiceRequest: {message}")
    roots = [{**span, "traceId": trace * 32, "spanId": "1000000000000001", "name": "invoke_agent"} for trace in "bd"]  # each trace ends
    child = {**span, "trace_id": "d" * 32, "parentSpanId": "1000000000000001"}
    both = {"resourceSpans": [{"scopeSpans": [{"spans": [*roots, child]}]}]}
    response = post(service, json.dumps(both).encode(), JSON)
    assert response.status_code == 200
    assert response.json()["partialSuccess"] == {
        "rejectedSpans": "1",
        "errorMessage": "1 span(s) rejected; first: span 1000000000000003: traceId: a JSON object gives traceId and trace_id, "
        "one field in both spellings: which value was meant cannot be known",
    }
    items = wait_for(lambda: len(review_items(service)) == 2 and review_items(service), what="two review items")
    assert sorted(item.trace_id for item in items) == ["b" * 32, "d" * 32]  # the span stands in both traces it names
    for item in items:
        (step,) = item.plan.steps
        assert (step.decision, step.step.call_id, list(step.reasons)) == (3, "1000000000000003", ["malformed_traceId", "effect_unknown", "arguments_not_recorded"])


# -- slow and vanishing clients (trial defects 10 and 16) -----------------------------------------


def _stalled_bodies(service: TraceFenceService, count: int, declared: int = 1_000_000) -> list[Any]:
    """``count`` connections that send the headers of a ``declared``-byte body and 10 bytes of it, then nothing."""
    import socket

    stalled = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", service.http_port))
        head = f"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {PROTOBUF}\r\nContent-Length: {declared}\r\n\r\n"
        sock.sendall(head.encode() + b"\x0a" * 10)
        stalled.append(sock)
    return stalled


def test_slow_bodies_hold_no_slot_and_time_out_with_408(serve, upstream) -> None:
    """Eight clients that send headers and 10 bytes used to take all eight slots (max_workers) before their
    bodies were read, and body reads had no timeout: every other OTLP/HTTP Export waited 100 s and more."""
    service = serve(max_workers=2, http_body_timeout_s=3)
    stalled = _stalled_bodies(service, 8)
    try:
        spans = agent_spans()
        exporter = HttpSpanExporter(endpoint=url(service), timeout=5)
        try:
            assert exporter.export(spans) is SpanExportResult.SUCCESS  # at once: the stalled bodies hold no slot
        finally:
            exporter.shutdown()
        assert len(upstream.wait_spans(len(spans), format(spans[0].context.trace_id, "032x"))) == len(spans)
        stalled[0].settimeout(10)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += stalled[0].recv(65536)
        head, _, rest = answer.partition(b"\r\n\r\n")
        assert head.split(b"\r\n")[0] == b"HTTP/1.1 408 Request Timeout"
        assert b"connection: close" in head.lower()
        length = int(next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")).split(b":")[1])
        while len(rest) < length:
            rest += stalled[0].recv(65536)
        status = status_pb2.Status.FromString(rest)
        assert (status.code, status.message) == (
            code_pb2.DEADLINE_EXCEEDED,
            "the request body did not arrive in full within 3s (service.http_body_timeout_s)",
        )
    finally:
        for sock in stalled:
            sock.close()


def test_bodies_received_at_once_are_bounded_in_bytes(serve) -> None:
    """With no slot taken while a body arrives, the bytes of the bodies held at once are bounded instead:
    max_workers × max_message_bytes, counted as they arrive; past it, 503 (retried), never more memory."""
    service = serve(max_workers=1, max_message_bytes=4096)
    stalled = _stalled_bodies(service, 1, declared=4096)
    try:
        stalled[0].sendall(b"\x0a" * 4000)  # 4010 of the 4096 bytes held
        wait_for(lambda: service._http_receiver._body_bytes == 4010, timeout=5)  # type: ignore[attr-defined]
        body = raw_request(raw_tool_span(TRACE, b"\x01" * 8, "customer.lookup")).SerializeToString()
        refused = post(service, body)
        assert (refused.status_code, refused.headers["retry-after"]) == (503, "1")
        assert status_of(refused).message == (
            "the OTLP/HTTP bodies being received hold 4010 bytes, the most held at once (max_workers × max_message_bytes = 4096); retry later"
        )
    finally:
        stalled[0].close()
    wait_for(lambda: service._http_receiver._body_bytes == 0, timeout=5)  # type: ignore[attr-defined]
    assert post(service, body).status_code == 200


def test_a_client_gone_mid_body_is_one_debug_line_without_a_traceback(serve, caplog) -> None:
    """Each client that disconnected mid-body logged an ERROR "Exception in ASGI application" with a
    ClientDisconnect traceback; so did requests held at a stop."""
    caplog.set_level(logging.DEBUG)
    service = serve()
    for sock in _stalled_bodies(service, 3):
        sock.close()
    wait_for(lambda: service._http_receiver.disconnects == 3, timeout=5)  # type: ignore[attr-defined]
    held = _stalled_bodies(service, 2)  # still held when the service stops
    try:
        service.stop(grace_s=0.5)
    finally:
        for sock in held:
            sock.close()
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith(("uvicorn", "otel_tracefence.service"))]
    assert [r.getMessage() for r in errors] == []
    assert not any(r.exc_info for r in caplog.records)
    gone = [r.getMessage() for r in caplog.records if "disconnected before its body was read" in r.getMessage()]
    assert len(gone) >= 3 and all(r.levelno == logging.DEBUG for r in caplog.records if "disconnected before" in r.getMessage())
