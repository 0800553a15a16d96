"""OTLP/JSON spans for tests that plan files: attribute values and spans as an OTLP exporter writes them
(https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding: hex ids, int64 as strings)."""

from __future__ import annotations

from typing import Any


def json_value(value: Any) -> dict:
    """An OTLP/JSON ``AnyValue``: a bool, an int (as a string), a list (``arrayValue``) or a string."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, list):
        return {"arrayValue": {"values": [json_value(v) for v in value]}}
    return {"stringValue": value}


def json_span(
    trace_id: str,
    span_id: str,
    name: str,
    parent: str = "",
    events: list | None = None,
    **attributes: Any,
) -> dict:
    """An OTLP/JSON span of ``trace_id`` that ran 100 ms, with ``attributes`` (keys as given) and ``events``."""
    span = {"traceId": trace_id, "spanId": span_id, "name": name, "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000000100000000",
            "attributes": [{"key": k, "value": json_value(v)} for k, v in attributes.items()]}  # fmt: skip
    if parent:
        span["parentSpanId"] = parent
    if events:
        span["events"] = events
    return span
