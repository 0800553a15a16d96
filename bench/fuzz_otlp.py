"""Coverage-guided fuzzing (atheris / libFuzzer) of the OTLP protobuf entry point.

Bytes → ``ExportTraceServiceRequest.FromString`` → ``group_request`` → ``plan_spans`` for each
trace → the plan's canonical JSON, with two configurations (defaults; tool rules, raw values and
tight limits). A protobuf ``DecodeError`` is the expected answer to bytes that are not a request;
any other exception, or a plan that breaks a safety promise (a decision that would re-fire a
write, an uncertain write not fenced, a replay class other than the most restrictive one), is a
crash: libFuzzer stops, prints the traceback and writes the input to ``crash-*`` in the work
directory.

Every span is planned, including those the service's ``invalid_reason`` would reject before
planning (ids of the wrong length): the normalizer never raises for any span.

Run (installs nothing; ``make fuzz`` installs the ``fuzz`` extra and runs both harnesses)::

    .venv/bin/python bench/fuzz_otlp.py                   # FUZZ_SECONDS (default 60), then exit 0
    FUZZ_SECONDS=600 .venv/bin/python bench/fuzz_otlp.py -jobs=2 -workers=2
    .venv/bin/python bench/fuzz_otlp.py path/to/crash-...  # replay one input

The corpus (seeded with the examples and a few hand-made requests) and crash files live in
``$FUZZ_WORKDIR`` (default ``$TMPDIR/tracefence-fuzz/otlp``), so a later run starts where the
last one stopped. Extra arguments are passed to libFuzzer.
"""

from __future__ import annotations

import atheris

with atheris.instrument_imports(include=["otel_tracefence"]):
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

    from fuzz_common import CONFIGS, ROOT, check, run
    from otel_tracefence.normalize import conventions as cv
    from otel_tracefence.pipeline.plan import group_request, plan_spans
    from otel_tracefence.otlp.json_reader import read_otlp_json

NAME = "otlp"


def test_one_input(data: bytes) -> None:
    try:
        request = ExportTraceServiceRequest.FromString(data)
    except DecodeError:
        return
    for config in CONFIGS:
        for trace_id, views in group_request(request).items():
            check(plan_spans(trace_id, views, config).plan)


# --- seeds and dictionary ---------------------------------------------------------------------


def _kv(key: str, value) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, dict):
        any_value = AnyValue()
        any_value.kvlist_value.values.extend(_kv(k, v) for k, v in value.items())
        return KeyValue(key=key, value=any_value)
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def _span(span_id: int, attributes: dict, *, name: str = "execute_tool pay", parent: int = 0, error: str = "") -> Span:
    span = Span(
        trace_id=bytes.fromhex("0af7651916cd43dd8448eb211c80319c"),
        span_id=span_id.to_bytes(8, "big"),
        parent_span_id=parent.to_bytes(8, "big") if parent else b"",
        name=name,
        start_time_unix_nano=1_000 + span_id,
        end_time_unix_nano=2_000 + span_id,
        status=Status(code=Status.STATUS_CODE_ERROR if error else Status.STATUS_CODE_UNSET),
    )
    span.attributes.extend(_kv(k, v) for k, v in attributes.items())
    if error:
        span.events.add(name="exception").attributes.append(_kv("exception.type", error))
    return span


def _handmade() -> list[ExportTraceServiceRequest]:
    """Requests the examples lack: other conventions, attempts, requested calls, key conflicts."""
    genai = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "pay", "tracefence.effect": "write"}
    spans = [
        _span(1, {"gen_ai.operation.name": "invoke_agent"}, name="invoke_agent a"),
        _span(2, {**genai, "gen_ai.tool.call.id": "c1", "gen_ai.tool.call.arguments": '{"k": "k1", "n": 1}', "gen_ai.tool.call.result": "ok"}, parent=1),
        _span(3, {**genai, "gen_ai.tool.call.id": "c2", "gen_ai.tool.call.arguments": {"k": "k1", "n": 2}}, parent=1, error="TimeoutError"),
        _span(4, {"mcp.method.name": "tools/call", "gen_ai.tool.name": "pay"}, name="tools/call pay", parent=3),
        _span(5, {"openinference.span.kind": "TOOL", "tool.name": "read_file", "input.value": '{"p": "a"}', "input.mime_type": "application/json", "output.value": "x"}, name="read_file", parent=1),
        _span(6, {"traceloop.span.kind": "tool", "traceloop.entity.name": "mail", "traceloop.entity.input": "{}", "http.request.method": "POST"}, name="mail.task", parent=1),
        _span(7, {"ai.toolCall.name": "pay", "ai.toolCall.id": "c3", "ai.toolCall.args": "{}", "mcp.tool.annotations.readOnlyHint": True}, name="ai.toolCall", parent=1),
        _span(
            8,
            {"gen_ai.operation.name": "chat", "gen_ai.output.messages": '[{"parts": [{"type": "tool_call", "id": "c9", "name": "pay", "arguments": "{}"}]}]'},
            name="chat m",
            parent=1,
        ),
        _span(
            9,
            {
                "openinference.span.kind": "LLM",
                "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c10",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "read_file",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"p": "b"}',
            },
            name="llm",
            parent=1,
        ),
        _span(10, {"langfuse.observation.type": "tool", "langfuse.observation.input": "[1]", "tracefence.status": "ok", "tracefence.idempotency_key": "k1"}, name="pay", parent=1),
        _span(11, {"gen_ai.tool.name": "pay", "tool_arguments": {"a": 1}, "code.function.parameters.a.value": 1}, name="running tool"),
        # A committed write dispatched twice (two MCP calls under one tool span), and one repeated.
        _span(12, {**genai, "gen_ai.tool.call.id": "c12", "gen_ai.tool.call.arguments": '{"n": 3}', "gen_ai.tool.call.result": "r"}, parent=1),
        _span(13, {"mcp.method.name": "tools/call", "gen_ai.tool.name": "pay"}, name="tools/call pay", parent=12),
        _span(14, {"mcp.method.name": "tools/call", "gen_ai.tool.name": "pay"}, name="tools/call pay", parent=12),
        _span(15, {**genai, "gen_ai.tool.call.id": "c15", "gen_ai.tool.call.arguments": '{"n": 3}'}, parent=1),
    ]
    requests = []
    for chunk in (spans, spans[1:3], spans[5:8], spans[11:]):
        request = ExportTraceServiceRequest()
        request.resource_spans.add().scope_spans.add().spans.extend(chunk)
        requests.append(request)
    return requests


def seeds() -> list[tuple[str, bytes]]:
    found = []
    sources = sorted((ROOT / "examples").glob("*.otlp.json")) + sorted((ROOT.parent / "shared" / "cases").glob("*.otlp.json"))
    for path in sources:
        read = read_otlp_json(path.read_text(encoding="utf-8"))
        found.append((path.name, read.request.SerializeToString()))
    found += [(f"handmade-{i}", request.SerializeToString()) for i, request in enumerate(_handmade())]
    return found


def dictionary() -> list[str]:
    words = {
        *cv.TRACEFENCE_INPUTS, cv.GEN_AI_OPERATION, cv.GEN_AI_TOOL_NAME, *cv.CALL_ID_KEYS, *cv.ARGUMENT_KEYS, *cv.RESULT_KEYS,
        *cv.MIME_TYPE_KEYS.values(), *cv.MCP_READ_ONLY_HINT_KEYS, *cv.HTTP_METHOD_KEYS, *(k for k, _ in cv.TOOL_KIND_MARKERS),
        *(v for _, v in cv.TOOL_KIND_MARKERS), *cv.TOOL_PRESENCE_MARKERS, *cv.AGENT_BOUNDARY_KINDS, *cv.AGENT_BOUNDARY_OPERATIONS,
        cv.EXECUTE_TOOL, cv.EXECUTE_TOOL_PREFIX, cv.GEN_AI_OUTPUT_MESSAGES, "execute_tool", "read", "write", "unknown", "ok", "timeout",
        "error", "exception", "exception.type", "error.type", "TimeoutError", "cancelled", "GET", "POST", "tool_call", "parts",
        "application/json", "llm.output_messages.0.message.tool_calls.0.tool_call.", "code.function.parameters.",
    }
    return sorted(words)


def main() -> None:
    run(NAME, test_one_input, seeds(), dictionary())


if __name__ == "__main__":
    main()
