"""Issue 28, part 1: the zero-code exporter speaks the OTLP protocol the standard variables name.

``OTEL_TRACES_EXPORTER=tracefence opentelemetry-instrument python agent.py`` with
``OTEL_EXPORTER_OTLP_PROTOCOL`` (or ``..._TRACES_PROTOCOL``) ``grpc``, ``http/protobuf`` or ``http/json``, into a
real ``TraceFenceService`` (gRPC and HTTP receivers on loopback ports, a bearer token the SDK sends from
``OTEL_EXPORTER_OTLP_HEADERS``) forwarding to a recording gRPC upstream: the annotated spans arrive there. The
protocol rule itself (``otel_tracefence.sdk.otlp_exporter``) in-process.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

from otel_tracefence.sdk import TraceFenceSpanExporter, otlp_span_exporter
from otel_tracefence.sdk.otlp_exporter import JSON_EXPORTER_MODULE, otlp_protocol
from otel_tracefence.service.server import TraceFenceService
from service_helpers import RecordingUpstream, service_config

PROGRAM = Path(__file__).resolve().parents[1] / "programs" / "zero_code_agent.py"
INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"
ROOT = Path(__file__).resolve().parents[2]
TOKEN = "zero-code-token"
try:
    __import__(JSON_EXPORTER_MODULE)
    HAS_JSON_EXPORTER = True
except ImportError:
    HAS_JSON_EXPORTER = False


@pytest.fixture
def upstream() -> Iterator[RecordingUpstream]:
    up = RecordingUpstream()
    up.start()
    yield up
    up.stop()


@pytest.fixture
def service(tmp_path: Path, upstream: RecordingUpstream) -> Iterator[TraceFenceService]:
    svc = TraceFenceService(service_config(upstream, tmp_path / "serve-review.db", http_endpoint="127.0.0.1:0", bearer_token=TOKEN))
    svc.start()
    yield svc
    svc.stop(0)


def run_agent(tmp_path: Path, **extra_env: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        PYTHONPATH=str(ROOT),
        OTEL_TRACES_EXPORTER="tracefence",
        OTEL_TRACEFENCE_REVIEW_DB=str(tmp_path / "agent-review.db"),
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_SERVICE_NAME="zero-code-agent",
        OTEL_EXPORTER_OTLP_HEADERS=f"authorization=Bearer {TOKEN}",
        **extra_env,
    )
    return subprocess.run([str(INSTRUMENT), sys.executable, str(PROGRAM)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(not INSTRUMENT.exists(), reason="opentelemetry-instrument is not installed (the `test` extra has it)")
@pytest.mark.parametrize(
    "variable, protocol",
    [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
    ],
)
def test_zero_code_exports_over_the_protocol_the_variables_name(tmp_path, service, upstream, variable, protocol):
    port = service.port if protocol == "grpc" else service.http_port
    env = {variable: protocol, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}
    if variable == "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL":
        env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"  # the traces variable wins over the general one
    result = run_agent(tmp_path, **env)
    assert result.returncode == 0, result.stderr
    spans = {s.name: s for s in upstream.wait_spans(3)}
    assert set(spans) == {"invoke_agent billing-agent", "execute_tool get_customer", "execute_tool invoice.create"}
    assert {s.service_name for s in spans.values()} == {"zero-code-agent"}
    assert {s.tf["tracefence.replay.class"] for s in spans.values()} == {"review"}
    assert spans["execute_tool invoice.create"].tf["tracefence.step.decision"] == "review"
    assert spans["execute_tool invoice.create"].tf["tracefence.step.reasons"] == ["write_timeout"]
    assert spans["execute_tool get_customer"].tf["tracefence.step.decision"] == "replay"
    refusals = [line for line in result.stderr.splitlines() if "no OTLP/JSON span exporter is installed" in line]
    if protocol == "http/json" and not HAS_JSON_EXPORTER:
        assert len(refusals) == 1  # one line, naming the protocol; the spans still arrived, over http/protobuf
        assert "OTEL_EXPORTER_OTLP_PROTOCOL=http/json" in refusals[0]
        assert "exporting over http/protobuf to the same endpoint instead" in refusals[0]
    else:
        assert refusals == []


def test_protocol_variables_in_order():
    assert otlp_protocol({}) == ("grpc", "default")
    assert otlp_protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": " HTTP/Protobuf "}) == ("http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL")
    assert otlp_protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}) == (
        "http/json",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    )
    assert otlp_protocol({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}) == ("grpc", "OTEL_EXPORTER_OTLP_PROTOCOL")


def test_the_sdk_exporter_reads_the_standard_variables_itself(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector.internal:4318/v1/traces")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=blue")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "3")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    exporter = otlp_span_exporter(environ={"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    try:
        assert type(exporter) is HttpSpanExporter
        assert exporter._endpoint == "http://collector.internal:4318/v1/traces"
        assert exporter._client._headers["x-tenant"] == "blue"
        assert exporter._client._headers["Content-Encoding"] == "gzip"
        assert exporter._client._timeout == 3.0
    finally:
        exporter.shutdown()
    grpc_exporter = otlp_span_exporter("grpc")
    try:
        assert type(grpc_exporter) is GrpcSpanExporter
    finally:
        grpc_exporter.shutdown()


@pytest.mark.skipif(HAS_JSON_EXPORTER, reason="an OTLP/JSON exporter is installed here")
def test_http_json_without_a_json_exporter_is_refused_in_one_line(caplog):
    with caplog.at_level(logging.ERROR, logger="otel_tracefence"):
        exporter = otlp_span_exporter(environ={"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"})
    exporter.shutdown()
    assert type(exporter) is HttpSpanExporter
    assert [r.getMessage() for r in caplog.records] == [
        "tracefence: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json: no OTLP/JSON span exporter is installed "
        "(opentelemetry-exporter-otlp-json-http); exporting over http/protobuf to the same endpoint instead"
    ]


def test_an_unknown_protocol_is_named(monkeypatch, tmp_path, caplog):
    with pytest.raises(ValueError) as raised:
        otlp_span_exporter(environ={"OTEL_EXPORTER_OTLP_PROTOCOL": "http/thrift"})
    assert str(raised.value) == "OTEL_EXPORTER_OTLP_PROTOCOL='http/thrift': expected one of grpc, http/protobuf, http/json"
    # Built by opentelemetry-instrument, the exporter never fails the setup: it says so and exports over gRPC.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/thrift")
    monkeypatch.setenv("OTEL_TRACEFENCE_REVIEW_DB", "")
    with caplog.at_level(logging.ERROR, logger="otel_tracefence"):
        exporter = TraceFenceSpanExporter()
    try:
        assert type(exporter._inner) is GrpcSpanExporter
    finally:
        exporter.shutdown()
    assert [r.getMessage() for r in caplog.records] == [
        "tracefence: OTEL_EXPORTER_OTLP_PROTOCOL='http/thrift': expected one of grpc, http/protobuf, http/json; exporting through OTLP instead, over grpc"
    ]


@pytest.mark.parametrize("name, expected", [("otlp_proto_grpc", GrpcSpanExporter), ("otlp_proto_http", HttpSpanExporter)])
def test_the_sdk_exporter_names_pin_a_protocol(monkeypatch, name, expected):
    monkeypatch.setenv("OTEL_TRACEFENCE_EXPORTER", name)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf" if expected is GrpcSpanExporter else "grpc")
    monkeypatch.setenv("OTEL_TRACEFENCE_REVIEW_DB", "")
    exporter = TraceFenceSpanExporter()
    try:
        assert type(exporter._inner) is expected
    finally:
        exporter.shutdown()
