"""The buffer's per-span path (docs/DECISIONS.md 165): a span of a trace held (not as a chunk of an overflowing
trace) skips the look-ups in the decided, deciding and forgotten traces. That is right only while a trace held
that way is in none of them; these tests drive a buffer with small bounds through random starts, ends, waits
and drains, check that after every step, and check that every span comes out exactly once."""

from __future__ import annotations

import random
from typing import Any

import pytest

from otel_tracefence.pipeline.trace_buffer import Decided, LateBatch, TraceBuffer
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.normalize import SpanView

ROOT = "1" * 16


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _view(trace_id: str, span_id: str) -> SpanView:
    if span_id == ROOT:
        return SpanView(trace_id, span_id, "invoke_agent", {"gen_ai.operation.name": "invoke_agent"}, None, start_time_unix_nano=1, end_time_unix_nano=9)
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": f"t{span_id}", "tracefence.effect": "write" if span_id[-1] in "02468" else "read"}
    return SpanView(trace_id, span_id, f"execute_tool {span_id}", tool, ROOT, start_time_unix_nano=2, end_time_unix_nano=3)


def _payloads(items: list[Any]) -> list[int]:
    out: list[int] = []
    for item in items:
        if isinstance(item, Decided):
            out.extend(payload for _, payload in item.spans)
        else:
            assert isinstance(item, LateBatch)
            out.extend(late.payload for late in item.spans)
    return out


def _check_held_traces_are_not_known(buffer: TraceBuffer[Any]) -> int:
    """The invariant the fast path relies on; returns how many held traces it was checked for."""
    checked = 0
    for trace_id, held in buffer._held.items():
        if held.late:  # a chunk of an overflowing trace: its spans take the look-ups
            continue
        assert trace_id not in buffer._decided and trace_id not in buffer._deciding and trace_id not in buffer._forgotten, trace_id
        checked += 1
    return checked


@pytest.mark.parametrize("seed", range(6))
def test_a_trace_held_is_never_known_as_decided_and_every_span_comes_out_once(seed):
    rng = random.Random(seed)
    clock = _Clock()
    config = TraceFenceConfig(max_traces=3, max_spans_per_trace=4, decided_cache_size=2, review_db="")
    buffer: TraceBuffer[int] = TraceBuffer(config, decision_wait_ms=50 if seed % 2 else 0, clock=clock)
    traces = [f"{i:032x}" for i in range(1, 8)]
    added: list[int] = []
    out: list[int] = []
    checked = 0
    kinds = {"decided": 0, "late": 0, "overflowing": 0}
    for serial in range(600):
        trace_id = rng.choice(traces)
        step = rng.random()
        if step < 0.3:
            buffer.started(trace_id, f"{rng.randrange(2, 9):016x}" if rng.random() < 0.8 else ROOT)
            continue
        if step < 0.9:
            span_id = ROOT if rng.random() < 0.2 else f"{rng.randrange(2, 12):016x}"
            items = [(_view(trace_id, span_id), serial, span_id == ROOT)]
            if rng.random() < 0.3:  # a batch, as the exporter and the service give them
                other = rng.choice(traces)
                items.append((_view(other, f"{rng.randrange(2, 12):016x}"), serial + 100_000, False))
            added.extend(payload for _, payload, _ in items)
            ready = buffer.add_batch(items)
        elif step < 0.97:
            clock.now += rng.choice((0.01, 0.06))
            ready = buffer.due()
        else:
            ready = buffer.drain()
        for item in ready:
            if isinstance(item, Decided):
                kinds["decided"] += 1
            elif item.overflowing:
                kinds["overflowing"] += 1
            else:
                kinds["late"] += 1
        out.extend(_payloads(ready))
        checked += _check_held_traces_are_not_known(buffer)
    out.extend(_payloads(buffer.drain()))
    assert sorted(out) == sorted(added)  # every span handed on, exactly once
    assert len(buffer) == 0
    # The walk went through what it is meant to: held traces checked, traces decided, late spans.
    assert checked > 100 and kinds["decided"] > 20 and kinds["late"] > 5, (checked, kinds)


def test_a_trace_forgotten_while_a_chunk_of_it_is_held_stays_late():
    """An overflowing trace's chunk is held (``late``): its spans still go through the look-ups, so a trace pushed
    out of the decided cache meanwhile is found among the forgotten ones and its spans stay late."""
    clock = _Clock()
    config = TraceFenceConfig(max_traces=5, max_spans_per_trace=2, decided_cache_size=1, review_db="")
    buffer: TraceBuffer[int] = TraceBuffer(config, decision_wait_ms=0, clock=clock)
    a, b = "a" * 32, "b" * 32
    first = buffer.add_batch([(_view(a, "2" * 16), 1, False), (_view(a, "3" * 16), 2, False)])  # the bound: a overflows
    assert [type(item).__name__ for item in first] == ["Decided"] and first[0].planned.plan.partial
    assert buffer.add_batch([(_view(a, "4" * 16), 3, False)]) == []  # held again, as a chunk
    assert buffer._held[a].late
    decided_b = buffer.add_batch([(_view(b, ROOT), 4, True)])  # b decided: a is pushed out of the decided cache
    assert [item.trace_id for item in decided_b] == [b] and a in buffer._forgotten and a not in buffer._decided
    late = buffer.add_batch([(_view(a, "5" * 16), 5, False)])
    assert [(type(item).__name__, [s.payload for s in item.spans]) for item in late] == [("LateBatch", [5])]
    assert first[0].planned.plan.replay_class.value == "review"  # a write in a chunk with no root span (DECISIONS 301)
    assert late[0].spans[0].replay_class == "review" and late[0].plan.partial  # a late tool step fails closed
    assert _payloads(buffer.drain()) == [3]
