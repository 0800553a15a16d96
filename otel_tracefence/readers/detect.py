"""Which reader a file needs: OTLP/JSON, JSON rows, NDJSON rows or CSV rows."""

from __future__ import annotations

import json

FORMATS = ("otlp-json", "json", "ndjson", "csv")
_OTLP_KEYS = ("resourceSpans", "resource_spans")


def detect_format(text: str) -> str:
    """Sniff the format from the content: an object with ``resourceSpans`` (or a misspelling of it) is OTLP/JSON, ``[`` a JSON array of rows,
    another object NDJSON rows, anything else CSV."""
    start = len(text) - len(text.lstrip())
    if text.startswith("[", start):
        return "json"
    if text.startswith("{", start):
        try:
            first, _ = json.JSONDecoder().raw_decode(text, start)
        except (ValueError, RecursionError):  # ValueError: not JSON, or an integer past int()'s digit limit
            first_line = text[start:].split("\n", 1)[0]
            return "otlp-json" if any(f'"{k}"' in first_line for k in _OTLP_KEYS) else "ndjson"
        return "otlp-json" if isinstance(first, dict) and any(_names_resource_spans(k) for k in first) else "ndjson"
    return "csv"


def _names_resource_spans(key: str) -> bool:
    """``resourceSpans``, or a misspelling of it by case, underscores or a final ``s`` (``resourceSpan``,
    ``ResourceSpans``): the OTLP/JSON reader then refuses the file naming that key, where read as a row it would
    only lack ``tool`` and ``call_id`` (DECISIONS 180)."""
    return key in _OTLP_KEYS or key.replace("_", "").casefold().removesuffix("s") == "resourcespan"
