"""What a review store target (config ``review_db``, ``--db``, ``--review-db``) is and how it is shown: a
PostgreSQL URL or a SQLite path, with any password masked in logs and messages."""

from __future__ import annotations

import os
import urllib.parse

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
INSTALL_HINT = "pip install 'otel-tracefence[postgres]'"


def is_postgres_url(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` is a PostgreSQL URL (``postgresql://`` or ``postgres://``, any letter case)."""
    return isinstance(target, str) and target[:13].lower().startswith(POSTGRES_SCHEMES)


def display_target(target: str | os.PathLike[str]) -> str:
    """``target`` as it may be logged and shown: a PostgreSQL URL with its password (in the user part or a
    ``password=`` parameter) replaced by ``***``; a path unchanged."""
    if not is_postgres_url(target):
        return os.fspath(target)
    parts = urllib.parse.urlsplit(str(target))
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:***@{hostport}"
    query = urllib.parse.urlencode(
        [(k, "***" if k == "password" else v) for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True)], safe="*"
    )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def error_naming(target: str | os.PathLike[str], exc: BaseException) -> str:
    """``exc``'s message for one line on standard error, led by :func:`display_target` of ``target`` unless
    it names it already (the stores' own errors do)."""
    where = display_target(target)
    return str(exc) if where in str(exc) else f"{where}: {exc}"
