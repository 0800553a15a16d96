"""An ASGI application served by uvicorn on a thread of its own, for the HTTP doors of ``tracefence serve``.

Generic: it knows nothing of what it serves (the OTLP/HTTP receiver, a web page). The
listening socket is bound by :meth:`AsgiServer.start` in the caller's thread, so a taken
or invalid address raises ``OSError`` at once, and port 0 gives a free port, read back
from :attr:`AsgiServer.port`. uvicorn then runs on its own event loop in a daemon thread
(it installs no signal handlers off the main thread) and logs through the standard
``logging`` loggers ``uvicorn.error`` (no access log, no logging configuration of its own).
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.parse
from typing import Any

import uvicorn

_POLL_S = 0.01
LISTEN_BACKLOG = 2048
"""Connections the kernel queues for the listener before they are accepted (uvicorn's default backlog): queued there,
they hold no descriptor of this process."""


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` for IPv6) as ``(host, port)``; raises ``OSError`` naming the address."""
    try:
        parts = urllib.parse.urlsplit("//" + address.strip())
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise OSError(f"cannot listen on {address}: {exc}") from None
    if not host or port is None:
        raise OSError(f"cannot listen on {address}: expected host:port")
    return host, port


def listening_socket(address: str) -> socket.socket:
    """A TCP socket bound to ``address`` and listening. Raises ``OSError`` (address taken, not local, not resolved)."""
    host, port = split_address(address)
    try:
        family, kind, proto, _, where = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise OSError(f"cannot listen on {address}: {exc}") from None
    sock = socket.socket(family, kind, proto)
    try:
        # As uvicorn and the Collector do: a restart may reuse a port in TIME_WAIT; a live listener still refuses us.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(where)
        sock.listen(LISTEN_BACKLOG)
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {address}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


class AsgiServer:
    """Serves ``app`` (any ASGI 3 application) on ``address`` (``host:port``, port 0: any free port).

    TLS when ``tls_certificate_file`` and ``tls_key_file`` (PEM) are both given. ``name`` names the thread
    and the log lines. ``options``: more ``uvicorn.Config`` keywords (e.g. ``limit_concurrency``). ``accept_batch``:
    the most connections accepted in one turn of the event loop (asyncio accepts up to uvicorn's ``backlog`` at a
    time, each taking a descriptor before the protocol sees it); the kernel's queue stays :data:`LISTEN_BACKLOG` long.
    :meth:`start` returns once the server accepts connections; :meth:`stop` ends it gracefully.
    """

    def __init__(
        self,
        app: Any,
        address: str,
        *,
        name: str = "asgi",
        tls_certificate_file: str | None = None,
        tls_key_file: str | None = None,
        accept_batch: int | None = None,
        **options: Any,
    ) -> None:
        if bool(tls_certificate_file) != bool(tls_key_file):  # fail closed: one of the two alone never means plaintext
            given, missing = ("tls_certificate_file", "tls_key_file") if tls_certificate_file else ("tls_key_file", "tls_certificate_file")
            raise OSError(f"cannot listen on {address} with TLS: {given} is set but {missing} is not")
        self.address = address
        self.name = name
        self.port = 0
        self.tls = bool(tls_certificate_file)
        if accept_batch is not None:
            options["backlog"] = accept_batch  # asyncio listens with it too: start() lengthens the kernel's queue again
        options.setdefault("log_level", "warning")  # its start and stop lines name a process: ours are clearer
        self._config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            server_header=False,
            lifespan="off",
            ssl_certfile=tls_certificate_file,
            ssl_keyfile=tls_key_file,
            **options,
        )
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    def start(self, timeout_s: float = 10.0) -> None:
        """Bind, start serving on a thread of its own and return once listening.

        Raises ``OSError`` when the address cannot be bound, or the server fails or does not start within ``timeout_s``.
        """
        sock = listening_socket(self.address)
        self.port = sock.getsockname()[1]
        server = self._server = uvicorn.Server(self._config)

        def serve() -> None:
            try:
                server.run(sockets=[sock])
            except BaseException as exc:  # noqa: BLE001 - reported by start(), or logged by uvicorn while serving
                self._failure = exc
            finally:
                sock.close()

        self._thread = threading.Thread(target=serve, name=f"tracefence-{self.name}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop(1.0)
                why = f": {self._failure}" if self._failure else (" (see the uvicorn.error log)" if not self._thread.is_alive() else f" within {timeout_s}s")
                raise OSError(f"cannot serve {self.name} on {self.address}{why}")
            time.sleep(_POLL_S)
        if self._config.backlog < LISTEN_BACKLOG:
            # asyncio listened with the accept batch; a burst of connections then waits in the kernel, not in SYN retries.
            sock.listen(LISTEN_BACKLOG)

    def stop(self, timeout_s: float = 5.0) -> bool:
        """Stop accepting connections, let requests under way finish within ``timeout_s``, then end the rest.

        Returns True when the server thread ended in time. Idempotent.
        """
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return True
        server.config.timeout_graceful_shutdown = max(0.1, timeout_s)
        server.should_exit = True
        thread.join(timeout_s + 0.5)
        if thread.is_alive():
            server.force_exit = True
            thread.join(1.0)
        return not thread.is_alive()
