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


def plan_one_call(effect: str, result: str) -> tuple[str | None, list[tuple[str, tuple[str, ...]]]]:
    """The plan of a trace of an ``invoke_agent`` root and one ``invoice.create`` tool span of ``effect`` (``read`` /
    ``write``) whose ``gen_ai.tool.call.result`` is ``result`` (text), through ``tracefence plan``'s reading of
    OTLP/JSON: ``(class, [(decision, reasons) of each step])``; asserts no input error."""
    import json  # noqa: PLC0415 - the planner only where a test plans

    from otel_tracefence.core.config import TraceFenceConfig  # noqa: PLC0415
    from otel_tracefence.pipeline.documents import plan_text  # noqa: PLC0415

    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    tool = json_span(trace, "00f067aa0ba902b7", "execute_tool invoice.create", parent="a3ce929d0e0e4736", **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "invoice.create", "gen_ai.tool.call.id": "c1",
        "tracefence.effect": effect, "gen_ai.tool.call.arguments": '{"amount": 1250}', "gen_ai.tool.call.result": result,
    })  # fmt: skip
    root = json_span(trace, "a3ce929d0e0e4736", "invoke_agent billing", **{"gen_ai.operation.name": "invoke_agent"})
    (plan,), errors = plan_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [root, tool]}]}]}), "otlp-json", TraceFenceConfig())
    assert errors == []
    return (plan.replay_class.value if plan.replay_class else None), [(d.decision.value, d.reasons) for d in plan.steps]
