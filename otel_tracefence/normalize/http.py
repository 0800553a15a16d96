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

A request's recorded headers (``http.request.header.<key>``, gRPC metadata) may carry its idempotency key
(``Idempotency-Key``) and its response's the server's word that it replayed a stored response
(``Idempotent-Replayed: true``): :func:`key_evidence` reads them, :func:`reconciled_key` gives the step's one key
(docs/DECISIONS.md 420-423).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from otel_tracefence.normalize.conventions import (
    IDEMPOTENCY_KEY_HEADERS, REPLAYED_RESPONSE_HEADERS, REPLAYED_TRUE, REQUEST_HEADER_PREFIXES, RESPONSE_HEADER_PREFIXES,
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


# -- Idempotency evidence in recorded headers (docs/DECISIONS.md 420-423) ------------------------------------------
_HEADER_PREFIXES = (*REQUEST_HEADER_PREFIXES, *RESPONSE_HEADER_PREFIXES)


@dataclass(frozen=True, slots=True)
class KeyEvidence:
    """What one span's recorded headers say of idempotency. ``key``: the one idempotency key its request sent, read
    from the attribute ``source``; ``problem``: why its headers give no one key (``key`` then ``None``: a value that
    is no string, an empty one, several different ones); ``replayed``: its response says the server answered with
    the response stored for the key (no new effect)."""

    key: str | None = None
    problem: str | None = None
    replayed: bool = False
    source: str = ""


def _header_values(value: Any) -> list[str] | None:
    """A header attribute's values: a plain string is one value, an array of strings its values; ``None`` for any
    other value (a number, an array holding no string)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _key_text(value: str) -> str:
    """A header value as a key: trimmed (RFC 9110 section 5.5: a field value's surrounding white space is no part of
    it), and an RFC 8941 sf-string (``"abc"``, the IETF draft's form of Idempotency-Key) read as its text."""
    text = value.strip()
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return text


def key_evidence(attributes: Mapping[str, Any]) -> KeyEvidence | None:
    """What the span's recorded request and response headers say of idempotency (:class:`KeyEvidence`), or ``None``
    when it records none of the headers ``conventions.IDEMPOTENCY_KEY_HEADERS`` and
    ``conventions.REPLAYED_RESPONSE_HEADERS`` name. Keys are compared in lower case, underscores read as dashes
    (``http.request.header.idempotency-key``, ``http.request.header.idempotency_key``,
    ``http.request.header.Idempotency-Key``, ``rpc.grpc.request.metadata.idempotency-key``); a request sending
    two different keys (or two headers that disagree) gives no one key."""
    keys: dict[str, str] = {}  # key -> the attribute it was read from (the first, in key order)
    problem = None
    replayed = False
    found = False
    for name in sorted(attributes):  # sorted: the same evidence whatever order the attributes came in
        lowered = name.lower()
        if not lowered.startswith(_HEADER_PREFIXES):
            continue
        request = lowered.startswith(REQUEST_HEADER_PREFIXES)
        prefixes = REQUEST_HEADER_PREFIXES if request else RESPONSE_HEADER_PREFIXES
        header = next(lowered[len(p):] for p in prefixes if lowered.startswith(p)).replace("_", "-")
        if request and header in IDEMPOTENCY_KEY_HEADERS:
            found = True
            values = _header_values(attributes[name])
            if values is None:
                problem = problem or f"{name}={attributes[name]!r:.80} is no string or array of strings"
                continue
            for value in values:
                text = _key_text(value)
                if not text:
                    problem = problem or f"{name}={attributes[name]!r:.80} holds an empty key"
                else:
                    keys.setdefault(text, name)
        elif not request and header in REPLAYED_RESPONSE_HEADERS:
            found = True
            values = _header_values(attributes[name]) or []
            replayed = replayed or any(value.strip().lower() == REPLAYED_TRUE for value in values)
    if not found:
        return None
    if problem is None and len(keys) > 1:
        problem = "the request sent several idempotency keys: " + ", ".join(f"{source}={key!r}" for key, source in sorted(keys.items()))
    if problem is not None or not keys:
        return KeyEvidence(None, problem, replayed)
    key, source = next(iter(keys.items()))
    return KeyEvidence(key, None, replayed, source)


def reconciled_key(own: str | None, found: Sequence[tuple[str, KeyEvidence]]) -> tuple[str | None, str | None]:
    """``(key, disagreement)``: the step's idempotency key given ``own`` (the key its span records: declared, or read
    from its arguments by the operator's rule) and ``found`` (each request's evidence, with the words naming where it
    is: ``"span 3b38e114a44b0498 ('POST')"``). The key the requests sent is the step's when it records none; when the
    records give no one key (``own`` and a request's differ, two requests' differ, a header that cannot be read),
    ``disagreement`` says so and ``key`` is ``own``: never resolved by order (docs/DECISIONS.md 421), the step is held
    (``malformed_idempotency_key``). The one rule for a tool span's own headers and for the requests below it, in
    time and late."""
    key = own
    origin = "the step's own record"
    for where, evidence in found:
        if evidence.problem is not None:
            return own, f"{where}: {evidence.problem}"
        if evidence.key is None:
            continue
        if key is None:
            key, origin = evidence.key, f"{where} ({evidence.source})"
        elif evidence.key != key:
            return own, f"the idempotency keys recorded disagree: {key!r} ({origin}), {evidence.key!r} ({where}, {evidence.source})"
    return key, None
