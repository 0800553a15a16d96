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
from typing import Any, Callable, Iterator

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from otel_tracefence.core.canonical import printable
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


_INT32 = (-(2**31), 2**31 - 1)


def _check_status(status: Any) -> Any:
    """The span's status to parse: an object whose ``code`` is one OTLP defines, or an integer it does not define.
    Protobuf's JSON parser, told to ignore unknown fields, would otherwise drop a status written another way
    ("ERROR") and leave the span reading as ok: raises ValueError naming the field. An integer code OTLP does not
    define (``7``) is kept, so the span is read whole and its step held at ``status`` by the normalizer
    (``SpanView.status_undefined``), as the service reads it from protobuf; one past int32 is clamped to it, as
    protobuf would otherwise wrap it (to ``0``: unset) (docs/DECISIONS.md 305)."""
    if status is None:
        return status
    if not isinstance(status, dict):
        raise ValueError(f"status: must be an object with a code, got {status!r}"[:200])
    code = status.get("code", 0)
    if isinstance(code, int) and not isinstance(code, bool):
        low, high = _INT32
        return status if low <= code <= high else {**status, "code": min(max(code, low), high)}
    if not isinstance(code, str) or code not in _STATUS_CODES:  # a list or object is no code either (never hashed)
        raise ValueError(f"status: code {code!r} is not one of 0 (unset), 1 (ok), 2 (error)"[:200])
    return status


def _parse_span(span_json: dict[str, Any], objects: _Objects) -> Span:
    doubled = _first_doubled(span_json) if objects.seen else None
    if doubled is not None:  # a key twice anywhere in the span: the span is malformed, never read last-wins
        raise ValueError(f"{doubled.field}: {doubled.why}")
    span_json = dict(span_json)
    missing = [name for name in _REQUIRED if not span_json.get(name) and not span_json.get(name.replace("Id", "_id").lower())]
    if missing:
        raise ValueError(f"{missing[0]}: missing")
    _hex_ids_to_base64(span_json, "span")
    if "status" in span_json:
        span_json["status"] = _check_status(span_json["status"])
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


class _Doubled(dict):
    """A JSON object the reader will not guess at: it gives one key twice, one field in both spellings the OTLP/JSON
    mapping accepts (lowerCamelCase and the proto name: ``traceId`` and ``trace_id``), or a key OTLP/JSON does not
    define that names a field but for case or underscores (``Status``, ``Code``, ``traceID``). ``field`` names the
    field (its lowerCamelCase name), ``why`` says what is wrong, ``pairs`` keeps every key as given."""

    __slots__ = ("field", "why", "pairs")


def _field_names() -> tuple[frozenset[str], dict[str, str], dict[str, str]]:
    """The JSON names of every field of ``ExportTraceServiceRequest`` and the messages under it; the proto names
    that differ, to their JSON name; and every name case-folded without underscores, to its JSON name. OTLP 0.x's
    ``instrumentation_library_spans`` and ``instrumentation_library``, still read, are among them."""
    json_names = {"instrumentationLibrarySpans", "instrumentationLibrary"}
    proto_names = {"instrumentation_library_spans": "instrumentationLibrarySpans", "instrumentation_library": "instrumentationLibrary"}
    stack, done = [ExportTraceServiceRequest.DESCRIPTOR], set()
    while stack:
        message = stack.pop()
        if message.full_name in done:
            continue
        done.add(message.full_name)
        for field_descriptor in message.fields:
            json_names.add(field_descriptor.json_name)
            if field_descriptor.name != field_descriptor.json_name:
                proto_names[field_descriptor.name] = field_descriptor.json_name
            if field_descriptor.message_type is not None:
                stack.append(field_descriptor.message_type)
    folded = {_folded(name): name for name in json_names}
    return frozenset(json_names), proto_names, folded


def _folded(name: str) -> str:
    return name.replace("_", "").casefold()


_JSON_NAMES, _PROTO_NAMES, _FOLDED_NAMES = _field_names()


class _Objects:
    """``object_pairs_hook`` for OTLP/JSON: a plain dict, or a :class:`_Doubled` for an object the reader will not
    guess at. json.loads would keep the last copy of a key, protobuf's parser one of two spellings, and it ignores a
    key it does not know: a second ``traceId`` or ``stringValue`` would silently replace the first, and a
    ``"Status": {"code": 2}`` leave a failed write reading as done (docs/DECISIONS.md 25, 180, 181, 185). ``seen``
    turns true at the first such object: only then do the readers look for them."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen = False

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            seen: set[str] = set()
            name = next(key for key, _ in pairs if key in seen or seen.add(key))
            why = f"a JSON object gives the key {name!r} twice: which value was meant cannot be known"
        else:
            for key in obj:
                if key in _JSON_NAMES:  # the common case: one test per key
                    continue
                name = _PROTO_NAMES.get(key)
                if name is not None:
                    if name in obj:
                        why = f"a JSON object gives {name} and {key}, one field in both spellings: which value was meant cannot be known"
                        break
                    continue
                name = _FOLDED_NAMES.get(_folded(key)) if isinstance(key, str) else None
                if name is not None:
                    why = f"a JSON object gives {printable(key)[:100]!r}, which OTLP/JSON does not define: it names {name} but for case or underscores, write {name}"
                    break
            else:
                return obj
        self.seen = True
        doubled = _Doubled(obj)
        doubled.field, doubled.why, doubled.pairs = name, why, pairs
        return doubled


def _first_doubled(value: Any) -> _Doubled | None:
    """The first :class:`_Doubled` object in ``value`` (walked without recursion: JSON may nest deep), else None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Doubled):
            return item
        if isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return None


def _loads(text: str, objects: _Objects) -> Any:
    return json.loads(text, object_pairs_hook=objects)


def _requests(text: str, objects: _Objects) -> Iterator[tuple[int, Any, int]]:
    """The requests of a file, one JSON document or one per line (JSON Lines: lines end at ``\n`` only, so a
    U+2028, U+0085 or form feed inside a string, which ``str.splitlines`` would split at, stays in its line), each
    with its line number and its length in characters."""
    stripped = text.strip()
    try:
        yield 1, _loads(stripped, objects), len(text)
        return
    except json.JSONDecodeError:
        pass
    except RecursionError:
        raise UnreadableInput("line 1: JSON nested too deep") from None
    except ValueError as exc:  # an integer past int()'s digit limit: JSON that cannot be read
        raise UnreadableInput(f"line 1: {exc}") from None
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield number, _line_request(number, line, objects), len(line) + 1


def _line_request(number: int, line: str, objects: _Objects) -> Any:
    """One line of a JSON Lines file parsed; :class:`UnreadableInput` naming the line when it is not JSON."""
    try:
        return _loads(line, objects)
    except json.JSONDecodeError as exc:
        raise UnreadableInput(f"line {number}: not JSON: {exc.msg}") from None
    except RecursionError:
        raise UnreadableInput(f"line {number}: JSON nested too deep") from None
    except ValueError as exc:
        raise UnreadableInput(f"line {number}: {exc}") from None


def _readable_trace_ids(span_json: Any) -> list[str]:
    """The span's trace ids that are valid OTLP/JSON hex (32 characters, not all zero), lower-cased, without
    repeats: ``traceId``, ``trace_id`` and, in a span refused for its keys, every copy and misspelling (``TraceId``):
    a span naming two traces is held in both."""
    if not isinstance(span_json, dict):
        return []
    ids: list[str] = []
    for name, value in span_json.pairs if isinstance(span_json, _Doubled) else span_json.items():
        if name not in ("traceId", "trace_id") and not (isinstance(span_json, _Doubled) and _folded(name) == "traceid"):
            continue
        if not isinstance(value, str) or len(value) != 32:
            continue
        try:
            if any(bytes.fromhex(value)) and value.lower() not in ids:
                ids.append(value.lower())
        except ValueError:
            continue
    return ids


def _readable_parent_id(span_json: Any) -> str:
    """The span's ``parentSpanId`` (or ``parent_span_id``) when it is valid OTLP/JSON hex (16 characters, not all
    zero), lower-cased; else ``""``."""
    if not isinstance(span_json, dict):
        return ""
    for name in ("parentSpanId", "parent_span_id"):
        value = span_json.get(name)
        if isinstance(value, str) and len(value) == 16:
            try:
                if any(bytes.fromhex(value)):
                    return value.lower()
            except ValueError:
                continue
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
_REQUEST_KEYS = frozenset({"resourceSpans", "resource_spans"})


def _no_hidden_spans(obj: dict[str, Any], known: frozenset[str], where: str, line: int, errors: list[InputError]) -> None:
    """An object of ``where`` with keys OTLP/JSON does not define that hold arrays may hold spans under
    another name (a misspelt or unknown container): ignoring them would plan a trace without them,
    so they are an error at that key (an object there too: DECISIONS 180). Unknown keys holding anything else are
    ignored, as OTLP says. ``obj`` giving a key twice, or a field in both spellings (``resourceSpans`` and
    ``resource_spans``), raises :class:`UnreadableInput`: protobuf's parser would read one copy and drop the other."""
    if isinstance(obj, _Doubled):
        raise UnreadableInput(f"line {line}: {obj.why} (in {where})")
    for key, value in obj.items():
        if key not in known and isinstance(value, (list, dict)) and value:
            kind = "an array" if isinstance(value, list) else "an object"
            field = key or '""'  # the empty key is named as written, so the error still names a field
            errors.append(InputError(line, field, f"{where} has a key OTLP/JSON does not define, holding {kind}: spans under it would be missed"))


def read_otlp_json(text: str, progress: Callable[[int], None] | None = None) -> OtlpRead:
    """Read OTLP/JSON text into one request; bad spans are listed in ``errors`` by line and span id.

    ``progress``, when given, is called with the characters of each request (line) once it is read (a progress bar).
    Raises :class:`UnreadableInput` when the text is not JSON.
    """
    result = OtlpRead()
    objects = _Objects()
    for line, request, length in _requests(text, objects):
        _read_request(request, line, result, objects)
        if progress is not None:
            progress(length)
    return result


def read_otlp_json_line(number: int, line: str, into: OtlpRead | None = None) -> OtlpRead:
    """Read line ``number`` of an OTLP/JSON Lines file (one ``ExportTraceServiceRequest``), as :func:`read_otlp_json`
    reads each line of a whole file, adding its spans and errors to ``into`` (a new :class:`OtlpRead` when ``None``),
    which is returned. Raises :class:`UnreadableInput` naming the line when it is not one JSON object
    (``tracefence plan --stream`` reads a file so, a line at a time)."""
    objects = _Objects()
    result = into if into is not None else OtlpRead()
    _read_request(_line_request(number, line, objects), number, result, objects)
    return result


def read_otlp_json_request(text: str) -> OtlpRead:
    """Read one OTLP/JSON ``ExportTraceServiceRequest`` object (an OTLP/HTTP body: one JSON document, not lines),
    as :func:`read_otlp_json` reads each line of a file; bad spans are listed in ``errors``.

    Raises :class:`UnreadableInput` when the text is not one JSON object.
    """
    objects = _Objects()
    try:
        request = _loads(text, objects)
    except json.JSONDecodeError as exc:
        raise UnreadableInput(f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise UnreadableInput("JSON nested too deep") from None
    except ValueError as exc:  # an integer past int()'s digit limit
        raise UnreadableInput(str(exc)) from None
    result = OtlpRead()
    _read_request(request, 1, result, objects)
    return result


def _no_doubled(value: Any, where: str, line: int, objects: _Objects) -> None:
    """Raise :class:`UnreadableInput` when ``value`` (a resource or scope, outside any span) holds an object giving a
    key twice: which resource or scope the spans under it have cannot be known (DECISIONS 180)."""
    doubled = _first_doubled(value) if objects.seen else None
    if doubled is not None:
        raise UnreadableInput(f"line {line}: {doubled.why} (in a {where})")


def _read_request(request: Any, line: int, result: OtlpRead, objects: _Objects) -> None:
    """Add the spans of one parsed ``ExportTraceServiceRequest`` (from ``line``) to ``result``.

    Raises :class:`UnreadableInput` for a key given twice outside the spans; a key OTLP/JSON does not define that
    may hold spans is an error without a span (the file is rejected, an OTLP/HTTP body refused: DECISIONS 180);
    a span that cannot be read whole is an error naming it, standing in each trace it names (DECISIONS 181)."""
    if not isinstance(request, dict):
        raise UnreadableInput(f"line {line}: not an ExportTraceServiceRequest object")
    _no_hidden_spans(request, _REQUEST_KEYS, "the request", line, result.errors)
    for resource_spans_json in _objects(request, "resourceSpans", "resource_spans", line, result.errors):
        _no_hidden_spans(resource_spans_json, _RESOURCE_SPANS_KEYS, "resourceSpans", line, result.errors)
        _no_doubled(resource_spans_json.get("resource"), "resource", line, objects)
        resource_spans = ResourceSpans()
        try:
            _parse_object(resource_spans_json.get("resource"), resource_spans.resource)
        except json_format.ParseError as exc:
            result.errors.append(InputError(line, "resource", str(exc)[:300]))
            continue
        resource_spans.schema_url = str(resource_spans_json.get("schemaUrl", ""))
        scopes = _objects(resource_spans_json, "scopeSpans", "scope_spans", line, result.errors)
        # OTLP/JSON before 1.0 (OTLP 0.x) named the scopes instrumentationLibrarySpans.
        scopes += _objects(resource_spans_json, "instrumentationLibrarySpans", "instrumentation_library_spans", line, result.errors)
        for scope_json in scopes:
            _no_hidden_spans(scope_json, _SCOPE_SPANS_KEYS, "scopeSpans", line, result.errors)
            _no_doubled(scope_json.get("scope", scope_json.get("instrumentationLibrary")), "scope", line, objects)
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
                    span = _parse_span(span_json, objects)
                except ValueError as exc:
                    field_name, _, message = str(exc).partition(": ")
                    label = _span_label(span_json, index)
                    # It stands in every trace it names (a span giving traceId and trace_id may name two).
                    trace_ids = _readable_trace_ids(span_json)
                    parent = "" if trace_ids else _readable_parent_id(span_json)
                    for n, trace_id in enumerate(trace_ids or [""]):
                        result.errors.append(InputError(line, field_name, message, label, trace_id=trace_id, repeat=n > 0, parent_span_id=parent))
                    continue
                scope_spans.spans.append(span)
                result.span_lines[span.span_id.hex()] = line
            if scope_spans.spans:
                resource_spans.scope_spans.append(scope_spans)
        if resource_spans.scope_spans:
            result.request.resource_spans.append(resource_spans)


__all__ = ["OtlpRead", "read_otlp_json", "read_otlp_json_line", "read_otlp_json_request"]
