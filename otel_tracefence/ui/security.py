"""What keeps a page that can resolve review items from being read or driven by someone else.

Sessions: a random session cookie (``HttpOnly``, ``SameSite=Strict``, ``Secure``
over HTTPS). Every POST must pass :meth:`SessionGuard.check_post`: its ``Origin``
(else its ``Referer``) is the page's own origin (scheme, host and port the
request came to), and it carries the CSRF token of its session, an HMAC
(SHA-256) of the session id under a secret drawn when the app starts. The rules
follow the OWASP CSRF Prevention Cheat Sheet (verifying origin with standard
headers; synchronizer token pattern).

Sign-in: when a review token is configured, every page but the sign-in page
needs a session signed in with it (the review API asks the token for reading
too: items name traces and tools). Signing in compares the token in constant
time, starts a new session (against session fixation) and sets a second cookie,
``<issued unix seconds>.<HMAC of session id and that time>``, valid for
:data:`SIGN_IN_TTL_S`; a restart (a new secret) signs everyone out.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
import urllib.parse
from typing import Callable

from starlette.requests import Request
from starlette.responses import Response

from otel_tracefence.core.config import TraceFenceConfig

SESSION_COOKIE = "tracefence_session"
SIGNED_IN_COOKIE = "tracefence_signed_in"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
SIGN_IN_TTL_S = 12 * 3600


def cookie_names(request: Request) -> tuple[str, str]:
    """The session and sign-in cookie names of the page ``request`` was sent to. Browsers share a host's
    cookies between its ports (RFC 6265, section 8.5), so the port is in the names: two pages on one host
    (``tracefence ui`` beside ``service.ui_endpoint``) keep their sessions apart."""
    suffix = f"_{request.url.port}" if request.url.port else ""
    return SESSION_COOKIE + suffix, SIGNED_IN_COOKIE + suffix


class Refused(Exception):
    """A request refused (HTTP 403); the message says why, for a person."""


class SessionGuard:
    """Issues session cookies, their CSRF tokens and sign-ins, and checks requests against them.

    ``review_token``: the token signing in takes; ``""``: no sign-in (every session counts as signed in).
    ``secret``: the HMAC key (random 32 bytes by default: sessions end with the process).
    ``clock``: Unix seconds (default :func:`time.time`); for tests.
    """

    def __init__(self, review_token: str = "", secret: bytes | None = None, clock: Callable[[], float] = time.time) -> None:
        self.review_token = review_token
        self._secret = secret or secrets.token_bytes(32)
        self._clock = clock

    def _mac(self, text: str) -> str:
        return hmac.new(self._secret, text.encode(), hashlib.sha256).hexdigest()

    @staticmethod
    def new_session() -> str:
        """A new random session id."""
        return secrets.token_urlsafe(32)

    def session(self, request: Request) -> tuple[str, bool]:
        """The request's session id, and whether it is new (then :meth:`set_session` must send it)."""
        current = request.cookies.get(cookie_names(request)[0], "")
        if 20 <= len(current) <= 100:
            return current, False
        return self.new_session(), True

    def token(self, session_id: str) -> str:
        """The CSRF token of ``session_id`` (hex HMAC-SHA-256)."""
        return self._mac("csrf|" + session_id)

    @staticmethod
    def set_session(request: Request, response: Response, session_id: str) -> None:
        """Send the session cookie: ``HttpOnly``, ``SameSite=Strict``, ``Secure`` over HTTPS, for this browser session."""
        secure = request.url.scheme == "https"
        response.set_cookie(cookie_names(request)[0], session_id, httponly=True, samesite="strict", secure=secure, path="/")

    def check_post(self, request: Request, given_token: str) -> None:
        """Raise :class:`Refused` unless the POST comes from this page's own origin with its session's CSRF token."""
        own = own_origin(request)
        origin = request.headers.get("origin")
        if origin == "null":  # an opaque origin: a sandboxed frame, a data: page, a cross-origin redirect
            raise Refused("refused: the request comes from an opaque origin (Origin: null), not from this page")
        if origin is None:
            referer = request.headers.get("referer", "")
            parts = urllib.parse.urlsplit(referer)
            origin = f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None
        if origin is None:
            raise Refused("refused: the request names no origin (no Origin or Referer header), so it cannot be told from a cross-site one")
        if origin.lower() != own.lower():
            raise Refused(f"refused: cross-origin request from {origin}; only pages of {own} may post here")
        session_id = request.cookies.get(cookie_names(request)[0], "")
        if not session_id or not given_token or not hmac.compare_digest(given_token.encode(), self.token(session_id).encode()):
            raise Refused("refused: the form's CSRF token is missing or stale; reload the page and try again")

    def signed_in(self, request: Request) -> bool:
        """Whether the request's session signed in with the review token within :data:`SIGN_IN_TTL_S`
        (always, when no token is configured)."""
        if not self.review_token:
            return True
        session_name, signed_in_name = cookie_names(request)
        session_id = request.cookies.get(session_name, "")
        issued, _, mac = request.cookies.get(signed_in_name, "").partition(".")
        if not session_id or not issued.isdigit() or not mac:
            return False
        if not 0 <= self._clock() - int(issued) <= SIGN_IN_TTL_S:
            return False
        return hmac.compare_digest(mac.encode(), self._mac(f"signed-in|{session_id}|{issued}").encode())

    def sign_in(self, request: Request, given_token: str, response: Response) -> None:
        """Sign a new session in on ``response`` when ``given_token`` is the review token; else raise :class:`Refused`."""
        if not token_matches(given_token, self.review_token):
            raise Refused("refused: that is not the review token")
        session_id = self.new_session()
        issued = str(int(self._clock()))
        self.set_session(request, response, session_id)
        secure = request.url.scheme == "https"
        response.set_cookie(
            cookie_names(request)[1], f"{issued}.{self._mac(f'signed-in|{session_id}|{issued}')}", httponly=True, samesite="strict", secure=secure, path="/"
        )

    @staticmethod
    def sign_out(request: Request, response: Response) -> None:
        """Drop the sign-in and the session."""
        for name in cookie_names(request):
            response.delete_cookie(name, path="/")


def own_origin(request: Request) -> str:
    """``scheme://host[:port]`` the request was sent to (its ``Host`` header)."""
    return f"{request.url.scheme}://{request.headers.get('host', '')}"


def token_matches(given: str, expected: str) -> bool:
    """Whether ``given`` is the review token ``expected`` (constant time); always true when none is configured."""
    if not expected:
        return True
    return hmac.compare_digest(given.encode(), expected.encode())


def check_ui_exposure(listen: str, config: TraceFenceConfig) -> str | None:
    """Fail closed, as the review API does (:func:`~otel_tracefence.service.serve_settings.check_review_exposure`):
    raise :class:`~otel_tracefence.core.config.ConfigError` when the page would listen on ``listen`` beyond
    loopback with no ``service.review_token`` and no ``ui.insecure``; with that flag, return the warning
    to log. ``None`` when all is well."""
    from otel_tracefence.core.config import ConfigError
    from otel_tracefence.core.exposure import exposure_problem

    problem = exposure_problem(listen, config.service.review_token, what="the review page", token_setting="review token")
    if problem is None:
        return None
    if not config.ui.insecure:
        raise ConfigError(
            f"refusing to start: {problem}. Give a review token (service.review_token, "
            "OTEL_TRACEFENCE_SERVICE__REVIEW_TOKEN; tracefence ui --review-token), or listen on loopback "
            "(127.0.0.1), or accept the exposure with ui.insecure (OTEL_TRACEFENCE_UI__INSECURE; tracefence ui --insecure-ui)",
            ("ui",),
        )
    return f"{problem} (allowed by ui.insecure)"


def served_hosts(listen: str) -> list[str] | None:
    """The ``Host`` names a page on ``listen`` answers (against DNS rebinding): on loopback, ``localhost``,
    ``127.0.0.1`` and the listen host; beyond it, ``None`` (any name: the review token guards resolving)."""
    from otel_tracefence.core.exposure import is_loopback

    if not is_loopback(listen):
        return None
    host = urllib.parse.urlsplit("//" + listen.strip()).hostname or "127.0.0.1"
    if ":" in host:  # an IPv6 literal: the Host header carries it in brackets (RFC 3986, 3.2.2)
        host = f"[{host}]"
    return sorted({"localhost", "127.0.0.1", host})
