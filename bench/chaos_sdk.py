"""The span processor's side of ``bench/chaos.py``: run in a child process by the Python of the install under test
(``--python``), with only the public API that install has (``TraceFenceSpanProcessor``, ``tool_call``), so the
same file measures an older commit's package. One JSON line per figure on stdout.

    PYTHON bench/chaos_sdk.py read-only-db DB     # built on an unwritable review DB path; one review trace; waits
                                                  # for a line on stdin (the path made writable), then flushes and stops
    PYTHON bench/chaos_sdk.py hanging-shutdown MS # shutdown(MS) over an exporter that hangs in export and shutdown
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_tracefence.agent.instrument import tool_call
from otel_tracefence.sdk.processor import TraceFenceSpanProcessor

HANG_S = 30


def say(**figures: Any) -> None:
    print(json.dumps(figures), flush=True)


def timed_out_write(provider: TracerProvider) -> str:
    """One agent turn whose write timed out (one review item); its trace id (hex)."""
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent billing") as root:
        try:
            with tool_call("invoice.create", effect="write", arguments={"amount": 1250}, call_id="c1", tracer_provider=provider):
                raise TimeoutError("billing API did not answer")
        except TimeoutError:
            pass
    return format(root.get_span_context().trace_id, "032x")


def read_only_db(db: str) -> None:
    exported = InMemorySpanExporter()
    try:
        processor = TraceFenceSpanProcessor(SimpleSpanProcessor(exported), review_db=db)
    except Exception as exc:  # noqa: BLE001 - the figure: the agent would not start
        say(started=False, error=repr(exc)[:120])
        return
    provider = TracerProvider()
    provider.add_span_processor(processor)
    trace_id = timed_out_write(provider)
    classes = sorted({str(s.attributes.get("tracefence.replay.class")) for s in exported.get_finished_spans()})
    say(started=True, trace_id=trace_id, spans=len(exported.get_finished_spans()), classes=classes)
    sys.stdin.readline()  # the parent made the path writable
    provider.force_flush()
    provider.shutdown()
    say(stopped=True)


class HangingExporter(SpanExporter):
    """Blocks ``HANG_S`` seconds in ``export`` and in ``shutdown``."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(HANG_S)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.wait(HANG_S)


def hanging_shutdown(timeout_ms: int) -> None:
    processor = TraceFenceSpanProcessor(BatchSpanProcessor(HangingExporter(), schedule_delay_millis=10), review_db="", decision_wait_ms=0)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent"):
        with tracer.start_as_current_span("execute_tool accounts.get_balance", attributes={"gen_ai.operation.name": "execute_tool", "tracefence.effect": "read"}):
            pass
    time.sleep(0.2)  # the batch processor's worker is inside the hanging export now
    started = time.monotonic()
    processor.shutdown(timeout_ms)
    say(seconds=time.monotonic() - started)
    os._exit(0)  # the hanging threads are not waited for


if __name__ == "__main__":
    if sys.argv[1] == "read-only-db":
        read_only_db(sys.argv[2])
    else:
        hanging_shutdown(int(sys.argv[2]))
