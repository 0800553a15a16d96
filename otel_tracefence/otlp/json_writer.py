"""Writing OTLP/JSON: ``ExportTraceServiceRequest`` messages as JSON lines, ids in hex.

OTLP/JSON (OTLP specification, "JSON Protobuf Encoding") is protobuf's JSON
mapping except that trace and span ids are lowercase hex, not base64. The
Collector's ``file`` exporter writes one request per line; so does this, and
``tracefence plan`` and the Collector's ``otlpjsonfile`` receiver read it back.
"""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path
from typing import IO, Any, Sequence

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _ids_to_hex(obj: dict[str, Any]) -> None:
    for name in _ID_FIELDS:
        value = obj.get(name)
        if value:
            obj[name] = base64.b64decode(value).hex()


def request_to_json(request: ExportTraceServiceRequest) -> str:
    """One request as a single line of OTLP/JSON."""
    data = json_format.MessageToDict(request)
    for resource_spans in data.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                _ids_to_hex(span)
                for link in span.get("links", []):
                    _ids_to_hex(link)
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


class OtlpJsonFileSpanExporter(SpanExporter):
    """A ``SpanExporter`` appending each batch as one line of OTLP/JSON to ``path`` (or an open text stream)."""

    def __init__(self, path: str | Path | IO[str]) -> None:
        self._own = not hasattr(path, "write")
        self._stream: IO[str] = open(path, "a", encoding="utf-8") if self._own else path  # type: ignore[arg-type]
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        if not spans:
            return SpanExportResult.SUCCESS
        line = request_to_json(encode_spans(spans))
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._lock:
            self._stream.flush()
        return True

    def shutdown(self) -> None:
        with self._lock:
            if self._own and not self._stream.closed:
                self._stream.close()
