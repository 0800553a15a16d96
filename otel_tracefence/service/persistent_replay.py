"""What an earlier run acknowledged and did not forward, read back from the persistent queue into the intake at
start (``service.persistent_queue_dir``; docs/DECISIONS.md 510).

Each stored request goes to the intake as it was received, within the intake's bounds: while the intake is full the
replay waits; a request larger than the bound set now is taken as it is. A stop ends the replay: what is left stays
on disk for the next start, and so does what an error left unread.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from otel_tracefence.service.intake import Intake, IntakeRefusal
from otel_tracefence.service.otlp_spans import read_request
from otel_tracefence.service.persistent_queue import PersistentQueue

_log = logging.getLogger("otel_tracefence.service")


def replay_persistent(persistent: PersistentQueue, intake: Intake, accepting: Callable[[], bool], *, wire: bool) -> int:
    """Hand the requests left in ``persistent`` to ``intake`` while ``accepting()``; the spans handed.
    ``wire``: read the spans with the wire reader (``service.span_reader: wire``). Never raises."""
    requests = spans = 0
    try:
        for request, count in persistent.replay():
            items, _ = read_request(request, wire=wire)
            reservation = None
            while accepting() and reservation is None:
                try:
                    reservation = intake.reserve(len(items), request.ByteSize())
                except IntakeRefusal as refusal:
                    if refusal.permanent:  # larger than the bound set now: taken as it is
                        break
                    time.sleep(0.05)
            if not accepting():
                if reservation is not None:
                    intake.release(reservation)
                break  # the rest stays on disk for the next start
            intake.put(items, reservation, source="persistent-queue", persisted=True)
            requests += 1
            spans += count
    except Exception as exc:  # noqa: BLE001 - what is not replayed stays on disk
        _log.error("persistent queue: replay stopped: %r; what is left is tried at the next start", exc)
    if requests:
        _log.info("persistent queue: replayed what an earlier run acknowledged", extra={"requests": requests, "spans": spans})
    return spans
