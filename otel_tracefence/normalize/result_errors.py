"""Results that say the call failed although its span says ok: the shapes, in one place.

A tool span whose status is OK (or unset) but whose recorded result is an error is
not a committed write: its status is ``error`` with the note ``error_in_result``.
The shapes below are what producers really record; operators add their own with
``result_error_shapes`` in the YAML config (:class:`~otel_tracefence.core.config.ResultErrorShape`).

Sources:

* MCP ``CallToolResult.isError`` (MCP specification, "Tools", error handling);
  Anthropic's ``tool_result`` blocks use ``is_error``.
* Content parts ``{"type": "error", ...}`` (MCP and agent frameworks' error parts).
* A top-level ``"error"`` object or message (JSON-RPC 2.0, most HTTP APIs).
* ``"response_type": "ERROR_HANDLED_BY_REFLECT_AND_RETRY_PLUGIN"``: Google ADK's ReflectAndRetryToolPlugin answers
  a failed tool call with this response (its ToolFailureResponse) while the span stays unset (google/adk-python
  src/google/adk/plugins/_reflect_retry_utils.py, REFLECT_AND_RETRY_RESPONSE_TYPE; docs/DECISIONS.md 551).
* ``"response_status": "Error"`` (OpenLLMetry and CrewAI tool outputs); a top-level
  ``"status"`` of ``error``, ``failed`` or ``failure`` (LangChain's ``ToolMessage``
  ``status: "error"``, most job APIs); ``"success": false`` and ``"ok": false``.
* GraphQL: a non-empty top-level ``"errors"`` list (GraphQL specification, "Response").
* A retry verdict, ``"retryable"`` or ``"non_retryable"``, true or false: only a failure report says whether the call
  may be tried again (CrewAI's ``ToolFailure``, crewAIInc/crewAI 1.15 src/crewai/tools/tool_failure.py, returned by a
  tool or by its MCP client on ``isError``; Temporal's ``ApplicationError``; docs/DECISIONS.md 983).
* An HTTP status code of 500 to 599 (RFC 9110 section 15.6, server errors); 4xx are
  refusals, which the API did not carry out, so they are not listed.
* A top-level ``"status"`` naming an outcome that is not a success or is not known (``timeout``,
  ``timed_out``, ``cancelled``, ``canceled``, ``aborted``, ``unknown``) or holding an HTTP status number that
  says so (500-599, 408 Request Timeout, 429 Too Many Requests); ``"timed_out": true`` / ``"timeout": true``
  (docs/DECISIONS.md 342).
* A status-like field (``status``, ``state``, ``outcome``, ``result``, ``code``, ``error_code``) whose string value is
  a code whose words name a failure (``INTERNAL_SERVER_ERROR``, ``SERVICE_UNAVAILABLE``, ``card_declined``,
  ``PAYMENT_FAILED``: :func:`failure_word_code`), GraphQL's top-level ``extensions`` read as a wrapper
  (docs/DECISIONS.md 1020, 1021).

Where the shapes look (docs/DECISIONS.md 342): a shape that is not ``anywhere`` looks at the result's top-level
object and at the object one level down under ``result``, ``data``, ``response`` or ``output`` (a wrapper around
the tool's own answer; its key folded too, ``"Result"``, ``"DATA"``: 371), or ``status`` when it is an object
(``{"status": {"code": 504}}``, 376). A top-level ``code`` (``{"code": 504}``, ``{"status": {"code": 503}}``) says
error with the same HTTP numbers as ``status`` (docs/DECISIONS.md 376). A status-like key (``status``, ``status_code``,
``statusCode``, ``http_status``) says error with one table of HTTP numbers (500-599, 408, 429), a number written as a
string too (``"504"``); a ``status`` string is compared folded (``"timed out"``, ``"TimedOut"``) and may name a gRPC
code whose outcome is not known (``DEADLINE_EXCEEDED``, ``UNAVAILABLE``...); a boolean flag may be written as the
string ``"true"``/``"false"`` (docs/DECISIONS.md 371). A key that is a shape's key only after folding (``textfold.folded_word``: case,
separators, white space, format characters; ``"Error"``, ``"timedOut"``) is read as that key when its value
says error there: such a key can only hold a step, never let one pass (as docs/DECISIONS.md 250 holds a
misspelt attribute key).
"""

from __future__ import annotations

from typing import Any, Iterable

import cython

import re

from pydantic import ConfigDict

from otel_tracefence.core.config import ResultErrorShape
from otel_tracefence.core.textfold import folded_word
from otel_tracefence.normalize.conventions import (
    LANGCHAIN_SERIALIZED_MARKER, LANGCHAIN_TOOL_MESSAGE, TEMPLATE_TEXT_KEYS,
    TOOL_MESSAGE_SHAPE, WORD_PATTERN,
)
from otel_tracefence.normalize.failure_words import FAILURE_CODE_WORDS, NEGATING_WORDS_AFTER, NEGATING_WORDS_BEFORE
from otel_tracefence.normalize.framework_texts import FRAMEWORK_ERROR_TEMPLATES
from otel_tracefence.normalize.word_search import Words

# The HTTP statuses that say a call failed or may have done part of its work, read alike under every status-like key
# (docs/DECISIONS.md 371): 500-599 (RFC 9110 section 15.6), 408 Request Timeout, 429 Too Many Requests; as [low, high).
FAILING_HTTP_STATUSES = ((500, 600), (408, 409), (429, 430))
HTTP_STATUS_RESULT_KEYS = ("status", "status_code", "statusCode", "http_status")  # "status" top-level only
# gRPC status codes' names (grpc.io "Status codes") a result may carry as its "status" whose call failed with an
# outcome the caller cannot know: the library's own failures and the server errors (their HTTP mappings are 5xx, 408,
# 429 or 499), and ABORTED/UNKNOWN already listed above. The refusals (INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS,
# PERMISSION_DENIED, FAILED_PRECONDITION, OUT_OF_RANGE, UNAUTHENTICATED) are left out as 4xx are.
GRPC_FAILING_CODES = ("deadline_exceeded", "unavailable", "internal", "resource_exhausted", "data_loss", "unimplemented")
# A status that names no success: a failure, or an outcome not known (timed out, cancelled, aborted, unknown, or not
# reached yet: pending, in progress, processing: docs/DECISIONS.md 970). Compared folded ("TimedOut", "in-progress").
FAILURE_STATUS_WORDS = ("error", "failed", "failure")
UNKNOWN_OUTCOME_WORDS = ("timeout", "timed_out", "cancelled", "canceled", "aborted", "unknown", "pending", "in_progress", "processing")
# Keys read as "status" is, at the top (docs/DECISIONS.md 970): a job's or a workflow's "state" (AWS Step Functions
# "FAILED", Airflow "failed"), an "outcome", a "result" holding a status word (a result holding a value is no status).
STATUS_LIKE_KEYS = ("state", "outcome", "result")
# Keys of an error report besides "error" (docs/DECISIONS.md 971): present and not empty, the call failed. AWS Lambda's
# error payload ("errorMessage", "errorType"), a Python tool's {"exception": ...}; camelCase read folded.
ERROR_REPORT_KEYS = ("error_message", "error_type", "exception")
# Node.js system error codes of a network call that failed part-way or never reached the peer (nodejs.org "Errors",
# Common system errors; getaddrinfo's EAI_AGAIN), undici's and axios's own codes for the same (docs/DECISIONS.md 972):
# under a top-level "code", compared folded; the code of a refusal (EACCES, ENOENT, ERR_BAD_REQUEST) is left out.
NETWORK_ERROR_CODES = (
    "ECONNRESET", "ETIMEDOUT", "ECONNREFUSED", "ECONNABORTED", "EPIPE", "EAI_AGAIN", "ENOTFOUND", "EHOSTUNREACH",
    "ENETUNREACH", "ENETDOWN", "ESOCKETTIMEDOUT", "UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT",
    "UND_ERR_BODY_TIMEOUT", "UND_ERR_SOCKET", "ERR_NETWORK", "ERR_BAD_RESPONSE", "ERR_CANCELED",
)
# The reason phrases of the HTTP statuses in FAILING_HTTP_STATUSES (RFC 9110 sections 15.6 and 15.5.9, RFC 6585
# section 4): a whole value that is one, under a key holding a message (docs/DECISIONS.md 971), says the call failed.
HTTP_FAILURE_PHRASES = (
    "Internal Server Error", "Not Implemented", "Bad Gateway", "Service Unavailable", "Gateway Timeout",
    "HTTP Version Not Supported", "Request Timeout", "Too Many Requests",
)
PHRASE_KEYS = ("detail", "message", "title", "reason", "status_text")
# Keys whose string value is read as a code made of words (docs/DECISIONS.md 1020): at the top and under a wrapper, as
# the keys above ("errorCode", "Status" folded); GraphQL servers' extensions.code, Stripe's code "card_declined".
WORD_CODE_KEYS = ("status", *STATUS_LIKE_KEYS, "code", "error_code")
_CODE_WORDS = re.compile(WORD_PATTERN)


def failure_word_code(value: str) -> bool:
    """True when ``value`` (a status-like field's string) is a code whose words (``conventions.WORD_PATTERN``: split at
    ``_ - .``, white space and case changes, lower-cased) name a failure or an outcome not known
    (``failure_words.FAILURE_CODE_WORDS``: ``INTERNAL_SERVER_ERROR``, ``card_declined``, ``requestTimeout``, ``timed out``),
    a failure word negated (``NO_ERROR``, ``not_failed``, ``error_free``) naming none (docs/DECISIONS.md 1020)."""
    words = [word.lower() for word in _CODE_WORDS.findall(value)]
    last = len(words) - 1
    for position, word in enumerate(words):
        if word in FAILURE_CODE_WORDS or (word == "timed" and position < last and words[position + 1] == "out"):
            negated = (position > 0 and words[position - 1] in NEGATING_WORDS_BEFORE) or (
                position < last and words[position + 1] in NEGATING_WORDS_AFTER
            )
            if not negated:
                return True
    return False


class _FailureWordCode(ResultErrorShape):
    """A default shape: ``key``'s value is a string :func:`failure_word_code` reads as a failure (docs/DECISIONS.md
    1020). A shape of the module, not a field of :class:`~otel_tracefence.core.config.ResultErrorShape`: the words are
    the product's convention (``failure_words.FAILURE_CODE_WORDS``), not an operator's setting, and a public field would be
    one more config key to keep. Read as the other shapes are (by key, its near-misses folded, top only, cached per
    value: no value under any other key is read)."""

    # Cython compiles the method below to a cyfunction, which pydantic would take for a field default.
    model_config = ConfigDict(extra="forbid", frozen=True, ignored_types=(type(failure_word_code),))

    def says_error(self, value: Any) -> bool:
        return type(value) is str and failure_word_code(value)


DEFAULT_SHAPES: tuple[ResultErrorShape, ...] = (
    ResultErrorShape(key="isError", equals=True, anywhere=True),
    ResultErrorShape(key="is_error", equals=True, anywhere=True),
    ResultErrorShape(key="type", equals="error", anywhere=True),
    ResultErrorShape(key="error", present=True),
    ResultErrorShape(key="response_status", equals="error"),
    ResultErrorShape(key="response_type", equals="ERROR_HANDLED_BY_REFLECT_AND_RETRY_PLUGIN"),
    *(ResultErrorShape(key="status", equals=word) for word in FAILURE_STATUS_WORDS + UNKNOWN_OUTCOME_WORDS),
    *(ResultErrorShape(key="status", equals=code) for code in GRPC_FAILING_CODES),
    *(ResultErrorShape(key="status", at_least=low, below=high) for low, high in FAILING_HTTP_STATUSES),
    *(ResultErrorShape(key="code", at_least=low, below=high) for low, high in FAILING_HTTP_STATUSES),  # top-level only (376)
    *(ResultErrorShape(key=key, equals=word) for key in STATUS_LIKE_KEYS for word in FAILURE_STATUS_WORDS + UNKNOWN_OUTCOME_WORDS),  # 970
    *(ResultErrorShape(key=key, present=True) for key in ERROR_REPORT_KEYS),  # 971
    *(ResultErrorShape(key="code", equals=code) for code in GRPC_FAILING_CODES + ("cancelled", "aborted", "unknown")),  # status.code (972)
    *(ResultErrorShape(key="code", equals=code) for code in NETWORK_ERROR_CODES),  # 972
    *(ResultErrorShape(key=key, equals=phrase) for key in PHRASE_KEYS for phrase in HTTP_FAILURE_PHRASES),  # 971
    *(_FailureWordCode(key=key) for key in WORD_CODE_KEYS),  # 1020: after the shapes naming whole values
    ResultErrorShape(key="timed_out", equals=True),
    ResultErrorShape(key="timeout", equals=True),
    ResultErrorShape(key="success", equals=False),
    ResultErrorShape(key="ok", equals=False),
    ResultErrorShape(key="errors", present=True),
    *(ResultErrorShape(key=key, equals=verdict) for key in ("retryable", "non_retryable") for verdict in (True, False)),  # 983
    *(
        ResultErrorShape(key=key, at_least=low, below=high, anywhere=True)
        for key in HTTP_STATUS_RESULT_KEYS[1:]
        for low, high in FAILING_HTTP_STATUSES
    ),
)
MAX_DEPTH = 8  # how deep "anywhere" looks: content parts sit two or three levels down
# A top-level object under one of these is read as the top too (376), and an object under one of these in it (two deep:
# {"response": {"body": {...}}}, an HTTP client's response and its body; docs/DECISIONS.md 973). GraphQL's top-level
# "extensions" (GraphQL specification, "Response Format": errors, data, extensions), where servers put a code
# (docs/DECISIONS.md 1021).
WRAPPER_KEYS = ("result", "data", "response", "output", "status", "body", "extensions")
WRAPPER_DEPTH = 2

ShapeIndex = dict[str, tuple[tuple[int, ResultErrorShape], ...]]


def _shape_index(shapes: tuple[ResultErrorShape, ...]) -> ShapeIndex:
    """Each key a shape looks for, with the shapes looking for it and their positions in ``shapes``, in order."""
    index: dict[str, list[tuple[int, ResultErrorShape]]] = {}
    for position, shape in enumerate(shapes):
        index.setdefault(shape.key, []).append((position, shape))
    return {key: tuple(entries) for key, entries in index.items()}


def _folded_index(index: ShapeIndex) -> ShapeIndex:
    """:func:`~otel_tracefence.core.textfold.folded_word` of each key of ``index`` -> the shapes looking for any key
    that folds so, in the shapes' order."""
    folded: dict[str, list[tuple[int, ResultErrorShape]]] = {}
    for key, entries in index.items():
        folded.setdefault(folded_word(key), []).extend(entries)
    return {key: tuple(sorted(entries, key=lambda entry: entry[0])) for key, entries in folded.items()}


_DEFAULT_INDEX = _shape_index(DEFAULT_SHAPES)
_DEFAULT_FOLDED = _folded_index(_DEFAULT_INDEX)
_NEAR_MISSES: dict[str, tuple[tuple[int, ResultErrorShape], ...]] = {}  # result key -> the default shapes it folds to
_NEAR_MISSES_MOST = 4096


@cython.ccall
def _near_miss(key: Any, index: ShapeIndex) -> tuple[tuple[int, ResultErrorShape], ...]:
    """The shapes of ``index`` looking for a key that ``key`` (none of their keys) is once folded; ``()`` for none.
    Cached per key for the default shapes (result keys repeat across steps: one dict lookup for a key seen before)."""
    if type(key) is not str:
        return ()
    if index is not _DEFAULT_INDEX:
        return _folded_index(index).get(folded_word(key), ())
    found = _NEAR_MISSES.get(key)
    if found is None:
        found = _DEFAULT_FOLDED.get(folded_word(key), ())
        if len(_NEAR_MISSES) >= _NEAR_MISSES_MOST:
            _NEAR_MISSES.clear()  # bounded: keys holding ids must not grow it for ever
        _NEAR_MISSES[key] = found
    return found


def _objects(value: Any, depth: int) -> Iterable[tuple[dict, int]]:
    """Every JSON object in ``value`` down to ``MAX_DEPTH`` levels, with its depth (0 = the result itself)."""
    stack = [(value, depth)]
    while stack:
        node, level = stack.pop()
        if level > MAX_DEPTH:
            continue
        if isinstance(node, dict):
            yield node, level
            stack.extend((child, level + 1) for child in node.values() if isinstance(child, (dict, list)))
        elif isinstance(node, list):
            stack.extend((child, level + 1) for child in node if isinstance(child, (dict, list)))


# What each default shape said of a short scalar value, by (position in DEFAULT_SHAPES, type, value): the shapes
# are frozen and ``says_error`` depends on the shape and the value only, while each call is an interpreted pydantic
# method reading the shape's fields through pydantic's attribute hook (about 3,000 instructions). Bounded: values
# of other types, strings longer than _SAID_LONGEST and values past _SAID_MOST entries are asked every time.
_SAID: dict = {}
_SAID_MOST = 4096
_SAID_LONGEST = 64
_SAID_TYPES = frozenset({str, int, float, bool, type(None)})
_PRESENT = tuple(shape.present for shape in DEFAULT_SHAPES)  # which default shapes may say an object or an array is an error


@cython.ccall
def _says_error(shape: ResultErrorShape, position: int, value: Any, remembered: bool) -> bool:
    """``shape.says_error(value)``; with ``remembered`` (``shape`` is ``DEFAULT_SHAPES[position]``), what it
    said of a short scalar value before is taken from :data:`_SAID`."""
    kind = type(value)
    if remembered and (kind is dict or kind is list) and not _PRESENT[position]:
        return False  # only a "present" shape says an object or an array is an error: no pydantic call (docs/DECISIONS.md 973)
    if not remembered or kind not in _SAID_TYPES or (kind is str and len(value) > _SAID_LONGEST):
        return shape.says_error(value)
    key = (position, kind, value)
    said = _SAID.get(key)
    if said is None:
        said = shape.says_error(value)
        if len(_SAID) < _SAID_MOST:
            _SAID[key] = said
    return said


@cython.ccall
def _first_shape(obj: dict, top: bool, index: ShapeIndex) -> ResultErrorShape | None:
    """The first shape (in the shapes' order) that says one object is an error: only the shapes that may look
    below the top (``anywhere``) unless ``top``. Reads only the object's keys some shape looks for."""
    found: ResultErrorShape | None = None
    found_at = -1
    remembered = index is _DEFAULT_INDEX
    for key, value in obj.items():
        entries = index.get(key)
        if entries is None:
            entries = _near_miss(key, index)
        for position, shape in entries:
            if found is not None and position > found_at:
                break
            if (top or shape.anywhere) and _says_error(shape, position, value, remembered):
                found, found_at = shape, position
                break
    return found


@cython.ccall
def _flat(obj: dict) -> bool:
    """True when no value of ``obj`` is an object or array (a loop: no generator)."""
    for value in obj.values():
        if isinstance(value, (dict, list)):
            return False
    return True


def error_shape(result: Any, shapes: Iterable[ResultErrorShape]) -> ResultErrorShape | None:
    """The first shape that says ``result`` (a parsed JSON value) is an error, or ``None``. Objects are looked
    at from the result down, and the first object one shape says is an error gives the first such shape."""
    index = _DEFAULT_INDEX if shapes is DEFAULT_SHAPES else _shape_index(tuple(shapes))
    if type(result) is dict and _flat(result):
        return _first_shape(result, True, index)  # the common flat object: itself only, without the walk
    wrapped = _wrapped(result)
    messages: list = []  # a LangChain serialized message's kwargs: the message itself, read as a top (docs/DECISIONS.md 402)
    for obj, level in _objects(result, 0):
        inner = _serialized_message(obj)
        if inner is not None:
            messages.append(inner)
        top = level == 0 or (level <= WRAPPER_DEPTH and _one_of(obj, wrapped)) or _one_of(obj, messages) or _tool_message(obj)
        shape = _first_shape(obj, top, index)
        if shape is not None:
            return shape
    return None


@cython.ccall
def _one_of(obj: Any, items: list) -> bool:
    """True when ``obj`` is (the same object as) one of ``items``."""
    for item in items:
        if obj is item:
            return True
    return False


@cython.ccall
def _serialized_message(obj: dict) -> Any:
    """The ``kwargs`` of a LangChain message serialized by ``langchain_core.load.dumpd`` whose class is a
    ``ToolMessage`` (``{"lc": 1, "type": "constructor", "id": [..., "ToolMessage"], "kwargs": {...}}``), else ``None``."""
    lc, constructor, kwargs = LANGCHAIN_SERIALIZED_MARKER
    if lc not in obj or obj.get("type") != constructor:
        return None
    inner = obj.get(kwargs)
    path = obj.get("id")
    if type(inner) is not dict or type(path) is not list or not path or path[-1] != LANGCHAIN_TOOL_MESSAGE:
        return None
    return inner


@cython.ccall
def _tool_message(obj: dict) -> bool:
    """True for a tool message dumped as a plain object (``{"type": "tool", "tool_call_id": ..., "status": ...}``:
    LangChain's ``ToolMessage.model_dump()``): it is a result of its own, read as a top wherever it is."""
    key, value, call_id = TOOL_MESSAGE_SHAPE
    return call_id in obj and obj.get(key) == value


_TEMPLATES = tuple((framework, versions, re.compile(pattern), source) for framework, versions, pattern, source in FRAMEWORK_ERROR_TEMPLATES)
_TEMPLATE_START = re.compile("|".join(f"(?:{pattern})" for _, _, pattern, _ in FRAMEWORK_ERROR_TEMPLATES))


# Words every template holds one of, in any case ("error", "timed out", "fail", "exception", "traceback", "fatal", a
# repr's "status=", "blocked by", a reason phrase's, an outcome word, a Node.js network code): JSON text without any
# holds no template.
_TEMPLATE_HINTS = (
    "rror", "fail", "timed", "timeout", "time out", "time-out", "xception", "traceback", "fatal", "status=", "blocked by",
    "gateway", "unavailable", "too many", "not implemented", "not supported", "cancel", "abort", "pending",
    "econn", "epipe", "eai_again", "enotfound", "ehostunreach", "enetunreach", "enetdown",
    # and the ASCII words of a failure report no template knows (failure_words.FAILURE_TEXT_PATTERN, DECISIONS 1031)
    "deadline", "http/", "http 5", "erro", "erreur", "falha", "falhou", "fehler", "fehlgeschlagen", "esgotado",
)


_TEMPLATE_WORDS = Words(_TEMPLATE_HINTS, fold=True)


@cython.ccall
def template_hint(text: str) -> bool:
    """False when ``text`` (a result's JSON text) cannot hold a framework's error template: none of their words, in any
    case (``word_search.Words``: one scan in C of an ASCII text, cheaper than one regular expression of many
    branches or a substring test per word)."""
    return _TEMPLATE_WORDS.any_in(text)


@cython.ccall
def _template_of(text: str) -> str | None:
    """The framework whose own error or timeout text ``text`` is (``framework_texts.FRAMEWORK_ERROR_TEMPLATES``), or ``None``."""
    if not _TEMPLATE_START.match(text):  # one match for the common result: none of them
        return None
    for framework, _, pattern, _ in _TEMPLATES:
        if pattern.match(text):
            return framework
    return None


def error_template(result: Any) -> str | None:
    """The framework whose own error or timeout text (``framework_texts.FRAMEWORK_ERROR_TEMPLATES``) a recorded result
    is: the result as a string, or a string under a content key (``conventions.TEMPLATE_TEXT_KEYS``) or in a list
    inside a JSON result, down to ``MAX_DEPTH``; ``None`` for none (docs/DECISIONS.md 402)."""
    if type(result) is str:
        return _template_of(result.lstrip())
    for obj, _ in _objects(result, 0):
        for key, value in obj.items():
            if type(value) is str and key in TEMPLATE_TEXT_KEYS:
                found = _template_of(value.lstrip())
                if found is not None:
                    return found
            elif type(value) is list:
                found = _template_in_list(value)
                if found is not None:
                    return found
    return _template_in_list(result) if type(result) is list else None


@cython.ccall
def _template_in_list(items: list) -> str | None:
    """The framework whose error or timeout text one string item of ``items`` is (the first), or ``None``."""
    for item in items:
        if type(item) is str:
            found = _template_of(item.lstrip())
            if found is not None:
                return found
    return None


def top_objects(result: Any) -> list[dict]:
    """The objects of a parsed result read as its top: the result itself when it is an object, and its wrappers
    (:func:`_wrapped`)."""
    if type(result) is dict and _flat(result):  # the common flat object: no wrapper in it
        return [result]
    wrapped = _wrapped(result)
    return [result, *wrapped] if type(result) is dict else wrapped


def _wrapped(result: Any) -> list[dict]:
    """The objects read as the result's top too: those under ``WRAPPER_KEYS`` in a top-level object, the keys folded
    as shape keys are (``"Result"``, ``"DATA"``; docs/DECISIONS.md 371), and under those keys in them, down to
    ``WRAPPER_DEPTH`` levels; the one object of a top-level list of one object, and its wrappers one level less deep
    (``[{"error": ...}]``; docs/DECISIONS.md 973)."""
    if type(result) is dict:
        layer = [result]
        found: list[dict] = []
    elif type(result) is list and len(result) == 1 and type(result[0]) is dict:
        layer = found = [result[0]]
    else:
        return []
    for _ in range(WRAPPER_DEPTH - len(found)):
        layer = [inner for obj in layer for key, inner in obj.items() if type(inner) is dict and type(key) is str and _wrapper_key(key)]
        if not layer:
            break
        found.extend(layer)
    return found


@cython.ccall
def _wrapper_key(key: str) -> bool:
    return key in WRAPPER_KEYS or folded_word(key) in WRAPPER_KEYS
