"""Canonical JSON (RFC 8785, JSON Canonicalization Scheme) and its SHA-256.

Arguments are compared by the SHA-256 of their canonical form, so key order and
white space never make two calls differ. RFC 8785 works on I-JSON (RFC 7493):
integers beyond 2**53 and non-finite numbers have no canonical form, and such
arguments are reported unavailable rather than compared by a lossy stand-in.
"""

from __future__ import annotations

import json
import unicodedata
from hashlib import sha256
from typing import Any

import cython

from otel_tracefence.core.reprs import fields_repr
import rfc8785

from otel_tracefence.core import reasons

DEFAULT_MAX_BYTES = 1 << 20
"""Largest argument or result text read, in bytes (1 MiB); larger is reported, not parsed."""
DEFAULT_MAX_DEPTH = 64
"""Deepest nesting of arrays and objects read in arguments."""


class JSONTextError(ValueError):
    """Text that is not JSON (RFC 8259): the field is malformed."""


class JSONTruncatedError(JSONTextError):
    """JSON text cut off before its end (a string, array or object left open), as an SDK's
    attribute length limit (``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``) or a backend leaves it:
    the value was recorded but cannot be read whole (``arguments_truncated``)."""


class JSONNumberError(JSONTextError):
    """JSON text holding an integer too long for Python to convert (more digits than
    ``sys.get_int_max_str_digits()``, 4300 by default). It is JSON, but not I-JSON: such
    arguments are unavailable (``arguments_not_i_json``), like any integer beyond 2**53."""


def _reject_constant(name: str) -> Any:
    raise JSONTextError(f"{name} is not JSON")


# Built once: json.loads/json.dumps with options build a new decoder/encoder on every call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# The C encoder _ENCODER builds on every call, built once, without the cycle check: only for values parsed
# from JSON text (parse_simple_json), which hold no cycles. Falls back to _ENCODER where there is no C encoder.
_C_ENCODE = (
    json.encoder.c_make_encoder(None, None, json.encoder.encode_basestring, None, ":", ",", True, False, False)
    if json.encoder.c_make_encoder is not None
    else None
)


@cython.ccall
def _encode_parsed(value: Any) -> str:
    return "".join(_C_ENCODE(value, 0)) if _C_ENCODE is not None else _ENCODER.encode(value)


class _FloatSeen(Exception):
    """Raised by the fast path's decoder at the first number with a fraction or exponent, or an integer of 16
    characters or more."""


def _no_float(text: str) -> Any:
    raise _FloatSeen


def _short_int(text: str) -> int:
    """An integer literal as ``int``, unless it is 16 characters or more (sign included): only those can lie beyond
    2**53 - 1 (9007199254740991 has 16 digits), where RFC 8785 has no exact form; they take the inspected path."""
    if len(text) >= 16:
        raise _FloatSeen
    return int(text)


@cython.ccall
def _decode(decoder: json.JSONDecoder, text: str) -> Any:
    """``decoder.decode(text)``, without its two whitespace scans and two Python frames when the text has
    no whitespace around its value (what serializers write): the decoder's own C scanner is called at
    index 0, as ``decode`` calls it then. Any other text goes through ``decode`` itself, so every value
    and every error is ``decode``'s."""
    try:
        value, end = decoder.scan_once(text, 0)
    except StopIteration:  # not a value at index 0 (leading whitespace, empty text): decode says what it is
        return decoder.decode(text)
    if end != len(text):  # trailing whitespace or extra data
        return decoder.decode(text)
    return value


# The fast path's decoder: as _DECODER, but stops at the first float (floats need RFC 8785's own form) and at the
# first integer that may lie beyond 2**53 - 1.
_DECODER_NO_FLOAT = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_no_float, parse_int=_short_int)
NOT_SIMPLE = object()
"""What :func:`parse_simple_json` returns for text it leaves to :func:`parse_json_text`."""


def parse_simple_json(text: str, max_depth: int) -> Any:
    """The value of JSON text that :func:`canonicalize` may write with ``json.dumps`` without inspecting
    it first (``canonicalize(value, simple=True)``), or :data:`NOT_SIMPLE` for any other text (a float, an
    integer literal of 16 characters or more, text with more than ``max_depth`` brackets, text that is not JSON:
    :func:`parse_json_text` then
    parses it, and raises what it raises). The common case of arguments costs one C-level parse.

    The brackets are counted only in text of ``2 * (max_depth + 1)`` characters or more: a value nested
    deeper than ``max_depth`` opens and closes more than ``max_depth`` arrays or objects, so its text is
    at least that long, and shorter text that is not JSON fails to parse here anyway."""
    if len(text) >= 2 * (max_depth + 1) and text.count("{") + text.count("[") > max_depth:  # an upper bound of the depth
        return NOT_SIMPLE
    try:
        return _decode(_DECODER_NO_FLOAT, text)
    except (_FloatSeen, ValueError, JSONTextError, RecursionError):
        return NOT_SIMPLE


# What backends and SDK wrappers append where they cut a value (Langfuse, Phoenix, log pipelines).
TRUNCATION_MARKERS = ("...", "\u2026", "[truncated]", "(truncated)", "<truncated>")


def _marked_truncated(text: str) -> bool:
    return text.rstrip().endswith(TRUNCATION_MARKERS)


# What may stand before a JSON value's first character in a recorded text (docs/DECISIONS.md 370): white space (any
# Unicode white space, as str.isspace says), NUL, and Unicode format characters (category Cf: U+FEFF byte order mark,
# U+200B zero-width space, U+2060...), which no reader shows and a producer's encoder may leave in front.
def _not_json_lead(char: str) -> bool:
    return char.isspace() or char == "\0" or unicodedata.category(char) == "Cf"


def json_start(text: str) -> str:
    """The first character of ``text`` after white space, NUL and Unicode format characters (``""`` for none): ``{``,
    ``[`` or ``"`` when the text starts as a JSON object, array or string does. Costs one index and one test for text
    starting at its value (what serializers write)."""
    first = text[:1]
    if first in ("{", "[", '"') or not first or not _not_json_lead(first):
        return first
    for char in text:
        if not _not_json_lead(char):
            return char
    return ""


def _cut_off(text: str, exc: json.JSONDecodeError | None) -> bool:
    """Whether text that failed to parse (``exc``: the decoder's error, ``None`` for a rejected constant such as
    ``NaN``) is a JSON value cut off, or one that cannot be read whole: text that starts as an object or array
    does (docs/DECISIONS.md 340: an attribute length limit cuts anywhere, inside a literal or a number too), a
    string left open, text ending where a value or delimiter is expected, or text ending with a truncation marker."""
    if json_start(text) in ("{", "["):
        return True
    if exc is None:
        return False
    return exc.msg.startswith("Unterminated string") or (exc.pos >= len(text.rstrip()) and bool(text.strip())) or _marked_truncated(text)


def parse_json_text(text: str) -> Any:
    """Parse JSON text strictly: ``NaN`` and ``Infinity`` are rejected.

    Raises :class:`JSONTruncatedError` for text that starts as a JSON object or
    array (after white space and byte order marks) and does not parse, whatever
    the error (an attribute length limit cuts inside a literal or a number as
    well as inside a string: ``{"paid": t``, ``{"n": 12.``), and for other JSON
    that ends too early (a string left open, the text ending where a value or
    delimiter is expected, or text that does not parse and ends with a
    truncation marker such as ``...``); :class:`JSONTextError` for other text
    that is not JSON, and ``RecursionError`` for nesting deeper than the
    interpreter can parse.
    """
    try:
        return _decode(_DECODER, text)
    except json.JSONDecodeError as exc:
        if _cut_off(text, exc):
            raise JSONTruncatedError(f"cut off: the JSON text does not parse ({exc.msg} at character {exc.pos} of {len(text)}): its value ends early or is broken") from None
        raise JSONTextError(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except JSONTextError as exc:
        if _cut_off(text, None):
            raise JSONTruncatedError(f"cut off or broken: the JSON text does not parse ({exc})") from None
        raise
    except ValueError as exc:  # int() refuses integers past its digit limit (CVE-2020-10735)
        raise JSONNumberError(f"a number out of range: {exc}") from None


_INT_MAX = 2**53 - 1  # RFC 8785 / I-JSON (RFC 7493): integers beyond this have no exact form


def inspect_value(value: Any, limit: int) -> tuple[int, bool]:
    """Nesting depth of arrays and objects (counted up to ``limit + 1``), and whether ``json.dumps``
    with sorted keys writes exactly RFC 8785's bytes for ``value``.

    That holds when the value has no floats, every integer is within +-(2**53 - 1),
    and every object key is ASCII (so code-point order is RFC 8785's UTF-16 order):
    then both write the same escapes (RFC 8785 section 3.2.2.2) and the same integers.
    """
    deepest = 0
    simple = True
    stack = [(value, 1)]
    while stack:
        node, level = stack.pop()
        kind = type(node)
        if kind is dict:
            children = node.values()
            if simple:
                simple = all(type(k) is str and k.isascii() for k in node)
        elif kind is list or kind is tuple:
            children = node
        else:
            if kind is float or (kind is int and not -_INT_MAX <= node <= _INT_MAX) or kind not in _SCALARS:
                simple = False
            continue
        if level > deepest:
            deepest = level
            if deepest > limit:
                return deepest, False
        stack.extend((child, level + 1) for child in children)
    return deepest, simple


_SCALARS = (str, int, bool, type(None), float)


def depth(value: Any, limit: int) -> int:
    """Nesting depth of arrays and objects in ``value``, counted up to ``limit + 1``."""
    return inspect_value(value, limit)[0]


@cython.dataclasses.dataclass(repr=False)
@cython.cclass
class Canonical:
    """Canonical JSON text and its SHA-256 (hex), or why there is none.

    Treat it as read-only: it is not frozen because one is built for every tool step and frozen
    dataclasses are several times slower to build (as ``SpanView``; docs/DECISIONS.md, 107).
    """

    text: str | None
    sha256: str | None
    unavailable: str | None = None

    def __repr__(self) -> str:
        return fields_repr(self)  # not Cython's: it fails outside the importing thread (reprs.py)


def canonicalize(value: Any, *, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = DEFAULT_MAX_DEPTH, simple: bool = False) -> Canonical:
    """Canonicalize an already-parsed JSON value (RFC 8785).

    ``simple``: the value came from :func:`parse_simple_json` (no float, no integer beyond 2**53 - 1, within
    ``max_depth``): its ``json.dumps`` text is taken when it is ASCII (so no non-ASCII key), without walking
    the value first; else the value is inspected.

    Values ``json.dumps`` writes exactly as RFC 8785 does (see :func:`inspect_value`;
    a property test checks the two agree) take that C-speed path; the rest go
    through the ``rfc8785`` library. Returns a :class:`Canonical` whose
    ``unavailable`` is a reason code (``arguments_too_deep``, ``arguments_too_large``,
    ``arguments_not_i_json``) when the value has no canonical form within the
    limits. Never raises for JSON-shaped input.
    """
    if simple:
        text = _encode_parsed(value)
        if text.isascii():
            data = text.encode("ascii")
            if len(data) > max_bytes:
                return Canonical(None, None, reasons.ARGUMENTS_TOO_LARGE)
            return Canonical(text, sha256(data).hexdigest())
    deepest, simple = inspect_value(value, max_depth)
    if deepest > max_depth:
        return Canonical(None, None, reasons.ARGUMENTS_TOO_DEEP)
    try:
        if simple:
            data = _ENCODER.encode(value).encode("utf-8")
        else:
            data = rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError, RecursionError):
        # ValueError includes UnicodeEncodeError: a lone surrogate is not I-JSON either.
        return Canonical(None, None, reasons.ARGUMENTS_NOT_I_JSON)
    if len(data) > max_bytes:
        return Canonical(None, None, reasons.ARGUMENTS_TOO_LARGE)
    return Canonical(data.decode("utf-8"), sha256(data).hexdigest())


def text_too_large(text: str, max_bytes: int) -> bool:
    """True when ``text`` encodes to more than ``max_bytes`` UTF-8 bytes."""
    if len(text) * 4 <= max_bytes:
        return False
    return len(text) > max_bytes or len(text.encode("utf-8", "surrogatepass")) > max_bytes


def is_unicode(text: str) -> bool:
    """True when ``text`` can be written as UTF-8: it holds no lone surrogate.

    JSON's ``"\\ud800"`` escape and Python strings can hold one; protobuf, JSON output
    and terminals cannot write it, so a name or id holding one is malformed.
    """
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(text: str) -> str:
    """``text`` with any lone surrogate written as a ``\\udXXX`` escape, so it can be written as UTF-8."""
    return text if is_unicode(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def sha256_text(text: str) -> str:
    """SHA-256 (hex) of ``text`` encoded as UTF-8."""
    return sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
