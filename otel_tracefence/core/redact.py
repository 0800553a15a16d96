"""Redaction of the raw values kept when the operator opts in (``store_raw_values: true``).

By default no raw argument or result is kept anywhere: plans and review items
hold SHA-256 hashes only. With ``store_raw_values`` on, the canonical arguments
(``arguments_json``) and the recorded result (``result_value``) are kept, and
this module replaces what they carry of secrets by ``"[REDACTED]"``:

* **keys**: the value of every object key in the configured list, at any depth,
  whatever its type (a string, a number, a whole object or array). Keys are
  compared case-insensitively with ``-`` and ``_`` removed, so ``api_key``
  matches ``api_key``, ``API-Key``, ``apiKey`` and ``APIKEY``. A configured key
  with ``*`` or ``?`` is a glob (``*password*`` matches ``db_password``).
* **card numbers**: 13 to 19 digits, optionally grouped by single spaces or
  dashes, that pass the Luhn check, anywhere in a string (free text included),
  and JSON integers of 13 to 19 digits that pass it.
* **bearer tokens**: ``Bearer <token>`` anywhere in a string (the token becomes
  ``[REDACTED]``, the word ``Bearer`` stays).

Strings that hold JSON (an object or array as text, such as a request body) are
read and redacted the same way. A value that cannot be walked (nesting too deep
for the interpreter) is replaced as a whole: redaction fails closed.

**Hashes are never computed over redacted values.** ``arguments_sha256`` and
``result_sha256`` are the hashes of the original canonical arguments and of the
result as recorded, computed before anything is redacted. Redaction must not
make two different calls compare equal: two calls with the same idempotency key
whose passwords differ have the same redacted ``arguments_json`` but different
hashes, and the planner (which compares hashes, never the kept text) still
fences them as an ``idempotency_key_conflict``.

Redaction applies only to the values otel-tracefence itself keeps. It never
changes the attributes a producer put on its spans: those are forwarded as they
came (redact at the source, or in the OpenTelemetry Collector with its
``redaction`` or ``attributes`` processors). Idempotency keys are kept as
recorded: a reviewer needs them to reconcile with the owning system.

The one place this runs is :func:`otel_tracefence.normalize.values.kept_arguments`
and :func:`~otel_tracefence.normalize.values.kept_result`, where the normalizer
decides which raw values a step keeps; every door (span processor, service,
CLI) goes through it.
"""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

REDACTED = "[REDACTED]"

DEFAULT_KEYS: tuple[str, ...] = (
    "password",
    "passwd",
    "secret",
    "token",
    "access_token",
    "refresh_token",
    "authorization",
    "api_key",
    "apikey",
    "x-api-key",
    "cookie",
    "set-cookie",
    "private_key",
    "client_secret",
    "card_number",
    "cvv",
    "cvc",
    "ssn",
)

# Digits in groups separated by one space or dash: linear, no backtracking between groups.
_DIGIT_RUN = re.compile(r"\d+(?:[ -]\d+)*")
_GROUP = re.compile(r"\d+")
# RFC 6750 b64token after the scheme; the scheme is case-insensitive (RFC 9110).
_BEARER = re.compile(r"(?i)\b(bearer)(\s+)[A-Za-z0-9\-._~+/]+=*")
_CARD_MIN, _CARD_MAX = 13, 19
_MAX_EMBEDDED_JSON = 8  # JSON-in-a-string levels read; deeper strings get the text patterns only


def normalize_key(key: str) -> str:
    """A key as it is compared: lower case, without ``-`` and ``_``."""
    return key.lower().replace("-", "").replace("_", "")


class Redaction(BaseModel):
    """Which parts of kept raw values are replaced by ``[REDACTED]`` (only with ``store_raw_values``)."""

    model_config = ConfigDict(extra="forbid")

    keys: list[str] = Field(default_factory=lambda: list(DEFAULT_KEYS))
    """Object keys whose values are redacted at any depth (case-insensitive, ``-`` and ``_`` ignored;
    ``*`` and ``?`` make a glob). Setting it replaces the default list; ``extra_keys`` adds to it."""
    extra_keys: list[str] = Field(default_factory=list)
    """Keys redacted in addition to ``keys``."""
    card_numbers: bool = True
    """Redact Luhn-valid 13-19 digit numbers (spaces or dashes allowed between digit groups)."""
    bearer_tokens: bool = True
    """Redact the token of ``Bearer <token>`` in any string."""

    _exact: frozenset[str] = PrivateAttr(default=frozenset())
    _glob: re.Pattern[str] | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any) -> None:
        names = [normalize_key(k) for k in (*self.keys, *self.extra_keys) if k]
        self._exact = frozenset(n for n in names if not _is_glob(n))
        globs = [fnmatch.translate(n) for n in names if _is_glob(n)]
        self._glob = re.compile("|".join(f"(?:{g})" for g in globs)) if globs else None

    @property
    def active(self) -> bool:
        """False when nothing would ever be redacted (no keys, no patterns)."""
        return bool(self._exact or self._glob or self.card_numbers or self.bearer_tokens)

    def redacts_key(self, key: str) -> bool:
        """True when the value under object key ``key`` is redacted."""
        name = normalize_key(key)
        return name in self._exact or (self._glob is not None and self._glob.fullmatch(name) is not None)


def _is_glob(name: str) -> bool:
    return "*" in name or "?" in name or "[" in name


def luhn_valid(digits: str) -> bool:
    """The Luhn check (ISO/IEC 7812) on a string of ASCII digits."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        d = ord(char) - 48
        if position % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _redact_card_run(run: str) -> str:
    """A run of digit groups with card numbers in it replaced: the whole run when it is one,
    else the longest Luhn-valid 13-19 digit window of whole groups, left to right."""
    groups = [(m.start(), m.end(), m.group()) for m in _GROUP.finditer(run)]
    digits = "".join(g[2] for g in groups)
    if _CARD_MIN <= len(digits) <= _CARD_MAX and luhn_valid(digits):
        return REDACTED
    if len(groups) == 1:
        return run
    out: list[str] = []
    last = 0
    i = 0
    while i < len(groups):
        found = None
        count = 0
        ends = []
        for j in range(i, len(groups)):
            count += len(groups[j][2])
            if count > _CARD_MAX:
                break
            if count >= _CARD_MIN:
                ends.append(j)
        for j in reversed(ends):  # the longest window first
            if luhn_valid("".join(g[2] for g in groups[i : j + 1])):
                found = j
                break
        if found is None:
            i += 1
            continue
        out.append(run[last : groups[i][0]])
        out.append(REDACTED)
        last = groups[found][1]
        i = found + 1
    out.append(run[last:])
    return "".join(out)


def redact_text(text: str, settings: Redaction) -> str:
    """``text`` with bearer tokens and card numbers replaced (the patterns only, no keys)."""
    if settings.bearer_tokens and "earer" in text.lower():
        text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    if settings.card_numbers:
        text = _DIGIT_RUN.sub(lambda m: _redact_card_run(m.group()) if len(m.group()) >= _CARD_MIN else m.group(), text)
    return text


def _embedded_json(text: str) -> Any:
    stripped = text.strip()
    if len(stripped) < 2 or stripped[0] not in "[{" or stripped[-1] not in "]}":
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, (dict, list)) else None


def _string(text: str, settings: Redaction, embedded: int) -> tuple[str, bool]:
    if embedded < _MAX_EMBEDDED_JSON:
        inner = _embedded_json(text)
        if inner is not None:
            redacted, changed = _walk(inner, settings, embedded + 1)
            if changed:
                return json.dumps(redacted, ensure_ascii=False, separators=(",", ":")), True
            return text, False
    out = redact_text(text, settings)
    return out, out != text


def _walk(value: Any, settings: Redaction, embedded: int = 0) -> tuple[Any, bool]:
    """``value`` redacted (a copy where anything changed), and whether anything did."""
    if isinstance(value, dict):
        out: dict = {}
        changed = False
        for key, item in value.items():
            if isinstance(key, str) and settings.redacts_key(key):
                out[key] = REDACTED
                changed = changed or not (isinstance(item, str) and item == REDACTED)
            else:
                out[key], item_changed = _walk(item, settings, embedded)
                changed = changed or item_changed
        return (out if changed else value), changed
    if isinstance(value, list):
        items = [_walk(item, settings, embedded) for item in value]
        if any(c for _, c in items):
            return [v for v, _ in items], True
        return value, False
    if isinstance(value, str):
        return _string(value, settings, embedded)
    if settings.card_numbers and isinstance(value, int) and not isinstance(value, bool):
        digits = str(abs(value))
        if _CARD_MIN <= len(digits) <= _CARD_MAX and luhn_valid(digits):
            return REDACTED, True
    return value, False


def redact_value(value: Any, settings: Redaction) -> tuple[Any, bool]:
    """A parsed JSON value with secrets replaced by ``[REDACTED]``, and whether anything was.

    Never raises: a value that cannot be walked is replaced as a whole (fails closed).
    """
    if not settings.active:
        return value, False
    try:
        return _walk(value, settings)
    except Exception:  # noqa: BLE001 - RecursionError above all: never keep what could not be checked
        return REDACTED, True


def redact_result_text(text: str, settings: Redaction) -> str:
    """A result recorded as text: JSON text is redacted by key and pattern (and written back
    compactly when anything changed); other text by pattern. Never raises (fails closed)."""
    if not settings.active:
        return text
    try:
        return _string(text, settings, 0)[0]
    except Exception:  # noqa: BLE001 - fails closed, as redact_value
        return REDACTED
