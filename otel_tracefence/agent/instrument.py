"""Instrumentation helpers: make or label OpenTelemetry tool spans that tracefence can plan.

Two helpers, for two situations:

* :func:`tool_call` — your code runs the tool and nobody else traces it. It makes
  one ``execute_tool`` span per call, following the OpenTelemetry GenAI semantic
  conventions ("Execute tool span": span name ``execute_tool {gen_ai.tool.name}``,
  kind ``INTERNAL``, ``gen_ai.operation.name`` = ``execute_tool``, status left
  unset on success, ``error.type`` on failure), plus the producer labels of
  DESIGN.md ("Normalized step"): ``tracefence.effect``, ``tracefence.status`` and
  ``tracefence.idempotency_key``, and ``tracefence.result_stable`` (issue 11). Use it as a context manager, an async context
  manager or a decorator on sync and async functions.
* :func:`declare` — a framework already makes the tool span (pydantic-ai,
  OpenInference-instrumented frameworks); call it inside the tool body to label
  that span with its effect, idempotency key and result stability.

Only the ``opentelemetry-api`` is used: without an SDK (no tracer provider
configured) every span is a no-op and both helpers cost next to nothing.
Mistakes in the developer's own arguments (an effect that is not ``read`` or
``write``, an empty idempotency key) raise :class:`ValueError` where the helper is
called; the span machinery itself never raises, and an exception from the tool
body always propagates unchanged.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import json
import logging
import re
import threading
from typing import Any, Callable, Mapping, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode, TracerProvider

try:  # opentelemetry-semantic-conventions, when installed (incubating GenAI attributes).
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _gen_ai
    from opentelemetry.semconv._incubating.attributes import error_attributes as _error

    GEN_AI_OPERATION_NAME: str = _gen_ai.GEN_AI_OPERATION_NAME
    GEN_AI_TOOL_NAME: str = _gen_ai.GEN_AI_TOOL_NAME
    GEN_AI_TOOL_CALL_ID: str = _gen_ai.GEN_AI_TOOL_CALL_ID
    GEN_AI_TOOL_CALL_ARGUMENTS: str = _gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS
    GEN_AI_TOOL_CALL_RESULT: str = _gen_ai.GEN_AI_TOOL_CALL_RESULT
    EXECUTE_TOOL: str = _gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value
    ERROR_TYPE: str = _error.ERROR_TYPE
except (ImportError, AttributeError):  # pragma: no cover - older or absent semantic-conventions package
    GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
    GEN_AI_TOOL_NAME = "gen_ai.tool.name"
    GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
    GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
    GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
    EXECUTE_TOOL = "execute_tool"
    ERROR_TYPE = "error.type"

# The producer's own labels (DESIGN.md, "Normalized step"); the same strings as
# otel_tracefence.normalize.conventions.TRACEFENCE_*, spelled here so that an agent
# importing this module does not load the normalizer (pydantic, protobuf).
TRACEFENCE_EFFECT = "tracefence.effect"
TRACEFENCE_STATUS = "tracefence.status"
TRACEFENCE_IDEMPOTENCY_KEY = "tracefence.idempotency_key"
TRACEFENCE_RESULT_STABLE = "tracefence.result_stable"

__all__ = ["ToolCall", "ToolCallSpan", "declare", "failure_status", "tool_call"]

_log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

EFFECTS = ("read", "write")
"""The effects a producer may declare; ``None`` leaves the effect to the operator's rules."""

# Exception classes that mean "timed out", by name anywhere in the exception's MRO, so
# that HTTP and RPC clients are recognised without importing them: httpx
# (TimeoutException: ReadTimeout, ConnectTimeout, WriteTimeout, PoolTimeout), requests
# (requests.exceptions.Timeout: ReadTimeout, ConnectTimeout), urllib3 (TimeoutError:
# ReadTimeoutError, ConnectTimeoutError), aiohttp (ServerTimeoutError,
# ConnectionTimeoutError, SocketTimeoutError), google.api_core (DeadlineExceeded).
TIMEOUT_CLASS_NAMES = frozenset(
    {
        "TimeoutError",
        "TimeoutException",
        "Timeout",
        "ReadTimeout",
        "ConnectTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "ReadTimeoutError",
        "ConnectTimeoutError",
        "ServerTimeoutError",
        "ConnectionTimeoutError",
        "SocketTimeoutError",
        "DeadlineExceeded",
    }
)
# Cancellation by name (trio.Cancelled; asyncio and concurrent.futures are checked by type too).
CANCEL_CLASS_NAMES = frozenset({"CancelledError", "Cancelled"})
# gRPC errors carry their status in ``code()``; only classes of this name are asked.
_GRPC_ERROR_CLASS_NAMES = frozenset({"RpcError", "AioRpcError"})
_GRPC_TIMEOUT_CODES = frozenset({"DEADLINE_EXCEEDED"})
_GRPC_CANCEL_CODES = frozenset({"CANCELLED"})


def _check_effect(effect: Any) -> str | None:
    if effect is not None and (not isinstance(effect, str) or effect not in EFFECTS):
        raise ValueError(f"effect must be 'read', 'write' or None, not {effect!r}")
    return effect


def _check_key(key: Any) -> str | None:
    if key is not None and (not isinstance(key, str) or not key):
        raise ValueError(f"idempotency_key must be a non-empty string or None, not {key!r}")
    return key


def _check_stable(result_stable: Any) -> bool | None:
    if result_stable is not None and not isinstance(result_stable, bool):
        raise ValueError(f"result_stable must be True, False or None, not {result_stable!r}")
    return result_stable


def _check_call_id(call_id: Any) -> str | None:
    if call_id is None:
        return None
    if isinstance(call_id, bool) or not isinstance(call_id, (str, int)) or not str(call_id):
        raise ValueError(f"call_id must be a non-empty string (or an integer) or None, not {call_id!r}")
    return str(call_id)


def _to_json(value: Any) -> str | None:
    """``value`` as JSON text, objects that JSON lacks as their ``str()``; ``None`` if it cannot be encoded.

    Never raises. NaN and infinities are refused (``allow_nan=False``): they are not
    JSON, and the normalizer would read the text as malformed. The text is ASCII.
    """
    try:
        return json.dumps(value, default=str, allow_nan=False)
    except Exception:  # noqa: BLE001 - circular data, bad keys, a failing __str__: leave it out
        return None


def _qualified_name(cls: type) -> str:
    """``module.QualName`` of a class, bare for builtins: ``TimeoutError``, ``httpx.ReadTimeout``."""
    module = getattr(cls, "__module__", None)
    name = getattr(cls, "__qualname__", None) or getattr(cls, "__name__", "Exception")
    return name if module in (None, "builtins", "__main__") else f"{module}.{name}"


def _grpc_code_name(exc: BaseException) -> str | None:
    if not any(getattr(c, "__name__", "") in _GRPC_ERROR_CLASS_NAMES for c in type(exc).__mro__):
        return None
    code = getattr(exc, "code", None)
    if not callable(code):
        return None
    try:
        value = code()
    except Exception:  # noqa: BLE001 - a half-built RpcError: no code to read
        return None
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else None


# A message that says the call timed out, in the past tense: "not a timeout" says nothing of the call.
_TIMEOUT_MESSAGE = re.compile(r"\btimed[ _-]?out\b", re.IGNORECASE)


def failure_status(exc: BaseException) -> str:
    """The ``tracefence.status`` of a call that raised ``exc``: ``timeout``, ``unknown`` or ``error``.

    * ``timeout``: :class:`TimeoutError` (so also ``asyncio.TimeoutError`` and
      ``socket.timeout``), any exception with a class named in
      :data:`TIMEOUT_CLASS_NAMES` in its MRO (httpx, requests, urllib3, aiohttp,
      google.api_core timeouts), a gRPC ``RpcError`` whose ``code()`` is
      ``DEADLINE_EXCEEDED``.
    * ``unknown``: cancellation (``asyncio.CancelledError``,
      ``concurrent.futures.CancelledError``, a class named ``CancelledError`` or
      ``Cancelled``, gRPC ``CANCELLED``) and any other ``BaseException`` that is
      not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``): the call was
      stopped from outside at an arbitrary point, so whether its effect happened
      is unknown.
    * ``timeout`` also for any other exception whose message says it ``timed out``:
      the MCP SDK raises ``MCPError("Request 'tools/call' timed out")``.
    * ``error``: any other exception.

    Never raises.
    """
    try:
        if isinstance(exc, TimeoutError):
            return "timeout"
        names = {getattr(c, "__name__", "") for c in type(exc).__mro__}
        if names & TIMEOUT_CLASS_NAMES:
            return "timeout"
        if isinstance(exc, (asyncio.CancelledError, concurrent.futures.CancelledError)) or names & CANCEL_CLASS_NAMES:
            return "unknown"
        grpc_code = _grpc_code_name(exc)
        if grpc_code in _GRPC_TIMEOUT_CODES:
            return "timeout"
        if grpc_code in _GRPC_CANCEL_CODES:
            return "unknown"
        if not isinstance(exc, Exception):
            return "unknown"
        if _TIMEOUT_MESSAGE.search(str(exc)[:1000]):  # the MCP SDK's McpError "Request 'tools/call' timed out", ...
            return "timeout"
    except Exception:  # noqa: BLE001 - a hostile exception class: call it an error
        pass
    return "error"


def declare(
    effect: str | None = None,
    *,
    idempotency_key: str | None = None,
    result_stable: bool | None = None,
    span: Span | None = None,
    tool: str | None = None,
) -> None:
    """Label a tool span with the producer's ``tracefence.effect``, ``tracefence.idempotency_key`` and
    ``tracefence.result_stable``.

    For a tool body that runs under a span someone else made (a framework's
    ``execute_tool`` / ``running tool`` span, an OpenInference ``TOOL`` span, or a
    :func:`tool_call` decorator's span): call it inside the body, where that span is
    current, or pass ``span``. ``effect`` is ``"read"``, ``"write"`` or ``None``
    (leave it to the operator's rules); ``idempotency_key`` is the key the
    destination deduplicates on, a non-empty string or ``None``. ``None`` values
    are not written. Never use the model's tool-call id as the key: models mint a
    new one each turn. ``result_stable=False`` says the tool's results differ between
    executions (a page id, a transaction id, a timestamp the agent may branch on; seed
    000): a read so labelled is never re-executed by a replay, its recorded result is
    injected (decision ``skip``, reason ``unstable_result``). ``True`` says they are
    stable, ``None`` leaves it to the operator's rules (default: stable). ``tool``
    names the tool in the warning below (default: the calling function's name).

    Raises :class:`ValueError` for any other effect, key or ``result_stable``. A
    ``span`` given, or a recording current span, is labelled, unless the current
    span's attributes already mark it as another kind than a tool span (an agent,
    chain or model span: labelling it would make a tool step of it). When tracing
    is on (an SDK tracer provider is set) and there is no current span (as inside
    tools of OpenInference's LangChain instrumentation), or it is of another kind,
    nothing is written: a warning is logged once per tool name with the remedy
    (``tool_rules`` in the configuration), and every such call is counted in the
    ``tracefence.declare.unrecorded`` metric. Without an SDK, or for a trace that
    was not sampled, it does nothing.
    """
    effect = _check_effect(effect)
    idempotency_key = _check_key(idempotency_key)
    result_stable = _check_stable(result_stable)
    target = span if span is not None else trace.get_current_span()
    try:
        if not target.is_recording():
            if span is None and not target.get_span_context().is_valid and _tracing_on():
                _unrecorded(tool or _caller_name(), effect, idempotency_key, "there is no current span")
            return
        if span is None and _is_tool_span(target) is False:
            _unrecorded(tool or _caller_name(), effect, idempotency_key, f"the current span {_span_name(target)!r} is not a tool span")
            return
        if effect is not None:
            target.set_attribute(TRACEFENCE_EFFECT, effect)
        if idempotency_key is not None:
            target.set_attribute(TRACEFENCE_IDEMPOTENCY_KEY, idempotency_key)
        if result_stable is not None:
            target.set_attribute(TRACEFENCE_RESULT_STABLE, result_stable)
    except Exception:  # noqa: BLE001 - a broken span implementation must not break the tool
        _log.debug("tracefence: could not label span", exc_info=True)


# The attributes that give a span's kind in the conventions the normalizer reads, with the values
# that make it a tool step (spelled here so that an agent importing this module does not load the
# normalizer). Many instrumentations set them only when the span ends, so a span that carries none
# yet is labelled: only a span already marked as another kind (an agent, chain or model span) is not.
_KIND_KEYS_TOOL_VALUES = {
    GEN_AI_OPERATION_NAME: ("execute_tool",),
    "openinference.span.kind": ("TOOL",),
    "traceloop.span.kind": ("tool",),
    "langfuse.observation.type": ("tool",),
    "langsmith.span.kind": ("tool", "TOOL"),
    "mlflow.spanType": ("TOOL",),
}


def _is_tool_span(span: Any) -> bool | None:
    """``False`` when a recording span's attributes, as they are now, mark it as another kind than a
    tool span (``openinference.span.kind`` ``CHAIN``, ``gen_ai.operation.name`` ``chat``, ...) and it
    carries no ``tracefence.*`` label; ``True`` when they mark a tool span; ``None`` when they say
    nothing or cannot be read (not an SDK span), and the span is labelled rather than guessed about."""
    try:
        attributes = getattr(span, "attributes", None)
        if not isinstance(attributes, Mapping):
            return None
        if any(isinstance(k, str) and k.startswith("tracefence.") for k in attributes):
            return True
        kinds = [(key, attributes[key]) for key in _KIND_KEYS_TOOL_VALUES if key in attributes]
        if not kinds:
            return None
        return any(value in _KIND_KEYS_TOOL_VALUES[key] for key, value in kinds)
    except Exception:  # noqa: BLE001
        return None


def _span_name(span: Any) -> str:
    try:
        name = getattr(span, "name", "")
        return name if isinstance(name, str) else ""
    except Exception:  # noqa: BLE001
        return ""


def _tracing_on() -> bool:
    """True when a tracer provider other than the API's default (proxy or no-op) is set globally."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def _caller_name() -> str:
    """The name of the function that called :func:`declare` (the tool body)."""
    import sys

    try:
        return sys._getframe(2).f_code.co_name
    except (AttributeError, ValueError):  # pragma: no cover - interpreters without frames
        return "<unknown>"


UNRECORDED_METRIC = "tracefence.declare.unrecorded"
_warned_tools: set[str] = set()
_warned_lock = threading.Lock()
_unrecorded_counter: Any = None


def _unrecorded(tool: str, effect: str | None, key: str | None, why: str) -> None:
    """Count a declaration no span records, and warn once per tool name with the remedy. Never raises."""
    global _unrecorded_counter
    try:
        if _unrecorded_counter is None:
            from opentelemetry import metrics

            from otel_tracefence.core.telemetry import instrument

            _unrecorded_counter = instrument(metrics.get_meter("otel_tracefence"), UNRECORDED_METRIC)
        _unrecorded_counter.add(1, {"tracefence.component": "instrument", GEN_AI_TOOL_NAME: tool})
        with _warned_lock:
            if tool in _warned_tools:
                return
            _warned_tools.add(tool)
        rule = [f"match: {json.dumps(tool)}"]
        if effect is not None:
            rule.append(f"effect: {effect}")
        if key is not None:
            rule.append("idempotency_key_argument: <argument name>")
        _log.warning(
            "tracefence: declare() in tool %r recorded nothing: %s to label, so its calls plan without this label "
            "(effect_unknown unless a rule says otherwise). Label the tool in the configuration instead: "
            "tool_rules: [{%s}]. See docs/processor.md, \"Labelling tools\", for your framework.",
            tool,
            why,
            ", ".join(rule),
        )
    except Exception:  # noqa: BLE001 - the tool must run whatever happens here
        pass


class ToolCallSpan:
    """One running tool call: what ``with tool_call(...) as call`` gives.

    ``span`` is the OpenTelemetry span (a non-recording one without an SDK).
    """

    __slots__ = ("span", "_record_result", "_token", "_finished")

    def __init__(self, span: Span, record_result: bool, token: Any) -> None:
        self.span = span
        self._record_result = record_result
        self._token = token
        self._finished = False

    def set_result(self, value: Any) -> None:
        """Record the call's result as ``gen_ai.tool.call.result`` (JSON text), if the call records results.

        Written only when the call was made with ``record_result=True`` (results
        are opt-in in the GenAI conventions: they may carry secrets). Values JSON
        lacks are written as their ``str()``; a value that cannot be encoded at
        all is left out. Never raises. A recorded result of a write that
        committed ``ok`` lets a replay inject it (replay class ``injected``
        rather than ``static``).
        """
        if not self._record_result:
            return
        try:
            if not self.span.is_recording():
                return
            text = _to_json(value)
            if text is not None:
                self.span.set_attribute(GEN_AI_TOOL_CALL_RESULT, text)
        except Exception:  # noqa: BLE001
            _log.debug("tracefence: could not record result", exc_info=True)

    def _finish(self, exc: BaseException | None) -> None:
        """Status, error attributes, end, detach. Never raises."""
        if self._finished:
            return
        self._finished = True
        span = self.span
        try:
            if exc is None:
                span.set_attribute(TRACEFENCE_STATUS, "ok")
            else:
                span.set_attribute(TRACEFENCE_STATUS, failure_status(exc))
                span.set_attribute(ERROR_TYPE, _qualified_name(type(exc)))
                span.record_exception(exc)
                try:
                    description = f"{type(exc).__name__}: {exc}"
                except Exception:  # noqa: BLE001 - a failing __str__
                    description = type(exc).__name__
                span.set_status(Status(StatusCode.ERROR, description))
        except Exception:  # noqa: BLE001
            _log.debug("tracefence: could not record the tool call's outcome", exc_info=True)
        try:
            span.end()
        except Exception:  # noqa: BLE001
            _log.debug("tracefence: could not end span", exc_info=True)
        if self._token is not None:
            try:
                otel_context.detach(self._token)
            except Exception:  # noqa: BLE001
                _log.debug("tracefence: could not detach context", exc_info=True)
            self._token = None


class ToolCall:
    """A tool call to trace; made by :func:`tool_call`, see there.

    Each ``with`` / ``async with`` entry and each call of a decorated function
    makes its own span. Entries of one object must nest (``with`` blocks); for
    concurrent calls make one object per call, or use the decorator.
    """

    def __init__(
        self,
        name: str,
        *,
        effect: str | None,
        idempotency_key: str | None,
        arguments: Any,
        call_id: str | None,
        tracer_provider: TracerProvider | None,
        record_arguments: bool,
        record_result: bool,
        result_stable: bool | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"tool name must be a non-empty string, not {name!r}")
        self.name = name
        self.effect = _check_effect(effect)
        self.idempotency_key = _check_key(idempotency_key)
        self.call_id = _check_call_id(call_id)
        self.result_stable = _check_stable(result_stable)
        self.arguments = arguments
        self.tracer_provider = tracer_provider
        self.record_arguments = bool(record_arguments)
        self.record_result = bool(record_result)
        self._active: list[ToolCallSpan] = []

    # -- span machinery -----------------------------------------------------------------

    def _start(self, arguments: Any) -> ToolCallSpan:
        """Start the span and make it current. Never raises: a broken SDK gives a no-op span."""
        attributes: dict[str, Any] = {GEN_AI_OPERATION_NAME: EXECUTE_TOOL, GEN_AI_TOOL_NAME: self.name}
        if self.call_id is not None:
            attributes[GEN_AI_TOOL_CALL_ID] = self.call_id
        if self.effect is not None:
            attributes[TRACEFENCE_EFFECT] = self.effect
        if self.idempotency_key is not None:
            attributes[TRACEFENCE_IDEMPOTENCY_KEY] = self.idempotency_key
        if self.result_stable is not None:
            attributes[TRACEFENCE_RESULT_STABLE] = self.result_stable
        try:
            tracer = trace.get_tracer(__name__, tracer_provider=self.tracer_provider)
            span = tracer.start_span(f"{EXECUTE_TOOL} {self.name}", kind=SpanKind.INTERNAL, attributes=attributes)
        except Exception:  # noqa: BLE001
            _log.debug("tracefence: could not start span", exc_info=True)
            span = INVALID_SPAN
        try:
            if self.record_arguments and arguments is not None and span.is_recording():
                text = _to_json(arguments)
                if text is not None:
                    span.set_attribute(GEN_AI_TOOL_CALL_ARGUMENTS, text)
        except Exception:  # noqa: BLE001
            _log.debug("tracefence: could not record arguments", exc_info=True)
        try:
            token = otel_context.attach(trace.set_span_in_context(span))
        except Exception:  # noqa: BLE001
            _log.debug("tracefence: could not make span current", exc_info=True)
            token = None
        return ToolCallSpan(span, self.record_result, token)

    # -- context managers ---------------------------------------------------------------

    def __enter__(self) -> ToolCallSpan:
        call = self._start(self.arguments)
        self._active.append(call)
        return call

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if self._active:
            self._active.pop()._finish(exc)
        return False  # never swallow: the exception propagates unchanged

    async def __aenter__(self) -> ToolCallSpan:
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        return self.__exit__(exc_type, exc, tb)

    # -- decorator ----------------------------------------------------------------------

    def __call__(self, func: F) -> F:
        if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
            raise TypeError(f"tool_call cannot decorate the generator function {func!r}: its span would end before it runs")
        fixed = [n for n, v in (("arguments", self.arguments), ("call_id", self.call_id), ("idempotency_key", self.idempotency_key)) if v is not None]
        if fixed:
            raise ValueError(
                f"tool_call as a decorator cannot fix {', '.join(fixed)}: they belong to one call, and every call of "
                f"the function would share them; arguments are bound from each call, and declare(idempotency_key=...) "
                f"inside the function labels its span"
            )
        bind = _arguments_binder(func) if self.record_arguments else None

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                call = self._start(bind(args, kwargs) if bind is not None else None)
                try:
                    result = await func(*args, **kwargs)
                except BaseException as exc:
                    call._finish(exc)
                    raise
                call.set_result(result)
                call._finish(None)
                return result

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            call = self._start(bind(args, kwargs) if bind is not None else None)
            try:
                result = func(*args, **kwargs)
            except BaseException as exc:
                call._finish(exc)
                raise
            call.set_result(result)
            call._finish(None)
            return result

        return wrapper  # type: ignore[return-value]


def _arguments_binder(func: Callable[..., Any]) -> Callable[[tuple, dict], dict[str, Any] | None] | None:
    """A function giving one call's arguments as ``{parameter: value}``, or ``None`` if there is no signature.

    Only the arguments actually passed are kept (no defaults applied: the model's
    request did not contain them). ``**kwargs`` are merged into the object; a
    leading ``self`` / ``cls`` is left out (its ``str()`` would differ between
    calls and make equal calls look different). Never raises at call time: a
    call that does not bind gives ``None`` (arguments not recorded), and the
    function itself then raises its ``TypeError``.
    """
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    parameters = signature.parameters
    names = list(parameters)
    skip = names[0] if names and names[0] in ("self", "cls") else None

    def bind(args: tuple, kwargs: dict) -> dict[str, Any] | None:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return None
        out: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            if name == skip:
                continue
            if parameters[name].kind is inspect.Parameter.VAR_KEYWORD and isinstance(value, Mapping):
                out.update(value)
            else:
                out[name] = value
        return out

    return bind


def tool_call(
    name: str,
    *,
    effect: str | None = None,
    idempotency_key: str | None = None,
    arguments: Any = None,
    call_id: str | None = None,
    tracer_provider: TracerProvider | None = None,
    record_arguments: bool = True,
    record_result: bool = False,
    result_stable: bool | None = None,
) -> ToolCall:
    """Trace one tool call as an OpenTelemetry GenAI ``execute_tool`` span.

    Context manager (sync or async) or decorator (sync or ``async def``)::

        with tool_call("invoice.create", effect="write", idempotency_key="inv-17",
                       arguments={"customer": "c-9", "amount_cents": 1200}, record_result=True) as call:
            call.set_result(create_invoice(...))

        @tool_call("read_file", effect="read")
        async def read_file(path: str) -> str: ...

    The span (OpenTelemetry GenAI semantic conventions, "Execute tool span"):

    * name ``execute_tool {name}``, kind ``INTERNAL``, a child of the current span;
    * ``gen_ai.operation.name`` = ``execute_tool``, ``gen_ai.tool.name`` = ``name``,
      ``gen_ai.tool.call.id`` = ``call_id`` when given (the id the model minted);
    * ``gen_ai.tool.call.arguments``: ``arguments`` as JSON text, when
      ``record_arguments`` and there are arguments. As a decorator, the arguments
      are those of each call, bound to the function's parameters
      (``inspect.signature(func).bind``; defaults not applied, ``**kwargs``
      merged, a leading ``self``/``cls`` left out). Values JSON lacks are
      written as their ``str()``; arguments that cannot be encoded (circular,
      NaN, non-string keys of other types) are left out, and the plan then says
      "arguments unavailable";
    * ``gen_ai.tool.call.result``: JSON text of the result, only when
      ``record_result`` (``call.set_result(value)`` in a ``with`` block, the
      return value of a decorated function);
    * ``tracefence.effect`` (``read`` or ``write``) and
      ``tracefence.idempotency_key`` when given (DESIGN.md, "Normalized step");
    * ``tracefence.result_stable`` (a boolean) when given: ``False`` for a tool whose
      results differ between executions (handles such as page ids, seed 000), so a
      read is injected, never re-executed, by a replay (``unstable_result``). Pair it
      with ``record_result=True``: an unstable read without its result makes the
      trace ``static``.

    On exit, ``tracefence.status`` says how the call ended: ``ok`` when nothing
    was raised (span status left ``UNSET``, as the GenAI conventions ask);
    otherwise span status ``ERROR``, the exception recorded as an ``exception``
    event, ``error.type`` = the exception's qualified class name (e.g.
    ``httpx.ReadTimeout``, bare for builtins), and ``tracefence.status`` =
    ``timeout``, ``unknown`` (cancelled or interrupted) or ``error``, see
    :func:`failure_status`. The exception is always re-raised unchanged, and
    nothing in the span machinery raises.

    ``tracer_provider`` defaults to the global one (``opentelemetry.trace``);
    without an SDK the span is a no-op.

    Raises :class:`ValueError` here, in the developer's code, for an empty
    ``name``, an ``effect`` other than ``"read"``, ``"write"`` or ``None``, an
    empty or non-string ``idempotency_key`` or ``call_id``, a ``result_stable``
    that is not a boolean or ``None``; and, used as a
    decorator, for fixed ``arguments``, ``call_id`` or ``idempotency_key``
    (they belong to one call: label a decorated call's span with
    :func:`declare` inside the function). :class:`TypeError` when decorating a
    generator function.
    """
    return ToolCall(
        name,
        effect=effect,
        idempotency_key=idempotency_key,
        arguments=arguments,
        call_id=call_id,
        tracer_provider=tracer_provider,
        record_arguments=record_arguments,
        record_result=record_result,
        result_stable=result_stable,
    )
