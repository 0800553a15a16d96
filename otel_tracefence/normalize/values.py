"""Arguments, results and idempotency keys read out of span attributes or rows."""

from __future__ import annotations

import ast
import re
import json
from typing import Any, Mapping, Sequence

import cython

from otel_tracefence.core.reprs import fields_repr

from otel_tracefence.core import reasons
from otel_tracefence.core.canonical import (
    JSONNumberError,
    JSONTextError,
    JSONTruncatedError,
    NOT_SIMPLE,
    canonicalize,
    json_start,
    parse_json_text,
    parse_simple_json,
    printable,
    sha256_text,
    text_too_large,
)
from otel_tracefence.core.config import Limits, TraceFenceConfig
from otel_tracefence.core.model import MalformedField
from otel_tracefence.normalize.conventions import (
    ARGUMENT_ENVELOPES, ARGUMENT_KEYS, ARGUMENT_WRAPPER_KEYS, CODE_PARAMETER_PREFIX, CODE_PARAMETER_SUFFIX, INPUT_MESSAGES_KEY, MIME_TYPE_KEYS, OPERATION_DETAILS_EVENT, OUTPUT_MESSAGES_KEY, RESULT_KEYS, TOOL_ARGUMENT_EVENTS, TOOL_RESULT_EVENTS, WRAPPED_ARGUMENT_KEYS,
    TOOL_MESSAGE_CLASS, TOOL_MESSAGE_TYPE, TOOL_MESSAGE_WRAPPER_KEYS,
)
from otel_tracefence.normalize.failure_words import FAILURE_TEXT_PATTERN
from otel_tracefence.normalize.result_flags import failure_flag
from otel_tracefence.normalize.result_errors import DEFAULT_SHAPES, error_shape, error_template, template_hint
from otel_tracefence.normalize.span_kinds import marked_field
from otel_tracefence.normalize.span_view import SpanEvent
from otel_tracefence.normalize.tokens import text_tokens, value_tokens
from otel_tracefence.core.redact import REDACTED, redact_result_text, redact_value

_ABSENT = object()
NOT_PARSED = object()
"""``Result.parsed`` of a result not recorded as JSON text that parsed."""


@cython.dataclasses.dataclass(repr=False)
@cython.cclass
class Arguments:
    """Canonical arguments (RFC 8785 text and SHA-256), or why they are unavailable, or what is malformed.

    Treat it as read-only: it is not frozen because one is built for every tool step and frozen
    dataclasses are several times slower to build (as ``SpanView``; docs/DECISIONS.md, 107).
    """

    json: str | None = None
    sha256: str | None = None
    unavailable: str | None = reasons.ARGUMENTS_NOT_RECORDED
    malformed: MalformedField | None = None
    value: Any = None  # the parsed value, for reading an idempotency key out of it
    notes: tuple[str, ...] = ()  # how they were read (``arguments_unwrapped``)
    call_id: str | None = None  # the call id a callback's envelope around them names (docs/DECISIONS.md 962)

    def __repr__(self) -> str:
        return fields_repr(self)  # not Cython's: it fails outside the importing thread (reprs.py)


NOT_RECORDED = Arguments()
TRUNCATED_ARGUMENTS = Arguments(
    unavailable=reasons.ARGUMENTS_TRUNCATED,
    malformed=MalformedField(
        "arguments",
        "arguments are cut off: the JSON text does not parse to its end (an attribute length limit?)",
        reason=reasons.ARGUMENTS_TRUNCATED,
    ),
)


def _unwrapped(value: Any) -> Any:
    """The keyword arguments inside a framework's wrapper (``conventions.ARGUMENT_WRAPPER_KEYS``),
    or ``None`` when ``value`` is not such a wrapper or holds positional arguments too."""
    if not isinstance(value, dict) or not value.keys() <= ARGUMENT_WRAPPER_KEYS:
        return None
    kwargs = value.get("kwargs")
    if not isinstance(kwargs, dict) or value.get("args"):
        return None
    return kwargs


_ENVELOPE_MARKS = frozenset(key for _, marks, *_ in ARGUMENT_ENVELOPES for key in marks)


def _in_envelope(value: Any) -> tuple[Any, str | None] | None:
    """The arguments inside a callback's envelope (``conventions.ARGUMENT_ENVELOPES``) and the call id it names, or
    ``None`` when ``value`` is no such envelope. The arguments are the envelope's arguments value when it is not null,
    else its text read as a JSON or Python literal, else that text (docs/DECISIONS.md 962)."""
    if not isinstance(value, dict):
        return None
    for keys, marks, arguments_key, text_key, call_id_path, _ in ARGUMENT_ENVELOPES:
        if not (marks <= value.keys() <= keys):
            continue
        inner = value.get(arguments_key)
        if inner is None:
            inner = literal_value(value.get(text_key))
        found: Any = value
        for step in call_id_path:
            found = found.get(step) if isinstance(found, dict) else None
        return inner, found if isinstance(found, str) and found else None
    return None


def literal_value(text: Any) -> Any:
    """``text`` read as JSON, else as a Python literal (``ast.literal_eval``: a ``repr`` of a dict), else as itself."""
    if not isinstance(text, str):
        return text
    try:
        return parse_json_text(text)
    except (JSONTextError, RecursionError):
        pass
    try:  # a JSON value or the text: tuples read as lists; sets, bytes, NaN and the like leave the text
        return json.loads(json.dumps(ast.literal_eval(text), allow_nan=False))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return text


def arguments_from_value(value: Any, limits: Limits, *, text_is_json: bool = True, unwrap: bool = False) -> Arguments:
    """Canonicalize arguments given as JSON text (``text_is_json``) or as an already-structured value.

    JSON text cut off before its end is ``arguments_truncated`` (malformed: the step is held).
    With ``unwrap``, a framework's ``{"kwargs": {...}}`` wrapper is taken off, noted as
    ``arguments_unwrapped``.
    """
    if isinstance(value, bytes):
        return Arguments(unavailable=None, malformed=MalformedField("arguments", "arguments are bytes, not JSON"))
    simple = False
    if isinstance(value, str) and text_is_json:
        if text_too_large(value, limits.max_argument_bytes):
            return Arguments(unavailable=reasons.ARGUMENTS_TOO_LARGE)
        parsed = parse_simple_json(value, limits.max_argument_depth)
        if parsed is not NOT_SIMPLE:
            value, simple = parsed, True
    if isinstance(value, str) and text_is_json and not simple:
        try:
            value = parse_json_text(value)
        except JSONNumberError:
            return Arguments(unavailable=reasons.ARGUMENTS_NOT_I_JSON)
        except JSONTruncatedError:
            return TRUNCATED_ARGUMENTS
        except JSONTextError as exc:
            return Arguments(unavailable=None, malformed=MalformedField("arguments", f"arguments are {exc}"))
        except RecursionError:
            return Arguments(unavailable=reasons.ARGUMENTS_TOO_DEEP)
    notes: tuple[str, ...] = ()
    call_id = None
    if unwrap:
        inner = _unwrapped(value)
        if inner is not None:
            value, notes = inner, (reasons.ARGUMENTS_UNWRAPPED,)
    if isinstance(value, dict) and not _ENVELOPE_MARKS.isdisjoint(value):  # a first C-level test: most values hold no mark
        enveloped = _in_envelope(value)
        if enveloped is not None:
            (value, call_id), notes, simple = enveloped, (reasons.ARGUMENTS_UNWRAPPED,), False
    canonical = canonicalize(value, max_bytes=limits.max_argument_bytes, max_depth=limits.max_argument_depth, simple=simple)
    if canonical.text is None:
        return Arguments(unavailable=canonical.unavailable)
    return Arguments(json=canonical.text, sha256=canonical.sha256, unavailable=None, value=value, notes=notes, call_id=call_id)


def bare_value_sha256(arguments: Arguments, limits: Limits) -> str | None:
    """The SHA-256 of the arguments a producer records when it collapses a one-parameter call's input to its bare
    value: ``{"isbn": "978-0"}`` recorded as ``978-0`` (OpenInference LangChain's ``_convert_io`` yields a one-key
    input's string value alone, no MIME type; docs/DECISIONS.md 442), read as :func:`span_arguments` reads such text
    (JSON where it parses, else the text). ``None`` when the arguments are no one-key object of a scalar value, or
    when the bare value would read as an object or array (that is no bare value)."""
    value = arguments.value
    if not isinstance(value, dict) or len(value) != 1:
        return None
    (inner,) = value.values()
    if isinstance(inner, str):
        bare = arguments_from_value(inner, limits)
        if bare.malformed is not None:
            bare = arguments_from_value(inner, limits, text_is_json=False)
    elif inner is None or isinstance(inner, (bool, int, float)):
        bare = arguments_from_value(inner, limits, text_is_json=False)
    else:
        return None
    return None if isinstance(bare.value, (dict, list)) else bare.sha256


@cython.ccall
def _looks_like_json(text: str) -> bool:
    """True when ``text`` starts as a JSON object, array or string does, after white space and byte order marks
    (``canonical.json_start``): such text that does not parse is cut off (a string too: ``"sess_0123`` is a value
    an attribute length limit cut; docs/DECISIONS.md 257, 340)."""
    return json_start(text) in ("{", "[", '"')


def _event_value(events: Sequence[SpanEvent], table: Sequence[tuple[str, str]]) -> Any:
    """The first ``(event name, attribute)`` of ``table`` that one of the span's events carries."""
    for name, key in table:
        for event in events:
            if event.name == name and key in event.attributes:
                return event.attributes[key]
    return _ABSENT


def _message_part(events: Sequence[SpanEvent], key: str, part_type: str, field_name: str) -> Any:
    """A field of the first ``part_type`` part in the messages an operation-details event carries in ``key``."""
    for event in events:
        if event.name != OPERATION_DETAILS_EVENT or key not in event.attributes:
            continue
        messages = event.attributes[key]
        if isinstance(messages, str):
            try:
                messages = parse_json_text(messages)
            except (JSONTextError, RecursionError):
                continue
        for message in messages if isinstance(messages, list) else ():
            parts = message.get("parts") if isinstance(message, dict) else None
            for part in parts if isinstance(parts, list) else ():
                if isinstance(part, dict) and part.get("type") == part_type and field_name in part:
                    return part[field_name]
    return _ABSENT


def event_arguments(events: Sequence[SpanEvent]) -> Any:
    """A tool span's arguments from its GenAI events (``conventions.TOOL_ARGUMENT_EVENTS``), or absent."""
    if not events:
        return _ABSENT
    value = _event_value(events, TOOL_ARGUMENT_EVENTS)
    return value if value is not _ABSENT else _message_part(events, INPUT_MESSAGES_KEY, "tool_call", "arguments")


def event_result(events: Sequence[SpanEvent]) -> Any:
    """A tool span's result from its GenAI events (``conventions.TOOL_RESULT_EVENTS``), or absent."""
    if not events:
        return _ABSENT
    value = _event_value(events, TOOL_RESULT_EVENTS)
    return value if value is not _ABSENT else _message_part(events, OUTPUT_MESSAGES_KEY, "tool_call_response", "response")


def span_arguments(attributes: Mapping[str, Any], limits: Limits, events: Sequence[SpanEvent] = ()) -> Arguments:
    """The call's arguments from the first convention that records them (``conventions.ARGUMENT_KEYS``),
    then ``code.function.parameters.*``, then the span's GenAI events."""
    for key in ARGUMENT_KEYS:
        value = attributes.get(key, _ABSENT)
        if value is _ABSENT:
            continue
        unwrap = key in WRAPPED_ARGUMENT_KEYS
        if key in MIME_TYPE_KEYS:
            # OpenInference: input.value is JSON only when its MIME type says so;
            # plain text (the default) that happens to parse is read as JSON too,
            # and text that starts like JSON but is cut off is truncated JSON.
            mime = attributes.get(MIME_TYPE_KEYS[key])
            if mime != "application/json" and isinstance(value, str):
                parsed = arguments_from_value(value, limits, unwrap=unwrap)
                if parsed.malformed is None or (parsed is TRUNCATED_ARGUMENTS and _looks_like_json(value)):
                    return parsed
                return arguments_from_value(value, limits, text_is_json=False)
        return arguments_from_value(value, limits, unwrap=unwrap)
    marked, value = marked_field(attributes, 4)  # a producer's own key on its marked tool span (DECISIONS 991)
    if marked:
        return arguments_from_value(value, limits)
    parameters = {
        key[len(CODE_PARAMETER_PREFIX) : -len(CODE_PARAMETER_SUFFIX)]: value
        for key, value in attributes.items()
        if key.startswith(CODE_PARAMETER_PREFIX) and key.endswith(CODE_PARAMETER_SUFFIX)
    }
    if parameters:
        return arguments_from_value(parameters, limits)
    value = event_arguments(events)
    if value is not _ABSENT:
        return arguments_from_value(value, limits)
    return NOT_RECORDED


@cython.dataclasses.dataclass(repr=False)
@cython.cclass
class Result:
    """A recorded result's hash and value; ``error`` names the shape that says the call failed,
    ``truncated`` is true for JSON text cut off before its end.

    Treat it as read-only: it is not frozen because one is built for every tool step and frozen
    dataclasses are several times slower to build (as ``SpanView``; docs/DECISIONS.md, 107).
    """

    recorded: bool = False
    sha256: str | None = None
    value: str | None = None  # canonical JSON, or the recorded text
    error: str | None = None
    truncated: bool = False
    # The parsed JSON object or array of a result recorded as JSON text (parsed once, for the error
    # shape, and read again for its tokens: tokens.result_tokens); NOT_PARSED for any other result.
    parsed: Any = cython.dataclasses.field(default=NOT_PARSED, compare=False, repr=False)

    def __repr__(self) -> str:
        return fields_repr(self)  # not Cython's: it fails outside the importing thread (reprs.py)


NO_RESULT = Result()


@cython.ccall
def _result_error(value: Any, limits: Limits, config: TraceFenceConfig | None) -> tuple[str | None, bool, Any]:
    """(the error shape the result matches, whether its JSON text is cut off, the value parsed from
    JSON text or :data:`NOT_PARSED`)."""
    parsed = NOT_PARSED
    text = value if isinstance(value, str) else None
    if isinstance(value, str):
        if not _looks_like_json(value):
            return _text_error(value), False, parsed  # text: a framework's own error text, or a failure report? (DECISIONS 402, 1031)
        if text_too_large(value, limits.max_argument_bytes):
            return UNREAD_RESULT, False, parsed  # JSON too large to look into: no evidence it succeeded (DECISIONS 486)
        try:
            value = parsed = parse_json_text(value)
        except JSONTruncatedError:
            return None, True, parsed
        except RecursionError:
            return UNREAD_RESULT, False, parsed  # nested past what the reader follows (DECISIONS 486)
        except JSONNumberError:
            return UNREAD_RESULT, False, parsed  # a number past what the reader converts: the rest unread too (DECISIONS 1030)
        except JSONTextError:
            return _text_error(value), False, parsed
    if type(value) is str and text is not None and json_start(value) in ("{", "["):  # JSON text inside a JSON string, read once (DECISIONS 1030)
        error, truncated, _ = _result_error(value, limits, config)
        return error, truncated, parsed
    if not isinstance(value, (dict, list)):
        return (_text_error(value) if isinstance(value, str) else None), False, NOT_PARSED  # a JSON string: read as the text it is
    shapes = DEFAULT_SHAPES if config is None or not config.result_error_shapes else DEFAULT_SHAPES + tuple(config.result_error_shapes)
    shape = error_shape(value, shapes)
    if shape is not None:
        return f"{shape.key}", False, parsed
    flag = failure_flag(value)  # a field whose key names a failure and whose value says one (DECISIONS 1032)
    if flag is not None:
        return flag, False, parsed
    if type(value) is list:  # an OTLP arrayValue of JSON strings: each item is JSON text of its own (DECISIONS 502)
        found = _json_items_error(value, limits, config)
        if found is not None:
            return found[0], found[1], parsed
    if text is not None and not template_hint(text):  # JSON text that holds no template's words: no walk (most results)
        return None, False, parsed
    return _template_error(value), False, parsed


@cython.ccall
def _json_items_error(items: list, limits: Limits, config: TraceFenceConfig | None) -> tuple | None:
    """``(error, truncated)`` of the first item of ``items`` that is JSON text (an object's or an array's) and reads
    as an error or as cut off by :func:`_result_error`, each item read as a result of its own; ``None`` for none."""
    for item in items:
        if type(item) is str and json_start(item) in ("{", "["):
            error, truncated, _ = _result_error(item, limits, config)
            if error is not None or truncated:
                return error, truncated
    return None


TEMPLATE_ERROR_PREFIX = "template:"  # Result.error of a result that is a framework's own error text: + the framework
# Result.error of a result that could not be checked for an error: JSON text over limits.max_argument_bytes or nested
# past what the parser follows, or bytes (docs/DECISIONS.md 486). Its status is unknown, not ok: a write is held.
UNREAD_RESULT = "unread"


# Result.error of a text result that reads as a failure report no template knows (failure_words.FAILURE_TEXT_PATTERN,
# docs/DECISIONS.md 1031): its outcome is unknown, not ok: a write is held.
FAILURE_TEXT = "failure_text"
_FAILURE_TEXT = re.compile(FAILURE_TEXT_PATTERN)


@cython.ccall
def _text_error(text: str) -> str | None:
    """``Result.error`` for a text result: a framework's own error text (:func:`_template_error`), else
    :data:`FAILURE_TEXT` for text that reads as a failure report (an ASCII text only when it holds one of the templates'
    words, ``result_errors.template_hint``: one scan), else ``None``."""
    found = _template_error(text)
    if found is not None:
        return found
    if (not text.isascii() or template_hint(text)) and _FAILURE_TEXT.search(text) is not None:
        return FAILURE_TEXT
    return None


@cython.ccall
def _template_error(value: Any) -> str | None:
    """``Result.error`` for a result that is a framework's own error or timeout text (``result_errors.error_template``):
    ``template:<framework>``; else ``None``."""
    framework = error_template(value)
    return None if framework is None else TEMPLATE_ERROR_PREFIX + framework


@cython.ccall
def result_from_value(value: Any, limits: Limits, config: TraceFenceConfig | None = None) -> Result:
    """Hash a recorded result: text as recorded (results are never compared, so no canonical form is
    needed), structured values (OTLP kvlist, JSON rows) as canonical JSON. A JSON result is also
    checked for an error shape (``result_errors.py``) and for being cut off."""
    error, truncated, parsed = _result_error(value, limits, config)
    if isinstance(value, str):
        # Hashed as recorded; the value kept is one that can be written out (a lone surrogate escaped).
        text = printable(value)
        return Result(True, sha256_text(value), text, error, truncated, parsed if text is value else NOT_PARSED)
    if isinstance(value, bytes):  # bytes say nothing readable of how the call went (DECISIONS 486)
        return Result(True, sha256_text(value.hex()), value.hex(), UNREAD_RESULT)
    canonical = canonicalize(value, max_bytes=limits.max_argument_bytes, max_depth=limits.max_argument_depth)
    if canonical.text is not None:
        return Result(True, canonical.sha256, canonical.text, error, truncated)
    text = repr(value)
    return Result(True, sha256_text(text), text, error, truncated)


def span_result(attributes: Mapping[str, Any], limits: Limits, events: Sequence[SpanEvent] = (), config: TraceFenceConfig | None = None) -> Result:
    """The call's recorded result from the first convention that records one, then the span's GenAI events."""
    for key in RESULT_KEYS:
        value = attributes.get(key, _ABSENT)
        if value is not _ABSENT:
            return result_from_value(value, limits, config)
    marked, value = marked_field(attributes, 5)  # a producer's own key on its marked tool span (DECISIONS 991)
    if marked:
        return result_from_value(value, limits, config)
    value = event_result(events)
    if value is not _ABSENT:
        return result_from_value(value, limits, config)
    return NO_RESULT


def _message_call_id(message: Any) -> Any:
    if not isinstance(message, dict):
        return None
    kwargs = message.get("kwargs")
    ids = message.get("id")
    if isinstance(kwargs, dict) and isinstance(ids, list) and ids and ids[-1] == TOOL_MESSAGE_CLASS:
        return kwargs.get("tool_call_id")
    if message.get("type") != TOOL_MESSAGE_TYPE:
        return None
    data = message.get("data")
    return data.get("tool_call_id") if isinstance(data, dict) else message.get("tool_call_id")


def result_call_id(result: Result | None) -> str | None:
    """The call id a recorded result that is one LangChain ToolMessage names (``conventions.TOOL_MESSAGE_CLASS``,
    its forms; docs/DECISIONS.md 443), or ``None``: a tool span of LangGraph's ToolNode records no call id of its
    own, only its ToolMessage does. Read from the value already parsed for the result's error shape."""
    if result is None or result.parsed is NOT_PARSED or not isinstance(result.parsed, dict):
        return None
    value = result.parsed
    for key in TOOL_MESSAGE_WRAPPER_KEYS:
        if key in value and isinstance(value[key], dict) and value.keys() <= {key, "kwargs"}:
            value = value[key]
            break
    found = _message_call_id(value)
    return found if isinstance(found, str) and found else None


def result_tokens(result: Result | None, limit: int) -> tuple[int, ...]:
    """The data-flow tokens of a recorded result (``tokens.text_tokens`` of its value), read from the value
    already parsed for its error shape when there is one, so JSON text is parsed once. ``None`` or a
    result not recorded gives ``()``."""
    if result is None or not result.recorded:
        return ()
    if result.parsed is not NOT_PARSED:
        return value_tokens(result.parsed, limit)
    return text_tokens(result.value, limit)


# -- raw values kept on opt-in --------------------------------------------------------------
# The one place where a step's raw values are kept (every step builder calls these): nothing
# unless ``store_raw_values``, and then redacted (otel_tracefence/core/redact.py). The hashes are
# not touched: they stay those of the original values, so redaction never makes two
# different calls compare equal.


def kept_arguments(arguments: Arguments, config: TraceFenceConfig) -> str | None:
    """The canonical arguments a step keeps: ``None`` unless ``store_raw_values``; then with
    secrets replaced by ``[REDACTED]`` (``config.redaction``), still canonical JSON."""
    if not config.store_raw_values or arguments.json is None:
        return None
    redacted, changed = redact_value(arguments.value, config.redaction)
    if not changed:
        return arguments.json
    # Only subtrees were replaced by strings: what had a canonical form within the limits still has one.
    canonical = canonicalize(redacted, max_bytes=config.limits.max_argument_bytes, max_depth=config.limits.max_argument_depth)
    return canonical.text if canonical.text is not None else json.dumps(REDACTED)


def kept_result(result: Result | None, config: TraceFenceConfig) -> str | None:
    """The result value a step keeps: ``None`` unless ``store_raw_values``; then redacted."""
    if not config.store_raw_values or result is None or result.value is None:
        return None
    return redact_result_text(result.value, config.redaction)
