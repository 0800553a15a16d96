"""The OTLP/HTTP receiver's connections: how many it holds, and how long one may wait for a request's header.

uvicorn (0.35 and later, on h11) closes a connection idle between requests after ``timeout_keep_alive``
(``service.http_idle_timeout_s`` is passed as it), but it has no header timeout (a connection that sends nothing,
or half a header, is held for ever) and no cap on the connections it accepts: ``limit_concurrency`` answers ``503``
only once a request's header has arrived, after the connection's descriptor has been held all along, and it logs one
line per request. So :func:`guarded_h11_protocol` makes uvicorn's own h11 protocol class do two things more:

* **header timeout**: a connection gets ``header_timeout_s`` seconds, from its accept (or from the first byte of a
  next request on a kept-alive connection), to send a complete request header; past it, it is closed (its body, once
  the header is here, has ``service.http_body_timeout_s`` of its own, in the receiver);
* **connection cap**: a connection accepted while ``max_connections`` are open is answered ``503`` with
  ``Retry-After`` and ``Connection: close`` at once, without reading it, and closed: its descriptor is given back
  in the same turn of the event loop.

Both are counted and logged as a rate (:class:`~otel_tracefence.core.log_rate.RateLog`), never one line per
connection. :func:`connection_cap` derives the cap from the process's descriptor limit (``RLIMIT_NOFILE``, read
at start), keeping a reserve for the gRPC receiver, the stores, the persistent queue and the upstream connections.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import ssl
from dataclasses import dataclass, field
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from otel_tracefence.core.log_rate import RateLog

_log = logging.getLogger("otel_tracefence.service")

RESERVE_MIN = 64
"""Descriptors always kept out of the OTLP/HTTP receiver's reach, at the least (and a quarter of the limit when more)."""
CAP_FLOOR = 8
"""The fewest connections the receiver holds whatever the limit says (below it, it could not serve at all)."""
UNLIMITED_CAP = 10_000
"""The cap when the descriptor limit is unlimited and ``service.http_max_connections`` is 0."""

ACCEPT_BATCH_MIN, ACCEPT_BATCH_MAX = 4, 2048
"""The accept batch's bounds (2048: uvicorn's default backlog)."""

_REFUSED = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@dataclass(frozen=True, slots=True)
class ConnectionCap:
    """The OTLP/HTTP receiver's connection cap and how it was found: ``limit`` (the soft ``RLIMIT_NOFILE``, None when
    unlimited), ``in_use`` (descriptors open when it was read), ``reserve`` (kept for the rest of the process) and
    ``configured`` (``service.http_max_connections``, 0: derived)."""

    connections: int
    limit: int | None
    in_use: int
    reserve: int
    configured: int
    accept_batch: int = 2048
    grpc_connections: int = UNLIMITED_CAP
    """The most OTLP/gRPC connections (``grpc.max_allowed_incoming_connections``): half the reserve, or with the HTTP
    receiver off its share too; ``service.grpc_max_connections`` lowers it."""
    """How many connections asyncio accepts in one turn of the event loop (uvicorn's ``backlog``), each a descriptor
    before any of them is seen and refused (a refused one's descriptor is closed two or three turns later, while the
    next batches are accepted): an eighth of the reserve, between 4 and 2048, so that a burst of accepts cannot take
    the reserve's descriptors (the kernel's queue stays 2048 long: ``AsgiServer(accept_batch=...)``)."""

    def describe(self) -> str:
        """One sentence for the start log."""
        if self.limit is None:
            return (
                f"the OTLP/HTTP receiver holds at most {self.connections} connections, the OTLP/gRPC receiver at most "
                f"{self.grpc_connections} (descriptor limit: unlimited)"
            )
        return (
            f"the OTLP/HTTP receiver holds at most {self.connections} connections: descriptor limit {self.limit} (RLIMIT_NOFILE), "
            f"{self.in_use} open at start, {self.reserve} kept for gRPC, the stores and the upstreams, at most {self.accept_batch} accepted at a time"
            + (f", service.http_max_connections {self.configured}" if self.configured else "")
            + f"; the OTLP/gRPC receiver at most {self.grpc_connections}"
        )


def open_descriptors() -> int:
    """File descriptors this process has open now (``/proc/self/fd``; 0 where it cannot be listed)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def connection_cap(configured: int = 0, limit: int | None = -1, in_use: int | None = None, *, grpc_configured: int = 0, http: bool = True) -> ConnectionCap:
    """The most OTLP/HTTP and OTLP/gRPC connections to hold at once.

    ``limit``: the descriptor limit (default -1: read now with ``resource.getrlimit(RLIMIT_NOFILE)``, its soft value;
    None: unlimited); ``in_use``: descriptors open now (default: counted). The HTTP cap is ``limit - in_use - reserve``,
    ``reserve = max(RESERVE_MIN, limit // 4)``, at least :data:`CAP_FLOOR`; ``configured`` (> 0) lowers it further,
    never raises it past the limit. gRPC's is half the reserve (the rest: the stores, the upstreams), plus the HTTP cap
    when ``http`` is False (no HTTP receiver); ``grpc_configured`` (> 0) lowers it. The accept batch is an eighth of the
    reserve (:attr:`ConnectionCap.accept_batch`).
    """
    if limit == -1:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        limit = None if soft == resource.RLIM_INFINITY else int(soft)
    if in_use is None:
        in_use = open_descriptors()
    if limit is None:
        return ConnectionCap(configured or UNLIMITED_CAP, None, in_use, 0, configured, ACCEPT_BATCH_MAX, grpc_configured or UNLIMITED_CAP)
    reserve = max(RESERVE_MIN, limit // 4)
    derived = max(CAP_FLOOR, limit - in_use - reserve)
    cap = min(derived, configured) if configured > 0 else derived
    grpc = max(CAP_FLOOR, reserve // 2 + (0 if http else derived))
    if grpc_configured > 0:
        grpc = min(grpc, grpc_configured)
    return ConnectionCap(cap, limit, in_use, reserve, configured, max(ACCEPT_BATCH_MIN, min(ACCEPT_BATCH_MAX, reserve // 8)), grpc)


@dataclass(slots=True)
class ConnectionGuard:
    """What :func:`guarded_h11_protocol`'s connections share (on the receiver's one event loop): the cap, the header
    timeout (seconds), the TLS context (None: plaintext), the connections held (each a descriptor, from its accept) and
    those among them waiting for a request (oldest first: the ones closed to make room), and three rate logs."""

    max_connections: int
    header_timeout_s: float
    refused: RateLog
    header_timeouts: RateLog
    evicted: RateLog
    tls: ssl.SSLContext | None = None
    held: set[Any] = field(default_factory=set)
    waiting: dict[Any, None] = field(default_factory=dict)

    @classmethod
    def make(cls, max_connections: int, header_timeout_s: float, tls: ssl.SSLContext | None = None, interval_s: float = 10.0) -> "ConnectionGuard":
        """A guard logging on ``otel_tracefence.service`` at most once per ``interval_s`` seconds for each kind."""
        return cls(
            max_connections,
            header_timeout_s,
            RateLog(_log, f"refused %d OTLP/HTTP connection(s) in %.0fs: {max_connections} open, each in a request, the cap "
                    "(503, Retry-After: 1)", interval_s=interval_s),
            RateLog(_log, f"closed %d OTLP/HTTP connection(s) in %.0fs that sent no complete request header within {header_timeout_s:g}s "
                    "(service.http_header_timeout_s)", interval_s=interval_s),
            RateLog(_log, f"closed %d OTLP/HTTP connection(s) in %.0fs that waited longest for a request, to make room: "
                    f"{max_connections} open, the cap", interval_s=interval_s),
            tls,
        )  # fmt: skip

    def admit(self, connection: Any) -> bool:
        """Count ``connection``, just accepted. At the cap, the connection waiting longest for a request (accepted or
        kept alive and sending nothing, in its TLS handshake, or part-way through a header) is closed to make room, as
        a web server closes its idle keep-alive connections when it runs out; when every one is in a request, False:
        ``connection`` is refused."""
        self.held.add(connection)
        if len(self.held) <= self.max_connections:
            return True
        oldest = next(iter(self.waiting), None)
        if oldest is None:
            self.release(connection)
            self.refused.event()
            return False
        self.release(oldest)
        self.evicted.event()
        oldest.close_connection()
        return True

    def release(self, connection: Any) -> None:
        """``connection`` no longer counts (closed, or being closed: its descriptor is given back within a turn)."""
        self.held.discard(connection)
        self.waiting.pop(connection, None)

    def flush(self) -> None:
        """Log what was counted since the last lines (at a stop)."""
        self.refused.flush()
        self.header_timeouts.flush()
        self.evicted.flush()


def tls_context(certificate_file: str | None, key_file: str | None) -> ssl.SSLContext | None:
    """The server's TLS context for a certificate chain and key (PEM), None for plaintext; ``OSError`` naming the file
    when one cannot be read."""
    if not certificate_file and not key_file:
        return None
    if not certificate_file or not key_file:  # fail closed: one alone never means plaintext
        given, missing = ("tls_certificate_file", "tls_key_file") if certificate_file else ("tls_key_file", "tls_certificate_file")
        raise OSError(f"cannot serve OTLP/HTTP with TLS: {given} is set but {missing} is not")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(certificate_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise OSError(f"cannot serve OTLP/HTTP with TLS: {certificate_file}, {key_file}: {exc}") from None
    context.set_alpn_protocols(["http/1.1"])
    return context


def guarded_h11_protocol(guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol class with ``guard``'s connection cap and header timeout, and TLS when ``guard.tls``
    (pass it as ``uvicorn.Config(http=...)``, uvicorn itself serving plaintext). The TLS handshake is made here, after
    the connection is counted, and is under the header timeout: from the accept, the handshake and the header together
    have ``header_timeout_s``."""

    class GuardedH11Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None
        _socket: Any = None  # the TCP transport: closed to end the connection at once, whatever TLS is doing
        _handshake: asyncio.Task[None] | None = None
        _early: list[bytes] | None = None  # what came right after the TLS handshake, before the connection was made

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            self._socket = transport
            if not guard.admit(self):
                super().connection_made(transport)
                if guard.tls is None:
                    transport.write(_REFUSED)
                transport.close()  # the descriptor is closed once the answer is written (at once: it is tiny)
                return
            guard.waiting[self] = None
            self._arm_header_timer()
            if guard.tls is None:
                super().connection_made(transport)
                return
            transport.pause_reading()  # the handshake's own reader takes over
            self._early = []
            self._handshake = self.loop.create_task(self._start_tls(transport))

        async def _start_tls(self, transport: Any) -> None:
            try:
                secure = await self.loop.start_tls(
                    transport, self, guard.tls, server_side=True,  # type: ignore[arg-type]
                    ssl_handshake_timeout=guard.header_timeout_s, ssl_shutdown_timeout=guard.header_timeout_s,
                )  # fmt: skip
            except Exception:  # noqa: BLE001 - a failed or abandoned handshake: the client's, closed, nothing to log
                self._forget()
                transport.close()
                return
            except asyncio.CancelledError:  # the server stops
                self._forget()
                transport.close()
                raise
            if secure is None or transport.is_closing():
                self._forget()
                return
            super().connection_made(secure)
            early, self._early = self._early or [], None
            for data in early:
                self.data_received(data)

        def data_received(self, data: bytes) -> None:
            if self._early is not None:  # TLS, made but not yet handed to uvicorn
                self._early.append(data)
                return
            if self._header_timer is None and self._waiting_for_header():  # a kept-alive connection's next request begins
                self._arm_header_timer()
            super().data_received(data)

        def handle_events(self) -> None:
            super().handle_events()
            if not self._waiting_for_header():  # the header is complete: a request under way
                guard.waiting.pop(self, None)
                if self._header_timer is not None:
                    self._header_timer.cancel()
                    self._header_timer = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self in guard.held and not self.transport.is_closing() and self._waiting_for_header():
                guard.waiting[self] = None  # kept alive: waiting for the next request, from now

        def connection_lost(self, exc: Exception | None) -> None:
            self._forget()
            if self.transport is not None:  # made (for TLS: handshake done)
                super().connection_lost(exc)

        def close_connection(self) -> None:
            """Close the connection now, unanswered (to make room at the cap)."""
            self._forget()
            self._socket.close()

        def _forget(self) -> None:
            guard.release(self)
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _waiting_for_header(self) -> bool:
            return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)

        def _arm_header_timer(self) -> None:
            self._header_timer = self.loop.call_later(guard.header_timeout_s, self._header_timed_out)

        def _header_timed_out(self) -> None:
            self._header_timer = None
            if self._socket.is_closing() or not self._waiting_for_header():
                return
            guard.header_timeouts.event()
            self._forget()
            self._socket.close()

    return GuardedH11Protocol


__all__ = ["CAP_FLOOR", "RESERVE_MIN", "ConnectionCap", "ConnectionGuard", "connection_cap", "guarded_h11_protocol", "open_descriptors", "tls_context"]
