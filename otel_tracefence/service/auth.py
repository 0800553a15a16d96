"""The bearer tokens of ``tracefence serve``: one check shared by the gRPC interceptor and the OTLP/HTTP receiver."""

from __future__ import annotations

import hmac


class BearerToken:
    """The ``Authorization`` value a call must carry, ``Bearer <token>``; with an empty token every call is allowed.

    Compared in constant time (``hmac.compare_digest``), as bytes, so a wrong token's length or prefix tells nothing.
    """

    def __init__(self, token: str = "") -> None:
        self._expected = f"Bearer {token}".encode() if token else None

    @property
    def required(self) -> bool:
        """True when calls must carry the token."""
        return self._expected is not None

    def allows(self, given: str | bytes | None) -> bool:
        """Whether an ``Authorization`` header value (``None`` when absent) opens the door."""
        if self._expected is None:
            return True
        if given is None:
            return False
        return hmac.compare_digest(given.encode() if isinstance(given, str) else given, self._expected)
