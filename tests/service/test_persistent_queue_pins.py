"""A pinned trace's spans stay in the persistent queue, settled or not, until it is released (DECISIONS 510)."""

from __future__ import annotations

from otel_tracefence.service.persistent_queue import PersistentQueue
from service_helpers import raw_request, raw_span


def test_a_pinned_trace_keeps_its_rows_until_released_and_other_traces_go(tmp_path):
    queue = PersistentQueue(tmp_path, targets=2)
    pinned, other = bytes.fromhex("aa" * 16), bytes.fromhex("bb" * 16)
    mixed = [raw_span(pinned, b"\x00" * 7 + b"\x01"), raw_span(other, b"\x00" * 7 + b"\x02")]
    alone = [raw_span(other, b"\x00" * 7 + b"\x03")]
    try:
        queue.append(raw_request(*mixed), mixed)
        queue.append(raw_request(*alone), alone)
        queue.pin(["aa" * 16, "not-hex", "cc"])  # ids that are no trace id are ignored
        assert queue.pinned() == 1
        for target in (0, 1):
            queue.settle(target, mixed + alone)
        assert queue.pending() == (1, 2)  # the request holding the pinned trace's span stays
        queue.release(["aa" * 16])
        assert (queue.pending(), queue.pinned()) == ((0, 0), 0)
    finally:
        queue.close()


def test_released_before_its_spans_are_settled_the_trace_goes_as_usual(tmp_path):
    queue = PersistentQueue(tmp_path, targets=1)
    trace = bytes.fromhex("dd" * 16)
    spans = [raw_span(trace, b"\x00" * 7 + b"\x09")]
    try:
        queue.append(raw_request(*spans), spans)
        queue.pin(["dd" * 16])
        queue.release(["dd" * 16])
        assert queue.pending() == (1, 1)  # not settled yet
        queue.settle(0, spans)
        assert queue.pending() == (0, 0)
    finally:
        queue.close()
