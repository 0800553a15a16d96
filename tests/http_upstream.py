"""A recording OTLP/HTTP upstream for tests: a real HTTP server on 127.0.0.1 (a free port), answering scripted statuses.

Every ``POST`` is recorded (path, headers, body decompressed); the answer is the next scripted one
(``script(status, retry_after=..., body=...)``), else ``200`` with an empty export response of the path's signal.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest, ExportMetricsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse

MESSAGES = {
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse),
    "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse),
    "/v1/logs": (ExportLogsServiceRequest, ExportLogsServiceResponse),
}


@dataclass
class Posted:
    """One request as the upstream got it."""

    path: str
    headers: dict[str, str]
    body: bytes
    status: int  # what it was answered

    def message(self) -> Any:
        """The body parsed as the path's export request (binary protobuf)."""
        return MESSAGES[self.path][0].FromString(self.body)

    def span_count(self) -> int:
        return sum(len(ss.spans) for rs in self.message().resource_spans for ss in rs.scope_spans)


@dataclass
class _Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    when: Any = None  # a predicate on the Posted request; None: any


class RecordingHttpUpstream:
    """``start()`` it, send to ``url(path)``, ``stop()`` it. ``script(...)`` queues answers, taken in order."""

    def __init__(self) -> None:
        self.posted: list[Posted] = []
        self._answers: list[_Answer] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0

    def script(self, status: int, *, retry_after: str | None = None, body: bytes | None = None, times: int = 1, when: Any = None) -> None:
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        with self._lock:
            self._answers.extend(_Answer(status, headers, body, when) for _ in range(times))

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _answer(self, posted: Posted) -> _Answer:
        with self._lock:
            for index, answer in enumerate(self._answers):
                if answer.when is None or answer.when(posted):
                    return self._answers.pop(index)
        response = MESSAGES.get(posted.path, (None, ExportTraceServiceResponse))[1]()
        return _Answer(200, {}, response.SerializeToString())

    def start(self) -> int:
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - the standard library's name
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                encoding = (self.headers.get("Content-Encoding") or "").lower()
                body = gzip.decompress(raw) if encoding == "gzip" else zlib.decompress(raw) if encoding == "deflate" else raw
                posted = Posted(self.path, {k.lower(): v for k, v in self.headers.items()}, body, 0)
                answer = upstream._answer(posted)
                posted.status = answer.status
                with upstream._lock:
                    upstream.posted.append(posted)
                payload = answer.body if answer.body is not None else b""
                self.send_response(answer.status)
                for key, value in answer.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="http-upstream", daemon=True).start()
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def requests(self, path: str = "/v1/traces", status: int | None = None) -> list[Posted]:
        with self._lock:
            return [p for p in self.posted if p.path == path and (status is None or p.status == status)]
