"""HTTP client spans below a tool step: how often it sent its effect, and whether the server failed.

HTTP semantic conventions: a client span carries ``http.request.method`` and ``url.full``
(``http.method`` and ``http.url`` before semantic conventions 1.21), and the response's
``http.response.status_code``. Methods other than GET, HEAD, OPTIONS and TRACE are unsafe
(RFC 9110 section 9.2.1): two client spans with one unsafe method and one URL below a write
step sent its effect twice. A response of 500 to 599 (RFC 9110 section 15.6) means the
server failed, whatever the tool span says; a client span that ended in error with no
response (a timeout, a reset) leaves the outcome unknown.

URLs are compared without their query string and fragment: a retry that adds
``?attempt=2`` sent the same effect. RPC client spans (``rpc.system``, RPC semantic
conventions) are requests too, to ``rpc.service/rpc.method``; RPC methods say nothing of
safety, so they count as unsafe.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from otel_tracefence.normalize.conventions import (
    GRPC_SERVER_ERRORS, HTTP_CLIENT_ERROR, HTTP_METHOD_KEYS, HTTP_METHOD_ORIGINAL_KEY, HTTP_OTHER_METHOD, HTTP_SAFE_METHODS, HTTP_SERVER_ERROR, HTTP_STATUS_KEYS, HTTP_URL_KEYS, HTTP_URL_PART_KEYS,
    RPC_GRPC_STATUS_KEY, RPC_METHOD, RPC_SYSTEM_KEY,
)
from otel_tracefence.normalize.span_view import KIND_SERVER, STATUS_ERROR, SpanView


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One HTTP request a client span records: method (as written: tokens are case-sensitive, so ``get``
    is no safe method, docs/DECISIONS.md 204), URL (``None`` when not
    recorded) and response status code (``None`` when none came back)."""

    method: str
    url: str | None
    status: int | None
    failed: bool = False  # the client span ended in error with no response
    server: bool = False  # the response is a SERVER span's own (own_response only): its 4xx is the caller's fault
    grpc_status: int | None = None  # rpc.grpc.status_code, read on a tool span's own exchange only (own_response)

    @property
    def unsafe(self) -> bool:
        return self.method not in HTTP_SAFE_METHODS

    @property
    def server_error(self) -> bool:
        return self.status is not None and self.status in HTTP_SERVER_ERROR

    @property
    def failed_response(self) -> bool:
        """A response that says the request failed, as the semantic conventions read it: on a client span (HTTP,
        "Status") a 400-599 status (docs/DECISIONS.md 303), on a server span a 500-599 one (372); a gRPC status code
        other than 0 on a client span, one of ``GRPC_SERVER_ERRORS`` on a server span (RPC conventions, 372)."""
        if self.status is not None and (self.status in HTTP_SERVER_ERROR or (not self.server and self.status in HTTP_CLIENT_ERROR)):
            return True
        return self.grpc_status is not None and (self.grpc_status in GRPC_SERVER_ERRORS if self.server else self.grpc_status != 0)


def _url(attributes: Mapping[str, Any]) -> str | None:
    for key in HTTP_URL_KEYS:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return value
    for host_key, port_key, path_key in HTTP_URL_PART_KEYS:
        host = attributes.get(host_key)
        if isinstance(host, str) and host:
            port = attributes.get(port_key) if port_key else None
            return f"{host}{f':{port}' if port not in (None, '') else ''}{attributes.get(path_key) or ''}"
    return None


def _status(attributes: Mapping[str, Any]) -> int | None:
    for key in HTTP_STATUS_KEYS:
        value = attributes.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.isdigit() and len(value) <= 3:
            return int(value)
    return None


def _same_resource(url: str | None) -> str | None:
    return url.split("#", 1)[0].split("?", 1)[0] if url is not None else None


def _original_agrees(method: Any, original: Any) -> bool:
    """Whether ``http.request.method_original`` may stand beside ``http.request.method``: the same method, or one the
    instrumentation canonicalized (its upper case) or recorded as ``_OTHER`` (HTTP conventions)."""
    return isinstance(original, str) and (original == method or original.upper() == method or method == HTTP_OTHER_METHOD)


def recorded_method(attributes: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``(method, disagreement)``: the one method a span's method keys (``conventions.HTTP_METHOD_KEYS``) record,
    ``(None, None)`` when no key holds one. Keys that disagree (``http.request.method=GET`` beside
    ``http.method=POST`` or ``HEAD``), a key holding no non-empty string, or an ``http.request.method_original``
    that is another method than ``http.request.method`` (not its case, not beside ``_OTHER``) give no one method:
    ``method`` is then a text naming what each holds (``"GET / POST"``), which is no safe method, and
    ``disagreement`` names the keys (``"http.request.method='GET', http.method='POST'"``). The one rule for the
    tool span's effect hints and for requests in time and late (docs/DECISIONS.md 346, 374); never resolved by
    the keys' order."""
    found = [(key, value) for key in HTTP_METHOD_KEYS if (value := attributes.get(key)) is not None]
    if not found:
        return None, None
    first = found[0][1]
    agree = isinstance(first, str) and bool(first) and all(value == first for _, value in found)
    original = attributes.get(HTTP_METHOD_ORIGINAL_KEY)
    if original is not None and not _original_agrees(attributes.get(HTTP_METHOD_KEYS[0], first), original):
        found.append((HTTP_METHOD_ORIGINAL_KEY, original))
        agree = False
    if agree:
        return first, None
    method = " / ".join(value if isinstance(value, str) and value else repr(value) for _, value in found)
    return method, ", ".join(f"{key}={value!r}" for key, value in found)


def _method(attributes: Mapping[str, Any]) -> str | None:
    """The method a client span records (:func:`recorded_method`), or the text naming what its keys hold."""
    return recorded_method(attributes)[0]


# Every key http_request looks for first: a span with none of them is neither an HTTP nor an RPC request.
REQUEST_KEYS = frozenset((*HTTP_METHOD_KEYS, RPC_SYSTEM_KEY))


def http_request(span: SpanView) -> HttpRequest | None:
    """The request a span records as an HTTP or RPC client, or ``None`` (neither, or a server span)."""
    if span.kind == KIND_SERVER:
        return None
    attributes = span.attributes
    if REQUEST_KEYS.isdisjoint(attributes):  # most spans: neither HTTP nor RPC
        return None
    method = _method(attributes)
    if method is not None:
        status = _status(attributes)
        return HttpRequest(method, _same_resource(_url(attributes)), status, status is None and span.status_code == STATUS_ERROR)
    system = attributes.get(RPC_SYSTEM_KEY)
    if isinstance(system, str) and system:
        target = f"{attributes.get('rpc.service', '')}/{attributes.get('rpc.method', '')}"
        return HttpRequest(RPC_METHOD, f"{system}:{target}", None, span.status_code == STATUS_ERROR)
    return None


def _grpc_status(attributes: Mapping[str, Any]) -> int | None:
    value = attributes.get(RPC_GRPC_STATUS_KEY)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 2:
        return int(value)
    return None


def own_response(span: SpanView) -> HttpRequest | None:
    """The HTTP or gRPC exchange a tool span records as its own: :func:`http_request`'s, or, for a span that records
    a response status and no method, one whose method is not known (``""``): the status alone says how the server
    answered (docs/DECISIONS.md 343). A SERVER span's exchange is read too, marked ``server``: its 5xx (and its
    gRPC server errors) are the tool failing, its 4xx the caller's fault (372). ``rpc.grpc.status_code`` is read
    into ``grpc_status`` (372). ``None`` for a span that records neither a request nor a status."""
    request = http_request(span)
    grpc_status = _grpc_status(span.attributes)
    if request is not None:
        return request if grpc_status is None else replace(request, grpc_status=grpc_status)
    status = _status(span.attributes)
    if status is None and grpc_status is None:
        return None
    return HttpRequest("", None, status, server=span.kind == KIND_SERVER, grpc_status=grpc_status)
