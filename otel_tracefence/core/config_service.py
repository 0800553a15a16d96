"""The doors' settings: ``tracefence serve`` (:class:`ServiceSettings`, its upstreams) and ``tracefence ui``
(:class:`UiSettings`), parts of :class:`~otel_tracefence.core.config.TraceFenceConfig`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from otel_tracefence.core.config_checks import (
    DEFAULT_UI_LISTEN,
    MIN_MESSAGE_BYTES,
    UpstreamProtocol,
    check_address,
    check_trace_url_template,
    check_upstream_endpoint,
    same_listen_address,
)
from otel_tracefence.core.config_operations import OperationsSettings


class UpstreamSettings(BaseModel):
    """One OTLP endpoint decided spans are forwarded to (a Collector, Jaeger, Tempo, an OTLP/HTTP intake...)."""

    model_config = ConfigDict(extra="forbid")

    endpoint: str = Field(min_length=1)
    """``host:port`` or ``http(s)://host:port``; ``http://`` or ``insecure`` means plaintext. Over ``http/protobuf``
    also a URL with a path: ``https://cloud.example.com/api/public/otel`` posts to ``.../api/public/otel/v1/traces``."""

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        return check_upstream_endpoint(value)
    protocol: UpstreamProtocol | None = None
    """``grpc`` (OTLP/gRPC) or ``http/protobuf`` (OTLP/HTTP, ``POST .../v1/traces``); default: ``service.upstream_protocol``."""
    insecure: bool | None = None
    """Plaintext; default: true for ``http://`` endpoints, false otherwise (as OTEL_EXPORTER_OTLP_INSECURE)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """gRPC metadata or HTTP headers sent with every export, e.g. ``authorization: Bearer ...``."""
    certificate_file: str | None = None
    """CA bundle (PEM) to verify the upstream's certificate."""
    client_certificate_file: str | None = None
    client_key_file: str | None = None
    timeout_s: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    """Deadline for one export including the exporter's own retries, in seconds."""
    compression: Literal["none", "gzip"] = "none"
    max_message_bytes: int = Field(default=4 * 1024 * 1024, ge=MIN_MESSAGE_BYTES)
    """Largest request this upstream takes, in bytes (gRPC's and the Collector's default receive limit is 4 MiB).
    Batches are sized under it; a span larger than it on its own is dropped and counted."""


class ServiceSettings(OperationsSettings):
    """``tracefence serve``: the OTLP/gRPC receiver, forwarding, review API and operations (``/metrics``, health and
    logs: :class:`~otel_tracefence.core.config_operations.OperationsSettings`)."""

    model_config = ConfigDict(extra="forbid")

    endpoint: str = "127.0.0.1:4317"
    """Address of the OTLP/gRPC receiver (loopback by default; ``0.0.0.0:4317`` to listen on all; port 0: any free port)."""
    review_endpoint: str = ""
    """Separate address for the review API and health service; empty serves them beside the receiver."""
    http_endpoint: str = "127.0.0.1:4318"
    """Address of the OTLP/HTTP receiver (``POST /v1/traces``, binary protobuf or OTLP/JSON, gzip or not; 4318 is the
    OTLP/HTTP default port). Same intake, bounds, token and TLS as the gRPC receiver. Empty or ``none`` turns it off;
    port 0: any free port."""
    http_cors_allowed_origins: list[str] = Field(default_factory=list)
    """Web origins (``https://app.example.com``, or ``*``) whose pages may send spans to the OTLP/HTTP receiver from a
    browser (CORS, as the Collector's ``cors.allowed_origins``); empty: none. The bearer token still applies."""
    http_body_timeout_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    """The longest an OTLP/HTTP request's body may take to arrive in full, in seconds; past it the request gets ``408``
    and its connection is closed. A request takes a decoding slot (``max_workers``) only once its body is here, so
    clients that send slowly, or send headers and stop, hold none (the bodies being received are bounded in bytes)."""
    http_header_timeout_s: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    """The longest an OTLP/HTTP connection may take to send a complete request header, in seconds, from its accept (its
    TLS handshake included), or from the first byte of a next request on a kept-alive connection; past it the connection is closed, counted and
    logged as a rate. The bearer token is checked as soon as the header is complete."""
    http_idle_timeout_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    """How long a kept-alive OTLP/HTTP connection may stay idle between requests, in seconds, before it is closed
    (uvicorn's ``timeout_keep_alive``)."""
    http_max_connections: int = Field(default=0, ge=0)
    """The most OTLP/HTTP connections held at once, from their accept (TLS handshakes included). At the cap a new
    connection closes the one that has waited longest for a request (sending nothing, in its TLS handshake, part-way
    through a header, or kept alive between requests), unanswered; only when every one is in a request does the new one
    get ``503`` with ``Retry-After`` and is closed at once (both counted, logged as a rate). 0 (the default): the process's descriptor limit (``RLIMIT_NOFILE``,
    read at start and logged) less the descriptors open then and a reserve (a quarter of the limit, at least 64) for
    gRPC, the stores and the upstreams; a value given lowers that, never raises it."""
    http_inflate_budget_bytes: int = Field(default=0, ge=0)
    """The decompressed bytes of gzip OTLP/HTTP bodies held at once, all requests together, counted as they are
    decompressed (1 MiB at a time, and the parts' joined copy while it is made) and given back once each request is
    decoded; a body that would pass it is not decompressed further and gets ``503`` with ``Retry-After``. 0 (the
    default): 4 × ``max_message_bytes``; never less than 2 × ``max_message_bytes`` (one whole body always fits). gRPC's compressed messages are decompressed by gRPC itself,
    each bounded by ``max_message_bytes``, at most ``max_workers`` at once."""
    grpc_max_connections: int = Field(default=0, ge=0)
    """The most OTLP/gRPC connections held at once (gRPC's ``grpc.max_allowed_incoming_connections``); past it a new
    connection is closed as it is accepted, before any byte is read (clients retry ``UNAVAILABLE``). 0 (the default):
    half the descriptor reserve of ``http_max_connections`` (an eighth of the limit, at least 32), or, with the OTLP/HTTP
    receiver off, the HTTP receiver's share too; a value given lowers that, never raises it. Split between the gRPC
    listeners when ``review_endpoint`` has its own."""
    grpc_handshake_timeout_s: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    """The longest a gRPC connection may take, from its accept, to finish its TLS handshake and send HTTP/2's preface and
    settings (gRPC's ``grpc.server_handshake_timeout_ms``, 120 s by default); past it the connection is closed."""
    grpc_idle_timeout_s: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    """How long a gRPC connection with no call under way is kept, in seconds, before the server ends it with ``GOAWAY``
    (gRPC's ``grpc.max_connection_idle_ms``, no limit by default); an exporter's channel reconnects at its next call."""
    grpc_max_concurrent_rpcs: int = Field(default=0, ge=0)
    """Calls each gRPC server serves or holds waiting for one of its ``max_workers`` threads at once (grpcio's
    ``maximum_concurrent_rpcs``); past it a call gets ``RESOURCE_EXHAUSTED`` at once, which the OpenTelemetry SDKs
    retry. 0 (the default): 16 × ``max_workers``."""
    decision_wait_ms: float = Field(default=1000.0, ge=0, allow_inf_nan=False)
    """After a trace's root span arrives, how long to keep waiting for its other spans (tail sampling's decision_wait)."""
    max_wait_ms: float = Field(default=30_000.0, gt=0, allow_inf_nan=False)
    """Longest a trace is held since its first span; a trace whose root never came is then decided partial."""
    max_message_bytes: int = Field(default=64 * 1024 * 1024, ge=MIN_MESSAGE_BYTES)
    """Largest Export request accepted, in bytes (the OTLP specification suggests 64 MiB; gRPC's default is 4 MiB);
    at least 1 KiB (less would refuse every real Export)."""
    span_reader: Literal["wire", "protobuf"] = "wire"
    """How a received span's ids and planning view are read from its bytes: ``wire`` (the default), by the service's
    own reader of the OTLP wire format (compiled with the engine), which leaves to protobuf any span it does not
    read; ``protobuf``, by protobuf's parser alone (the reference, e.g. to rule the reader out while debugging).
    Both give the same views and plans, and refuse the same spans with the same reasons."""
    upstreams: list[UpstreamSettings] = Field(default_factory=list)
    """Where decided spans go; with none, they are written to ``output_file``."""
    output_file: str = "tracefence-spans.otlp.jsonl"
    """OTLP/JSON lines file written when no upstream is configured."""
    intake_queue_spans: int = Field(default=100_000, gt=0)
    """Spans acknowledged but not yet read into the buffer; past it Export answers UNAVAILABLE with a retry delay."""
    intake_queue_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    """Encoded bytes of the requests acknowledged but not yet read; the request being accepted counts. Past it
    Export answers UNAVAILABLE with a retry delay; a request larger on its own gets RESOURCE_EXHAUSTED."""
    forward_queue_spans: int = Field(default=200_000, gt=0)
    """Spans waiting to be forwarded, per upstream; past it the oldest batches are dropped and counted."""
    forward_batch_wait_ms: float = Field(default=50.0, ge=0, le=60_000, allow_inf_nan=False)
    """How long a forward batch under its size (8192 spans, or the upstream's ``max_message_bytes``) waits for more
    decided spans before it is sent, in milliseconds (as the Collector's batch processor ``timeout``): fewer, larger
    upstream calls for this much more latency. 0: send at once."""
    backpressure_ratio: float = Field(default=0.8, gt=0, le=1)
    """Queue fill at which Export answers UNAVAILABLE with a retry delay, so clients retry instead of losing spans."""
    retry_delay_s: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    """Retry delay suggested to clients refused for back-pressure, in seconds."""
    drain_timeout_s: float = Field(default=8.0, gt=0, allow_inf_nan=False)
    """On SIGTERM, the whole shutdown's time in seconds: in-flight calls, deciding what is held, draining the forward
    queues. ``tracefence serve`` exits within it and about two seconds more (the default fits ``docker stop``'s 10 s;
    keep Kubernetes' terminationGracePeriodSeconds above preStop + this + 2). What is not forwarded then is counted."""
    persistent_queue_dir: str = ""
    """Opt-in persistent queue: a folder where every acknowledged request is written (SQLite, WAL) before the Export
    is acknowledged and kept until forwarded, so a crash or SIGKILL loses nothing acknowledged and what a SIGTERM's
    drain could not forward is sent at the next start. Empty (the default): spans are kept in memory only."""
    max_workers: int = Field(default=8, gt=0)
    """Threads serving gRPC calls."""
    worker_processes: int = Field(default=1, ge=1, le=64)
    """Processes deciding traces (``tracefence serve --workers N``). 1: one process does everything, as before. N > 1:
    the process started is a router that owns every listener and sends each span to worker process
    ``int.from_bytes(trace_id[8:16], "big") % N``, so a trace is always decided whole by one worker
    (``otel_tracefence.service.router``)."""
    tls_certificate_file: str | None = None
    """Server certificate chain (PEM); with ``tls_key_file``, the receiver and review API speak TLS."""
    tls_key_file: str | None = None
    bearer_token: str = ""
    """When set, every OTLP Export call must carry ``authorization: Bearer <token>`` (compared in constant time).
    It is the ingest token only: it never opens the review API."""
    review_token: str = ""
    """When set, every review API call (list, get, resolve) must carry ``authorization: Bearer <review_token>``.
    Required when the review API listens beyond loopback, unless ``insecure_review_api``."""
    insecure_review_api: bool = False
    """Serve a review API reachable beyond loopback with no ``review_token`` (anyone who reaches it can resolve
    review items); a warning is logged at start. Off: such a service refuses to start."""
    ui_endpoint: str = ""
    """Address of the review page and trace inspector (``ui`` settings) inside ``tracefence serve``; empty: none.
    Beyond loopback it needs ``review_token`` or ``ui.insecure``, as ``tracefence ui`` does."""
    upstream_protocol: UpstreamProtocol = "grpc"
    """How decided spans are forwarded to an upstream that names no ``protocol`` of its own: ``grpc`` (OTLP/gRPC) or
    ``http/protobuf`` (OTLP/HTTP); the same batching, retries, ``Retry-After``/``RetryInfo`` pauses and splitting of
    batches refused as too large on both (``otel_tracefence.service.forward``)."""
    metrics_exporter: Literal["none", "console", "otlp"] = "none"
    """Where self-telemetry goes: ``otlp`` uses the OTEL_EXPORTER_OTLP_METRICS_* variables."""
    metrics_interval_ms: float = Field(default=60_000.0, gt=0, allow_inf_nan=False)
    reconcile_interval_s: float = Field(default=0.0, ge=0, le=86_400, allow_inf_nan=False)
    """Ask the ``reconcilers`` about open review items every this many seconds, in the background (never on the
    intake path); an item whose answer is ``undetermined`` is asked again after twice the wait of its last time, up to
    an hour. At most a day. 0 (the default): never; ``tracefence reconcile`` asks on demand."""

    @field_validator("http_endpoint", "metrics_endpoint", mode="before")
    @classmethod
    def _off_when_none(cls, value: Any) -> Any:
        return "" if isinstance(value, str) and value.strip().lower() in ("", "none") else value

    @field_validator("endpoint", "review_endpoint", "http_endpoint", "ui_endpoint", "metrics_endpoint")
    @classmethod
    def _listen_address(cls, value: str) -> str:
        return check_address(value, port_zero=True) if value else value

    @model_validator(mode="after")
    def _waits_in_order(self) -> ServiceSettings:
        """The decision wait runs inside the maximum wait (both from a trace's spans): a longer one would never be
        waited in full, so the pair has no one meaning."""
        if self.decision_wait_ms > self.max_wait_ms:
            raise ValueError(
                f"decision_wait_ms {self.decision_wait_ms:g} is longer than max_wait_ms {self.max_wait_ms:g}: a trace is decided "
                "at max_wait_ms at the latest, so the decision wait could never run in full; raise max_wait_ms or lower decision_wait_ms"
            )
        return self

    def protocol_of(self, upstream: UpstreamSettings) -> str:
        """The protocol ``upstream`` is forwarded over: its own ``protocol``, else ``upstream_protocol``."""
        return upstream.protocol or self.upstream_protocol

    @model_validator(mode="after")
    def _upstream_endpoints_fit_protocol(self) -> ServiceSettings:
        """A URL with a path or no port is an OTLP/HTTP address; an OTLP/gRPC upstream needs host:port."""
        for upstream in self.upstreams:
            if self.protocol_of(upstream) == "grpc":
                try:
                    check_upstream_endpoint(upstream.endpoint, "grpc")
                except ValueError as exc:
                    raise ValueError(f"upstream {exc}; a path or a default port is for OTLP/HTTP upstreams (protocol: http/protobuf)") from None
        return self

    @model_validator(mode="after")
    def _listen_addresses_apart(self) -> ServiceSettings:
        """Two listeners on one address would fail to bind ("Address already in use")."""
        if self.review_endpoint and same_listen_address(self.endpoint, self.review_endpoint):
            raise ValueError(
                f"review_endpoint {self.review_endpoint} is the receiver's endpoint {self.endpoint}: leave review_endpoint out "
                "to serve the review API beside the receiver, or give it a port of its own"
            )
        for name, other in (("endpoint", self.endpoint), ("review_endpoint", self.review_endpoint)):
            if self.http_endpoint and other and same_listen_address(self.http_endpoint, other):
                raise ValueError(
                    f"http_endpoint {self.http_endpoint} is the {name} {other}: give the OTLP/HTTP receiver a port of its own, "
                    "or turn it off with http_endpoint: none"
                )
        listeners = [("endpoint", self.endpoint), ("review_endpoint", self.review_endpoint), ("http_endpoint", self.http_endpoint)]
        for own, address, what in (("ui_endpoint", self.ui_endpoint, "the review page"), ("metrics_endpoint", self.metrics_endpoint, "/metrics and health")):
            for name, other in listeners:
                if address and other and same_listen_address(address, other):
                    raise ValueError(f"{own} {address} is the {name} {other}: give {what} a port of its own")
            listeners.append((own, address))
        return self



class UiSettings(BaseModel):
    """``tracefence ui``: the review page and the trace inspector (``otel_tracefence/ui``).

    Resolving on the page takes the review API's token, ``service.review_token``, when one is set.
    """

    model_config = ConfigDict(extra="forbid")

    listen: str = DEFAULT_UI_LISTEN
    """Address the page listens on (loopback by default; port 0: any free port). Beyond loopback it needs
    ``service.review_token`` or ``insecure``."""
    insecure: bool = False
    """Serve the page beyond loopback with no review token (anyone who reaches it can resolve items)."""
    trace_url_template: str = ""
    """Link to each trace in a tracing backend, ``{trace_id}`` replaced by the trace id (lowercase hex), e.g.
    ``http://localhost:16686/trace/{trace_id}`` (Jaeger); empty: no link."""
    trace_links: dict[str, str] = Field(default_factory=dict)
    """More links per trace on the item page, by label, each a template as ``trace_url_template`` is, e.g.
    ``{"Jaeger": "http://localhost:16686/trace/{trace_id}", "Tempo": "<a Grafana Explore address>", "Phoenix": ...}``
    (docs/review-page.md gives the three); an environment variable takes it as JSON."""
    max_inspect_bytes: int = Field(default=16 * 1024 * 1024, gt=0)
    """Largest input the inspector plans, in bytes; a larger one is refused with 413."""
    max_inspect_steps: int = Field(default=20_000, gt=0)
    """Most steps the inspector shows: an input that plans to more is refused with 413 before any table or
    JSON is built (a page cannot show them; ``tracefence plan`` can)."""

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        return check_address(value, port_zero=True)

    @field_validator("trace_url_template")
    @classmethod
    def _template(cls, value: str) -> str:
        return check_trace_url_template(value)

    @field_validator("trace_links")
    @classmethod
    def _links(cls, value: dict[str, str]) -> dict[str, str]:
        for label, template in value.items():
            if not label.strip() or not template:
                raise ValueError(f"trace_links: {label!r}: a link needs a label and a template")
            check_trace_url_template(template)
        return value
