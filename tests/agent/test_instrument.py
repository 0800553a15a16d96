"""otel_tracefence.agent.instrument: the spans tool_call() makes, declare(), and the plans those spans give."""

import asyncio
import concurrent.futures
import enum
import json
import math
import socket
import subprocess
import sys
import textwrap

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from conftest import ROOT
from otel_tracefence.agent import instrument
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.agent.instrument import declare, failure_status, tool_call
from otel_tracefence.core.model import Decision, ReplayClass
from otel_tracefence.normalize import conventions as cv
from otel_tracefence.normalize import from_readable
from otel_tracefence.pipeline.plan import plan_spans

MODULE = __name__


# --- Stand-ins for client libraries' exceptions (recognised by class name, never imported) ---


class TimeoutException(Exception):  # httpx.TimeoutException
    pass


class ReadTimeout(TimeoutException):  # httpx.ReadTimeout
    pass


class ConnectTimeout(TimeoutException):  # httpx.ConnectTimeout
    pass


class RequestException(OSError):  # requests.exceptions.RequestException
    pass


class Timeout(RequestException):  # requests.exceptions.Timeout
    pass


class RequestsReadTimeout(Timeout):  # requests.exceptions.ReadTimeout
    pass


class ServerTimeoutError(Exception):  # aiohttp.ServerTimeoutError
    pass


class StatusCodeStandIn(enum.Enum):  # grpc.StatusCode
    OK = (0, "ok")
    CANCELLED = (1, "cancelled")
    DEADLINE_EXCEEDED = (4, "deadline exceeded")
    UNAVAILABLE = (14, "unavailable")


class RpcError(Exception):  # grpc.RpcError (its concrete errors also have code())
    def __init__(self, code):
        super().__init__(code.name)
        self._code = code

    def code(self):
        return self._code


class BrokenRpcError(RpcError):
    def code(self):
        raise RuntimeError("no code yet")


class Cancelled(BaseException):  # trio.Cancelled
    pass


class ToolFailure(Exception):
    pass


# --- Fixtures and helpers ---


@pytest.fixture
def otel():
    """A real SDK tracer provider exporting synchronously to memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _tool_spans(exporter):
    return [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool ")]


def _only(exporter):
    spans = _tool_spans(exporter)
    assert len(spans) == 1, [s.name for s in spans]
    return spans[0]


def _plan(exporter):
    spans = exporter.get_finished_spans()
    trace_ids = {s.context.trace_id for s in spans}
    assert len(trace_ids) == 1
    trace_id = format(trace_ids.pop(), "032x")
    views = [from_readable(s, i) for i, s in enumerate(spans)]
    return plan_spans(trace_id, views, TraceFenceConfig()).plan


def _decisions(plan):
    """{tool: (decision, reasons)} for a plan whose tools are distinct."""
    out = {d.step.tool: (d.decision, d.reasons) for d in plan.steps}
    assert len(out) == len(plan.steps)
    return out


def _exception_events(span):
    return [e for e in span.events if e.name == "exception"]


# --- Attribute names ---


def test_label_names_are_the_normalizers():
    assert instrument.TRACEFENCE_EFFECT == cv.TRACEFENCE_EFFECT
    assert instrument.TRACEFENCE_STATUS == cv.TRACEFENCE_STATUS
    assert instrument.TRACEFENCE_IDEMPOTENCY_KEY == cv.TRACEFENCE_IDEMPOTENCY_KEY
    assert instrument.GEN_AI_OPERATION_NAME == cv.GEN_AI_OPERATION == "gen_ai.operation.name"
    assert instrument.GEN_AI_TOOL_NAME == cv.GEN_AI_TOOL_NAME
    assert instrument.EXECUTE_TOOL == cv.EXECUTE_TOOL
    assert instrument.GEN_AI_TOOL_CALL_ARGUMENTS in cv.ARGUMENT_KEYS
    assert instrument.GEN_AI_TOOL_CALL_RESULT in cv.RESULT_KEYS
    assert instrument.GEN_AI_TOOL_CALL_ID in cv.CALL_ID_KEYS
    assert instrument.ERROR_TYPE == "error.type"


# --- Context manager: success ---


def test_ok_span_name_kind_attributes_status(otel):
    provider, exporter = otel
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("agent run") as root:
        with tool_call(
            "invoice.create",
            effect="write",
            idempotency_key="inv-17",
            arguments={"customer": "c-9", "amount_cents": 1200},
            call_id="call_1",
            tracer_provider=provider,
            record_result=True,
        ) as call:
            assert trace.get_current_span() is call.span
            call.set_result({"invoice": "in_1"})
        assert trace.get_current_span() is root
    span = _only(exporter)
    assert span.name == "execute_tool invoice.create"
    assert span.kind is SpanKind.INTERNAL
    assert dict(span.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "invoice.create",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.call.arguments": '{"customer": "c-9", "amount_cents": 1200}',
        "gen_ai.tool.call.result": '{"invoice": "in_1"}',
        "tracefence.effect": "write",
        "tracefence.idempotency_key": "inv-17",
        "tracefence.status": "ok",
    }
    assert span.status.status_code is StatusCode.UNSET
    assert span.events == ()
    assert span.parent.span_id == root.get_span_context().span_id
    assert span.instrumentation_scope.name == "otel_tracefence.agent.instrument"


def test_minimal_span_has_only_the_given_attributes(otel):
    provider, exporter = otel
    with tool_call("search", tracer_provider=provider):
        pass
    assert dict(_only(exporter).attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "tracefence.status": "ok",
    }


def test_result_written_only_when_record_result(otel):
    provider, exporter = otel
    with tool_call("search", effect="read", arguments={"q": "x"}, tracer_provider=provider) as call:
        call.set_result(["hit"])
    span = _only(exporter)
    assert "gen_ai.tool.call.result" not in span.attributes
    assert span.attributes["gen_ai.tool.call.arguments"] == '{"q": "x"}'


def test_record_arguments_false_leaves_arguments_out(otel):
    provider, exporter = otel
    with tool_call("search", arguments={"q": "secret"}, record_arguments=False, tracer_provider=provider):
        pass
    assert "gen_ai.tool.call.arguments" not in _only(exporter).attributes


def test_integer_call_id_is_written_as_text(otel):
    provider, exporter = otel
    with tool_call("search", call_id=7, tracer_provider=provider):
        pass
    assert _only(exporter).attributes["gen_ai.tool.call.id"] == "7"


@pytest.mark.parametrize(
    "arguments,expected",
    [
        ({"when": __import__("datetime").date(2024, 5, 1)}, '{"when": "2024-05-01"}'),
        ({"n": 1, "tags": ("a", "b")}, '{"n": 1, "tags": ["a", "b"]}'),
        ({1: "int keys become text"}, '{"1": "int keys become text"}'),
        ("plain text", '"plain text"'),
    ],
)
def test_arguments_json_uses_str_for_what_json_lacks(otel, arguments, expected):
    provider, exporter = otel
    with tool_call("t", arguments=arguments, tracer_provider=provider):
        pass
    assert _only(exporter).attributes["gen_ai.tool.call.arguments"] == expected


def _circular():
    value = {"a": 1}
    value["self"] = value
    return value


class _BadStr:
    def __str__(self):
        raise RuntimeError("no text")


@pytest.mark.parametrize(
    "arguments",
    [_circular(), {"x": math.nan}, {"x": math.inf}, {("tuple", "key"): 1}, {"x": _BadStr()}],
    ids=["circular", "nan", "inf", "tuple_key", "failing_str"],
)
def test_unencodable_arguments_are_left_out_never_raised(otel, arguments):
    provider, exporter = otel
    with tool_call("t", effect="read", arguments=arguments, tracer_provider=provider) as call:
        call.set_result(arguments)
    span = _only(exporter)
    assert "gen_ai.tool.call.arguments" not in span.attributes
    assert span.attributes["tracefence.status"] == "ok"


def test_unencodable_result_is_left_out(otel):
    provider, exporter = otel
    with tool_call("t", record_result=True, tracer_provider=provider) as call:
        call.set_result(_circular())
    assert "gen_ai.tool.call.result" not in _only(exporter).attributes


# --- Context manager: failures ---


def _run_failing(provider, exc, **kwargs):
    with pytest.raises(type(exc)) as raised:
        with tool_call("invoice.create", effect="write", tracer_provider=provider, **kwargs):
            raise exc
    assert raised.value is exc  # re-raised unchanged
    return raised


def _assert_failed(span, status, error_type):
    assert span.attributes["tracefence.status"] == status
    assert span.attributes["error.type"] == error_type
    assert span.status.status_code is StatusCode.ERROR
    events = _exception_events(span)
    assert len(events) == 1
    assert events[0].attributes["exception.type"] == error_type


def test_timeout_error(otel):
    provider, exporter = otel
    exc = TimeoutError("gateway did not answer")
    raised = _run_failing(provider, exc)
    assert raised.value.__traceback__ is not None
    span = _only(exporter)
    _assert_failed(span, "timeout", "TimeoutError")
    assert span.status.description == "TimeoutError: gateway did not answer"
    assert _exception_events(span)[0].attributes["exception.message"] == "gateway did not answer"


def test_socket_timeout(otel):
    provider, exporter = otel
    _run_failing(provider, socket.timeout("timed out"))
    _assert_failed(_only(exporter), "timeout", "TimeoutError")


def test_asyncio_wait_for_timeout_outside_and_cancellation_inside(otel):
    """wait_for cancels the slow tool (its own span: unknown) and raises TimeoutError around it (timeout)."""
    provider, exporter = otel

    @tool_call("slow.write", effect="write", tracer_provider=provider)
    async def slow_write(amount):
        await asyncio.sleep(5)

    async def main():
        async with tool_call("outer", effect="write", tracer_provider=provider):
            await asyncio.wait_for(slow_write(3), timeout=0.01)

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(main())
    spans = {s.name: s for s in _tool_spans(exporter)}
    assert set(spans) == {"execute_tool slow.write", "execute_tool outer"}
    _assert_failed(spans["execute_tool outer"], "timeout", "TimeoutError")
    inner = spans["execute_tool slow.write"]
    _assert_failed(inner, "unknown", "asyncio.exceptions.CancelledError")
    assert inner.attributes["gen_ai.tool.call.arguments"] == '{"amount": 3}'
    assert inner.parent.span_id == spans["execute_tool outer"].context.span_id


@pytest.mark.parametrize(
    "exc,error_type",
    [
        (ReadTimeout("read timed out"), f"{MODULE}.ReadTimeout"),
        (ConnectTimeout("connect timed out"), f"{MODULE}.ConnectTimeout"),
        (TimeoutException("pool"), f"{MODULE}.TimeoutException"),
        (RequestsReadTimeout("requests"), f"{MODULE}.RequestsReadTimeout"),
        (ServerTimeoutError("aiohttp"), f"{MODULE}.ServerTimeoutError"),
        (RpcError(StatusCodeStandIn.DEADLINE_EXCEEDED), f"{MODULE}.RpcError"),
    ],
    ids=["httpx_read", "httpx_connect", "httpx_base", "requests", "aiohttp", "grpc_deadline"],
)
def test_client_library_timeouts_by_class_name(otel, exc, error_type):
    provider, exporter = otel
    _run_failing(provider, exc)
    _assert_failed(_only(exporter), "timeout", error_type)


@pytest.mark.parametrize(
    "exc,status",
    [
        (TimeoutError(), "timeout"),
        (asyncio.TimeoutError(), "timeout"),
        (socket.timeout(), "timeout"),
        (ReadTimeout(), "timeout"),
        (Timeout(), "timeout"),
        (ServerTimeoutError(), "timeout"),
        (RpcError(StatusCodeStandIn.DEADLINE_EXCEEDED), "timeout"),
        (RpcError(StatusCodeStandIn.CANCELLED), "unknown"),
        (RpcError(StatusCodeStandIn.UNAVAILABLE), "error"),
        (BrokenRpcError(StatusCodeStandIn.OK), "error"),
        (asyncio.CancelledError(), "unknown"),
        (concurrent.futures.CancelledError(), "unknown"),
        (Cancelled(), "unknown"),
        (KeyboardInterrupt(), "unknown"),
        (SystemExit(1), "unknown"),
        (ValueError("bad"), "error"),
        (ConnectionError("refused"), "error"),
        (RequestException("requests, not a timeout"), "error"),
        (RuntimeError("Request 'tools/call' timed out"), "timeout"),  # the MCP SDK's MCPError
        (ToolFailure(), "error"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else v,
)
def test_failure_status(exc, status):
    assert failure_status(exc) == status


def test_asyncio_cancelled_error(otel):
    provider, exporter = otel
    _run_failing(provider, asyncio.CancelledError())
    _assert_failed(_only(exporter), "unknown", "asyncio.exceptions.CancelledError")


def test_concurrent_futures_cancelled_error(otel):
    provider, exporter = otel
    _run_failing(provider, concurrent.futures.CancelledError())
    _assert_failed(_only(exporter), "unknown", "concurrent.futures._base.CancelledError")


def test_task_cancelled_while_in_tool(otel):
    provider, exporter = otel

    async def tool():
        async with tool_call("charge", effect="write", idempotency_key="ch-1", tracer_provider=provider):
            await asyncio.sleep(5)

    async def main():
        task = asyncio.create_task(tool())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    _assert_failed(_only(exporter), "unknown", "asyncio.exceptions.CancelledError")


def test_keyboard_interrupt_is_unknown(otel):
    provider, exporter = otel
    _run_failing(provider, KeyboardInterrupt())
    _assert_failed(_only(exporter), "unknown", "KeyboardInterrupt")


def test_other_error(otel):
    provider, exporter = otel
    _run_failing(provider, ToolFailure("card declined"))
    span = _only(exporter)
    _assert_failed(span, "error", f"{MODULE}.ToolFailure")
    assert span.status.description == "ToolFailure: card declined"


def test_builtin_error_type_is_bare(otel):
    provider, exporter = otel
    _run_failing(provider, KeyError("k"))
    _assert_failed(_only(exporter), "error", "KeyError")


def test_async_context_manager(otel):
    provider, exporter = otel

    async def main():
        async with tool_call("fetch", effect="read", arguments={"url": "u"}, tracer_provider=provider, record_result=True) as call:
            await asyncio.sleep(0)
            call.set_result("body")
        with pytest.raises(ToolFailure):
            async with tool_call("fetch2", effect="read", tracer_provider=provider):
                raise ToolFailure()

    asyncio.run(main())
    spans = {s.name: s for s in _tool_spans(exporter)}
    ok = spans["execute_tool fetch"]
    assert ok.attributes["tracefence.status"] == "ok"
    assert ok.attributes["gen_ai.tool.call.result"] == '"body"'
    assert ok.status.status_code is StatusCode.UNSET
    _assert_failed(spans["execute_tool fetch2"], "error", f"{MODULE}.ToolFailure")


def test_same_object_nested_entries_make_separate_spans(otel):
    provider, exporter = otel
    call = tool_call("retry", effect="read", tracer_provider=provider)
    with call as outer:
        with call as inner:
            assert inner.span is not outer.span
            assert trace.get_current_span() is inner.span
        assert trace.get_current_span() is outer.span
    spans = _tool_spans(exporter)
    assert len(spans) == 2
    assert spans[0].parent.span_id == spans[1].context.span_id


# --- Validation (the developer's own mistakes raise at the call) ---


@pytest.mark.parametrize("effect", ["delete", "READ", "unknown", "", 1, True])
def test_invalid_effect_raises(effect):
    with pytest.raises(ValueError, match="effect"):
        tool_call("t", effect=effect)


@pytest.mark.parametrize("key", ["", 17, b"inv"])
def test_invalid_idempotency_key_raises(key):
    with pytest.raises(ValueError, match="idempotency_key"):
        tool_call("t", idempotency_key=key)


@pytest.mark.parametrize("name", ["", None, 3])
def test_invalid_name_raises(name):
    with pytest.raises(ValueError, match="tool name"):
        tool_call(name)


@pytest.mark.parametrize("call_id", ["", True, 1.5])
def test_invalid_call_id_raises(call_id):
    with pytest.raises(ValueError, match="call_id"):
        tool_call("t", call_id=call_id)


# --- Decorator ---


def test_sync_decorator_binds_call_arguments(otel):
    provider, exporter = otel

    @tool_call("read_file", effect="read", tracer_provider=provider, record_result=True)
    def read_file(path, encoding="utf-8", *rest, limit=None, **extra):
        """Read a file."""
        return {"path": path, "limit": limit}

    assert read_file.__name__ == "read_file" and read_file.__doc__ == "Read a file."
    assert read_file("a.txt", limit=3, flag=True) == {"path": "a.txt", "limit": 3}
    assert read_file("b.txt", "latin-1", "x") == {"path": "b.txt", "limit": None}
    first, second = _tool_spans(exporter)
    assert first.name == second.name == "execute_tool read_file"
    assert json.loads(first.attributes["gen_ai.tool.call.arguments"]) == {"path": "a.txt", "limit": 3, "flag": True}
    assert json.loads(second.attributes["gen_ai.tool.call.arguments"]) == {"path": "b.txt", "encoding": "latin-1", "rest": ["x"]}
    assert first.attributes["gen_ai.tool.call.result"] == '{"path": "a.txt", "limit": 3}'
    assert first.attributes["tracefence.effect"] == "read"
    assert first.attributes["tracefence.status"] == "ok"
    assert first.context.span_id != second.context.span_id


def test_decorator_result_not_recorded_by_default(otel):
    provider, exporter = otel

    @tool_call("lookup", effect="read", tracer_provider=provider)
    def lookup(key):
        return "value"

    assert lookup("k") == "value"
    span = _only(exporter)
    assert span.attributes["gen_ai.tool.call.arguments"] == '{"key": "k"}'
    assert "gen_ai.tool.call.result" not in span.attributes


def test_decorator_on_method_leaves_self_out(otel):
    provider, exporter = otel

    class Client:
        @tool_call("crm.update", effect="write", tracer_provider=provider)
        def update(self, record_id, fields):
            return True

    assert Client().update("r1", fields={"name": "Ada"}) is True
    assert json.loads(_only(exporter).attributes["gen_ai.tool.call.arguments"]) == {"record_id": "r1", "fields": {"name": "Ada"}}


def test_decorator_call_that_does_not_bind_records_no_arguments_and_raises_typeerror(otel):
    provider, exporter = otel

    @tool_call("t", tracer_provider=provider)
    def t(a):
        return a

    with pytest.raises(TypeError):
        t(1, 2)
    span = _only(exporter)
    assert "gen_ai.tool.call.arguments" not in span.attributes
    _assert_failed(span, "error", "TypeError")


def test_sync_decorator_reraises_unchanged(otel):
    provider, exporter = otel
    exc = ReadTimeout("slow")

    @tool_call("http.post", effect="write", tracer_provider=provider)
    def post(url):
        raise exc

    with pytest.raises(ReadTimeout) as raised:
        post("https://x")
    assert raised.value is exc
    _assert_failed(_only(exporter), "timeout", f"{MODULE}.ReadTimeout")


def test_async_decorator_binds_arguments_and_records_result(otel):
    provider, exporter = otel

    @tool_call("weather", effect="read", tracer_provider=provider, record_result=True)
    async def weather(city, *, units="metric"):
        await asyncio.sleep(0)
        return {"city": city, "temp": 21.5}

    assert asyncio.iscoroutinefunction(weather)
    assert asyncio.run(weather("Oslo", units="imperial")) == {"city": "Oslo", "temp": 21.5}
    span = _only(exporter)
    assert span.name == "execute_tool weather"
    assert json.loads(span.attributes["gen_ai.tool.call.arguments"]) == {"city": "Oslo", "units": "imperial"}
    assert json.loads(span.attributes["gen_ai.tool.call.result"]) == {"city": "Oslo", "temp": 21.5}
    assert span.status.status_code is StatusCode.UNSET


def test_async_decorator_error(otel):
    provider, exporter = otel

    @tool_call("weather", effect="read", tracer_provider=provider)
    async def weather(city):
        raise ToolFailure(city)

    with pytest.raises(ToolFailure):
        asyncio.run(weather("Oslo"))
    _assert_failed(_only(exporter), "error", f"{MODULE}.ToolFailure")


def test_concurrent_async_calls_get_their_own_spans(otel):
    provider, exporter = otel

    @tool_call("fetch", effect="read", tracer_provider=provider)
    async def fetch(n):
        await asyncio.sleep(0.001 * (3 - n))
        return n

    async def main():
        with trace.get_tracer("agent", tracer_provider=provider).start_as_current_span("agent"):
            return await asyncio.gather(*(fetch(n) for n in range(3)))

    assert asyncio.run(main()) == [0, 1, 2]
    spans = _tool_spans(exporter)
    assert sorted(json.loads(s.attributes["gen_ai.tool.call.arguments"])["n"] for s in spans) == [0, 1, 2]
    roots = {s.parent.span_id for s in spans}
    assert len(roots) == 1  # all siblings under the agent span, none nested in another


@pytest.mark.parametrize(
    "kwargs",
    [{"idempotency_key": "inv-1"}, {"call_id": "c1"}, {"arguments": {"a": 1}}],
    ids=["idempotency_key", "call_id", "arguments"],
)
def test_decorator_refuses_per_call_values(kwargs):
    with pytest.raises(ValueError, match="decorator"):

        @tool_call("t", **kwargs)
        def t():
            pass


def test_decorator_refuses_generators():
    with pytest.raises(TypeError, match="generator"):

        @tool_call("t")
        def gen():
            yield 1

    with pytest.raises(TypeError, match="generator"):

        @tool_call("t")
        async def agen():
            yield 1


# --- declare() ---


def test_declare_labels_a_frameworks_tool_span(otel):
    provider, exporter = otel
    tracer = provider.get_tracer("framework")
    with tracer.start_as_current_span("running tool", attributes={"gen_ai.tool.name": "send_email"}):
        declare("write", idempotency_key="mail-42")
    (span,) = exporter.get_finished_spans()
    assert dict(span.attributes) == {
        "gen_ai.tool.name": "send_email",
        "tracefence.effect": "write",
        "tracefence.idempotency_key": "mail-42",
    }


def test_declare_given_span_and_none_values_not_written(otel):
    provider, exporter = otel
    tracer = provider.get_tracer("framework")
    span = tracer.start_span("search", attributes={"openinference.span.kind": "TOOL"})
    declare("read", span=span)
    declare(idempotency_key="k", span=span)
    declare(span=span)
    span.end()
    assert dict(exporter.get_finished_spans()[0].attributes) == {
        "openinference.span.kind": "TOOL",
        "tracefence.effect": "read",
        "tracefence.idempotency_key": "k",
    }


def test_declare_inside_decorated_tool_labels_its_span(otel):
    provider, exporter = otel

    @tool_call("invoice.create", effect="write", tracer_provider=provider)
    def create_invoice(order):
        declare(idempotency_key=f"inv-{order}")
        return "in_1"

    create_invoice(17)
    assert _only(exporter).attributes["tracefence.idempotency_key"] == "inv-17"


def test_declare_without_recording_span_does_nothing(otel):
    provider, exporter = otel
    declare("write", idempotency_key="k")  # no current span
    ended = provider.get_tracer("x").start_span("done")
    ended.end()
    declare("read", span=ended)  # no longer recording
    assert "tracefence.effect" not in exporter.get_finished_spans()[0].attributes


@pytest.mark.parametrize("kwargs", [{"effect": "remove"}, {"effect": "write", "idempotency_key": ""}, {"idempotency_key": 5}])
def test_declare_invalid_raises(otel, kwargs):
    provider, _ = otel
    with provider.get_tracer("x").start_as_current_span("running tool"):
        with pytest.raises(ValueError):
            declare(**kwargs)


# --- Without an SDK, and with a broken one ---


def test_noop_tracer_provider(otel):
    _, exporter = otel

    @tool_call("t", effect="read", tracer_provider=trace.NoOpTracerProvider(), record_result=True)
    def t(x):
        declare(idempotency_key="k")
        return x * 2

    assert t(2) == 4
    with tool_call("t", effect="write", arguments=_circular(), tracer_provider=trace.NoOpTracerProvider(), record_result=True) as call:
        assert not call.span.is_recording()
        call.set_result(1)
    with pytest.raises(TimeoutError):
        with tool_call("t", tracer_provider=trace.NoOpTracerProvider()):
            raise TimeoutError()
    assert exporter.get_finished_spans() == ()


def test_without_any_sdk_configured_is_a_noop():
    """A fresh interpreter with no tracer provider set: every form works and nothing is recorded."""
    script = textwrap.dedent(
        """
        import asyncio
        from opentelemetry import trace
        from otel_tracefence.agent.instrument import declare, tool_call

        with tool_call("invoice.create", effect="write", idempotency_key="inv-1", arguments={"a": 1}, record_result=True) as call:
            assert not call.span.is_recording()
            call.set_result({"ok": True})
            declare("write", idempotency_key="inv-1")

        @tool_call("read_file", effect="read", record_result=True)
        def read_file(path):
            return path.upper()

        @tool_call("fetch", effect="read")
        async def fetch(url):
            async with tool_call("inner"):
                return url

        async def boom():
            async with tool_call("boom"):
                raise TimeoutError("t")

        assert read_file("a") == "A"
        assert asyncio.run(fetch("u")) == "u"
        try:
            asyncio.run(boom())
        except TimeoutError as exc:
            assert str(exc) == "t"
        else:
            raise AssertionError("not re-raised")
        declare("read")
        assert not trace.get_current_span().is_recording()
        print("ok")
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ok\n"
    assert proc.stderr == ""


class _Hostile:
    """A span and tracer whose every method raises: the tool must still run and its exception pass through."""

    def __getattr__(self, name):
        raise RuntimeError(f"broken {name}")


class _HostileProvider(trace.TracerProvider):
    def get_tracer(self, *args, **kwargs):
        raise RuntimeError("broken provider")


class _HostileSpanTracer(trace.Tracer):
    def start_span(self, *args, **kwargs):
        return _HostileSpan()

    def start_as_current_span(self, *args, **kwargs):  # pragma: no cover - not used
        raise RuntimeError


class _HostileSpan(trace.NonRecordingSpan):
    def __init__(self):
        super().__init__(trace.INVALID_SPAN_CONTEXT)

    def is_recording(self):
        return True

    def set_attribute(self, key, value):
        raise RuntimeError("set_attribute")

    def set_status(self, *args, **kwargs):
        raise RuntimeError("set_status")

    def record_exception(self, *args, **kwargs):
        raise RuntimeError("record_exception")

    def end(self, *args, **kwargs):
        raise RuntimeError("end")


class _HostileSpanProvider(trace.TracerProvider):
    def get_tracer(self, *args, **kwargs):
        return _HostileSpanTracer()


@pytest.mark.parametrize("provider", [_HostileProvider(), _HostileSpanProvider()], ids=["provider", "span"])
def test_broken_tracing_never_breaks_the_tool(provider):
    with tool_call("t", effect="write", arguments={"a": 1}, tracer_provider=provider, record_result=True) as call:
        call.set_result(1)
    exc = ToolFailure("boom")
    with pytest.raises(ToolFailure) as raised:
        with tool_call("t", tracer_provider=provider):
            raise exc
    assert raised.value is exc

    @tool_call("t", tracer_provider=provider, record_result=True)
    async def t(x):
        declare("read")
        return x

    assert asyncio.run(t(3)) == 3
    assert trace.get_current_span() is trace.INVALID_SPAN


# --- The plans these spans give (normalizer + planner) ---


def test_plan_read_replays_timed_out_keyed_write_is_reviewed(otel):
    provider, exporter = otel
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("agent run"):
        with tool_call("crm.lookup", effect="read", arguments={"id": "c-9"}, call_id="call_1", tracer_provider=provider):
            pass
        with pytest.raises(ReadTimeout):
            with tool_call(
                "invoice.create",
                effect="write",
                idempotency_key="inv-17",
                arguments={"customer": "c-9", "amount_cents": 1200},
                call_id="call_2",
                tracer_provider=provider,
            ):
                raise ReadTimeout("no answer")
    plan = _plan(exporter)
    assert plan.replay_class is ReplayClass.REVIEW
    assert [d.step.call_id for d in plan.steps] == ["call_1", "call_2"]
    assert _decisions(plan) == {
        "crm.lookup": (Decision.REPLAY, ("declared_read",)),
        "invoice.create": (Decision.REVIEW, ("write_timeout",)),
    }
    write = plan.steps[1].step
    assert (write.effect.value, write.effect_source.value, write.status.value, write.idempotency_key) == ("write", "declared", "timeout", "inv-17")
    assert write.arguments_sha256 is not None and write.arguments_unavailable is None


def test_plan_only_reads_is_dynamic_whatever_their_status(otel):
    provider, exporter = otel
    with provider.get_tracer("agent").start_as_current_span("agent run"):
        with tool_call("search", effect="read", arguments={"q": "a"}, tracer_provider=provider):
            pass
        with pytest.raises(TimeoutError):
            with tool_call("fetch", effect="read", arguments={"url": "u"}, tracer_provider=provider):
                raise TimeoutError()
    plan = _plan(exporter)
    assert plan.replay_class is ReplayClass.DYNAMIC
    assert _decisions(plan) == {
        "search": (Decision.REPLAY, ("declared_read",)),
        "fetch": (Decision.REPLAY, ("declared_read",)),
    }
    assert {d.step.tool: d.step.status.value for d in plan.steps} == {"search": "ok", "fetch": "timeout"}


@pytest.mark.parametrize("record_result,replay_class,reasons", [(True, ReplayClass.INJECTED, ("write_committed",)), (False, ReplayClass.STATIC, ("write_committed", "result_not_recorded"))])
def test_plan_committed_write_is_skipped(otel, record_result, replay_class, reasons):
    provider, exporter = otel

    @tool_call("invoice.create", effect="write", tracer_provider=provider, record_result=record_result)
    def create_invoice(order, amount_cents):
        declare(idempotency_key=f"inv-{order}")
        return {"invoice": "in_1"}

    with provider.get_tracer("agent").start_as_current_span("agent run"):
        with tool_call("crm.lookup", effect="read", arguments={"id": "c-9"}, tracer_provider=provider):
            pass
        create_invoice(17, 1200)
    plan = _plan(exporter)
    assert plan.replay_class is replay_class
    assert _decisions(plan) == {
        "crm.lookup": (Decision.REPLAY, ("declared_read",)),
        "invoice.create": (Decision.SKIP, reasons),
    }
    write = plan.steps[1].step
    assert write.idempotency_key == "inv-17"
    assert write.result_recorded is record_result


@pytest.mark.parametrize(
    "exc,reason",
    [(asyncio.CancelledError(), "write_status_unknown"), (ToolFailure("declined"), "write_error"), (TimeoutError(), "write_timeout")],
    ids=["cancelled", "error", "timeout"],
)
def test_plan_uncertain_write_is_reviewed(otel, exc, reason):
    provider, exporter = otel
    with provider.get_tracer("agent").start_as_current_span("agent run"):
        with pytest.raises(type(exc)):
            with tool_call("payment.charge", effect="write", idempotency_key="ch-1", arguments={"cents": 500}, tracer_provider=provider):
                raise exc
    plan = _plan(exporter)
    assert plan.replay_class is ReplayClass.REVIEW
    assert _decisions(plan) == {"payment.charge": (Decision.REVIEW, (reason,))}


def test_plan_undeclared_effect_is_reviewed(otel):
    provider, exporter = otel
    with tool_call("mystery", arguments={}, tracer_provider=provider):
        pass
    plan = _plan(exporter)
    assert plan.replay_class is ReplayClass.REVIEW
    (decision,) = plan.steps
    assert decision.decision is Decision.REVIEW
    assert decision.reasons[0] == "effect_unknown"


def test_plan_same_key_different_arguments_is_a_conflict(otel):
    provider, exporter = otel
    with provider.get_tracer("agent").start_as_current_span("agent run"):
        for call_id, cents in (("call_1", 500), ("call_2", 700)):
            with tool_call("payment.charge", effect="write", idempotency_key="ch-1", arguments={"cents": cents}, call_id=call_id, tracer_provider=provider, record_result=True) as call:
                call.set_result({"charged": cents})
    plan = _plan(exporter)
    assert plan.replay_class is ReplayClass.REVIEW
    assert [(d.step.call_id, d.decision, d.reasons[0], d.related_call_ids) for d in plan.steps] == [
        ("call_1", Decision.CONFLICT, "idempotency_key_conflict", ("call_2",)),
        ("call_2", Decision.CONFLICT, "idempotency_key_conflict", ("call_1",)),
    ]


def test_plan_unencodable_arguments_are_unavailable_not_malformed(otel):
    provider, exporter = otel
    with tool_call("search", effect="read", arguments={"x": math.nan}, tracer_provider=provider):
        pass
    plan = _plan(exporter)
    (decision,) = plan.steps
    assert decision.decision is Decision.REPLAY
    assert decision.step.malformed == ()
    assert decision.step.arguments_unavailable == "arguments_not_recorded"
