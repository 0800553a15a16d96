"""Flat rows of the seed's form: a JSON array, NDJSON, or CSV with a header.

Fields: ``trace_id`` (optional), ``call_id`` or ``id``, ``tool``, ``effect``,
``status``, ``idempotency_key``, ``arguments`` (a JSON value; JSON text in CSV),
``result`` (optional), ``result_stable`` (optional: ``true`` or ``false``, as a
boolean or as that word), ``start_time`` (optional: Unix nanoseconds, or an RFC 3339
timestamp). The camelCase spellings ``traceId``, ``callId``, ``idempotencyKey``,
``resultStable`` and ``startTime`` are accepted; a row that carries both spellings
of one field is malformed at that field. Other fields are ignored, each named once
in :attr:`RowsRead.warnings`. An empty CSV cell is an absent field.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Iterator

from otel_tracefence.core.canonical import is_unicode, printable
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import MalformedField, ToolStatus, ToolStep
from otel_tracefence.normalize.effect import resolve_effect
from otel_tracefence.normalize.status import parse_declared as parse_status
from otel_tracefence.normalize.step import recorded_result_outcome, result_stability
from otel_tracefence.normalize.tokens import value_tokens
from otel_tracefence.normalize.argument_keys import arguments_key
from otel_tracefence.normalize.values import NOT_RECORDED, arguments_from_value, kept_arguments, kept_result, result_from_value, result_tokens
from otel_tracefence.readers.errors import InputError, UnreadableInput
from otel_tracefence.core.textfold import visible

_ABSENT = object()


@dataclass(slots=True)
class RowsRead:
    """Steps by trace id, and every row rejected (a row with malformed fields yields both)."""

    steps: dict[str, list[ToolStep]] = field(default_factory=dict)
    errors: list[InputError] = field(default_factory=list)
    warnings: list[InputError] = field(default_factory=list)
    """One per column that is no row field, at the line it first appears (the header's, in CSV)."""


FIELDS = ("trace_id", "call_id", "id", "tool", "effect", "status", "idempotency_key", "arguments", "result", "result_stable", "start_time")
"""The row fields, in their snake_case spelling."""
CAMEL_CASE = {"traceId": "trace_id", "callId": "call_id", "idempotencyKey": "idempotency_key", "resultStable": "result_stable", "startTime": "start_time"}
"""The camelCase spellings accepted for the fields of more than one word."""
_KNOWN = frozenset(FIELDS) | frozenset(CAMEL_CASE)


def unknown_column(name: str, line: int) -> InputError:
    """The warning for a column that is no row field: ignored, with the closest field when one is near."""
    close = difflib.get_close_matches(name.lower().replace("-", "_"), [*FIELDS, *(c.lower() for c in CAMEL_CASE)], n=1, cutoff=0.75)
    if close:
        suggestion = CAMEL_CASE.get(next((c for c in CAMEL_CASE if c.lower() == close[0]), ""), close[0])
        hint = f"did you mean {suggestion!r}?"
    else:
        hint = f"the fields are {', '.join(FIELDS)}"
    return InputError(line, printable(str(name))[:100], f"not a row field, ignored; {hint}", planned=True)


_SPELLINGS = {name.casefold(): name for name in FIELDS} | {camel.casefold(): snake for camel, snake in CAMEL_CASE.items()}


def field_named(name: str) -> str | None:
    """The field (snake_case) that ``name`` names once case-folded and stripped of white space and of invisible
    characters (Unicode format characters such as U+200B, NFKC: ``textfold.visible``), when it is not one of its
    accepted spellings (``"Status"``, ``"status "``, ``"TraceId"``, ``"status\u200b"``); else None (DECISIONS 183, 208)."""
    if name in _KNOWN or not isinstance(name, str):
        return None
    return _SPELLINGS.get(visible(name).strip().casefold())


def _one_spelling(row: dict[str, Any]) -> tuple[dict[str, Any], list[MalformedField]]:
    """``row`` with camelCase fields under their snake_case names; a field given in two spellings is malformed.

    A name that differs from a field only by case or white space is read as that field and the row is malformed at
    it (a misspelt ``trace_id`` must not move the row out of its trace); given with the field itself it is malformed
    as two spellings are (DECISIONS 183).
    """
    if not any(camel in row for camel in CAMEL_CASE) and not any(field_named(name) for name in row if name not in _KNOWN):
        return row, []
    row = dict(row)
    malformed = []
    for camel, snake in CAMEL_CASE.items():
        if camel not in row:
            continue
        value = row.pop(camel)
        if _text(row, snake) is not _ABSENT and not (value is None or value == ""):
            malformed.append(MalformedField(snake, f"both {snake} and {camel} given: give one"))
        elif _text(row, snake) is _ABSENT:
            row[snake] = value
    for name in [name for name in row if field_named(name)]:
        snake = field_named(name)
        value = row.pop(name)
        if value is None or value == "":
            continue
        if _text(row, snake) is not _ABSENT:
            malformed.append(MalformedField(snake, f"both {snake} and {name!r} given: give one, spelt {snake}"[:300]))
        else:
            row[snake] = value
            malformed.append(MalformedField(snake, f"{name!r} is not a field name: write {snake}, lower case, no spaces"[:300]))
    return row, malformed


def _text(row: dict[str, Any], name: str) -> Any:
    value = row.get(name, _ABSENT)
    return _ABSENT if value is None or value == "" else value


_UINT64_END = 1 << 64  # start times are Unix nanoseconds in a uint64, as in OTLP and the plan's schema
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _start_time(value: Any) -> int | MalformedField:
    """Unix nanoseconds (an integer, or ASCII digits) or an RFC 3339 timestamp with an offset; either
    must fall in 0 .. 2**64-1 (1970 to 2554): a time the plan cannot hold is malformed, never clamped."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _UINT64_END:
        return value
    if isinstance(value, str):
        if value.isascii() and value.isdigit():  # str.isdigit() alone also takes "²", which int() refuses
            if len(value) <= 20 and int(value) < _UINT64_END:
                return int(value)
        else:
            try:
                moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                pass
            else:
                if moment.tzinfo is not None:
                    since = moment - _EPOCH  # exact; timestamp() is a float, and fails near year 1
                    nanos = (since.days * 86_400 + since.seconds) * 1_000_000_000 + since.microseconds * 1000
                    if 0 <= nanos < _UINT64_END:
                        return nanos
    return MalformedField(
        "start_time", f"start_time {value!r} is neither Unix nanoseconds (0 to 2**64-1) nor an RFC 3339 timestamp with offset from 1970 on"[:300]
    )


def _not_unicode(name: str, value: str) -> MalformedField:
    return MalformedField(name, f"{name} {value!r} holds a lone surrogate: not Unicode text"[:300])


def row_trace_id(text: str) -> tuple[str, MalformedField | None]:
    """A row's trace id as the trace it names: hex digits in lower case (``5B8E...`` is the trace OTLP writes
    ``5b8e...``), white space around it taken off and the row malformed for it, as a field name misspelt by white
    space is (docs/DECISIONS.md 183, 258): the row stays in the trace it names and is held."""
    stripped = text.strip()
    bad = MalformedField("trace_id", f"trace_id {text!r} has white space around it"[:300]) if stripped != text else None
    if stripped and all(ch in _HEX_DIGITS for ch in stripped):
        stripped = stripped.lower()
    return stripped, bad


_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


def _not_text(name: str, value: object, wanted: str) -> str:
    """Why a field's value is refused, the value spelled as JSON (the rows' own notation: ``true``, not Python's
    ``True``; a lone surrogate in it escaped, :func:`printable`), at most 300 characters."""
    try:
        shown = printable(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):  # not from JSON (a CSV cell is a string): as Python shows it
        shown = repr(value)
    return f"{name} {shown} is not {wanted}"[:300]


def _trace_id_field(row: dict[str, Any], malformed: list[MalformedField]) -> str | int:
    """The row's ``trace_id`` (``""`` when absent): an integer as given, a string as :func:`row_trace_id` reads it; a
    value of another type, or a string holding a lone surrogate, is malformed (appended to ``malformed``) and kept printable."""
    trace_id = _text(row, "trace_id")
    if trace_id is _ABSENT:
        trace_id = ""
    elif isinstance(trace_id, (dict, list, bool, float)):
        malformed.append(MalformedField("trace_id", _not_text("trace_id", trace_id, "a string or an integer")))
        trace_id = printable(str(trace_id))
    elif isinstance(trace_id, str) and not is_unicode(trace_id):
        malformed.append(_not_unicode("trace_id", trace_id))
        trace_id = printable(trace_id)
    elif isinstance(trace_id, str):
        trace_id, bad = row_trace_id(trace_id)
        if bad is not None:
            malformed.append(bad)
    return trace_id


def _call_id_field(row: dict[str, Any], line: int, malformed: list[MalformedField]) -> str | int:
    """The row's ``call_id``, else its ``id``; when neither is there, or it is neither a string nor an integer, or holds
    a lone surrogate, the row is malformed (appended to ``malformed``) and its call id is ``line-<line>``."""
    call_id = _text(row, "call_id")
    if call_id is _ABSENT:
        call_id = _text(row, "id")
    if call_id is _ABSENT:
        malformed.append(MalformedField("call_id", "no call_id or id"))
        call_id = f"line-{line}"
    elif isinstance(call_id, (dict, list, bool, float)):
        malformed.append(MalformedField("call_id", _not_text("call_id", call_id, "a string or an integer")))
        call_id = f"line-{line}"
    elif isinstance(call_id, str) and not is_unicode(call_id):
        malformed.append(_not_unicode("call_id", call_id))
        call_id = f"line-{line}"
    return call_id


def _tool_field(row: dict[str, Any], malformed: list[MalformedField]) -> str:
    """The row's ``tool``; ``""`` when it is absent, not a string or not Unicode text (the row then malformed: ``malformed``)."""
    tool = _text(row, "tool")
    if not isinstance(tool, str):
        malformed.append(MalformedField("tool", "no tool name" if tool is _ABSENT else _not_text("tool", tool, "a string")))
        return ""
    if not is_unicode(tool):
        malformed.append(_not_unicode("tool", tool))
        return ""
    return tool


def _status_field(row: dict[str, Any], malformed: list[MalformedField]) -> ToolStatus:
    """The row's declared ``status`` (:func:`parse_status`); unknown when absent or malformed (appended to ``malformed``)."""
    status = _text(row, "status")
    if status is _ABSENT:
        return ToolStatus.UNKNOWN
    status = parse_status(status)
    if isinstance(status, MalformedField):
        malformed.append(status)
        return ToolStatus.UNKNOWN
    return status


def _idempotency_key_field(row: dict[str, Any], tool: str, arguments: Any, config: TraceFenceConfig, malformed: list[MalformedField]) -> str | None:
    """The row's ``idempotency_key`` (an integer as its digits), else the one its arguments give at the tool's key
    argument, the configured ones, or any spelling (``argument_keys.arguments_key``, as for spans); ``None`` when there
    is none, or when it is malformed (appended to ``malformed``: not a string, not Unicode text, or an argument that is
    no key)."""
    key = _text(row, "idempotency_key")
    if key is _ABSENT:
        key = arguments_key(arguments.value, tool, config)
        if isinstance(key, MalformedField):
            malformed.append(key)
            key = None
    elif isinstance(key, int) and not isinstance(key, bool):
        key = str(key)
    elif not isinstance(key, str):
        malformed.append(MalformedField("idempotency_key", _not_text("idempotency_key", key, "a string")))
        key = None
    elif not is_unicode(key):
        malformed.append(_not_unicode("idempotency_key", key))
        key = None
    return key


def _start_time_field(row: dict[str, Any], malformed: list[MalformedField]) -> int:
    """The row's ``start_time`` in Unix nanoseconds (:func:`_start_time`); 0 when absent or malformed (appended to ``malformed``)."""
    start = _start_time(row["start_time"]) if _text(row, "start_time") is not _ABSENT else 0
    if isinstance(start, MalformedField):
        malformed.append(start)
        return 0
    return start


def row_to_step(row: dict[str, Any], line: int, config: TraceFenceConfig, *, arguments_are_text: bool) -> ToolStep:
    """One row to a step; what cannot be read is listed in ``malformed`` (the CLI rejects such rows)."""
    row, malformed = _one_spelling(row)
    # Names and ids end up in the plan, which is written as UTF-8: one that is not a string or an
    # integer, or holds a lone surrogate (JSON's "\ud800" escape), is malformed, never printed as is.
    trace_id = _trace_id_field(row, malformed)
    call_id = _call_id_field(row, line, malformed)
    tool = _tool_field(row, malformed)
    declared = _text(row, "effect")
    effect, source, bad_effect = resolve_effect(None if declared is _ABSENT else declared, tool, {}, config)
    if bad_effect is not None:
        malformed.append(bad_effect)
    status: Any = _status_field(row, malformed)
    raw_arguments = _text(row, "arguments") if arguments_are_text else row.get("arguments", _ABSENT)
    # A string is JSON text in every format, as in CSV and in gen_ai.tool.call.arguments: an
    # encoded object must compare equal to the same object written out (docs/DECISIONS.md).
    arguments = NOT_RECORDED if raw_arguments is _ABSENT or raw_arguments is None else arguments_from_value(
        raw_arguments, config.limits, text_is_json=True
    )
    if arguments.malformed is not None:
        malformed.append(arguments.malformed)
    key = _idempotency_key_field(row, tool, arguments, config, malformed)
    raw_result = _text(row, "result") if arguments_are_text else row.get("result", _ABSENT)
    result = result_from_value(raw_result, config.limits, config) if raw_result not in (_ABSENT, None) else None
    notes: tuple[str, ...] = ()
    if result is not None:  # the span's rule (DECISIONS 500): an error, a framework's error text or a cut-off value is no commit
        status, notes = recorded_result_outcome(status, result, False, malformed)
    declared_stable = _text(row, "result_stable")
    if isinstance(declared_stable, str) and declared_stable in ("true", "false"):
        declared_stable = declared_stable == "true"  # CSV holds text: the same two words in every format
    stable, bad_stability = result_stability(None if declared_stable is _ABSENT else declared_stable, tool, config)
    if bad_stability is not None:
        malformed.append(bad_stability)
    start = _start_time_field(row, malformed)
    return ToolStep(
        trace_id=str(trace_id),
        call_id=str(call_id),
        tool=tool,
        effect=effect,
        effect_source=source,
        status=status,
        idempotency_key=key,
        arguments_json=kept_arguments(arguments, config),
        arguments_sha256=arguments.sha256,
        arguments_unavailable=arguments.unavailable,
        result_recorded=result is not None,
        result_sha256=result.sha256 if result else None,
        result_value=kept_result(result, config),
        start_time_unix_nano=start,
        sequence=line,
        malformed=tuple(malformed),
        notes=notes,
        result_stable=stable,
        argument_tokens=value_tokens(arguments.value, config.limits.max_tokens_per_value),
        result_tokens=result_tokens(result, config.limits.max_tokens_per_value),
    )


_JSON_SPACE = " \t\r\n"  # RFC 8259 white space; str.strip() would take more


def _json_array_rows(text: str) -> Iterator[tuple[int, Any]]:
    """Elements of a top-level JSON array with the line each starts on."""
    decoder = _ROW_DECODER
    index = len(text) - len(text.lstrip(_JSON_SPACE))
    if not text.startswith("[", index):
        raise UnreadableInput("line 1: a JSON rows file must be an array of objects")
    index += 1
    expect_value = True
    seen = False
    line, counted_to = 1, 0  # lines counted once, as the scan moves on (counting from 0 for each row was quadratic)
    while True:
        while index < len(text) and text[index] in _JSON_SPACE:
            index += 1
        if index >= len(text):
            raise UnreadableInput(f"line {text.count(chr(10), 0, index) + 1}: the JSON array is not closed")
        line += text.count("\n", counted_to, index)
        counted_to = index
        if text[index] == "]" and (not expect_value or not seen):
            if text[index + 1 :].strip(_JSON_SPACE):
                raise UnreadableInput(f"line {line}: not JSON: more after the array's closing ]")
            return
        if text[index] == "," and not expect_value:
            index += 1
            expect_value = True
            continue
        if not expect_value or text[index] in ",]":  # [1 2], [1,], [,1]: not JSON
            raise UnreadableInput(f"line {line}: not JSON: expected {'a value' if expect_value else ', or ]'}")
        try:
            value, index = decoder.raw_decode(text, index)
        except json.JSONDecodeError as exc:
            raise UnreadableInput(f"line {exc.lineno}: not JSON: {exc.msg}") from None
        except (RecursionError, ValueError) as exc:
            raise UnreadableInput(f"line {line}: {exc if isinstance(exc, ValueError) else 'nesting too deep'}") from None
        expect_value, seen = False, True
        yield line, value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all distinct: with a key twice (``"effect": "write", "effect": "read"``)
    which one the producer meant cannot be known, so the row is refused, never read last-wins."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise ValueError(f"key {twice!r} appears twice in one object")
    return obj


_ROW_DECODER = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_unique_keys)


def _ndjson_rows(text: str) -> Iterator[tuple[int, Any]]:
    # NDJSON and JSON Lines end a line at "\n" only: str.splitlines() would also split at U+2028, U+0085 or a
    # form feed inside a string (valid JSON), breaking the row and every line number after it.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            yield number, _ROW_DECODER.decode(line)
        except json.JSONDecodeError as exc:
            yield number, InputError(number, "row", f"not JSON: {exc.msg} at column {exc.colno}")
        except RecursionError:
            yield number, InputError(number, "row", "JSON nested too deep")
        except ValueError as exc:
            yield number, InputError(number, "row", str(exc))


def _csv_rows(text: str) -> Iterator[tuple[int, Any]]:
    # The csv module refuses cells over 128 KiB by default (a process-wide limit): raise it
    # to the text's length so a big arguments cell reaches the limits and is reported
    # "arguments_too_large" as in JSON rows, instead of failing the whole file.
    if len(text) >= csv.field_size_limit():
        csv.field_size_limit(len(text) + 1)
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)  # an unclosed quote is an error, not a short row
    try:
        header = reader.fieldnames or []
    except csv.Error as exc:
        raise UnreadableInput(f"line 1: not CSV: {exc}") from None
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise UnreadableInput(f"line 1: column {twice[0]!r} appears twice in the header")
    if "tool" not in header or not ({"call_id", "callId", "id"} & set(header)):
        raise UnreadableInput(_not_a_header(text))
    start = reader.line_num + 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield start, InputError(start, "row", f"not CSV: {exc}")
            return
        if None in row:
            yield start, InputError(start, "row", f"{len(header) + len(row[None])} fields where the header has {len(header)}")
        elif None in row.values():  # DictReader fills the cells a short row lacks with None
            filled = sum(value is not None for value in row.values())
            yield start, InputError(start, "row", f"{filled} fields where the header has {len(header)}")
        else:
            yield start, row
        start = reader.line_num + 1


def _not_a_header(text: str) -> str:
    """Why the first line is no CSV header: a JSON value that is no rows file is named as such."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = []
    if isinstance(value, (list, dict)):  # rows or OTLP/JSON read as CSV on purpose (--input-format csv)
        return "line 1: the CSV header must name at least tool and call_id (or id)"
    kind = {bool: "true/false", str: "string", type(None): "null"}.get(type(value), "number")
    return (
        f"line 1: the input is a JSON {kind}, not a trace file: give OTLP/JSON (an object with resourceSpans), "
        "JSON rows (an array of objects), NDJSON rows (one object per line) or CSV rows with a header"
    )


READERS = {"json": _json_array_rows, "ndjson": _ndjson_rows, "csv": _csv_rows}


def read_rows(text: str, input_format: str, config: TraceFenceConfig) -> RowsRead:
    """Read rows of ``input_format`` (``json``, ``ndjson`` or ``csv``) into steps by trace.

    Raises :class:`UnreadableInput` when the file as a whole cannot be read.
    """
    result = RowsRead()
    unknown: set[str] = set()
    for line, row in READERS[input_format](text):
        if isinstance(row, InputError):
            result.errors.append(row)
            continue
        if not isinstance(row, dict):
            result.errors.append(InputError(line, "row", f"a row must be an object, not {type(row).__name__}"))
            continue
        for name in row:
            if name not in _KNOWN and name not in unknown and not field_named(name):
                unknown.add(name)
                result.warnings.append(unknown_column(name, 1 if input_format == "csv" else line))
        step = row_to_step(row, line, config, arguments_are_text=input_format == "csv")
        result.errors.extend(InputError(line, f.field, f.message, planned=True) for f in step.malformed)
        result.steps.setdefault(step.trace_id, []).append(step)
        for other in _other_trace_ids(row, step.trace_id):  # a malformed row naming two traces is held in both
            result.steps.setdefault(other, []).append(replace(step, trace_id=other))
    return result


def _other_trace_ids(row: dict[str, Any], trace_id: str) -> list[str]:
    """The trace ids other than ``trace_id`` that ``row`` gives in another spelling (``traceId``, ``Trace_ID``):
    such a row is malformed, and it stands in each trace it names (DECISIONS 183)."""
    names = [name for name in row if name == "traceId" or field_named(name) == "trace_id"]
    values = (row[name] for name in names)
    return list(dict.fromkeys(str(v) for v in values if isinstance(v, (str, int)) and not isinstance(v, bool) and v != "" and str(v) != trace_id))
