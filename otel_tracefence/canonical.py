"""Canonical JSON (RFC 8785, JSON Canonicalization Scheme) and its SHA-256.

Arguments are compared by the SHA-256 of their canonical form, so key order and
white space never make two calls differ. RFC 8785 works on I-JSON (RFC 7493):
integers beyond 2**53 and non-finite numbers have no canonical form, and such
arguments are reported unavailable rather than compared by a lossy stand-in.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import rfc8785

from otel_tracefence import reasons

DEFAULT_MAX_BYTES = 1 << 20
"""Largest argument or result text read, in bytes (1 MiB); larger is reported, not parsed."""
DEFAULT_MAX_DEPTH = 64
"""Deepest nesting of arrays and objects read in arguments."""


class JSONTextError(ValueError):
    """Text that is not JSON (RFC 8259): the field is malformed."""


def _reject_constant(name: str) -> Any:
    raise JSONTextError(f"{name} is not JSON")


def parse_json_text(text: str) -> Any:
    """Parse JSON text strictly: ``NaN`` and ``Infinity`` are rejected.

    Raises :class:`JSONTextError` for text that is not JSON and ``RecursionError``
    for nesting deeper than the interpreter can parse.
    """
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise JSONTextError(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def depth(value: Any, limit: int) -> int:
    """Nesting depth of arrays and objects in ``value``, counted up to ``limit + 1``."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        if level > deepest:
            deepest = level
            if deepest > limit:
                return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


@dataclass(frozen=True, slots=True)
class Canonical:
    """Canonical JSON text and its SHA-256 (hex), or why there is none."""

    text: str | None
    sha256: str | None
    unavailable: str | None = None


def canonicalize(value: Any, *, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = DEFAULT_MAX_DEPTH) -> Canonical:
    """Canonicalize an already-parsed JSON value.

    Returns a :class:`Canonical` whose ``unavailable`` is a reason code
    (``arguments_too_deep``, ``arguments_too_large``, ``arguments_not_i_json``)
    when the value has no canonical form within the limits. Never raises for
    JSON-shaped input.
    """
    if depth(value, max_depth) > max_depth:
        return Canonical(None, None, reasons.ARGUMENTS_TOO_DEEP)
    try:
        data = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, RecursionError):
        return Canonical(None, None, reasons.ARGUMENTS_NOT_I_JSON)
    if len(data) > max_bytes:
        return Canonical(None, None, reasons.ARGUMENTS_TOO_LARGE)
    return Canonical(data.decode("utf-8"), hashlib.sha256(data).hexdigest())


def text_too_large(text: str, max_bytes: int) -> bool:
    """True when ``text`` encodes to more than ``max_bytes`` UTF-8 bytes."""
    if len(text) * 4 <= max_bytes:
        return False
    return len(text) > max_bytes or len(text.encode("utf-8", "surrogatepass")) > max_bytes


def sha256_text(text: str) -> str:
    """SHA-256 (hex) of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
