"""The logs of ``tracefence serve``: every line on standard error through one handler, as JSON or text.

* One handler, on the root logger (:func:`configure`); any other handler is removed, so no line comes twice.
* Both formats keep every field: JSON, one object per line (``time``, ``level``, ``logger``, ``message``, the
  record's extra fields, ``exception``); text, ``time level logger: message key=value ...`` (a value with a space,
  a quote or an ``=``, or not a string or number, is written as JSON).
* The trace context where there is one: a line logged while a span is current carries ``trace_id`` and ``span_id``.
* Uncaught exceptions (main thread or any other) are logged by the handler, at ``CRITICAL``, with their traceback.
* The gRPC C-core writes its own lines to file descriptor 2, not through Python: :func:`capture_native_stderr`
  reads them there and logs each through the handler (logger ``grpc``, its severity kept), with
  ``GRPC_VERBOSITY`` following the level when it is not set (docs/DECISIONS.md 683).
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import sys
import threading
import time
from typing import Any, TextIO

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
_BARE = re.compile(r"[^\s\"'=]+")


def _time(record: logging.LogRecord) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """The record's own fields (``extra=``) and its trace context, if a span is current where it was logged."""
    out = {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}
    context = getattr(record, "_trace_context", None)
    if context is not None:
        out.setdefault("trace_id", context[0])
        out.setdefault("span_id", context[1])
    return out


class _TraceContext(logging.Filter):
    """Notes the current span's ids on the record (read where it was logged, before any other thread formats it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from opentelemetry import trace

        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            record._trace_context = (format(context.trace_id, "032x"), format(context.span_id, "016x"))
        return True


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", ...extra fields, "exception"}`` per record."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": _time(record), "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        entry.update(fields(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def _text_value(value: Any) -> str:
    if isinstance(value, str) and _BARE.fullmatch(value):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return json.dumps(value, default=str)


class TextFormatter(logging.Formatter):
    """``time level logger: message key=value ...``, then the traceback on the lines below."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_time(record)} {record.levelname} {record.name}: {record.getMessage()}"
        extra = fields(record)
        if extra:
            line += " " + " ".join(f"{key}={_text_value(value)}" for key, value in extra.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure(level: str = "INFO", fmt: str = "json", stream: TextIO | None = None) -> logging.Handler:
    """Send every log record at ``level`` and above to ``stream`` (standard error) through one handler, as JSON lines
    (``fmt="json"``) or text; uncaught exceptions go through it too. Returns the handler."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(_TraceContext())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in list(logging.Logger.manager.loggerDict):  # a library's own handler would print its lines twice
        logger = logging.getLogger(name)
        if logger.handlers:
            logger.handlers[:] = []
            logger.propagate = True
    fatal = logging.getLogger("otel_tracefence")

    def uncaught(kind, value, tb) -> None:
        if issubclass(kind, KeyboardInterrupt):
            return sys.__excepthook__(kind, value, tb)
        fatal.critical("uncaught exception: %s: %s", kind.__name__, value, exc_info=(kind, value, tb))

    def uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        fatal.critical(
            "uncaught exception in thread %s: %s: %s", getattr(args.thread, "name", "?"), args.exc_type.__name__, args.exc_value,
            exc_info=(args.exc_type, args.exc_value, args.exc_traceback),  # type: ignore[arg-type]
        )  # fmt: skip

    sys.excepthook = uncaught
    threading.excepthook = uncaught_in_thread
    return handler


# GRPC_VERBOSITY (gRPC's environment variable) for each level: C-core lines below it are not even written.
GRPC_VERBOSITY = {"DEBUG": "INFO"}  # else ERROR, gRPC's own default: its INFO lines are diagnostics ("not suitable for production")
# An absl log line of the C-core: "E1203 11:43:19.123456   12345 chttp2_transport.cc:123] message"; the older
# gpr form "E1203 11:43:19.123456 12345 file.cc:123] message" is the same shape.
_NATIVE_LINE = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+ ([^\]\s]+)\] ?(.*)$")
_NATIVE_LEVELS = {"I": logging.INFO, "W": logging.WARNING, "E": logging.ERROR, "F": logging.CRITICAL}


def grpc_verbosity(level: str, environ: dict[str, str] | Any = os.environ) -> None:
    """Set ``GRPC_VERBOSITY`` for ``level`` unless it is set already (the operator's own value is kept). gRPC reads it
    once, when its core starts: call this before the first channel or server is made."""
    environ.setdefault("GRPC_VERBOSITY", GRPC_VERBOSITY.get(level.upper(), "ERROR"))


class NativeStderr:
    """File descriptor 2 replaced by a pipe whose lines are logged (logger ``grpc``); Python's own ``sys.stderr``
    keeps writing to the real standard error. :meth:`close` puts descriptor 2 back and logs what is left."""

    def __init__(self) -> None:
        sys.stderr.flush()
        self._saved = os.dup(2)
        read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        self.stream = io.TextIOWrapper(io.FileIO(os.dup(self._saved), "w"), encoding="utf-8", errors="replace", line_buffering=True)
        self._log = logging.getLogger("grpc")
        self._reader = threading.Thread(target=self._read, args=(read,), name="tracefence-native-stderr", daemon=True)
        self._reader.start()

    def _read(self, fd: int) -> None:
        with io.open(fd, "rb", closefd=True) as source:
            for raw in source:
                self.line(raw.decode("utf-8", "replace").rstrip("\r\n"))

    def line(self, text: str) -> None:
        """Log one line the C-core (or any native code) wrote to descriptor 2."""
        if not text.strip():
            return
        found = _NATIVE_LINE.match(text)
        if found:
            severity, source, message = found.groups()
            self._log.log(_NATIVE_LEVELS[severity], message, extra={"source": source})
        else:
            self._log.warning(text, extra={"source": "stderr"})

    def close(self, timeout_s: float = 1.0) -> None:
        """Descriptor 2 back to standard error; wait up to ``timeout_s`` for the lines still in the pipe."""
        if self in _capture:
            _capture.remove(self)
        os.dup2(self._saved, 2)  # the pipe's last writer closed: the reader reaches its end
        self._reader.join(timeout_s)


_capture: list[NativeStderr] = []  # the capture in force in this process, if any


def real_stderr() -> int | None:
    """The descriptor of the real standard error while descriptor 2 is captured (for a child process), else None."""
    return _capture[0]._saved if _capture else None


def release() -> None:
    """End this process's capture of descriptor 2, if any (before ``os._exit``), its last lines logged."""
    for native in list(_capture):
        native.close()


def capture_native_stderr(handler: logging.Handler, level: str) -> NativeStderr | None:
    """Route what native code writes to descriptor 2 through ``handler`` (which then writes to the real standard
    error), with ``GRPC_VERBOSITY`` set for ``level``; None where descriptor 2 cannot be replaced."""
    grpc_verbosity(level)
    try:
        native = NativeStderr()
    except OSError:
        return None
    if isinstance(handler, logging.StreamHandler):
        handler.setStream(native.stream)
    sys.stderr = native.stream
    _capture[:] = [native]
    return native
