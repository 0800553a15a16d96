"""The bearer tokens of ``tracefence serve``: one check shared by the gRPC interceptor and the OTLP/HTTP receiver."""

from __future__ import annotations

import hmac


class BearerToken:
    """The ``Authorization`` value a call must carry, ``Bearer <token>`` (the scheme in any letter case); with an
    empty token every call is allowed.

    Compared in constant time (``hmac.compare_digest``), as bytes, so a wrong token's length or prefix tells nothing.
    """

    def __init__(self, token: str = "") -> None:
        self._expected = token.encode() if token else None

    @property
    def required(self) -> bool:
        """True when calls must carry the token."""
        return self._expected is not None

    def allows(self, given: str | bytes | None) -> bool:
        """Whether an ``Authorization`` header value (``None`` when absent) opens the door."""
        if self._expected is None:
            return True
        raw = b"" if given is None else given.encode() if isinstance(given, str) else given
        scheme, _, credentials = raw.strip().partition(b" ")
        # The scheme is case-insensitive (RFC 7235, section 2.1; RFC 6750, section 2.1): "bearer" is "Bearer".
        # The credentials are always compared, so the answer's time never depends on how the header is wrong.
        matches = hmac.compare_digest(credentials.strip(), self._expected)
        return matches and scheme.lower() == b"bearer"
