"""The OTLP/gRPC receiver's connections: grpcio's own server options, set from ``service.grpc_*``.

gRPC core bounds what the OTLP/HTTP receiver bounds by hand (:mod:`~otel_tracefence.service.http_connections`), each
with a channel argument of its own (``include/grpc/impl/channel_arg_names.h``):

* ``grpc.max_allowed_incoming_connections``: the connection cap, enforced at the accept, before the handshake (a
  connection past it is closed unread); from the descriptor limit (:func:`~.http_connections.connection_cap`);
* ``grpc.server_handshake_timeout_ms``: from the accept to the TLS handshake's end and HTTP/2's settings
  (``service.grpc_handshake_timeout_s``; gRPC's own default, 120 s, let a silent connection hold its slot that long);
* ``grpc.max_connection_idle_ms``: a connection with no call under way is ended with ``GOAWAY``
  (``service.grpc_idle_timeout_s``; no limit by default in gRPC);
* grpcio's ``maximum_concurrent_rpcs``: calls served or queued for a thread at once, past it ``RESOURCE_EXHAUSTED``
  (``service.grpc_max_concurrent_rpcs``, 0: :data:`GRPC_RPCS_PER_WORKER` × ``max_workers``).

gRPC core cannot close its oldest idle connection to make room as the HTTP receiver does: at its cap it refuses the new
one, and the handshake timeout is what frees the slots a flood of silent connections holds.
"""

from __future__ import annotations

from typing import Any

GRPC_RPCS_PER_WORKER = 16
"""Calls held per ``max_workers`` thread when ``service.grpc_max_concurrent_rpcs`` is 0 (one served, fifteen waiting)."""


def grpc_connection_options(settings: Any, max_connections: int) -> list[tuple[str, int]]:
    """The channel arguments of a gRPC server of ``tracefence serve`` (``settings``: its ``ServiceSettings``) holding at
    most ``max_connections`` connections."""
    return [
        ("grpc.max_allowed_incoming_connections", max_connections),
        ("grpc.server_handshake_timeout_ms", max(1, round(settings.grpc_handshake_timeout_s * 1000))),
        ("grpc.max_connection_idle_ms", max(1, round(settings.grpc_idle_timeout_s * 1000))),
    ]


__all__ = ["GRPC_RPCS_PER_WORKER", "grpc_connection_options"]
