"""Commit on evidence, not on silence (docs/DECISIONS.md 400-403): what a write step's span says of its outcome
besides the conventions the normalizer reads.

* :func:`failure_evidence`: an attribute the normalizer does not read whose key names a status, an error, a failure,
  a timeout or a success (``conventions.FAILURE_EVIDENCE_WORDS``) and whose value is no success value holds a write
  (``unrecognized_failure_evidence``, naming the key): a framework's own status attribute (``app.tool.status=error``)
  must not let a failed write pass as committed because its convention is not learnt yet.
* :func:`failure_event`: a span event named for an error, a failure, a timeout or a cancellation (``error``,
  ``failure``) other than ``exception`` holds a write the same way (docs/DECISIONS.md 974).
* :func:`producer_of`: which producer recorded a tool span and whether it records results by default
  (``conventions.PRODUCER_RESULT_DEFAULTS``): the planner asks it of a write with no result
  (``write_outcome_unrecorded``, ``planner/rules.py``).
* :func:`status_blind_path`: a producer path known to end a failed call's span ok (``status_paths.STATUS_EVIDENCE_PATHS``),
  or a result of MCP content parts alone (``isError`` dropped, any producer): there a write's ok status is no evidence
  of commit (``write_outcome_unrecorded``, docs/DECISIONS.md 780, 800).
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

import cython

from otel_tracefence.core import reasons
from otel_tracefence.core.model import MalformedField
from otel_tracefence.core.textfold import folded_word
from otel_tracefence.core.value_text import shown
from otel_tracefence.normalize.conventions import (
    AGENT_RUN_RECORDS, DURATION_VALUE_PATTERN, FAILURE_EVIDENCE_WORDS, MCP_METHOD_KEY, FRAMEWORK_STATUS_KEYS, NO_FAILURE_VALUES, OUTPUT_MESSAGES_KEY, PRODUCER_RESULT_DEFAULTS, RESULT_KEYS, RESULT_KEY_WORDS, SUCCESS_FLAG_VALUES, SUCCESS_STATUS_VALUES, WORD_PATTERN,
)
from otel_tracefence.normalize.status_paths import (
    MCP_CLIENT_DROPS_IS_ERROR, MCP_CONTENT_PART_REPR, MCP_CONTENT_PART_TYPES, MCP_IS_ERROR_FALSE_REPR, STATUS_EVIDENCE_PATHS,
)
from otel_tracefence.normalize.framework_texts import PAUSED_RUN_TEXTS, REDACTED_MARKS, REDACTED_TEXTS
from otel_tracefence.normalize.read_keys import READ_KEYS, TRACEFENCE_NAMESPACE, misread_key
from otel_tracefence.normalize.span_kinds import marked_fields
from otel_tracefence.normalize.word_search import Words


_WORDS = re.compile(WORD_PATTERN)
_DURATION = re.compile(DURATION_VALUE_PATTERN)
_KINDS: dict[str, Any] = {}  # key -> the kind of outcome it names, or "": keys repeat across spans (bounded below)
_KINDS_MOST = 4096
NO_KIND = ""
WITHOUT_EVIDENCE: set[str] = set()
"""Keys that name no outcome or that the normalizer reads (bounded as :data:`_KINDS`): a span whose keys are all
here costs one C-level ``issuperset``."""


@cython.ccall
def outcome_kind(key: str) -> str:
    """What outcome an attribute key names (``status``, ``error``, ``timeout``, ``success``), or ``""``: none, or a
    key the normalizer reads (``read_keys.READ_KEYS``), of its own namespace or one it holds as a misspelling of a key
    it reads (``read_keys.misread_key``: held there already). Cached per key."""
    found = _KINDS.get(key)
    if found is not None:
        return found
    found = NO_KIND
    if key not in READ_KEYS and not folded_word(key).startswith(TRACEFENCE_NAMESPACE) and misread_key(key) is None:
        words = [word.lower() for word in _WORDS.findall(key)]
        for position, word in enumerate(words):
            kind = FAILURE_EVIDENCE_WORDS.get(word)
            if kind is None and word == "timed" and position + 1 < len(words) and words[position + 1] == "out":
                kind = "timeout"
            if kind is not None:
                found = kind
                break
    if len(_KINDS) >= _KINDS_MOST:
        _KINDS.clear()
        WITHOUT_EVIDENCE.clear()
    _KINDS[key] = found
    if found == NO_KIND:
        WITHOUT_EVIDENCE.add(key)
    return found


def says_no_failure(kind: str, value: Any) -> bool:
    """True when ``value`` of an attribute naming ``kind`` is a success value: a status of ``ok``, ``success``,
    ``completed``... (folded), 0 or an HTTP 2xx; a success flag true; an error, failure or timeout attribute false,
    empty or ``none``; a timeout attribute holding a number or a duration (a setting, not an outcome)."""
    if isinstance(value, (list, tuple)):
        return all(says_no_failure(kind, item) for item in value)
    if isinstance(value, bool):
        return value if kind == "success" else (not value if kind != "status" else False)
    if isinstance(value, (int, float)):
        if kind == "status":
            return value == 0 or 200 <= value < 300
        if kind == "success":
            return value == 1
        if kind == "timeout":
            return True
        return value == 0
    if value is None:
        return kind != "success"
    if not isinstance(value, str):
        return False  # bytes, a kvlist: not understood
    folded = folded_word(value)
    if kind == "status":
        return folded in SUCCESS_STATUS_VALUES or (folded.isdigit() and (folded == "0" or 200 <= int(folded) < 300))
    if kind == "success":
        return folded in SUCCESS_FLAG_VALUES
    if kind == "timeout" and _DURATION.match(value):
        return True
    return folded in NO_FAILURE_VALUES


def failure_evidence(attributes: Mapping[str, Any], failed: bool = False) -> MalformedField | None:
    """The first attribute that names an outcome the normalizer does not read (:func:`outcome_kind`) and holds no
    success value (:func:`says_no_failure`), as the reason to hold a write step (``unrecognized_failure_evidence``);
    ``None`` when there is none. Asked of write steps only: a read replays whatever its outcome. When ``failed`` (the
    step's status is already an error), the failure key of the producer whose marker the span carries
    (``conventions.MARKED_TOOL_FIELDS``: Logfire's ``error``) repeats that status and is read (docs/DECISIONS.md 993)."""
    if attributes.keys() <= WITHOUT_EVIDENCE:
        return None
    for key, value in attributes.items():
        kind = outcome_kind(key)
        if kind != NO_KIND and not says_no_failure(kind, value):
            marked = marked_fields(attributes) if failed else None
            if marked is not None and marked[6] == key:
                continue
            return MalformedField(
                "status",
                f"attribute {key!r} holds {shown(value)}: it names the call's {kind} and is no success value the normalizer knows: "
                "whether the write committed cannot be known",
                reason=reasons.UNRECOGNIZED_FAILURE_EVIDENCE,
            )
    return None


_EVENT_FAILURE_KINDS = frozenset({"error", "timeout", "cancellation"})  # an event carries no status value: its name says it
EXCEPTION_EVENT_NAME = "exception"  # read by status.py (and a near-miss of it held there): not evidence here


def failure_event(events: Any) -> MalformedField | None:
    """The first span event whose name names an error, a failure, a timeout or a cancellation (:func:`outcome_kind`:
    ``error``, ``failure``, ``tool.timeout``, ``cancelled``) other than the ``exception`` event ``status.py`` reads,
    as the reason to hold a write step (``unrecognized_failure_evidence``, naming the event); ``None`` for none. An
    ``error`` event is how some producers record a failure the span's status does not (docs/DECISIONS.md 974)."""
    for event in events:
        name = event.name
        if type(name) is not str or folded_word(name) == EXCEPTION_EVENT_NAME:
            continue
        kind = outcome_kind(name)
        if kind in _EVENT_FAILURE_KINDS:
            return MalformedField(
                "status",
                f"span event {name!r} names the call's {kind}, and only the {EXCEPTION_EVENT_NAME!r} event is read: "
                "whether the write committed cannot be known",
                reason=reasons.UNRECOGNIZED_FAILURE_EVIDENCE,
            )
    return None


@cython.ccall
def producer_of(attributes: Mapping[str, Any]) -> tuple:
    """``(producer, whether it records results by default)`` for a tool span (``conventions.PRODUCER_RESULT_DEFAULTS``,
    first match); ``(OTHER_PRODUCER, None)`` for a span of a producer not in the table (the trace alone shows whether it
    records them). A step not read from a span (a row) has producer ``""``: none of this applies to it."""
    for producer, key, records, _ in PRODUCER_RESULT_DEFAULTS:
        if key in attributes:
            return producer, records
    return OTHER_PRODUCER, None


OTHER_PRODUCER = "span"  # a tool span of a producer the table does not list


def _is_content_parts(value: str | None) -> bool:
    """True when a recorded result (canonical JSON or text) is an MCP content part or a non-empty list of them, or
    text holding the MCP Python SDK's repr of one (``status_paths.MCP_CONTENT_PART_REPR``) and no ``isError=False``."""
    if not value:
        return False
    if "Content(type='" in value or "(type='resource" in value:  # the repr's prefilter: one scan, no regex on other text
        return MCP_CONTENT_PART_REPR.search(value) is not None and not any(flag in value for flag in MCP_IS_ERROR_FALSE_REPR)
    if value[0] not in "{[" or '"type"' not in value:  # canonical JSON: every part has a "type" key
        return False
    try:
        parsed = json.loads(value)
    except ValueError:
        return False
    parts = parsed if isinstance(parsed, list) and parsed else [parsed]
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str) or kind not in MCP_CONTENT_PART_TYPES:  # a list or an object is no part type (unhashable)
            return False
    return True


MCP_PARTS_ALONE = "a result of MCP content parts alone, the CallToolResult without its isError"
MCP_CLIENT_CALL = "an MCP client's tools/call span with no result, which an isError result does not end in error"
MCP_IS_ERROR_DROPPED = (MCP_PARTS_ALONE, MCP_CLIENT_CALL)
"""The start of the message :func:`status_blind_path` gives a result of MCP content parts: ``normalize/trace.py``
lifts it when the MCP server's own span of the call says ok (docs/DECISIONS.md 800)."""


def status_blind_path(attributes: Mapping[str, Any], result_value: str | None, result_recorded: bool = False, kind: str = "") -> str | None:
    """What makes a tool span's status no evidence of its outcome, or ``None``: the status is read as before.

    A recorded result of MCP content parts alone (``status_paths.MCP_CONTENT_PART_TYPES``), whoever recorded it: the
    CallToolResult's ``isError`` was dropped, and with it the call's failure (MCP specification, Tools, "Error
    Handling"; docs/DECISIONS.md 800). Else a producer path of ``status_paths.STATUS_EVIDENCE_PATHS``: under an entry
    marking the path that reports failures, a span of that producer without the marker is on another path; under an
    entry marking a path that drops them, a marked span is on it (docs/DECISIONS.md 780), unless the entry says a
    recorded result is evidence there and ``result_recorded`` (docs/DECISIONS.md 955). Asked of ok write steps
    only: a read replays whatever its outcome."""
    if _is_content_parts(result_value):
        return f"{MCP_PARTS_ALONE} (MCP reports a tool's failure as a result with isError true)"
    if not result_recorded and (kind, attributes.get(MCP_METHOD_KEY)) == MCP_CLIENT_DROPS_IS_ERROR:  # DECISIONS 988
        return MCP_CLIENT_CALL
    for path, producer, marker, reports, result_is_evidence, _ in STATUS_EVIDENCE_PATHS:
        if result_is_evidence and result_recorded:
            continue
        matched = True
        for key, value in producer:
            if attributes.get(key) != value:
                matched = False
                break
        if not matched:
            continue
        marked = marker in attributes
        if reports and not marked:
            return f"a span of {path}'s producer without {marker}: not that path, the one whose failures end the span ERROR"
        if marked and not reports:
            return f"{path} ({marker}), which ends a failed call's span ok"
    return None


@cython.ccall
def framework_status_failed(attributes: Mapping[str, Any]) -> bool:
    """True when a framework's own status attribute (``conventions.FRAMEWORK_STATUS_KEYS``: Strands'
    ``gen_ai.tool.status``, OpenLLMetry's ``gen_ai.task.status``) holds no success value."""
    for key in FRAMEWORK_STATUS_KEYS:
        value = attributes.get(key)
        if value is not None and not says_no_failure("status", value):
            return True
    return False


def redacted(value: Any) -> bool:
    """True when a recorded value (text, or a JSON string's canonical text) is a producer's stand-in for a value it
    was told to hide (``framework_texts.REDACTED_VALUES``, compared folded for case, docs/DECISIONS.md 952, 979),
    holds a JSON object field whose whole value is one (``{"id": "****"}``, 979), or holds a producer's mark of a
    part it hid (``framework_texts.REDACTED_MARKS``: Logfire's scrubbing, 986)."""
    if not isinstance(value, str) or not value:
        return False
    if len(value) <= _STAND_IN_LONGEST and (value.casefold() in REDACTED_TEXTS or (value[0] == '"' and value[1:-1].casefold() in REDACTED_TEXTS)):
        return True
    if not _STAND_IN_HINTS.any_in(value):  # most recorded values: one scan
        return False
    if value[0] in "{[" and _STAND_IN_FIELD.search(value) is not None:
        return True
    for _, mark, _ in REDACTED_MARKS:
        if mark in value:
            return True
    return False


_STAND_IN_LONGEST = max(len(text) for text in REDACTED_TEXTS) + 2  # a quoted one, as a JSON string's text
# The prefilter, case-folded as the field's pattern is (one scan in C of an ASCII text; most recorded values hold none):
# a JSON string value's opening quote followed by a stand-in's first character (``_``, ``*``, ``[``, ``<``, Go's
# ``\u003c``), the word the other stand-ins hold, or a producer's mark of a part it hid.
_STAND_IN_HINTS = Words(('"_', '"*', '"[', '"<', "\\u003c", "redacted", *(mark.lower() for _, mark, _ in REDACTED_MARKS)), fold=True)
_STAND_IN_FIELD = re.compile(
    r'(?i):\s*"(?:' + "|".join(
        sorted({re.escape(form) for text in REDACTED_TEXTS for form in (text, text.replace("<", "\\u003c").replace(">", "\\u003e"))}, key=len, reverse=True)
    ) + r')"\s*[,}]'
)  # a JSON object field whose whole value is a stand-in (JSON text; Go's encoders write < and > as \u003c, \u003e)


_RESULT_WORD = re.compile(r"(?i)output|result|respon|return")  # the prefilter: a key holding none names no result


@cython.ccall
def unread_result_key(attributes: Mapping[str, Any]) -> str | None:
    """The first attribute key the normalizer does not read whose last part names what a call returned
    (``conventions.RESULT_KEY_WORDS``, the part after its last dot or that part's last word: ``gen_ai.tool.output``,
    ``mastra.tool.result``, ``output``, ``tool_outputs``, ``toolCallResult``) and whose value is
    not empty, or ``None``: on a write span with no result read, the result may be there in a form no convention
    reads (docs/DECISIONS.md 953)."""
    for key, value in attributes.items():
        if key in READ_KEYS or value is None or value == "" or value == [] or value == {} or _RESULT_WORD.search(key) is None:
            continue
        last = key.rpartition(".")[2]
        words = _WORDS.findall(last)
        if folded_word(last) in RESULT_KEY_WORDS or (words and words[-1].lower() in RESULT_KEY_WORDS):
            return key
    return None


_OUTPUT_KEYS = ("output.value", OUTPUT_MESSAGES_KEY)  # where a model span records its output (OpenInference, GenAI)


def run_output_unrecorded(attributes: Mapping[str, Any]) -> bool | None:
    """For an agent run's span that recorded no output (``conventions.AGENT_RUN_RECORDS``): ``True`` when it recorded
    its input (held in a trace with no tool span, docs/DECISIONS.md 987), ``False`` when it recorded neither (held only
    where the trace holds no model span either, 1010); ``None`` for a span of no run, or a run that recorded its output."""
    for kind_key, kind, input_key, output_key in AGENT_RUN_RECORDS:
        if attributes.get(kind_key) == kind and attributes.get(output_key) in (None, ""):
            return attributes.get(input_key) not in (None, "")
    return None


def hidden_output(attributes: Mapping[str, Any]) -> bool:
    """True when a span's recorded output is its producer's stand-in for a hidden value (:func:`redacted`): the calls
    a model asked for in it cannot be read (docs/DECISIONS.md 952)."""
    return any(redacted(attributes.get(key)) for key in _OUTPUT_KEYS)


_PAUSED_RUN = tuple((framework, re.compile(pattern)) for framework, _, pattern, _ in PAUSED_RUN_TEXTS)
_PAUSED_OUTPUT_KEYS = (*RESULT_KEYS, OUTPUT_MESSAGES_KEY)  # where a run's output is recorded
_PAUSED_OUTPUT_KEY_SET = frozenset(_PAUSED_OUTPUT_KEYS)


def paused_run(attributes: Mapping[str, Any]) -> str | None:
    """The framework whose text for a run paused with tool calls waiting (``framework_texts.PAUSED_RUN_TEXTS``) a span's
    recorded output is, or ``None`` (docs/DECISIONS.md 958)."""
    if _PAUSED_OUTPUT_KEY_SET.isdisjoint(attributes):  # most spans: one C-level test
        return None
    for key in _PAUSED_OUTPUT_KEYS:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            text = value.strip().strip('"')
            for framework, pattern in _PAUSED_RUN:
                if pattern.fullmatch(text):
                    return framework
    return None
