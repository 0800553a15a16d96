"""The service's gRPC listeners: a ``grpc.Server`` with the service's bounds, health and bearer tokens, bound with
TLS or without.

Each server gets the message size bounds, the connection options (:mod:`.grpc_connections`), a thread pool of
``service.max_workers`` and the standard health service; it refuses to share a taken port (``grpc.so_reuseport``
0). With one of the two TLS files alone it refuses to listen at all (fail closed: never plaintext by accident).
"""

from __future__ import annotations

from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2_grpc

from otel_tracefence.core.config import ServiceSettings
from otel_tracefence.service.auth import BearerToken
from otel_tracefence.service.grpc_connections import GRPC_RPCS_PER_WORKER, grpc_connection_options

REVIEW_SERVICE = "tracefence.v1.ReviewService"
_HEALTH_PREFIX = "/grpc.health.v1.Health/"
_REVIEW_PREFIX = f"/{REVIEW_SERVICE}/"


class BearerTokenInterceptor(grpc.ServerInterceptor):
    """Calls must carry ``authorization: Bearer <token>``: OTLP Export the ingest token (``bearer_token``), the
    review API its own token (``review_token``); the one never opens the other. Health checks need none. A
    service without a token is open. Compared in constant time (``hmac.compare_digest``); a missing or wrong
    token gets ``UNAUTHENTICATED``."""

    def __init__(self, token: str = "", review_token: str = "") -> None:
        self._ingest = BearerToken(token)
        self._review = BearerToken(review_token)

    def intercept_service(self, continuation, handler_call_details):
        method = handler_call_details.method
        if method.startswith(_HEALTH_PREFIX):
            return continuation(handler_call_details)
        token = self._review if method.startswith(_REVIEW_PREFIX) else self._ingest
        if token.allows(dict(handler_call_details.invocation_metadata or ()).get("authorization", "")):
            return continuation(handler_call_details)

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")

        return grpc.unary_unary_rpc_method_handler(deny)


def grpc_server(settings: ServiceSettings, health_servicer: health.HealthServicer, max_connections: int) -> grpc.Server:
    """A gRPC server, not started, with the bounds and tokens of ``settings``, serving
    ``health_servicer``; at most ``max_connections`` connections."""
    options = [
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.so_reuseport", 0),  # a second server on a taken port must fail, not share it
        *grpc_connection_options(settings, max_connections),
    ]
    tokens = (settings.bearer_token, settings.review_token)
    interceptors = [BearerTokenInterceptor(*tokens)] if any(tokens) else []
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=settings.max_workers), options=options, interceptors=interceptors,
        maximum_concurrent_rpcs=settings.grpc_max_concurrent_rpcs or GRPC_RPCS_PER_WORKER * settings.max_workers,
    )  # fmt: skip
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    return server


def bind(server: grpc.Server, address: str, settings: ServiceSettings) -> int:
    """Bind ``server`` to ``address`` (TLS when ``settings`` names both files); the port bound. Raises ``OSError``
    when the address is taken or invalid, or only one of the two TLS files is set."""
    if bool(settings.tls_certificate_file) != bool(settings.tls_key_file):
        # Fail closed: one of the two alone must not fall back to plaintext.
        given, missing = ("tls_certificate_file", "tls_key_file") if settings.tls_certificate_file else ("tls_key_file", "tls_certificate_file")
        raise OSError(f"cannot listen on {address} with TLS: {given} is set but {missing} is not")
    if settings.tls_certificate_file and settings.tls_key_file:
        with open(settings.tls_key_file, "rb") as key, open(settings.tls_certificate_file, "rb") as chain:
            credentials = grpc.ssl_server_credentials([(key.read(), chain.read())])
        add_port = lambda: server.add_secure_port(address, credentials)  # noqa: E731
    else:
        add_port = lambda: server.add_insecure_port(address)  # noqa: E731
    try:
        port = add_port()
    except RuntimeError as exc:  # grpc says "Failed to bind": the address is taken or invalid
        raise OSError(f"cannot listen on {address}: {exc}") from None
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    return port
