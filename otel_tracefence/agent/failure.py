"""What a tool's exception means for its span: ``tracefence.status`` (``timeout``, ``cancelled`` or ``error``),
told by the exception's class names and gRPC status code, without importing the clients that raise them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import re


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



def _qualified_name(cls: type) -> str:
    """``module.QualName`` of a class, bare for builtins: ``TimeoutError``, ``httpx.ReadTimeout``."""
    module = getattr(cls, "__module__", None)
    name = str(getattr(cls, "__qualname__", None) or getattr(cls, "__name__", "Exception"))
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

