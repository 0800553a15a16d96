"""A recorded result's field whose key names an error, a timeout, a cancellation or a success (``hasError``,
``failed``, ``cancelled``, ``timedOut``, ``errorCode``, ``err``, ``fault``, ``success``) and whose value says the
call did not succeed: the call failed, as a result error shape says (docs/DECISIONS.md 1032).

The keys are read as attribute keys are (``evidence.outcome_kind``: their words, 974); only the result's top objects
(the result and its wrappers, ``result_errors.top_objects``), where a result reports on its own call: deeper, a
field belongs to what the call returned (an invoice's ``failed_payments``). A value says a failure only when it can
mean nothing else: for an error, ``true``, a non-empty text that is no "none" value, or a non-empty object or list;
for a timeout or a cancellation, ``true`` (a number is a setting, a time a timestamp: ``cancelled_at``); for a
success, ``false``, ``0`` or a text saying no."""

from __future__ import annotations

from typing import Any

import cython

from otel_tracefence.core.textfold import folded_word
from otel_tracefence.normalize.conventions import NO_FAILURE_VALUES
from otel_tracefence.normalize.evidence import WITHOUT_EVIDENCE, outcome_kind
from otel_tracefence.normalize.result_errors import top_objects

_TRUE_TEXTS = frozenset({"true", "yes"})
_NOT_SUCCESS_TEXTS = frozenset({"false", "no", "0", "failed", "failure", "error"})


def failure_flag(result: Any) -> str | None:
    """The key of the first field of ``result``'s top objects (parsed JSON) that says the call did not succeed, by
    the rule above; ``None`` for none (or a result that is no object)."""
    for obj in top_objects(result):
        if obj.keys() <= WITHOUT_EVIDENCE:  # every key known to name no outcome (most results): one C-level test
            continue
        for key, value in obj.items():
            if type(key) is str and _says_failure(outcome_kind(key), value):
                return key
    return None


@cython.ccall
def _says_failure(kind: str, value: Any) -> bool:
    if kind == "error":
        if value is True:
            return True
        if type(value) is str:
            return folded_word(value) not in NO_FAILURE_VALUES
        return type(value) in (dict, list) and len(value) > 0
    if kind == "timeout" or kind == "cancellation":
        return value is True or (type(value) is str and value.strip().lower() in _TRUE_TEXTS)
    if kind == "success":
        return value is False or (type(value) is int and value == 0) or (type(value) is str and value.strip().lower() in _NOT_SUCCESS_TEXTS)
    return False
