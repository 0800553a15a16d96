"""How a message speaks of a value it could not read: its type and size, never the value itself.

A malformed ``tracefence.*`` label (``tracefence.status``, ``tracefence.effect``, ``tracefence.result_stable``,
``tracefence.idempotency_key``, an MCP hint) is the producer's raw value: copied into the message, it reached the
review item, its database and write-ahead log, the review API and the logs, at any size (a 1 MiB value made a 1 MiB
item). Messages say what the value is (:func:`described`) and every message kept or logged is cut to
:data:`MESSAGE_MAX_CHARS` (:func:`capped`). The value itself stays on the span, forwarded as it came.
"""

from __future__ import annotations

from typing import Any

MESSAGE_MAX_CHARS = 1000
"""The longest message kept in a plan, a review item or a log line, in characters."""


def described(value: Any) -> str:
    """``value``'s JSON type and size, e.g. ``"a string of 4 characters"``, ``"an integer"``, ``"an array of 3
    elements"``, ``"an object of 2 keys"``, ``"8 bytes"``, ``"null"``: never its content."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return f"a string of {len(value)} character{'' if len(value) == 1 else 's'}"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"{len(value)} byte{'' if len(value) == 1 else 's'}"
    if isinstance(value, (list, tuple)):
        return f"an array of {len(value)} element{'' if len(value) == 1 else 's'}"
    if isinstance(value, dict):
        return f"an object of {len(value)} key{'' if len(value) == 1 else 's'}"
    return f"a {type(value).__name__}"


def capped(message: str, limit: int = MESSAGE_MAX_CHARS) -> str:
    """``message`` when it is at most ``limit`` characters; else its start, cut so that the whole, with a note of the
    length it had, is ``limit`` characters long."""
    if len(message) <= limit:
        return message
    note = f"... (cut: {len(message)} characters)"
    return message[: max(0, limit - len(note))] + note


__all__ = ["MESSAGE_MAX_CHARS", "capped", "described"]
