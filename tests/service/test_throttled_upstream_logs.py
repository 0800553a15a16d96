"""Issue 30 (throttling): an upstream answering RESOURCE_EXHAUSTED without RetryInfo to every Export has each batch
split down to single spans and each dropped (the OTLP specification: not retried); the drops are counted one by one
and logged as a rate with the count, not one line per span."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from otel_tracefence.service.forward import SDK_EXPORTER_LOGGER
from otel_tracefence.service.server import TraceFenceService
from service_helpers import ThrottlingUpstream, raw_request, raw_span, service_config, trace_stub, wait_for

SPANS = 300


def test_spans_refused_as_too_large_are_logged_as_a_rate(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    upstream = ThrottlingUpstream()
    upstream.start()
    service = TraceFenceService(service_config(upstream, tmp_path / "r.db"))
    service.start()
    try:
        with caplog.at_level(logging.WARNING):
            spans = [raw_span(bytes.fromhex(f"{n + 1:032x}"), bytes.fromhex(f"{n + 1:016x}")) for n in range(SPANS)]  # roots: decided at once
            channel, stub = trace_stub(f"127.0.0.1:{service.port}")
            with channel:
                stub.Export(raw_request(*spans), timeout=10)
            forwarder = service.forwarders[0]
            wait_for(lambda: forwarder.dropped_spans == SPANS, timeout=30, what=f"{SPANS} spans dropped")
            service.stop(1)  # flushes the rate lines
        drops = [r.getMessage() for r in caplog.records if "each too large on its own" in r.getMessage()]
        splits = [r.getMessage() for r in caplog.records if "as too large: sent again in halves" in r.getMessage()]
        assert sum(int(re.match(r"dropped (\d+) span", line).group(1)) for line in drops) == SPANS
        assert 1 <= len(drops) <= 3 and 1 <= len(splits) <= 3  # a rate: the first at once, the rest at the interval or the stop
        assert upstream.refused >= SPANS  # every span was tried on its own before it was dropped
        assert not [r for r in caplog.records if "(too_large)" in r.getMessage()]  # the old line per span
        exporter_lines = [r for r in caplog.records if r.name == SDK_EXPORTER_LOGGER]
        assert 1 <= len(exporter_lines) <= 4  # the SDK exporter's own line per failed export: once per 10 s
    finally:
        service.stop(0)
        upstream.stop()
