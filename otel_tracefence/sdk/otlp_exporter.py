"""The OTLP span exporter the standard ``OTEL_EXPORTER_OTLP_*`` variables ask for, built from the SDK's own exporters.

The protocol is ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, else ``OTEL_EXPORTER_OTLP_PROTOCOL``, else ``grpc`` (the
Python SDK's default, and what the zero-code exporter always built before): ``grpc`` builds
``opentelemetry-exporter-otlp-proto-grpc``'s exporter, ``http/protobuf`` the one of
``opentelemetry-exporter-otlp-proto-http``, ``http/json`` the one of ``opentelemetry-exporter-otlp-json-http`` when
that package is installed. Each SDK exporter reads the other variables itself (endpoint, headers, certificate,
client certificate and key, compression, timeout, per signal or for all): nothing here parses them. Without an
OTLP/JSON exporter, ``http/json`` is refused in one log line and the spans go over ``http/protobuf`` to the same
endpoint (every OTLP/HTTP receiver takes binary protobuf), rather than being dropped (docs/DECISIONS.md, 530).
"""

from __future__ import annotations

import logging
import os
from typing import Mapping

from opentelemetry.sdk.trace.export import SpanExporter

PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
PROTOCOLS = ("grpc", "http/protobuf", "http/json")
DEFAULT_PROTOCOL = "grpc"
JSON_EXPORTER_MODULE = "opentelemetry.exporter.otlp.json.http.trace_exporter"
_log = logging.getLogger("otel_tracefence")


def otlp_protocol(environ: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """The OTLP protocol for traces and where it was read: ``(protocol, source)``, the protocol lower-cased and
    stripped, the source the variable's name or ``"default"``. The value is not checked here (see
    :func:`otlp_span_exporter`)."""
    for name in PROTOCOL_VARIABLES:
        value = environ.get(name, "").strip().lower()
        if value:
            return value, name
    return DEFAULT_PROTOCOL, "default"


def otlp_span_exporter(protocol: str | None = None, environ: Mapping[str, str] = os.environ) -> SpanExporter:
    """A new OTLP span exporter of the SDK for ``protocol`` (default: :func:`otlp_protocol`'s), configured by the
    SDK itself from the ``OTEL_EXPORTER_OTLP_*`` variables.

    ``http/json`` without ``opentelemetry-exporter-otlp-json-http`` installed logs one error naming the protocol and
    the package, and returns the ``http/protobuf`` exporter. Raises :class:`ValueError` for a protocol that is none
    of ``grpc``, ``http/protobuf``, ``http/json`` (the message names the variable it came from), and
    :class:`ImportError` naming the package when the exporter's package is not installed."""
    source = "protocol argument"
    if protocol is None:
        protocol, source = otlp_protocol(environ)
    protocol = protocol.strip().lower()
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter

        return GrpcSpanExporter()
    if protocol == "http/json":
        try:
            module = __import__(JSON_EXPORTER_MODULE, fromlist=["OTLPSpanExporter"])
        except ImportError:
            _log.error(
                "tracefence: %s=http/json: no OTLP/JSON span exporter is installed (opentelemetry-exporter-otlp-json-http); "
                "exporting over http/protobuf to the same endpoint instead",
                source,
            )
        else:
            return module.OTLPSpanExporter()
        protocol = "http/protobuf"
    if protocol == "http/protobuf":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
        except ImportError as exc:
            raise ImportError(f"{source}=http/protobuf needs opentelemetry-exporter-otlp-proto-http: pip install opentelemetry-exporter-otlp-proto-http") from exc
        return HttpSpanExporter()
    raise ValueError(f"{source}={protocol!r}: expected one of {', '.join(PROTOCOLS)}")
