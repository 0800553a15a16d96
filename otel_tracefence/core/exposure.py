"""Whether a listener that can resolve review items is exposed: the one rule the review API (``tracefence serve``)
and the review page (``tracefence ui``) both check before they start (SECURITY.md)."""

from __future__ import annotations

import ipaddress
import urllib.parse


def is_loopback(address: str) -> bool:
    """True when ``host:port`` listens on loopback only (127.0.0.0/8, ::1, localhost)."""
    host = urllib.parse.urlsplit("//" + address.strip()).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # another host name: it may resolve anywhere
        return False


def exposure_problem(address: str, token: str, *, what: str, token_setting: str) -> str | None:
    """Why a listener that can resolve review items is exposed: ``what`` (e.g. ``the review API``) at
    ``address`` beyond loopback with no ``token``; ``None`` when it is on loopback or has a token.
    The one rule behind :func:`otel_tracefence.service.serve_settings.check_review_exposure` and ``tracefence ui``'s check."""
    if token or is_loopback(address):
        return None
    return f"{what} would listen on {address}, beyond loopback, with no {token_setting}: anyone who reaches it could resolve review items"
