"""Forward batching (issue 10): decided spans reach the upstream in few, large calls, and a drain never waits."""

from __future__ import annotations

from service_helpers import raw_request, raw_span, wait_for

from otel_tracefence.core.config import ServiceSettings, UpstreamSettings
from otel_tracefence.service.forward import MAX_BATCH_SPANS, Forwarder, UpstreamTarget


def _trace(n: int):
    """One small decided trace as the fence hands it on: 3 spans of trace ``n``."""
    tid = n.to_bytes(16, "big")
    return raw_request(*(raw_span(tid, (n * 8 + i + 1).to_bytes(8, "big"), f"op {i}") for i in range(3)))


def _target(upstream) -> UpstreamTarget:
    return UpstreamTarget(UpstreamSettings(endpoint=f"http://127.0.0.1:{upstream.port}", timeout_s=5))


def test_requests_put_within_the_batch_wait_reach_the_upstream_in_one_call(upstream):
    forwarder = Forwarder(_target(upstream), max_spans=200_000, batch_wait_s=30.0)
    for n in range(1, 41):
        forwarder.put(_trace(n), 3)
    # Well under the batch size: nothing is sent before the wait, which a drain cuts short.
    assert upstream.requests == []
    assert forwarder.drain(10)
    assert len(upstream.requests) == 1
    spans = [s for rs in upstream.requests[0].resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert len(spans) == 120 and len({s.span_id for s in spans}) == 120
    assert forwarder.sent_spans == 120 and forwarder.dropped_spans == 0


def test_a_full_batch_is_sent_without_waiting(upstream):
    forwarder = Forwarder(_target(upstream), max_spans=200_000, batch_wait_s=600.0)
    fit = MAX_BATCH_SPANS // 3  # traces of 3 spans that fit in one batch; one more does not
    for n in range(1, fit + 2):
        forwarder.put(_trace(n), 3)
    wait_for(lambda: upstream.requests, timeout=30, what="the full batch sent before its wait ran out")
    first = sum(len(ss.spans) for rs in upstream.requests[0].resource_spans for ss in rs.scope_spans)
    assert first == 3 * fit  # the trace that did not fit waits behind it, in the next batch
    assert forwarder.drain(10)
    assert len(upstream.requests) == 2 and forwarder.sent_spans == 3 * (fit + 1)


def test_the_batch_wait_is_a_service_setting_with_its_default():
    assert ServiceSettings().forward_batch_wait_ms == 50.0
    assert ServiceSettings(forward_batch_wait_ms=0).forward_batch_wait_ms == 0
