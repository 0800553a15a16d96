"""How a message speaks of a value it could not read: its type and size, never the value itself.

A malformed ``tracefence.*`` label (``tracefence.status``, ``tracefence.effect``, ``tracefence.result_stable``,
``tracefence.idempotency_key``, an MCP hint) is the producer's raw value: copied into the message, it reached the
review item, its database and write-ahead log, the review API and the logs, at any size (a 1 MiB value made a 1 MiB
item). Messages say what the value is (:func:`described`) and every message kept or logged is cut to
:data:`MESSAGE_MAX_CHARS` (:func:`capped`). The value itself stays on the span, forwarded as it came.

A value a message quotes as evidence (a span's status message, its ``error.type``, an outcome attribute's value) is
:func:`shown`: by default described, like a label's; only when the redaction policy keeps raw values
(``store_raw_values``, set for the trace being read with :func:`showing_values`) is it quoted, redacted by that policy
(``core/redact.py``, as the kept arguments and result) and cut to :data:`SHOWN_MAX_CHARS`.
"""

from __future__ import annotations

import difflib
from contextvars import ContextVar, Token
from typing import Any, Iterable

from otel_tracefence.core.redact import Redaction, redact_value

MESSAGE_MAX_CHARS = 1000
"""The longest message kept in a plan, a review item or a log line, in characters."""


def not_one_of(name: str, value: Any, allowed: Iterable[str]) -> str:
    """``"<name> (<described value>) is not one of a, b, c"``, with ``"; did you mean 'b'?"`` when the value is one
    of ``allowed`` but for case and surrounding white space (``"Write"``, ``" ok"``) or a close misspelling of one
    (:func:`difflib.get_close_matches`, cutoff 0.75: ``"wrte"``). The hint names an allowed value, never the value
    given: a closed vocabulary is no secret, the producer's text may be."""
    choices = list(allowed)
    message = f"{name} ({described(value)}) is not one of {', '.join(choices)}"
    if isinstance(value, str) and len(value) <= 64:
        folded = value.strip().casefold()
        close = [folded] if folded in choices else difflib.get_close_matches(folded, choices, n=1, cutoff=0.75)
        if close:
            message += f"; did you mean {close[0]!r}?"
    return message


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


SHOWN_MAX_CHARS = 120
"""The longest a value quoted in a message may be, in characters (when the policy keeps raw values)."""

_SHOWING: ContextVar[Redaction | None] = ContextVar("tracefence_showing_values", default=None)


def showing_values(policy: Redaction | None) -> Token[Redaction | None]:
    """From now on, in this thread or task, :func:`shown` quotes values redacted by ``policy`` (None: describes them);
    give the token to :func:`stop_showing` when done."""
    return _SHOWING.set(policy)


def stop_showing(token: Token[Redaction | None]) -> None:
    _SHOWING.reset(token)


def shown(value: Any) -> str:
    """How a message shows a value the producer recorded: :func:`described` (type and size, never the content), unless
    :func:`showing_values` set a policy (``store_raw_values``): then the value redacted by it, as ``repr``, cut to
    :data:`SHOWN_MAX_CHARS`."""
    policy = _SHOWING.get()
    if policy is None:
        return described(value)
    redacted, _ = redact_value(value, policy)
    return capped(repr(redacted), SHOWN_MAX_CHARS)


__all__ = ["MESSAGE_MAX_CHARS", "SHOWN_MAX_CHARS", "capped", "described", "showing_values", "shown", "stop_showing"]
