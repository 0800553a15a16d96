"""The review sink of the doors that run inside the agent (the span processor and the zero-code exporter): the
store ``review_db`` names, opened when it can be. Telemetry must never keep the agent from starting, so a store that
cannot be opened (a read-only or missing directory, a full disk, PostgreSQL down) is logged once, and the review items
are held in memory by the fence (bounded by ``max_traces``, counted in ``tracefence.review.pending``) and written once
the store opens, or dropped at shutdown with a count and a log line (docs/DECISIONS.md 484)."""

from __future__ import annotations

import builtins
import logging
import os
import threading
from typing import Any, Callable, Mapping, Sequence

from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import TracePlan
from otel_tracefence.pipeline.review_writer import ReviewSink, open_review_sink
from otel_tracefence.review.targets import display_target, url_scheme

_log = logging.getLogger("otel_tracefence.sdk")


class ReviewStoreNotOpen(OSError):
    """The review store could not be opened (yet): the item is held and written again later."""


class ReviewStoreWhenOpen:
    """A :class:`~otel_tracefence.pipeline.review_writer.ReviewSink` over the store ``config.review_db`` names, opened at the
    first write that finds it openable. Until then every write raises :class:`ReviewStoreNotOpen`, so the fence holds
    the item and retries (its retry pauses, up to 30 s apart). ``first_error``: why the first open failed."""

    def __init__(self, config: TraceFenceConfig, first_error: BaseException, *, opener: Callable[[TraceFenceConfig], ReviewSink | None] = open_review_sink) -> None:
        self._config = config
        self._opener = opener
        self._store: Any = None
        self._lock = threading.Lock()
        self._last_error: BaseException = first_error
        self.on_error: Callable[[str], None] | None = None  # handed to the store once it is open

    @property
    def is_open(self) -> bool:
        return self._store is not None

    def _opened(self) -> Any:
        with self._lock:
            if self._store is None:
                try:
                    store = self._opener(self._config)
                except Exception as exc:  # noqa: BLE001 - any failure to open: not yet
                    self._last_error = exc
                    raise ReviewStoreNotOpen(f"the review database {display_target(self._config.review_db)} cannot be opened: {exc}") from exc
                if getattr(store, "on_error", False) is None:
                    store.on_error = self.on_error
                self._store = store
                _log.warning("tracefence: the review database %s is open now; the review items held meanwhile are written", display_target(self._config.review_db))
            return self._store

    def upsert(self, plan: TracePlan, *, service_name: str = "") -> Any:
        return self._opened().upsert(plan, service_name=service_name)

    keeps_spans = True  # handed on to a store that keeps them (issue 26)

    def upsert_many(self, plans: Sequence[tuple[TracePlan, str]], *, spans: Mapping[str, Any] | None = None) -> builtins.list[Any]:
        store = self._opened()
        write_many = getattr(store, "upsert_many", None)
        if write_many is not None:
            return write_many(plans, spans=spans) if spans and getattr(store, "keeps_spans", False) else write_many(plans)
        return [store.upsert(plan, service_name=service) for plan, service in plans]

    def close(self) -> None:
        with self._lock:
            store, self._store = self._store, None
        if store is not None:
            store.close()


def open_review_sink_or_hold(config: TraceFenceConfig, component: str) -> ReviewSink | None:
    """The review store ``config.review_db`` names (``None`` when it is empty); when it cannot be opened now, logged
    once as a warning and a :class:`ReviewStoreWhenOpen` that opens it at a later write. Opened, where it is is logged
    once at INFO (a SQLite file by its absolute path: the default, ``tracefence-review.db``, is made in the working
    directory; DECISIONS 893). Never raises."""
    try:
        sink = open_review_sink(config)
    except Exception as exc:  # noqa: BLE001 - the agent starts whatever the disk says
        _log.warning(
            "tracefence %s: cannot open the review database %s (%s); spans are planned and handed on annotated as always, "
            "review items are held in memory (at most max_traces=%d) and written once it opens, or counted as lost at shutdown",
            component, display_target(config.review_db), exc, config.max_traces,
        )  # fmt: skip
        return ReviewStoreWhenOpen(config, exc)
    if sink is not None:
        where = display_target(config.review_db) if url_scheme(config.review_db) else os.path.abspath(config.review_db)
        _log.info("tracefence %s: review items go to the review database %s (review_db; empty keeps no review queue)", component, where)
    return sink
