"""Issue 30 (JSON bodies counted while read): an OTLP/JSON body with more spans than the intake's bound is refused
(413, the message the full parse gave) from a count taken before the body is parsed; one within it is read as before.
Peak memory before and after: bench/json_span_bound.py (a figure, not a test)."""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest
import requests
from google.protobuf import json_format
from google.rpc import status_pb2

from otel_tracefence.service import export
from otel_tracefence.service.server import TraceFenceService


@pytest.fixture
def serve(services: Callable[..., TraceFenceService]) -> Callable[..., TraceFenceService]:
    return services


def body(spans: int) -> bytes:
    parts = [{"traceId": f"{n + 1:032x}", "spanId": f"{n + 1:016x}", "name": "op"} for n in range(spans)]
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": parts[: spans // 2]}, {"spans": parts[spans // 2 :]}]}]}).encode()


def post(service: TraceFenceService, data: bytes) -> requests.Response:
    return requests.post(f"http://127.0.0.1:{service.http_port}/v1/traces", data=data, headers={"Content-Type": "application/json"}, timeout=30)


def test_a_body_past_the_span_bound_is_refused_before_it_is_parsed(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    service = serve(intake_queue_spans=1000)
    parsed: list[int] = []
    real = export.read_otlp_json_request
    monkeypatch.setattr(export, "read_otlp_json_request", lambda text: parsed.append(1) or real(text))
    answer = post(service, body(5000))
    assert answer.status_code == 413
    status = json_format.Parse(answer.text, status_pb2.Status())
    assert status.message == (
        "the request has 5000 spans, more than the whole intake queue holds (service.intake_queue_spans = 1000); send it in smaller batches"
    )
    assert parsed == []  # refused from the count alone
    within = post(service, body(1000))  # at the bound: counted, then read and accepted as before
    assert within.status_code == 200 and parsed == [1]
    assert json.loads(within.text) == {}


def test_a_body_the_count_cannot_walk_gets_the_readers_answer(serve: Any) -> None:
    service = serve(intake_queue_spans=10)
    answer = post(service, b'{"resourceSpans": [{"scopeSpans": [{"spans": [' + b"{}," * 100 + b"]}]}]}")  # a trailing comma: not JSON
    assert answer.status_code == 400
    status = json_format.Parse(answer.text, status_pb2.Status())
    assert status.message.startswith("not an OTLP/JSON ExportTraceServiceRequest: not JSON: ")
