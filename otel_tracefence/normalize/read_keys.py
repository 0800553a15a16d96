"""What the normalizer reads, as text: the namespaces and words of every key and event it reads (:data:`READ_MARKERS`,
which let the service skip the attributes of a span that holds none), every key it reads (:data:`READ_KEYS`), and a
key it does not read that is one it reads but for case, separators or a letter (docs/DECISIONS.md 250, 344, 373).

Every key and word is named in an upper-case constant of ``conventions.py`` (the conventions table) or of this module;
a key read anywhere in ``normalize/`` belongs in one of them."""

from __future__ import annotations

import re
from typing import Any, Mapping

import cython

from otel_tracefence.core.textfold import folded_word, unconfused
from otel_tracefence.normalize import conventions, framework_texts
from otel_tracefence.normalize.conventions import REQUEST_HEADER_PREFIXES, RESPONSE_HEADER_PREFIXES


# -- Which spans the normalizer reads beyond their ids, name, times, kind and status -----------------------------
# Keys read outside this table (activity.py: kinds and finish reasons; status.py: failure signs), named here so
# that READ_MARKERS below covers every read. A new key read anywhere in normalize/ belongs in this table or here.
OTHER_READ_KEYS = (
    "db.system", "db.system.name", "messaging.system", "rpc.system", "llm.request.type", "error.type", "exception.type",
    "gen_ai.response.finish_reasons", "gen_ai.response.finish_reason", "llm.response.finish_reason", "langfuse.observation.type",
    "traceloop.entity.name", "rpc.method",
)
# Text the normalizer looks for in any attribute key, in some values and in span names (activity.py: "tool",
# "tools", "function" before "call"), and the span event read outside the GenAI ones (status.py: "exception").
# "trace" and "fence": every key one letter from the tracefence namespace holds one of them (DECISIONS 344), and
# "tracfe" the one transposition that breaks both, "tracfeence" (373).
READ_WORDS = ("tool", "function", "exception", "tracefence", "trace", "fence", "tracfe")


def _constant_strings() -> list[str]:
    """Every string in the upper-case constants of ``conventions.py``, ``framework_texts.py`` and this module (tuples, sets and dicts
    walked, keys and values), as defined when it is called: the keys and words the normalizer reads are named there."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, (tuple, list, set, frozenset)):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(key)
                walk(item)

    for constants in (vars(conventions), vars(framework_texts), globals()):
        for name, value in list(constants.items()):
            if name.isupper() and not name.startswith("_") and not name.endswith("PATTERN"):
                walk(value)
    return found


def _read_markers() -> frozenset[str]:
    """The namespace (the text up to and with its first dot, lower-cased) of every attribute key and event name
    named in the upper-case constants (:func:`_constant_strings`), and :data:`READ_WORDS`."""
    found: set[str] = set(READ_WORDS)
    for value in _constant_strings():
        head, dot, _ = value.partition(".")
        if dot and head and " " not in value and head.replace("_", "").replace("-", "").isalnum():
            found.add(head.lower() + ".")
    return frozenset(found)


READ_MARKERS: frozenset[str] = _read_markers()
"""Lower-case text one of which is in any span whose attributes or events the normalizer reads (every key it
reads starts with one of these namespaces, every word it looks for is here). A span whose text holds none of
them, compared case-insensitively, is planned the same with no attributes and no events: the service reads
such a span without them (``span_view.from_otlp_head``). tests/service/test_service_bytes.py proves it on every case."""


# -- Keys misspelt: a key the normalizer does not read that is one it reads once folded (docs/DECISIONS.md 250) --------
# The attributes this module's export step writes (annotate.py; a span planned by another fence carries them): with
# TRACEFENCE_INPUTS, every key of the tracefence.* namespace. Any other key of it is not understood.
TRACEFENCE_ANNOTATION_KEYS = (
    "tracefence.replay.class", "tracefence.step.decision", "tracefence.step.reasons", "tracefence.step.related_call_ids",
    "tracefence.step.effect", "tracefence.step.status", "tracefence.step.attempt_of", "tracefence.plan.schema_version",
    "tracefence.trace.partial", "tracefence.trace.late", "tracefence.trace.reasons", "tracefence.related_traces",
    "tracefence.trace.retries_unchecked",
)
TRACEFENCE_NAMESPACE = "tracefence"  # folded
_KEY_SHAPE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)+$")
_UNDOTTED_READ_KEYS = ("tool_arguments", "tool_response")  # older pydantic-ai: keys with no namespace
# Keys producers write as their own that fold to a read key: understood as what they are, not as a misspelling.
FOLD_TWINS_IN_USE = frozenset({
    "agent_name",  # pydantic-ai's agent span, beside gen_ai.agent.name
})


def fold_key(key: str) -> str:
    """``key`` as every near-miss is compared (:func:`otel_tracefence.core.textfold.folded_word`: NFKC, Unicode format
    characters dropped, case-folded, without the separators ``.``, ``_``, ``-`` and white space):
    ``"tracefence.Status "`` and ``"tracefence_status"`` fold to ``"tracefencestatus"``."""
    return folded_word(key)


def _read_keys() -> frozenset[str]:
    """Every attribute key (and span event name) named in the upper-case constants (:func:`_constant_strings`): the strings shaped
    like a dotted key, and :data:`_UNDOTTED_READ_KEYS`."""
    return frozenset({*_UNDOTTED_READ_KEYS, *(value for value in _constant_strings() if _KEY_SHAPE.match(value))})


READ_KEYS: frozenset[str] = _read_keys()
"""The attribute keys the normalizer reads (exactly as written)."""
FOLDED_READ_KEYS: dict[str, str] = {fold_key(key): key for key in sorted(READ_KEYS)}
""":func:`fold_key` of each of :data:`READ_KEYS` -> that key."""
_MISREAD: dict[str, Any] = {}  # key -> the read key it resembles, or None: keys repeat across spans (bounded below)
_MISREAD_CACHE_SIZE = 4096


@cython.ccall
def _resembled(key: str) -> str | None:
    """:func:`misread_key`, uncached."""
    if key in READ_KEYS or key in FOLD_TWINS_IN_USE:
        return None
    folded = fold_key(key)
    found = FOLDED_READ_KEYS.get(folded)
    if found is not None:
        return found
    if folded.startswith(TRACEFENCE_NAMESPACE) and key not in TRACEFENCE_ANNOTATION_KEYS:
        return "tracefence.*"  # our own namespace: every key of it is known
    near = folded if key.isascii() else fold_key(unconfused(key))  # trаcefence.status, a Cyrillic а (DECISIONS 344)
    if (near.startswith(TRACEFENCE_NAMESPACE) and key not in TRACEFENCE_ANNOTATION_KEYS) or _near_namespace(near):
        return "tracefence.*"  # one letter from it (tracefense.status), or drawn with look-alike letters
    return None


@cython.ccall
def _one_edit_apart(a: str, b: str) -> bool:
    """True when ``a`` becomes ``b`` by exactly one edit: a letter changed, added or removed, or two adjacent letters
    swapped (Damerau-Levenshtein distance 1, optimal string alignment: ``tracefnece`` is one edit from ``tracefence``;
    docs/DECISIONS.md 373)."""
    if len(a) < len(b):
        a, b = b, a
    if len(a) - len(b) > 1 or a == b:
        return False
    for i in range(len(b)):
        if a[i] != b[i]:
            if len(a) != len(b):
                return a[i + 1 :] == b[i:]
            swapped = i + 1 < len(a) and a[i] == b[i + 1] and a[i + 1] == b[i]
            return a[i + 1 :] == b[i + 1 :] or (swapped and a[i + 2 :] == b[i + 2 :])
    return True  # b is a with its last letter removed


def _near_namespace(folded: str) -> bool:
    """True when a folded key starts with text one edit from :data:`TRACEFENCE_NAMESPACE` (docs/DECISIONS.md 344; a
    transposition is one edit, 373)."""
    size = len(TRACEFENCE_NAMESPACE)
    return any(_one_edit_apart(folded[:n], TRACEFENCE_NAMESPACE) for n in (size - 1, size, size + 1) if len(folded) >= n)


@cython.ccall
def misread_key(key: str) -> str | None:
    """The key the normalizer reads that ``key`` is but for case, separators, white space or format characters, or
    ``"tracefence.*"`` for a key of that namespace (folded) that is none of its keys; ``None`` for any other key
    (one it reads, or one it has no reason to read). Cached per key: one dict lookup for a key seen before."""
    found = _MISREAD.get(key, _MISREAD)
    if found is not _MISREAD:
        return found
    found = _resembled(key)
    if len(_MISREAD) >= _MISREAD_CACHE_SIZE:
        _MISREAD.clear()  # bounded: keys holding ids must not grow it for ever
    _MISREAD[key] = found
    return found


UNDERSTOOD_KEYS: set[str] = set()
"""Keys :func:`misread_key` found nothing wrong with (bounded as its cache is). A caller on the hot path tests
``attributes.keys() <= UNDERSTOOD_KEYS`` (C-level, no call) before calling :func:`misread_attribute`."""


HEADER_KEYS_SEEN: set[str] = set()
"""The keys of :data:`UNDERSTOOD_KEYS` that are recorded request or response headers (``REQUEST_HEADER_PREFIXES``,
``RESPONSE_HEADER_PREFIXES``, in any case): a span whose keys are all understood records a header only when it holds
one of these, so a tool span is asked for its headers' idempotency evidence without a pass over its keys
(docs/DECISIONS.md 503). Filled and cleared with ``UNDERSTOOD_KEYS``; empty (and so free) where no span records one."""
_HEADER_KEY_PREFIXES = (*REQUEST_HEADER_PREFIXES, *RESPONSE_HEADER_PREFIXES)


def misread_attribute(attributes: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first attribute key of ``attributes`` that :func:`misread_key` flags, with the key it resembles; ``None``
    when there is none. Called for every span that is read: a span whose keys were all seen before and found
    understood costs one C-level ``issuperset`` (no call per key)."""
    if attributes.keys() <= UNDERSTOOD_KEYS:  # a keys view against the set: no set built, no call per key
        return None
    for key in attributes:
        found = misread_key(key)
        if found is not None:
            return key, found
    if len(UNDERSTOOD_KEYS) >= _MISREAD_CACHE_SIZE:
        UNDERSTOOD_KEYS.clear()
        HEADER_KEYS_SEEN.clear()
    for key in attributes:  # the keys not seen before only (a span of known keys never comes here)
        if key not in UNDERSTOOD_KEYS and key.lower().startswith(_HEADER_KEY_PREFIXES):
            HEADER_KEYS_SEEN.add(key)
    UNDERSTOOD_KEYS.update(attributes)
    return None


@cython.ccall
def records_headers(attributes: Mapping[str, Any]) -> bool:
    """Whether a span whose keys :func:`misread_attribute` has read (all understood, or it was just called on them)
    records a request or response header attribute: one C-level ``isdisjoint`` against :data:`HEADER_KEYS_SEEN`, and
    nothing at all while no span has recorded one (docs/DECISIONS.md 503)."""
    return bool(HEADER_KEYS_SEEN) and not HEADER_KEYS_SEEN.isdisjoint(attributes)


def misread_own_key(attributes: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first attribute key of ``attributes`` in the ``tracefence`` namespace (folded) that :func:`misread_key`
    flags (``tracefence.Replay.Class``, ``tracefence.trace.Partial``, ``tracefence.stauts``), with the key it
    resembles; ``None`` when there is none. Such a key holds a span's trace wherever the span is
    (docs/DECISIONS.md 250, 356): ours are all known. Costs one C-level ``issuperset`` for a span of known keys."""
    if attributes.keys() <= UNDERSTOOD_KEYS:
        return None
    for key in attributes:
        found = misread_key(key)
        if found is not None and found.startswith(TRACEFENCE_NAMESPACE):
            return key, found
    return None


def misread_message(key: str, resembles: str) -> str:
    """Why an attribute key is not understood (a reason's message)."""
    if resembles == "tracefence.*":
        return f"attribute key {key!r} is in the tracefence namespace (or one letter from it) but is none of its keys: not understood"
    return f"attribute key {key!r} is {resembles!r} only after folding case, separators and white space: not understood, not read as it"
