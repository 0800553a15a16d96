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

import functools
import inspect
import logging
from typing import Any, Callable, Literal, Mapping, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode, TracerProvider

# The attribute names are re-exported: importers of this module's constants keep working.
from otel_tracefence.agent.attributes import (  # noqa: F401
    EFFECTS,
    ERROR_TYPE,
    EXECUTE_TOOL,
    GEN_AI_OPERATION_NAME,
    GEN_AI_TOOL_CALL_ARGUMENTS,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_CALL_RESULT,
    GEN_AI_TOOL_NAME,
    TRACEFENCE_EFFECT,
    TRACEFENCE_IDEMPOTENCY_KEY,
    TRACEFENCE_RESULT_STABLE,
    TRACEFENCE_STATUS,
    _check_call_id,
    _check_effect,
    _check_key,
    _check_stable,
    _to_json,
)
from otel_tracefence.agent.declare import declare
from otel_tracefence.agent.failure import CANCEL_CLASS_NAMES, TIMEOUT_CLASS_NAMES, _qualified_name, failure_status  # noqa: F401

__all__ = ["ToolCall", "ToolCallSpan", "declare", "failure_status", "tool_call"]

_log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


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

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> Literal[False]:
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
