"""An idempotency key in a call's arguments: one rule for spans (``step.py``) and rows (``readers/rows.py``).

A tool rule naming its key argument (``idempotency_key_argument``) is the only place read for its tool; else the
configured paths (``idempotency_key_arguments``, default ``idempotency_key``), then any field whose name folds to
``idempotencykey`` (docs/DECISIONS.md 251, 969).
"""

from __future__ import annotations

from typing import Any

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import MalformedField
from otel_tracefence.core.textfold import folded_word
from otel_tracefence.core.value_text import described


def arguments_key(value: Any, tool: str, config: TraceFenceConfig) -> str | MalformedField | None:
    """The idempotency key ``value`` (parsed arguments) holds for ``tool`` under ``config``, by the rule above: a string
    or an integer's digits, a :class:`MalformedField` for a key field of another type, ``None`` for none."""
    rule = config.rule_for(tool) if tool else None
    if rule is not None and rule.idempotency_key_argument:
        return key_from_arguments(value, [rule.idempotency_key_argument])
    key = key_from_arguments(value, config.idempotency_key_arguments)
    return key if key is not None else key_field_anywhere(value)


IDEMPOTENCY_KEY_FIELD = "idempotencykey"  # a field named so, folded (idempotency_key, idempotencyKey, Idempotency-Key)
_KEY_FIELD_DEPTH = 3  # how deep an arguments object is searched for one (headers.Idempotency-Key, options.idempotency_key)


def key_field_anywhere(value: Any) -> str | MalformedField | None:
    """The value of the first field of ``value`` (an arguments object, searched breadth first, ``_KEY_FIELD_DEPTH``
    levels deep, keys in their order) whose name folds to ``idempotencykey`` (``textfold.folded_word``): an
    idempotency key written under another spelling or nesting than the configured paths (docs/DECISIONS.md 969).
    A string or integer is the key; anything else but ``null`` is a key that cannot be read (a ``MalformedField``)."""
    level = [value] if isinstance(value, dict) else []
    for _ in range(_KEY_FIELD_DEPTH):
        below = []
        for node in level:
            for name, item in node.items():
                if folded_word(name) == IDEMPOTENCY_KEY_FIELD:
                    if isinstance(item, str) and item:
                        return item
                    if isinstance(item, int) and not isinstance(item, bool):
                        return str(item)
                    if item is not None:
                        return MalformedField("idempotency_key", f"idempotency key argument {name!r} holds {described(item)}, not a non-empty string or an integer")
                elif isinstance(item, dict):
                    below.append(item)
        level = below
    return None


def key_from_arguments(value: Any, paths: list[str]) -> str | MalformedField | None:
    """The first configured argument field (dotted path) holding a string or integer key; a field found holding
    anything else but ``null`` (an object, an array, a boolean, a float, an empty string) is a key that cannot be
    read: ``MalformedField("idempotency_key", ...)`` (docs/DECISIONS.md 251)."""
    if not isinstance(value, dict):
        return None
    for path in paths:
        node: Any = value
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                node = None
                break
            node = node[part]
        if isinstance(node, str) and node:
            return node
        if isinstance(node, int) and not isinstance(node, bool):
            return str(node)
        if node is not None:
            return MalformedField("idempotency_key", f"idempotency key argument {path!r} holds {described(node)}, not a non-empty string or an integer")
    return None
