"""Arguments, results and idempotency keys read out of span attributes or rows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from otel_tracefence import reasons
from otel_tracefence.canonical import JSONNumberError, JSONTextError, canonicalize, parse_json_text, printable, sha256_text, text_too_large
from otel_tracefence.config import Limits, TraceFenceConfig
from otel_tracefence.model import MalformedField
from otel_tracefence.normalize import conventions as cv
from otel_tracefence.redact import REDACTED, redact_result_text, redact_value

_ABSENT = object()


@dataclass(frozen=True, slots=True)
class Arguments:
    """Canonical arguments (RFC 8785 text and SHA-256), or why they are unavailable, or what is malformed."""

    json: str | None = None
    sha256: str | None = None
    unavailable: str | None = reasons.ARGUMENTS_NOT_RECORDED
    malformed: MalformedField | None = None
    value: Any = None  # the parsed value, for reading an idempotency key out of it


NOT_RECORDED = Arguments()


def arguments_from_value(value: Any, limits: Limits, *, text_is_json: bool = True) -> Arguments:
    """Canonicalize arguments given as JSON text (``text_is_json``) or as an already-structured value."""
    if isinstance(value, bytes):
        return Arguments(unavailable=None, malformed=MalformedField("arguments", "arguments are bytes, not JSON"))
    if isinstance(value, str) and text_is_json:
        if text_too_large(value, limits.max_argument_bytes):
            return Arguments(unavailable=reasons.ARGUMENTS_TOO_LARGE)
        try:
            value = parse_json_text(value)
        except JSONNumberError:
            return Arguments(unavailable=reasons.ARGUMENTS_NOT_I_JSON)
        except JSONTextError as exc:
            return Arguments(unavailable=None, malformed=MalformedField("arguments", f"arguments are {exc}"))
        except RecursionError:
            return Arguments(unavailable=reasons.ARGUMENTS_TOO_DEEP)
    canonical = canonicalize(value, max_bytes=limits.max_argument_bytes, max_depth=limits.max_argument_depth)
    if canonical.text is None:
        return Arguments(unavailable=canonical.unavailable)
    return Arguments(json=canonical.text, sha256=canonical.sha256, unavailable=None, value=value)


def span_arguments(attributes: Mapping[str, Any], limits: Limits) -> Arguments:
    """The call's arguments from the first convention that records them (``conventions.ARGUMENT_KEYS``)."""
    for key in cv.ARGUMENT_KEYS:
        value = attributes.get(key, _ABSENT)
        if value is _ABSENT:
            continue
        if key in cv.MIME_TYPE_KEYS:
            # OpenInference: input.value is JSON only when its MIME type says so;
            # plain text (the default) that happens to parse is read as JSON too.
            mime = attributes.get(cv.MIME_TYPE_KEYS[key])
            if mime != "application/json" and isinstance(value, str):
                parsed = arguments_from_value(value, limits)
                return parsed if parsed.malformed is None else arguments_from_value(value, limits, text_is_json=False)
        return arguments_from_value(value, limits)
    parameters = {
        key[len(cv.CODE_PARAMETER_PREFIX) : -len(cv.CODE_PARAMETER_SUFFIX)]: value
        for key, value in attributes.items()
        if key.startswith(cv.CODE_PARAMETER_PREFIX) and key.endswith(cv.CODE_PARAMETER_SUFFIX)
    }
    if parameters:
        return arguments_from_value(parameters, limits)
    return NOT_RECORDED


@dataclass(frozen=True, slots=True)
class Result:
    recorded: bool = False
    sha256: str | None = None
    value: str | None = None  # canonical JSON, or the recorded text


NO_RESULT = Result()


def result_from_value(value: Any, limits: Limits) -> Result:
    """Hash a recorded result: text as recorded (results are never compared, so no canonical form is
    needed), structured values (OTLP kvlist, JSON rows) as canonical JSON."""
    if isinstance(value, str):
        # Hashed as recorded; the value kept is one that can be written out (a lone surrogate escaped).
        return Result(True, sha256_text(value), printable(value))
    if isinstance(value, bytes):
        return Result(True, sha256_text(value.hex()), value.hex())
    canonical = canonicalize(value, max_bytes=limits.max_argument_bytes, max_depth=limits.max_argument_depth)
    if canonical.text is not None:
        return Result(True, canonical.sha256, canonical.text)
    text = repr(value)
    return Result(True, sha256_text(text), text)


def span_result(attributes: Mapping[str, Any], limits: Limits) -> Result:
    """The call's recorded result from the first convention that records one."""
    for key in cv.RESULT_KEYS:
        value = attributes.get(key, _ABSENT)
        if value is not _ABSENT:
            return result_from_value(value, limits)
    return NO_RESULT


# -- raw values kept on opt-in --------------------------------------------------------------
# The one place where a step's raw values are kept (every step builder calls these): nothing
# unless ``store_raw_values``, and then redacted (otel_tracefence/redact.py). The hashes are
# not touched: they stay those of the original values, so redaction never makes two
# different calls compare equal.


def kept_arguments(arguments: Arguments, config: TraceFenceConfig) -> str | None:
    """The canonical arguments a step keeps: ``None`` unless ``store_raw_values``; then with
    secrets replaced by ``[REDACTED]`` (``config.redaction``), still canonical JSON."""
    if not config.store_raw_values or arguments.json is None:
        return None
    redacted, changed = redact_value(arguments.value, config.redaction)
    if not changed:
        return arguments.json
    # Only subtrees were replaced by strings: what had a canonical form within the limits still has one.
    canonical = canonicalize(redacted, max_bytes=config.limits.max_argument_bytes, max_depth=config.limits.max_argument_depth)
    return canonical.text if canonical.text is not None else json.dumps(REDACTED)


def kept_result(result: Result | None, config: TraceFenceConfig) -> str | None:
    """The result value a step keeps: ``None`` unless ``store_raw_values``; then redacted."""
    if not config.store_raw_values or result is None or result.value is None:
        return None
    return redact_result_text(result.value, config.redaction)


def key_from_arguments(value: Any, paths: list[str]) -> str | None:
    """The first configured argument field (dotted path) holding a string or integer key."""
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
    return None
