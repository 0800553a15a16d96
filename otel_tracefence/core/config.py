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
import logging
import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError, YamlConfigSettingsSource

from otel_tracefence.core.config_checks import (
    DEFAULT_UI_LISTEN,
    MIN_MESSAGE_BYTES,
    UPSTREAM_PATH,
    ConfigError,
    UpstreamProtocol,
    check_address,
    check_reference,
    check_trace_url_template,
    check_upstream_endpoint,
)
from otel_tracefence.core.config_rules import DEFAULT_MAX_INPUT_BYTES, Limits, ResultErrorShape, ToolRule
from otel_tracefence.core.config_service import ServiceSettings, UiSettings, UpstreamSettings
from otel_tracefence.core.config_sources import DuplicateKey, check_environment, closest_setting, load_yaml, refuse_case_twins, unknown_environment
from otel_tracefence.core.redact import Redaction

# The settings' parts live by role (config_checks: no pydantic; config_rules: the planner's; config_service: the
# doors'); this module puts them together and is where they are imported from.
__all__ = [
    "CONFIG_FILE_ENV", "DEFAULT_MAX_INPUT_BYTES", "DEFAULT_UI_LISTEN", "ENV_PREFIX", "MIN_MESSAGE_BYTES", "OTHER_ENV_NAMES",
    "UPSTREAM_PATH", "ConfigError", "Limits", "ResultErrorShape", "ServiceSettings", "ToolRule", "TraceFenceConfig",
    "UiSettings", "UpstreamProtocol", "UpstreamSettings", "check_address", "check_reference", "check_trace_url_template",
    "check_upstream_endpoint", "describe", "load_config",
]

CONFIG_FILE_ENV = "OTEL_TRACEFENCE_CONFIG"
ENV_PREFIX = "OTEL_TRACEFENCE_"
# OTEL_TRACEFENCE_* variables read outside the settings model, where they are read: the config file (here),
# the zero-code exporter's inner exporter (sdk/exporter.py), `tracefence review`'s endpoint and token (cli/review.py).
OTHER_ENV_NAMES = (CONFIG_FILE_ENV, "OTEL_TRACEFENCE_EXPORTER", "OTEL_TRACEFENCE_REVIEW_ENDPOINT", "OTEL_TRACEFENCE_REVIEW_TOKEN")

_log = logging.getLogger(__name__)

_config_file: contextvars.ContextVar[Path | None] = contextvars.ContextVar("tracefence_config_file", default=None)


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
        _check_config_file(path)
    try:
        check_environment(os.environ, ENV_PREFIX)
    except DuplicateKey as exc:
        raise ConfigError(f"environment: {exc}: a setting has one value", (exc.field,) if exc.field else ()) from None
    except RecursionError:
        raise ConfigError(f"environment: an {ENV_PREFIX}* value is nested too deep to read") from None
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
    except RecursionError:
        raise ConfigError("configuration: a value is nested too deep to read") from None
    except SettingsError as exc:
        # A list or nested value in an OTEL_TRACEFENCE_* variable that is not JSON.
        fields = tuple(re.findall(r'field "(\w+)"', str(exc)))
        names = ", ".join(f"{ENV_PREFIX}{field.upper()}" for field in fields) or f"an {ENV_PREFIX}* variable"
        raise ConfigError(f"environment: {names} is not JSON: {ENV_PREFIX}* variables take JSON for lists and nested values", fields) from None
    finally:
        _config_file.reset(token)


def _yaml_problem(exc: Exception) -> str:
    """PyYAML's error on one line: the problem and where (``line L, column C``, from 1), without its excerpt of the
    file (PyYAML's own text is several lines: the excerpt and a caret)."""
    problem, mark = getattr(exc, "problem", None), getattr(exc, "problem_mark", None)
    if not problem:
        return " ".join(str(exc).split())
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else str(problem)


def _check_config_file(path: Path) -> None:
    """Read the YAML file at ``path`` as the settings source will: raises :class:`ConfigError` naming the file for one
    that is not there, cannot be read, is not YAML, nests too deep, is no mapping or gives a setting twice."""
    if path.is_dir():
        raise ConfigError(f"config file {path}: a folder, not a file")
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
        raise ConfigError(f"config file {path}: not YAML: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise ConfigError(f"config file {path}: nested too deep to read") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping of settings")
    try:
        refuse_case_twins(loaded or {})
    except DuplicateKey as exc:
        raise ConfigError(f"config file {path}: {exc}: a setting has one value", (exc.field,)) from None
