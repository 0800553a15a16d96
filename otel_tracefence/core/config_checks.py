"""The configuration's plain checks, with no pydantic: the error every reader raises, the listen and upstream
addresses, ``module:function`` references and trace URL templates. The settings models
(:mod:`otel_tracefence.core.config`, :mod:`otel_tracefence.core.config_service`) call them in their validators; the
command line calls them on its flags before any settings model is imported (a fast ``tracefence --help``).
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Literal

MIN_MESSAGE_BYTES = 1024  # the smallest gRPC/OTLP message bound accepted, in bytes: less refuses every real request


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the file and field.

    ``fields``: the top-level settings at fault, when known.
    """

    def __init__(self, message: str, fields: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.fields = fields


def check_address(value: str, *, schemes: tuple[str, ...] = (), port_zero: bool = False) -> str:
    """``host:port`` (or ``scheme://host:port`` for a listed scheme), the port within 1..65535 (0 too if allowed).

    Raises ``ValueError`` naming what is wrong.
    """
    text = value.strip()
    scheme, sep, rest = text.partition("://")
    if sep and scheme not in schemes:
        raise ValueError(f"{value!r}: scheme must be one of {', '.join(schemes) or 'none'}")
    try:
        parts = urllib.parse.urlsplit("//" + (rest if sep else text))
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{value!r}: {exc}") from None
    if not parts.hostname or port is None or (port == 0 and not port_zero) or parts.path not in ("", "/"):
        raise ValueError(f"{value!r}: expected host:port" + (f" or {'/'.join(schemes)}://host:port" if schemes else ""))
    return text


UpstreamProtocol = Literal["grpc", "http/protobuf"]
UPSTREAM_PATH = "/v1/traces"


def check_upstream_endpoint(value: str, protocol: str | None = None) -> str:
    """An upstream's endpoint for ``protocol`` (``None``: either): ``host:port`` or ``http(s)://host:port`` for both;
    for ``http/protobuf`` also an ``http(s)://`` URL with no port (80 or 443) or a path (a path that does not end in
    ``/v1/traces`` gets it appended, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` does). Raises ``ValueError`` naming what is wrong."""
    try:
        return check_address(value, schemes=("http", "https"))
    except ValueError:
        if protocol == "grpc":
            raise
    scheme, sep, _ = value.strip().partition("://")
    try:
        parts = urllib.parse.urlsplit(value.strip())
        _ = parts.port  # raises for a port out of range
    except ValueError as exc:
        raise ValueError(f"{value!r}: {exc}") from None
    if not sep or scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(f"{value!r}: expected host:port, http(s)://host:port, or (for http/protobuf) an http(s):// URL")
    return value.strip()


_REFERENCE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def check_reference(value: str) -> str:
    """``value`` if it is an object reference ``module:function`` (dotted names, as entry points write them: the
    Python packaging specification's entry points data model), else :class:`ValueError`. Whether it imports is
    checked when the reconcilers are loaded (:func:`otel_tracefence.reconcile.registry.load_reconcilers`)."""
    if not _REFERENCE.fullmatch(value.strip()):
        raise ValueError(f"{value!r} is not a 'module:function' reference (e.g. billing_checks:find_invoice)")
    return value.strip()


def check_trace_url_template(value: str) -> str:
    """``ui.trace_url_template``: empty, or an ``http(s)://`` URL holding ``{trace_id}``. Raises ``ValueError`` naming it."""
    if value and "{trace_id}" not in value:
        raise ValueError(f"{value!r}: a trace URL template must hold {{trace_id}}")
    if value and urllib.parse.urlsplit(value).scheme not in ("http", "https"):
        raise ValueError(f"{value!r}: a trace URL template must start with http:// or https://")
    return value


_WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "[::]", "*", ""})
_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1"})


def same_listen_address(a: str, b: str) -> bool:
    """Whether two ``host:port`` listen addresses would collide: the same port (not 0) on the same
    host, or on any host when either is a wildcard."""
    host_a, _, port_a = a.strip().rpartition(":")
    host_b, _, port_b = b.strip().rpartition(":")
    if port_a != port_b or port_a in ("0", ""):
        return False
    host_a, host_b = host_a.lower(), host_b.lower()
    if host_a in _LOOPBACK_HOSTS and host_b in _LOOPBACK_HOSTS:
        return True
    return host_a == host_b or host_a in _WILDCARD_HOSTS or host_b in _WILDCARD_HOSTS


DEFAULT_UI_LISTEN = "127.0.0.1:8077"
