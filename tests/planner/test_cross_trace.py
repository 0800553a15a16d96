"""The rules across traces (planner/cross_trace.py) and the write index that feeds them
(pipeline/write_index.py): exact decisions, reasons, links and classes (docs/DECISIONS.md 590-594)."""

from __future__ import annotations

import logging

from otel_tracefence.core.model import OK, READ, TIMEOUT, WRITE, RelatedTrace, ToolStep
from otel_tracefence.pipeline import write_index as write_index_module
from otel_tracefence.pipeline.write_index import MemoryWriteIndex
from otel_tracefence.planner import plan_trace
from otel_tracefence.planner.cross_trace import IndexedWrite, against_earlier, index_keys

SHA_A, SHA_B = "a" * 64, "b" * 64


def _step(trace: str, *, status=OK, key: str | None = "inv-9", sha: str | None = SHA_A, effect=WRITE, call: str = "c1", at: int = 0) -> ToolStep:
    return ToolStep(
        trace_id=trace, call_id=call, tool="invoice.create", effect=effect, status=status, idempotency_key=key,
        arguments_sha256=sha, arguments_json="{}" if sha else None, arguments_unavailable=None if sha else "arguments_not_recorded",
        result_recorded=status is OK, start_time_unix_nano=at,
    )  # fmt: skip


def _plan(*steps: ToolStep):
    return plan_trace(steps[0].trace_id, steps)


def _summary(plan):
    return plan.replay_class.value, [(d.decision.value, d.reasons, d.related_traces) for d in plan.steps]


def test_index_keys_are_the_key_and_the_arguments_of_a_write_only():
    assert index_keys(_step("t1")) == (("invoice.create", "key", "inv-9"), ("invoice.create", "args", SHA_A))
    assert index_keys(_step("t1", key=None, sha=None)) == ()
    assert index_keys(_step("t1", effect=READ)) == ()


def test_a_conflict_outranks_a_retry_and_every_earlier_call_is_linked_in_time_order():
    earlier = [
        IndexedWrite("t2", "c9", "invoice.create", "inv-9", SHA_A, 20, held=True, committed=False),
        IndexedWrite("t1", "c1", "invoice.create", "inv-9", SHA_B, 10, held=False, committed=True),
    ]
    plan = against_earlier(_plan(_step("t3", at=30)), lambda step: earlier)
    assert _summary(plan) == (
        "review",
        [("conflict", ("idempotency_key_reused_across_traces", "retry_of_held_write"), (
            RelatedTrace("t1", "c1", "idempotency_key_reused_across_traces"), RelatedTrace("t2", "c9", "retry_of_held_write")))],
    )  # fmt: skip


def test_a_resolved_held_write_is_no_longer_retried_and_the_own_trace_never_matches():
    resolved = IndexedWrite("t1", "c1", "invoice.create", "inv-9", SHA_A, 10, held=True, committed=False, resolved=True)
    own = IndexedWrite("t3", "c0", "invoice.create", "inv-9", SHA_B, 0, held=True, committed=False)
    plan = _plan(_step("t3"))
    assert against_earlier(plan, lambda step: [resolved, own]) is plan


def test_a_held_step_keeps_its_own_codes_after_the_finding_and_gains_a_committed_repeat_note():
    earlier = [IndexedWrite("t1", "c1", "invoice.create", "inv-9", SHA_A, 10, held=False, committed=True)]
    plan = against_earlier(_plan(_step("t2", status=TIMEOUT)), lambda step: earlier)
    assert _summary(plan) == ("review", [("review", ("write_timeout", "repeats_committed_write"), (RelatedTrace("t1", "c1", "repeats_committed_write"),))])


def test_the_links_are_bounded():
    earlier = [IndexedWrite(f"t{i:02}", "c1", "invoice.create", "inv-9", SHA_A, i, held=True, committed=False) for i in range(5)]
    plan = against_earlier(_plan(_step("t9", at=99)), lambda step: earlier, max_related=2)
    assert [r.trace_id for r in plan.steps[0].related_traces] == ["t00", "t01"]


def test_the_index_evicts_the_oldest_writes_and_counts_them():
    index = MemoryWriteIndex(max_entries=2)
    for trace in ("t1", "t2", "t3"):
        index.plan_against(_plan(_step(trace, status=TIMEOUT, key=f"k-{trace}", sha=trace * 32)))
    assert (len(index), index.evicted) == (2, 1)
    assert index.lookup(_step("t9", key="k-t1", sha="t1" * 32)) == []
    assert [w.trace_id for w in index.lookup(_step("t9", key="k-t3", sha=SHA_B))] == ["t3"]


def test_a_resolved_trace_is_no_retry_target_and_a_replanned_trace_replaces_its_writes():
    index = MemoryWriteIndex()
    index.plan_against(_plan(_step("t1", status=TIMEOUT)))
    index.resolve("t1")
    assert _summary(index.plan_against(_plan(_step("t2")))) == ("injected", [("skip", ("write_committed",), ())])
    index.plan_against(_plan(_step("t2", status=TIMEOUT)))  # t2 again, now held
    assert len(index) == 2


def test_an_index_that_fails_leaves_the_plan_as_planned_alone_noted_unchecked_and_logs_once(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("index bug")

    monkeypatch.setattr(write_index_module, "against_earlier", broken)
    index = MemoryWriteIndex()
    counted = []
    index.on_unchecked = lambda: counted.append(1)
    plan = _plan(_step("t1"))
    with caplog.at_level(logging.ERROR, logger=write_index_module.__name__):
        for _ in range(2):
            assert _summary(index.plan_against(plan)) == ("injected", [("skip", ("write_committed", "retries_unchecked"), ())])
    assert index.failures == 2 and counted == [1, 1]
    assert [(r.getMessage(), r.exc_info) for r in caplog.records] == [  # one line, the error named, no traceback
        ("tracefence: the write index failed; traces are planned alone (retries across traces unchecked): RuntimeError('index bug')", None)
    ]


def test_an_index_of_size_zero_plans_every_trace_alone():
    index = MemoryWriteIndex(max_entries=0)
    index.plan_against(_plan(_step("t1", status=TIMEOUT)))
    plan = _plan(_step("t2"))
    assert index.plan_against(plan) is plan and len(index) == 0
