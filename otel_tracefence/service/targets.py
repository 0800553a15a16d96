"""What the forwarder sends to: the target contract (a send's :class:`Outcome`, a queued :data:`Request`),
:func:`encode` (a queued request as the bytes sent), and the embedded default, :class:`FileTarget`.

The upstream OTLP/gRPC target is :mod:`otel_tracefence.service.upstream_grpc`, the OTLP/HTTP one
:mod:`otel_tracefence.service.upstream_http`; the queue and its worker are :mod:`otel_tracefence.service.forward`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol, Union

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_tracefence.otlp.json_writer import request_to_json
from otel_tracefence.service.otlp_bytes import LazyRequest


@dataclass(frozen=True)
class Outcome:
    """What became of one send: ``sent``; ``retry`` (keep it, try again, after ``retry_after_s`` if the server
    said); ``too_large`` (split it); ``rejected`` (permanent: drop it). ``reason`` says why, for the logs."""

    kind: str
    reason: str = ""
    retry_after_s: float | None = None
    rejected_spans: int = 0  # sent, but the upstream refused this many through OTLP partial success


SENT = Outcome("sent")
RETRY = Outcome("retry")
SendResult = Union[bool, Outcome]  # a bare bool means sent (True) or retry (False)
# A queued request: encoded bytes (what the service puts), the encoded parts of a merged batch (joined when
# sent), or a message (a full ExportTraceServiceRequest or a LazyRequest, as put).
Request = Union[bytes, list, ExportTraceServiceRequest, LazyRequest]


class Target(Protocol):
    name: str
    max_message_bytes: int | None  # the largest request the target takes; None: no limit of its own

    def send(self, request: Request) -> SendResult: ...

    def close(self) -> None: ...


def encode(request: Request) -> bytes:
    """A queued request as the bytes sent: itself when encoded already, the parts of a merged batch joined
    (concatenated encodings of ``ExportTraceServiceRequest`` merge into one), a message serialized."""
    if isinstance(request, bytes):
        return request
    if isinstance(request, list):
        return b"".join(request)
    return request.SerializeToString()


class FileTarget:
    """OTLP/JSON lines appended to a file: the embedded default when no upstream is configured.

    The file holds spans' raw attribute values, as the persistent queue does: one this creates is private to its
    owner (``0600``), as the queue's and the review database's are; an existing file keeps its permissions.
    """

    def __init__(self, path: str) -> None:
        self.name = f"file:{path}"
        self.max_message_bytes = None
        self._stream = open(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "a", encoding="utf-8")

    def send(self, request: Request) -> Outcome:
        full = request if isinstance(request, ExportTraceServiceRequest) else ExportTraceServiceRequest.FromString(encode(request))
        self._stream.write(request_to_json(full) + "\n")
        self._stream.flush()
        return SENT

    def close(self) -> None:
        self._stream.close()

