"""What a review store target (config ``review_db``, ``--db``, ``--review-db``) is and how it is shown: a
PostgreSQL URL or a SQLite path, with any password masked in logs and messages."""

from __future__ import annotations

import os
import re
import urllib.parse

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
INSTALL_HINT = "pip install 'otel-tracefence[postgres]'"
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def url_scheme(target: str | os.PathLike[str]) -> str | None:
    """The scheme of ``target`` when it is written as a URL (``scheme://...``), lowercase; None for a path."""
    match = _URL.match(target) if isinstance(target, str) else None
    return match.group(1).lower() if match else None


def check_target(target: str | os.PathLike[str]) -> str | os.PathLike[str]:
    """``target`` when it is a store this version serves: a SQLite file's path (any text that is no URL) or a
    PostgreSQL URL. Raises ``ValueError`` for a URL of any other scheme (``sqlite:///x.db``, ``mysql://...``), naming
    it (its password masked): it would otherwise be taken for a file name and reported as a missing file."""
    scheme = url_scheme(target)
    if scheme is None or is_postgres_url(target):
        return target
    hint = " (for SQLite, give the file's path itself, not a sqlite:// URL)" if scheme.startswith("sqlite") else ""
    raise ValueError(f"{display_target(target)}: a {scheme}:// URL is not a review store this version serves: give a SQLite file path or a postgresql:// URL{hint}")


def is_postgres_url(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` is a PostgreSQL URL (``postgresql://`` or ``postgres://``, any letter case)."""
    return isinstance(target, str) and target[:13].lower().startswith(POSTGRES_SCHEMES)


def display_target(target: str | os.PathLike[str]) -> str:
    """``target`` as it may be logged and shown: a URL (PostgreSQL's, or one of a scheme no store serves) with its
    password (in the user part or a ``password=`` parameter) replaced by ``***``; a path unchanged."""
    if url_scheme(target) is None:
        return os.fspath(target)
    parts = urllib.parse.urlsplit(str(target))
    if not is_postgres_url(target) and parts.password is None:
        return str(target)  # nothing to mask: as written
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
