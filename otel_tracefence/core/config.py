"""Configuration: one home for every knob and its default.

Read once, at construction, from (highest first) explicit arguments, then
``OTEL_TRACEFENCE_*`` environment variables, then a YAML file named by the
``config_file`` argument or ``OTEL_TRACEFENCE_CONFIG``, then the defaults below.
Nested values take ``__`` in variable names, e.g.
``OTEL_TRACEFENCE_LIMITS__MAX_ARGUMENT_BYTES=65536``; lists take JSON, e.g.
``OTEL_TRACEFENCE_IDEMPOTENCY_KEY_ARGUMENTS='["request_id"]'``.

Example file (``examples/tracefence.yaml``)::

    tool_rules:              # first match wins; glob on the tool name
      - match: "read_*"
        effect: read
      - match: "payments.*"
        effect: write
        idempotency_key_argument: idempotency_key
    idempotency_key_arguments: [idempotency_key]

Errors: :class:`ConfigError` for a missing or unreadable file, YAML that does
not parse, a key given twice (in the file, in a variable's JSON, or two variables
differing only in case: ``config_sources.py``), or a value of the wrong kind,
naming the file and the field. An ``OTEL_TRACEFENCE_*`` variable that names no
setting is logged as a warning and ignored (docs/DECISIONS.md 192).
"""

from __future__ import annotations

import contextvars
import fnmatch
import logging
import os
import re
import urllib.parse
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError, YamlConfigSettingsSource

from otel_tracefence.core.canonical import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH
from otel_tracefence.core.config_operations import OperationsSettings
from otel_tracefence.core.config_sources import DuplicateKey, check_environment, closest_setting, load_yaml, refuse_case_twins, unknown_environment
from otel_tracefence.core.redact import Redaction
from otel_tracefence.core.textfold import folded_word

CONFIG_FILE_ENV = "OTEL_TRACEFENCE_CONFIG"
ENV_PREFIX = "OTEL_TRACEFENCE_"
# OTEL_TRACEFENCE_* variables read outside the settings model, where they are read: the config file (here),
# the zero-code exporter's inner exporter (sdk/exporter.py), `tracefence review`'s endpoint and token (cli/review.py).
OTHER_ENV_NAMES = (CONFIG_FILE_ENV, "OTEL_TRACEFENCE_EXPORTER", "OTEL_TRACEFENCE_REVIEW_ENDPOINT", "OTEL_TRACEFENCE_REVIEW_TOKEN")

_log = logging.getLogger(__name__)

_config_file: contextvars.ContextVar[Path | None] = contextvars.ContextVar("tracefence_config_file", default=None)


MIN_MESSAGE_BYTES = 1024  # the smallest gRPC/OTLP message bound accepted, in bytes: less refuses every real request

class ConfigError(ValueError):
    """The configuration cannot be used; the message names the file and field.

    ``fields``: the top-level settings at fault, when known.
    """

    def __init__(self, message: str, fields: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.fields = fields


class ToolRule(BaseModel):
    """An operator's rule for tools whose name matches ``match`` (an ``fnmatch`` glob, case-sensitive)."""

    model_config = ConfigDict(extra="forbid")

    match: str = Field(min_length=1)
    effect: Literal["read", "write"] | None = None
    idempotency_key_argument: str | None = None
    """Dotted path into the call's arguments whose value is the idempotency key."""
    result: Literal["stable", "unstable"] | None = None
    """``unstable``: the tool returns values that differ between executions (page ids, transaction ids,
    timestamps: handles the agent may branch on, seed 000), so a read is never re-executed by a replay
    (decision ``skip``, reason ``unstable_result``); ``None`` or ``stable``: results are taken as stable."""

    _regex: re.Pattern[str] = PrivateAttr()

    def model_post_init(self, context: Any) -> None:
        self._regex = re.compile(fnmatch.translate(self.match))

    def matches(self, tool: str) -> bool:
        """True when ``tool`` matches this rule's glob."""
        return self._regex.fullmatch(tool) is not None


class ResultErrorShape(BaseModel):
    """A shape of recorded result that says the call failed although its span says ok.

    The shape matches an object of the result (JSON) that has ``key`` with a value that
    ``equals`` (strings compared folded: case, separators, white space), or a number within
    [``at_least``, ``below``), or, with ``present``, any non-empty object, string or
    ``true``. Only the result's top-level object is looked at unless ``anywhere``
    (then every object down to 8 levels). The defaults are in
    ``otel_tracefence/normalize/result_errors.py``; ``result_error_shapes`` adds to them.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(min_length=1)
    equals: str | bool | int | None = None
    at_least: float | None = None
    below: float | None = None
    present: bool = False
    anywhere: bool = False

    def says_error(self, value: Any) -> bool:
        """True when ``value`` (found under ``key``) says the call failed. Read as producers write them
        (docs/DECISIONS.md 371): a number may be a decimal string (``"504"``), a string is compared folded
        (``textfold.folded_word``: ``"timed out"``, ``"TimedOut"`` and ``"timeout "`` are ``timed_out`` and
        ``timeout``), and a boolean may be the string ``"true"`` or ``"false"`` (any case)."""
        if self.present:
            return value is True or (isinstance(value, (dict, list, str)) and len(value) > 0)
        if self.at_least is not None or self.below is not None:
            number = _number(value)
            if number is None:
                return False
            return (self.at_least is None or number >= self.at_least) and (self.below is None or number < self.below)
        if isinstance(self.equals, str):
            return isinstance(value, str) and folded_word(value) == folded_word(self.equals)
        if isinstance(self.equals, bool):
            return value is self.equals or (isinstance(value, str) and folded_word(value) == ("true" if self.equals else "false"))
        return value == self.equals and not isinstance(value, bool)


def _number(value: Any) -> int | float | None:
    """A JSON number, or a decimal integer written as a string (``"504"``, ``" 504 "``); ``None`` for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str) and len(value) <= 16 and (digits := value.strip()).isascii() and digits.isdigit():
        return int(digits)
    return None


DEFAULT_MAX_INPUT_BYTES = 256 * 1024 * 1024  # 256 MiB: a file past it is refused, not read (limits.max_input_bytes)


class Limits(BaseModel):
    """Input bounds: beyond them a value is reported, never parsed."""

    model_config = ConfigDict(extra="forbid")

    max_argument_bytes: int = Field(default=DEFAULT_MAX_BYTES, gt=0)
    """Largest arguments or result text read, in bytes; larger arguments are 'unavailable'."""
    max_argument_depth: int = Field(default=DEFAULT_MAX_DEPTH, gt=0, le=512)
    """Deepest nesting of arrays and objects read in arguments."""
    max_related_call_ids: int = Field(default=50, gt=0)
    """Most related call ids listed on one decision (keeps planning linear in big groups)."""
    max_tokens_per_value: int = Field(default=64, ge=0)
    """Most id-like tokens (``normalize/tokens.py``) kept from one step's arguments, and from its result, for
    the data-flow notes (``consumes_result_of``); the first ones in the value, the rest not linked. 0 turns linking off."""
    max_attributes_per_span: int = Field(default=1024, gt=0)
    """Most attributes read from one tool span; a tool span with more is malformed (``malformed_attributes``)."""
    max_input_bytes: int = Field(default=DEFAULT_MAX_INPUT_BYTES, gt=0)
    """Largest input ``tracefence plan`` and ``tracefence tools`` read from one file or standard input, in bytes; a
    larger one (or an endless one, ``/dev/zero``) is refused with one line and exit 2, never read whole
    (docs/DECISIONS.md 504)."""


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
        if self.review_endpoint and _same_listen_address(self.endpoint, self.review_endpoint):
            raise ValueError(
                f"review_endpoint {self.review_endpoint} is the receiver's endpoint {self.endpoint}: leave review_endpoint out "
                "to serve the review API beside the receiver, or give it a port of its own"
            )
        for name, other in (("endpoint", self.endpoint), ("review_endpoint", self.review_endpoint)):
            if self.http_endpoint and other and _same_listen_address(self.http_endpoint, other):
                raise ValueError(
                    f"http_endpoint {self.http_endpoint} is the {name} {other}: give the OTLP/HTTP receiver a port of its own, "
                    "or turn it off with http_endpoint: none"
                )
        listeners = [("endpoint", self.endpoint), ("review_endpoint", self.review_endpoint), ("http_endpoint", self.http_endpoint)]
        for own, address, what in (("ui_endpoint", self.ui_endpoint, "the review page"), ("metrics_endpoint", self.metrics_endpoint, "/metrics and health")):
            for name, other in listeners:
                if address and other and _same_listen_address(address, other):
                    raise ValueError(f"{own} {address} is the {name} {other}: give {what} a port of its own")
            listeners.append((own, address))
        return self


_WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "[::]", "*", ""})
_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1"})


def _same_listen_address(a: str, b: str) -> bool:
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


def _seconds_or_duration(value: Any) -> Any:
    """A number given as text (an environment variable: ``"604800"``, ``"3600.5"``) read as seconds; anything
    else as pydantic reads a ``timedelta`` (a number of seconds, ``7d``, ISO 8601 ``P7D``)."""
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return value
    return value


class TraceFenceConfig(BaseSettings):
    """Everything the normalizer, planner and their doors read.

    Defaults: no tool rules (every undeclared effect is ``unknown``), idempotency
    keys read from an ``idempotency_key`` argument, hashes only (no raw values).
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid")

    tool_rules: list[ToolRule] = Field(default_factory=list)
    """First match wins: a tool's effect and where its idempotency key lives."""
    idempotency_key_arguments: list[str] = Field(default_factory=lambda: ["idempotency_key"])
    """Argument fields (dotted paths) that carry an idempotency key, for tools no rule names."""
    result_error_shapes: list[ResultErrorShape] = Field(default_factory=list)
    """More result shapes that say a call failed although its span says ok (added to the defaults)."""
    store_raw_values: bool = False
    """Keep canonical arguments and results in plans and review items (they may hold secrets)."""
    redaction: Redaction = Field(default_factory=Redaction)
    """With ``store_raw_values``: keys and patterns replaced by ``[REDACTED]`` in the kept values (hashes are of the originals)."""
    limits: Limits = Field(default_factory=Limits)
    write_index_max_entries: int = Field(default=100_000, ge=0)
    """Most writes each door remembers to meet later traces' writes (retries across traces,
    ``pipeline/write_index.py``), oldest out first; 0 plans every trace alone. ``tracefence serve`` with a review
    store keeps them in its database: this is then the bound of the table's rows, shared by every replica."""
    write_index_retention: Annotated[timedelta, BeforeValidator(_seconds_or_duration)] = Field(default=timedelta(days=7), gt=timedelta(0))
    """``tracefence serve`` with a review store: how long a write stays in the database's write index, in seconds
    (``604800``) or as a duration (``7d``, ISO 8601 ``P7D`` or ``PT12H``, ``12:00:00``, ``1 day, 12:00:00``)."""

    reconcilers: dict[str, Annotated[str, AfterValidator(check_reference)]] = Field(default_factory=dict)
    """Tool name (exact) -> the operator's read-only check that asks the owning system whether a held write took
    effect, as ``"module:function"`` (``tracefence reconcile``, ``service.reconcile_interval_s``;
    :mod:`otel_tracefence.reconcile`). Over the entry points of the group ``tracefence.reconcilers``. In the
    environment, JSON: ``OTEL_TRACEFENCE_RECONCILERS='{"invoice.create": "billing_checks:find_invoice"}'``."""
    reconcile_timeout_s: float = Field(default=10.0, gt=0, le=3600, allow_inf_nan=False)
    """Longest a reconciler is waited for, per call (seconds, at most an hour); past it the call's verdict is
    ``undetermined``."""
    reconcile_max_concurrent: int = Field(default=4, gt=0, le=64)
    """Most reconciler calls running at once, counting calls still running past their timeout."""

    # The doors: span processor, zero-code exporter and service.
    review_db: str = "tracefence-review.db"
    """The review queue: a SQLite file (WAL mode), or a ``postgresql://`` / ``postgres://`` URL (one
    queue shared by every replica; needs the ``postgres`` extra); empty disables the review queue."""
    review_db_min_free_bytes: int = Field(default=8 * 1024 * 1024, ge=0)
    """``tracefence serve`` with a SQLite review database: the least free space (bytes) on its volume for the service
    to start (0: no check); below it the store also trims its write-ahead log after every write."""
    review_spans_max: int = Field(default=500, ge=0, le=100_000)
    """Most spans of a held trace its review item keeps for the item page's waterfall (name, ids, kind, times,
    status, step): the tool spans first, then their ancestors, then the earliest others; the rest are counted only.
    0 keeps none. Each step's times and argument field hashes are kept whatever this says."""
    review_classes: Annotated[list[Literal["review", "static", "injected", "dynamic"]], NoDecode] = Field(
        default_factory=lambda: ["review"], min_length=1
    )
    """Replay classes whose traces go to the review queue; in the environment, comma-separated. Never empty
    (an unfilled template variable must not turn the queue off silently): to keep no queue, set ``review_db``
    empty."""
    decision_wait_ms: float = Field(default=60_000.0, ge=0, allow_inf_nan=False)
    """Span processor: after a trace's local root span ends, the longest to wait (ms) for its spans
    still open in this process (it decides as soon as the last one ends). The default, 60 s, is the
    MCP TypeScript SDK's default request timeout: a tool call still running when the root ends has
    usually ended by then. 0: decide when the root ends. The zero-code exporter waits only when
    this is set explicitly."""
    max_traces: int = Field(default=10_000, gt=0)
    """Most traces held at once; past it the oldest is planned as it stands, flagged partial."""
    max_spans_per_trace: int = Field(default=1_000, gt=0)
    """Most spans held for one trace; past it the trace is planned as it stands, flagged partial."""
    decided_cache_size: int = Field(default=10_000, gt=0)
    """Recently decided traces remembered, so their late spans get the trace's class."""
    service: ServiceSettings = Field(default_factory=ServiceSettings)
    """``tracefence serve`` only."""
    ui: UiSettings = Field(default_factory=UiSettings)
    """``tracefence ui`` (and ``service.ui_endpoint``): the review page and the trace inspector."""

    @field_validator("review_classes", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("idempotency_key_arguments")
    @classmethod
    def _non_empty_paths(cls, value: list[str]) -> list[str]:
        if any(not path for path in value):
            raise ValueError("argument paths must be non-empty")
        return value

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings):
        sources: list[Any] = [init_settings, env_settings]
        path = _config_file.get()
        if path is not None:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=path))
        return tuple(sources)

    def rule_for(self, tool: str) -> ToolRule | None:
        """The first rule whose glob matches ``tool``, or ``None``."""
        for rule in self.tool_rules:
            if rule.matches(tool):
                return rule
        return None


def describe(error: ValidationError) -> str:
    """A validation error as ``field.path: message; ...``; a key that names no setting gets the closest setting
    of its mapping, when one is close (``service.upstream: Extra inputs are not permitted; did you mean
    service.upstreams?``)."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}{closest_setting(TraceFenceConfig, err['loc']) if err['type'] == 'extra_forbidden' else ''}"
        if err["loc"]
        else err["msg"].removeprefix("Value error, ")
        for err in error.errors()
    )


def load_config(config_file: str | os.PathLike[str] | None = None, **overrides: Any) -> TraceFenceConfig:
    """Load the configuration: arguments, then environment, then the YAML file, then defaults.

    ``config_file`` defaults to ``$OTEL_TRACEFENCE_CONFIG``; with neither, no file is read.
    Raises :class:`ConfigError`.
    """
    raw = config_file if config_file is not None else os.environ.get(CONFIG_FILE_ENV) or None
    path = Path(raw) if raw is not None else None
    if path is not None:
        if not path.is_file():
            raise ConfigError(f"config file {path}: not found")
        try:
            import yaml

            loaded = load_yaml(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {path}: cannot be read: {exc}") from None
        except DuplicateKey as exc:
            raise ConfigError(f"config file {path}: {exc}: a setting has one value") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path}: not YAML: {exc}") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config file {path}: the top level must be a mapping of settings")
        try:
            refuse_case_twins(loaded or {})
        except DuplicateKey as exc:
            raise ConfigError(f"config file {path}: {exc}: a setting has one value", (exc.field,)) from None
    try:
        check_environment(os.environ, ENV_PREFIX)
    except DuplicateKey as exc:
        raise ConfigError(f"environment: {exc}: a setting has one value", (exc.field,) if exc.field else ()) from None
    for name in unknown_environment(os.environ, ENV_PREFIX, TraceFenceConfig, OTHER_ENV_NAMES):
        _log.warning("environment: %s names no setting and is ignored (misspelt, or for another version?)", name)
    token = _config_file.set(path)
    try:
        return TraceFenceConfig(**overrides)
    except ValidationError as exc:
        where = f"configuration (file {path}, {ENV_PREFIX}* variables)" if path else f"configuration ({ENV_PREFIX}* variables)"
        problems = describe(exc)
        fields = tuple(dict.fromkeys(str(err["loc"][0]) for err in exc.errors() if err["loc"]))
        if fields and all(name in overrides for name in fields):  # the caller's own arguments are at fault
            where = "configuration (arguments)"
        raise ConfigError(f"{where}: {problems}", fields) from None
    except SettingsError as exc:
        # A list or nested value in an OTEL_TRACEFENCE_* variable that is not JSON.
        fields = tuple(re.findall(r'field "(\w+)"', str(exc)))
        raise ConfigError(f"environment: {exc}: {ENV_PREFIX}* variables take JSON for lists and nested values", fields) from None
    finally:
        _config_file.reset(token)
