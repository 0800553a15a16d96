"""OTLP/JSON files: the JSON encoding of ``ExportTraceServiceRequest``, one per file or one per line.

OTLP/JSON is not protobuf's plain JSON mapping: trace and span ids are hex, not
base64 (OTLP specification, "JSON Protobuf Encoding"), enums may be integers and
unknown fields must be ignored. Ids are converted to the protobuf mapping's form
and each span is parsed on its own by ``google.protobuf.json_format``, so one bad
span is reported with its place and field and never loses the rest.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from otel_tracefence.readers.errors import InputError, UnreadableInput

_ID_LENGTHS = {"traceId": 32, "spanId": 16, "parentSpanId": 16, "trace_id": 32, "span_id": 16, "parent_span_id": 16}
_REQUIRED = ("traceId", "spanId")


@dataclass(slots=True)
class OtlpRead:
    """The spans read, regrouped as one ``ExportTraceServiceRequest``, and the spans rejected."""

    request: ExportTraceServiceRequest = field(default_factory=ExportTraceServiceRequest)
    errors: list[InputError] = field(default_factory=list)
    span_lines: dict[str, int] = field(default_factory=dict)  # span id (hex) -> line of its request


def _hex_ids_to_base64(obj: dict[str, Any], where: str) -> None:
    """Replace hex ids in ``obj`` (a span or link) with base64, in place; raises ValueError naming the field."""
    for name, length in _ID_LENGTHS.items():
        value = obj.get(name)
        if value is None or value == "" and name in ("parentSpanId", "parent_span_id"):
            continue
        if isinstance(value, str) and _is_base64_id(value, length // 2):
            raise ValueError(
                f"{name}: the {where}'s {name} {value!r} is base64 (protobuf's plain JSON mapping); OTLP/JSON writes ids "
                f"as {length} hex characters: convert each id (in Python: base64.b64decode(id).hex())"
            )
        if not isinstance(value, str) or len(value) != length:
            raise ValueError(f"{name}: the {where}'s {name} must be {length} hex characters, got {value!r}"[:200])
        try:
            raw = bytes.fromhex(value)
        except ValueError:
            raise ValueError(f"{name}: the {where}'s {name} {value!r} is not hex"[:200]) from None
        if not any(raw):
            raise ValueError(f"{name}: an all-zero id is invalid")
        obj[name] = base64.b64encode(raw).decode("ascii")


def _is_base64_id(value: str, size: int) -> bool:
    """True when ``value`` is not hex but is the base64 (standard or URL-safe, padded or not) of ``size`` bytes."""
    if len(value) > 4 * size or all(c in "0123456789abcdefABCDEF" for c in value):
        return False
    padded = value + "=" * (-len(value) % 4)
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            if len(decode(padded.encode("ascii"), validate=True) if decode is base64.b64decode else decode(padded.encode("ascii"))) == size:
                return True
        except (ValueError, UnicodeEncodeError):
            continue
    return False


_STATUS_CODES = {0, 1, 2, "STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"}


def _check_status(status: Any) -> None:
    """A span's status must be an object whose ``code`` is one OTLP defines: protobuf's JSON parser,
    told to ignore unknown fields, would otherwise drop a status written another way ("ERROR") and
    leave the span reading as ok. Raises ValueError naming the field."""
    if status is None:
        return
    if not isinstance(status, dict):
        raise ValueError(f"status: must be an object with a code, got {status!r}"[:200])
    code = status.get("code", 0)
    if code not in _STATUS_CODES or isinstance(code, bool):
        raise ValueError(f"status: code {code!r} is not one of 0 (unset), 1 (ok), 2 (error)"[:200])


def _parse_span(span_json: dict[str, Any]) -> Span:
    span_json = dict(span_json)
    missing = [name for name in _REQUIRED if not span_json.get(name) and not span_json.get(name.replace("Id", "_id").lower())]
    if missing:
        raise ValueError(f"{missing[0]}: missing")
    _hex_ids_to_base64(span_json, "span")
    _check_status(span_json.get("status"))
    links = span_json.get("links")
    if isinstance(links, list):
        span_json["links"] = [dict(link) for link in links if isinstance(link, dict)]
        for link in span_json["links"]:
            _hex_ids_to_base64(link, "link")
    try:
        return json_format.ParseDict(span_json, Span(), ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise ValueError(_parse_error(exc)) from None
    except (SystemError, UnicodeError):  # protobuf's C parser on a string holding a lone surrogate ("\ud800")
        raise ValueError(f"span: {_SURROGATE}") from None


_NESTED_PARSE_ERROR = re.compile(r"Failed to parse (\w+) field: ")


def _parse_error(exc: json_format.ParseError) -> str:
    """``field: cause`` from json_format's message, which wraps the cause once per level of nesting
    ("Failed to parse attributes field: Failed to parse value field: ... Message too deep")."""
    text = str(exc)
    path = _NESTED_PARSE_ERROR.findall(text)
    cause = (text[text.rfind("field: ") + len("field: ") :] if path else text).rstrip(".")
    where = ".".join(path) if len(path) <= 4 else f"{path[0]}.{path[1]}...{path[-1]}"
    return f"{path[0] if path else 'span'}: {cause}{f' (at {where})' if len(path) > 1 else ''}"[:300]


class _DuplicateKey(ValueError):
    pass


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key given twice: json.loads would keep the last copy, and a second
    ``resourceSpans`` or ``stringValue`` would silently replace the first (which was meant cannot be known)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise _DuplicateKey(f"a JSON object gives the key {twice!r} twice: which value was meant cannot be known")
    return obj


def _requests(text: str) -> Iterator[tuple[int, Any]]:
    stripped = text.strip()
    try:
        yield 1, json.loads(stripped, object_pairs_hook=_object)
        return
    except _DuplicateKey as exc:
        raise UnreadableInput(f"line 1: {exc}") from None
    except json.JSONDecodeError:
        pass
    except RecursionError:
        raise UnreadableInput("line 1: JSON nested too deep") from None
    except ValueError as exc:  # an integer past int()'s digit limit: JSON that cannot be read
        raise UnreadableInput(f"line 1: {exc}") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                yield number, json.loads(line, object_pairs_hook=_object)
            except _DuplicateKey as exc:
                raise UnreadableInput(f"line {number}: {exc}") from None
            except json.JSONDecodeError as exc:
                raise UnreadableInput(f"line {number}: not JSON: {exc.msg}") from None
            except RecursionError:
                raise UnreadableInput(f"line {number}: JSON nested too deep") from None
            except ValueError as exc:
                raise UnreadableInput(f"line {number}: {exc}") from None


def _readable_trace_id(span_json: Any) -> str:
    """The span's trace id when it is valid OTLP/JSON hex (32 characters, not all zero), else ``""``."""
    value = span_json.get("traceId", span_json.get("trace_id")) if isinstance(span_json, dict) else None
    if not isinstance(value, str) or len(value) != 32:
        return ""
    try:
        return value.lower() if any(bytes.fromhex(value)) else ""
    except ValueError:
        return ""


def _span_label(span_json: Any, index: int) -> str:
    span_id = span_json.get("spanId") if isinstance(span_json, dict) else None
    return span_id if isinstance(span_id, str) and span_id else f"#{index}"


_SURROGATE = "a name or value holds a lone surrogate: not Unicode text"


def _parse_object(value: Any, message: Any) -> None:
    """Parse an optional OTLP/JSON object into ``message``; raises ``ParseError`` when it is not an object."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise json_format.ParseError(f"must be an object, not {type(value).__name__}")
    try:
        json_format.ParseDict(value, message, ignore_unknown_fields=True)
    except (SystemError, UnicodeError):  # protobuf's C parser on a string holding a lone surrogate
        raise json_format.ParseError(_SURROGATE) from None


def _objects(container: dict[str, Any], name: str, snake_name: str, line: int, errors: list[InputError]) -> list[dict[str, Any]]:
    """The objects of the array ``name`` (or ``snake_name``) of an OTLP/JSON object; anything else
    there (a number, a string, an object, an element that is not an object) is an error at ``name``."""
    value = container.get(name, container.get(snake_name))
    if value is None:
        return []
    if not isinstance(value, list):
        errors.append(InputError(line, name, f"must be an array, not {type(value).__name__}"))
        return []
    kept = [item for item in value if isinstance(item, dict)]
    if len(kept) < len(value):
        errors.append(InputError(line, name, f"{len(value) - len(kept)} element(s) are not objects"))
    return kept


_RESOURCE_SPANS_KEYS = frozenset(
    {"resource", "scopeSpans", "scope_spans", "instrumentationLibrarySpans", "instrumentation_library_spans", "schemaUrl", "schema_url"}
)
_SCOPE_SPANS_KEYS = frozenset({"scope", "instrumentationLibrary", "instrumentation_library", "spans", "schemaUrl", "schema_url"})


def _no_hidden_spans(obj: dict[str, Any], known: frozenset[str], where: str, line: int, errors: list[InputError]) -> None:
    """An object of ``where`` with keys OTLP/JSON does not define that hold arrays may hold spans under
    another name (a misspelt or unknown container): ignoring them would plan a trace without them,
    so they are an error at that key. Unknown keys holding anything else are ignored, as OTLP says."""
    for key, value in obj.items():
        if key not in known and isinstance(value, list) and value:
            errors.append(InputError(line, key, f"{where} has a key OTLP/JSON does not define, holding an array: spans under it would be missed"))


def read_otlp_json(text: str) -> OtlpRead:
    """Read OTLP/JSON text into one request; bad spans are listed in ``errors`` by line and span id.

    Raises :class:`UnreadableInput` when the text is not JSON.
    """
    result = OtlpRead()
    for line, request in _requests(text):
        _read_request(request, line, result)
    return result


def read_otlp_json_request(text: str) -> OtlpRead:
    """Read one OTLP/JSON ``ExportTraceServiceRequest`` object (an OTLP/HTTP body: one JSON document, not lines),
    as :func:`read_otlp_json` reads each line of a file; bad spans are listed in ``errors``.

    Raises :class:`UnreadableInput` when the text is not one JSON object.
    """
    try:
        request = json.loads(text, object_pairs_hook=_object)
    except json.JSONDecodeError as exc:
        raise UnreadableInput(f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise UnreadableInput("JSON nested too deep") from None
    except ValueError as exc:  # a key given twice; an integer past int()'s digit limit
        raise UnreadableInput(str(exc)) from None
    result = OtlpRead()
    _read_request(request, 1, result)
    return result


def _read_request(request: Any, line: int, result: OtlpRead) -> None:
    """Add the spans of one parsed ``ExportTraceServiceRequest`` (from ``line``) to ``result``."""
    if not isinstance(request, dict):
        raise UnreadableInput(f"line {line}: not an ExportTraceServiceRequest object")
    for resource_spans_json in _objects(request, "resourceSpans", "resource_spans", line, result.errors):
        resource_spans = ResourceSpans()
        try:
            _parse_object(resource_spans_json.get("resource"), resource_spans.resource)
        except json_format.ParseError as exc:
            result.errors.append(InputError(line, "resource", str(exc)[:300]))
            continue
        resource_spans.schema_url = str(resource_spans_json.get("schemaUrl", ""))
        _no_hidden_spans(resource_spans_json, _RESOURCE_SPANS_KEYS, "resourceSpans", line, result.errors)
        scopes = _objects(resource_spans_json, "scopeSpans", "scope_spans", line, result.errors)
        # OTLP/JSON before 1.0 (OTLP 0.x) named the scopes instrumentationLibrarySpans.
        scopes += _objects(resource_spans_json, "instrumentationLibrarySpans", "instrumentation_library_spans", line, result.errors)
        for scope_json in scopes:
            _no_hidden_spans(scope_json, _SCOPE_SPANS_KEYS, "scopeSpans", line, result.errors)
            scope_spans = ScopeSpans()
            try:
                _parse_object(scope_json.get("scope"), scope_spans.scope)
            except json_format.ParseError as exc:
                result.errors.append(InputError(line, "scope", str(exc)[:300]))
                continue
            spans_json = scope_json.get("spans")
            if spans_json is not None and not isinstance(spans_json, list):
                result.errors.append(InputError(line, "spans", f"must be an array, not {type(spans_json).__name__}"))
                continue
            for index, span_json in enumerate(spans_json or []):
                try:
                    if not isinstance(span_json, dict):
                        raise ValueError("span: not an object")
                    span = _parse_span(span_json)
                except ValueError as exc:
                    field_name, _, message = str(exc).partition(": ")
                    label = _span_label(span_json, index)
                    result.errors.append(InputError(line, field_name, message, label, trace_id=_readable_trace_id(span_json)))
                    continue
                scope_spans.spans.append(span)
                result.span_lines[span.span_id.hex()] = line
            if scope_spans.spans:
                resource_spans.scope_spans.append(scope_spans)
        if resource_spans.scope_spans:
            result.request.resource_spans.append(resource_spans)


__all__ = ["OtlpRead", "read_otlp_json", "read_otlp_json_request"]
