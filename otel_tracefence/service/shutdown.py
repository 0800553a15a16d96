"""The time of a stop (``TraceFenceService.stop``), shared out as it goes, and its helpers: what was acknowledged
and never read, the forward queues drained at once, the review items it could not write.

A stop's time (docs/DECISIONS.md 195): ``READ_SHARE`` of it to read what the intake holds, then ``PLAN_SHARE`` of
what is left to plan what is held; the rest is handed on without a plan (review), cheaply; the forward queues send
all along, and their drain has at least ``STOP_FORWARD_S`` or a quarter of that time, meanwhile the review items of
the traces not planned are written.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from otel_tracefence.service.forward import Forwarder
from otel_tracefence.service.otlp_bytes import span_key
from otel_tracefence.service.otlp_spans import OtlpItem

_log = logging.getLogger("otel_tracefence.service")
READ_SHARE = 0.3
PLAN_SHARE = 0.5
REVIEW_SHARE = 0.75  # ... the review items of what was not planned are written until then (or STOP_FORWARD_S before the end)
STOP_FORWARD_S = 1.5
STOP_OVERRUN_S = 2.0  # stop() returns within drain_timeout_s and at most this more (a call under way at the deadline)
OWED_SHOWN = 100  # trace ids a log line names at most


def stop_clock(budget_s: float) -> Callable[[], float]:
    """A function giving the seconds left of ``budget_s`` seconds from now (never below 0)."""
    deadline = time.monotonic() + budget_s
    return lambda: max(0.0, deadline - time.monotonic())


def unread_by_trace(items: list[OtlpItem]) -> dict[str, list[tuple[None, OtlpItem]]]:
    """Spans acknowledged and never read, by trace id (hex), as the fence hands them on unplanned (no view). A span
    whose trace id does not read (the receiver checked it: it cannot happen) goes under ``""``, still handed on."""
    out: dict[str, list[tuple[None, OtlpItem]]] = {}
    for item in items:
        try:
            trace_id = span_key(item.span)[:16].hex()
        except Exception:  # noqa: BLE001 - handed on all the same, as review
            trace_id = ""
        out.setdefault(trace_id, []).append((None, item))
    return out


def drain_forwarders(forwarders: list[Forwarder], seconds: float, wait_s: float) -> list[bool]:
    """Drain every forward queue at once, each for at most ``seconds``, waiting at most ``wait_s`` in all;
    whether each queue was emptied (``False`` for one still draining)."""
    results = [False] * len(forwarders)

    def drain(index: int, forwarder: Forwarder) -> None:
        results[index] = forwarder.drain(seconds)

    threads = [threading.Thread(target=drain, args=(i, f), daemon=True) for i, f in enumerate(forwarders)]
    for thread in threads:
        thread.start()
    until = time.monotonic() + wait_s
    for thread in threads:
        thread.join(timeout=max(0.0, until - time.monotonic()))
    return results


def log_owed_reviews(owed: list[str]) -> None:
    """One error line for the review items a stop could not write in its time (the shutdown thread still inside a
    write, e.g. waiting on a locked SQLite database, or short of the traces it had yet to reach): how many, and the
    first ``OWED_SHOWN`` trace ids. They are lost: the thread is abandoned with the process (DECISIONS 209)."""
    if not owed:
        return
    shown = ", ".join(owed[:OWED_SHOWN]) + (f" and {len(owed) - OWED_SHOWN} more" if len(owed) > OWED_SHOWN else "")
    _log.error(
        "shutdown: %d review item(s) were not written when the time ran out (the review store did not answer in time: "
        "a database locked by another process?); they are lost: traces %s", len(owed), shown,
    )  # fmt: skip

