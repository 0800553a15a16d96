"""Id-like tokens of arguments and results, as hashes: how data flow between steps is seen.

The seed (000, "What was observed") has ``pager.trigger`` return
``{"status": "paged", "id": "pg_8812"}`` and the agent's next step use
``pg_8812``. The planner links such steps (``consumes_result_of`` /
``result_consumed_by``) by comparing hashes of the tokens found here, so no raw
value is kept.

What counts as a token, exactly (docs/DECISIONS.md, item 56):

* only text inside **string values**: the string values of JSON arguments and
  JSON results at any depth (object keys, numbers, booleans and ``null`` never
  count), or the whole of a result recorded as text that is not JSON;
* a string is cut into **runs** of ASCII letters, digits, ``_`` and ``-``; every
  other character separates runs (``https://x/pages/pg_8812.`` holds the run
  ``pg_8812``), and a run counts whole or not at all;
* a run counts when it is, case-sensitively:

  1. a **UUID**: 8-4-4-4-12 hexadecimal digits holding at least one decimal
     digit, as every RFC 9562 UUID of versions 1 to 8 does (compared lower-cased);
  2. a **prefixed handle**: 1 to 16 ASCII letters, then ``_`` or ``-``, then at
     least 3 more characters of which at least one is a digit (``pg_8812``,
     ``ch_3MtwBw``, ``TCK-1234``, ``in_acme_1250``; not ``ch_1``, ``utf-8``,
     ``gpt-4o``, ``v2``);
  3. an **opaque id**: at least 12 ASCII letters and digits with no separator,
     holding both a letter and a digit (hex and base-62 ids: ``3MtwBwLkdIwHu7ix``,
     ``4bf92f3577b34da6``).

Numbers, dates and timestamps, words, paths and short codes do not count: they
repeat by coincidence (an amount, a date, ``p99``), and a link that is not data
flow would mislead a reader. An id the seed would call a handle but written as a
bare number (``8812``) is therefore not linked: a stated limit.

Each token is hashed with SHA-256; the first 8 bytes, read as an unsigned
big-endian integer, are kept. At most ``limit`` distinct tokens are kept per
value (``limits.max_tokens_per_value``), the first in document order.
"""

from __future__ import annotations

import re
from hashlib import sha256 as _sha256
from typing import Any

import cython

from otel_tracefence.core.canonical import JSONTextError, parse_json_text

_UUID_RE = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_HANDLE_RE = r"[A-Za-z]{1,16}[_-](?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{3,}"
_OPAQUE_RE = r"(?=[A-Za-z0-9]*[A-Za-z])(?=[A-Za-z0-9]*[0-9])[A-Za-z0-9]{12,}"
_UUID = re.compile(_UUID_RE)
_FORMS = re.compile(rf"{_UUID_RE}|{_HANDLE_RE}|{_OPAQUE_RE}")
# Every token holds a digit, so only whole runs holding one are tested against the forms: a C-level
# scan that passes over the words, keys and punctuation of most values without backtracking.
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z_-]*+[0-9][A-Za-z0-9_-]*+")  # possessive: linear in the text


def is_token(run: str) -> bool:
    """True when ``run`` (a run of ``[A-Za-z0-9_-]``) is id-like: a UUID, a prefixed handle or an opaque id."""
    return _FORMS.fullmatch(run) is not None and any(c.isdigit() for c in run)


def _has_token(text: str) -> bool:
    """True when some run of ``text`` (JSON text: keys included) is a token."""
    return any(_FORMS.fullmatch(run) for run in _CANDIDATE.findall(text))


@cython.ccall
def token_hash(token: str) -> int:
    """The hash kept for a token: the first 8 bytes of its SHA-256 (UTF-8), as an unsigned big-endian integer.
    A UUID is lower-cased first."""
    if len(token) == 36 and _UUID.fullmatch(token):
        token = token.lower()
    return int.from_bytes(_sha256(token.encode("utf-8")).digest()[:8], "big")


def tokens_of_string(text: str) -> list[str]:
    """The id-like tokens of one string, in order (repeats kept)."""
    return [run for run in _CANDIDATE.findall(text) if _FORMS.fullmatch(run)]


# The shortest token: a prefixed handle of one letter, ``_`` or ``-``, and 3 more characters (a UUID has 36, an opaque id 12).
_MIN_TOKEN_LENGTH = 5


@cython.ccall
def _may_hold_token(text: str) -> bool:
    """False when no run of ``text`` can be a token: it is shorter than the shortest token, or it is all letters
    (every token holds an ASCII digit). Two C-level string tests that spare most short strings a regular expression."""
    return len(text) >= _MIN_TOKEN_LENGTH and not text.isalpha()


@cython.ccall
def _add_tokens(text: str, found: dict[int, None], limit: int) -> bool:
    """Add the hashes of ``text``'s tokens to ``found`` in order; True once it holds ``limit``."""
    for run in _CANDIDATE.findall(text):
        if _FORMS.fullmatch(run):
            found[token_hash(run)] = None
            if len(found) >= limit:
                return True
    return False


@cython.ccall
def _flat_object_tokens(obj: dict, found: dict[int, None], limit: int) -> bool:
    """Add the hashes of the tokens of an object none of whose values is an array or object (the common
    arguments and results), in order, without :func:`value_tokens`' stack; False, ``found`` untouched,
    when some value is one."""
    for child in obj.values():
        if isinstance(child, (dict, list, tuple)):
            return False
    for child in obj.values():
        if isinstance(child, str) and _may_hold_token(child) and _add_tokens(child, found, limit):
            break
    return True


@cython.locals(stack=list, children=list)
def value_tokens(value: Any, limit: int) -> tuple[int, ...]:
    """Hashes of the tokens in the string values of a parsed JSON value (keys, numbers and other scalars
    never count): sorted and unique, at most ``limit`` distinct tokens, the first in document order
    (objects in their key order). ``None`` or a value without strings gives ``()``. A string that
    cannot hold a token (:func:`_may_hold_token`) is not searched."""
    if limit <= 0 or value is None:
        return ()
    found: dict[int, None] = {}
    if type(value) is dict and _flat_object_tokens(value, found, limit):
        return tuple(sorted(found)) if found else ()
    stack = [value]
    while stack:  # depth first, in document order: children pushed in reverse
        node = stack.pop()
        if isinstance(node, str):
            if _may_hold_token(node) and _add_tokens(node, found, limit):
                break
        elif isinstance(node, dict):
            if node:
                children = list(node.values())  # a list reversed in place: C-level, unlike extending from reversed()
                children.reverse()
                stack.extend(children)
        elif isinstance(node, (list, tuple)):
            if node:
                stack.extend(node[::-1])
    return tuple(sorted(found)) if found else ()


def text_tokens(text: str | None, limit: int) -> tuple[int, ...]:
    """Hashes of the tokens of a recorded result: its string values when the text is a JSON object
    or array, else the whole text. ``None`` gives ``()``."""
    if text is None or limit <= 0 or not _has_token(text):  # no token anywhere, keys included: nothing to parse
        return ()
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            return value_tokens(parse_json_text(text), limit)
        except (JSONTextError, RecursionError):
            pass  # cut off or not JSON: read as text
    return value_tokens(text, limit)
