"""The fifth fresh-user trial's findings (docs/DECISIONS.md 355-369): exact plans, guard refusals and CLI exits on
OTLP/JSON files a door might have written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from otel_tracefence.cli import main
from otel_tracefence.pipeline.documents import plan_text
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.agent.replay import NonReplayableTraceError, ReplayGuard
from tests.planner.test_recorded_class_and_partial_flags import TRACE, _file, _read, _span


def _plans(text: str) -> tuple[Any, list]:
    notes: list = []
    (plan,) = plan_text(text, "auto", TraceFenceConfig(), warnings=notes)[0]
    return plan, notes


def _root(**attributes: Any) -> dict:
    return _span("aa" * 8, "invoke_agent a", **{"gen_ai.operation.name": "invoke_agent", **attributes})


# -- 3: the CI gate takes the class a door recorded, as the guard does ------------------------------------------------


def test_plan_takes_the_class_its_spans_record_and_the_gate_fails_on_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # serve held the trace review for a span it refused (not in its output file): `plan --fail-on review` re-planned it
    # dynamic and exited 0, while the guard refused it.
    path = tmp_path / "serve-out.jsonl"
    path.write_text(_file(_root(**{"tracefence.replay.class": "review"}), _read(**{"tracefence.replay.class": "review"})))
    plan, notes = _plans(path.read_text())
    assert (plan.replay_class.value, [d.decision.value for d in plan.steps], plan.partial) == ("review", ["replay"], False)
    (note,) = notes
    assert (note.field, note.span_id, note.message) == (
        "tracefence.replay.class", "aa" * 8,
        f"trace {TRACE}: its spans record the class review (tracefence.replay.class='review'); its steps here give dynamic: "
        "planned review, as the door that wrote the file planned it (see its review item)",
    )
    assert main(["plan", str(path), "--fail-on", "review"]) == 1
    err = capsys.readouterr().err
    assert f"fail-on review: trace {TRACE}: class review: recorded by the door that wrote the file (tracefence.replay.class)" in err
    path.write_text(_file(_root(**{"tracefence.replay.class": "dynamic"}), _read(**{"tracefence.replay.class": "dynamic"})))
    assert (_plans(path.read_text())[0].replay_class.value, main(["plan", str(path), "--fail-on", "review"])) == ("dynamic", 0)


# -- 9: the guard's edge cases -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["root", "tool"])
@pytest.mark.parametrize(
    "key, value, why",
    [
        ("tracefence.replay.class", ["review"], "its spans record the class review (tracefence.replay.class=['review'])"),
        ("tracefence.plan.schema_version", "9", "its spans record tracefence.plan.schema_version='9', a plan schema this version (schema 1) does not know"),
    ],
)
def test_a_recorded_class_that_is_no_class_or_an_unknown_schema_is_review(tmp_path: Path, where: str, key: str, value: Any, why: str) -> None:
    # An array class raised TypeError (unhashable) in the guard; schema_version "9" was accepted silently.
    path = tmp_path / "out.jsonl"
    extra = {key: value}
    path.write_text(_file(_root(**(extra if where == "root" else {})), _read(**(extra if where == "tool" else {}))))
    plan, (note,) = _plans(path.read_text())
    assert plan.replay_class.value == "review" and why in note.message
    with pytest.raises(NonReplayableTraceError, match=f"trace {TRACE} is planned review"):
        ReplayGuard.from_file(path, mode="injected")


@pytest.mark.parametrize("flag", [("tracefence.trace.partial", 0), ("tracefence.trace.partial", []), ("tracefence.trace.reasons", []),
                                  ("tracefence.trace.late", 0)])  # fmt: skip
def test_a_flag_of_an_incomplete_trace_that_is_zero_or_empty_is_not_false(tmp_path: Path, flag: tuple[str, Any]) -> None:
    # 0 and [] were read as false (0 == False in Python) while "0" was partial: any value but false is partial (287).
    key, value = flag
    path = tmp_path / "out.jsonl"
    path.write_text(_file(_root(**{key: value}), _read()))
    assert _plans(path.read_text())[0].partial is True
    with pytest.raises(NonReplayableTraceError, match=f"the plan of trace {TRACE} is partial"):
        ReplayGuard.from_file(path, mode="dynamic")


@pytest.mark.parametrize("key, value", [("tracefence.trace.Partial", True), ("tracefence.Replay.Class", "review"), ("tracefence.stauts", "ok")])
def test_a_tracefence_key_not_understood_on_a_span_above_a_step_holds_the_trace(tmp_path: Path, key: str, value: Any) -> None:
    # On the tool span such a key was held (malformed_attributes); on the agent root above it, ignored: dynamic.
    path = tmp_path / "out.jsonl"
    path.write_text(_file(_root(**{key: value}), _read()))
    plan, _ = _plans(path.read_text())
    held = [d for d in plan.steps if d.decision.value == "review"]
    assert (plan.replay_class.value, [(d.step.span_id, d.reasons) for d in held]) == (
        "review", [("aa" * 8, ("unrecognized_tool_span", "effect_unknown", "arguments_not_recorded"))])
    assert f"(attribute key {key!r} is " in held[0].step.malformed[0].message
    with pytest.raises(NonReplayableTraceError, match="is held for review"):
        ReplayGuard.from_file(path, mode="dynamic")


# -- 4 and 7: the buffer's late path (every door: processor, exporter, service) -----------------------------------------

from otel_tracefence.pipeline.trace_buffer import Decided, LateBatch, TraceBuffer  # noqa: E402
from otel_tracefence.normalize import SpanView  # noqa: E402

LATE_TRACE = "c3" * 16
WRITE = {"gen_ai.operation.name": "execute_tool", "tracefence.effect": "write"}


def _view(span_id: str, name: str, attributes: dict, parent: str | None = "aa" * 8, **fields: Any) -> SpanView:
    return SpanView(LATE_TRACE, span_id, name, attributes, parent_span_id=parent, start_time_unix_nano=1, end_time_unix_nano=2, **fields)


def _decided_buffer() -> tuple[TraceBuffer, list]:
    """A trace decided as it stands: its root and a committed write `invoice.create` (span bb..), `injected`."""
    buffer: TraceBuffer = TraceBuffer(TraceFenceConfig(), decision_wait_ms=0)
    write = _view("bb" * 8, "execute_tool invoice.create", {**WRITE, "gen_ai.tool.name": "invoice.create", "gen_ai.tool.call.id": "k1",
                  "gen_ai.tool.call.arguments": '{"a": 1}', "gen_ai.tool.call.result": '{"id": "i1"}'})  # fmt: skip
    out = buffer.add_batch([(write, None, False), (_view("aa" * 8, "invoke_agent", {"gen_ai.operation.name": "invoke_agent"}, None), None, True)])
    (decided,) = [o for o in out if isinstance(o, Decided)]
    assert decided.planned.plan.replay_class.value == "injected"
    return buffer, [write]


def _late(buffer: TraceBuffer, view: SpanView) -> LateBatch:
    (batch,) = buffer.add_batch([(view, None, False)])
    assert isinstance(batch, LateBatch)
    return batch


def test_a_late_span_reusing_a_decided_span_id_with_other_content_is_no_redelivery() -> None:
    # The trial's dupid_late.py: a timed-out payments.charge under the committed write's span id came late and was
    # annotated with the remembered class (injected), no review item; in time the same gives review malformed_span_id.
    buffer, (write,) = _decided_buffer()
    again = _late(buffer, write)  # a true redelivery: the same span again
    assert (again.plan, again.spans[0].replay_class) == (None, "injected")
    timeout = _view("bb" * 8, "execute_tool payments.charge", {**WRITE, "gen_ai.tool.name": "payments.charge", "gen_ai.tool.call.id": "k2",
                    "gen_ai.tool.call.arguments": '{"amt": 5}', "error.type": "timeout"}, status_code="ERROR")  # fmt: skip
    batch = _late(buffer, timeout)
    assert batch.plan is not None and batch.plan.replay_class.value == "review" and batch.spans[0].replay_class == "review"
    assert [(d.step.tool, d.decision.value, d.reasons) for d in batch.plan.steps] == [
        ("invoice.create", "review", ("malformed_span_id", "decided_before_complete")),
        ("payments.charge", "review", ("malformed_span_id", "write_timeout", "decided_before_complete")),
    ]


@pytest.mark.parametrize("dropped", [{"dropped_attributes": 4}, {"dropped_events": 1}])
def test_a_late_span_that_dropped_data_holds_its_trace_as_in_time(dropped: dict) -> None:
    # The trial's late.py rows dropped_*: a late plain span that dropped attributes or events changed nothing
    # (class kept injected); in time it is review span_data_dropped (DECISIONS 252).
    buffer, _ = _decided_buffer()
    batch = _late(buffer, _view("dd" * 8, "work", {"x": 1}, parent="bb" * 8, **dropped))
    assert batch.plan is not None and batch.spans[0].replay_class == "review"
    held = [(d.step.span_id, d.decision.value, d.reasons[:2]) for d in batch.plan.steps if d.step.span_id == "dd" * 8]
    assert held == [("dd" * 8, "review", ("span_data_dropped", "effect_unknown"))]


# -- 13: the review CLI and `tools --db` on a database with one bad item -------------------------------------------------

import sqlite3  # noqa: E402

from otel_tracefence.review import SQLiteReviewStore  # noqa: E402
from tests.review.test_cli_review import _plan as _review_plan  # noqa: E402

GOOD, BAD = "2c" * 16, "ec" * 16


@pytest.mark.parametrize("stored, why", [(b"\xff\xff\xff", "its bytes do not decode"), ("not a blob", "stored as str, not as the bytes of a ReviewItem")])
def test_one_unreadable_review_item_is_named_and_the_others_are_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stored: object, why: str
) -> None:
    # One corrupt blob made `review list` and `tools --db` fail with DecodeError and list nothing; an item stored as
    # text made `show` fail with TypeError.
    db = tmp_path / "review.db"
    with SQLiteReviewStore(db) as store:
        store.upsert(_review_plan(GOOD))
        store.upsert(_review_plan(BAD))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE review_items SET item = ? WHERE trace_id = ?", (stored, BAD))
    named = f"the review item of trace {BAD} cannot be read ({why}"
    assert main(["review", "--db", str(db), "list"]) == 2
    out, err = capsys.readouterr()
    assert GOOD in out and BAD not in out
    assert err.startswith(f"tracefence review list: {db}: {named}") and err.rstrip().endswith("): skipped")
    assert main(["review", "--db", str(db), "show", BAD[:6]]) == 2
    assert capsys.readouterr().err.startswith(f"tracefence review show: {db}: {named}")
    assert main(["review", "--db", str(db), "show", GOOD]) == 0
    capsys.readouterr()
    assert main(["tools", "--db", str(db)]) == 2
    out, err = capsys.readouterr()
    assert "payments.charge" in out and err.startswith(f"tracefence tools: {db}: {named}")


# -- 14: in time, spans sharing one span id each carry their own step's annotations --------------------------------------

from otel_tracefence.pipeline.fence import Fence  # noqa: E402


def test_spans_sharing_a_span_id_each_carry_their_own_steps_annotations() -> None:
    # The trial's dupid.py request a: a committed invoice.create and a timed-out payments.charge under one span id.
    # serve wrote one merged set on both: invoice.create got payments.charge's write_timeout, both `status ok`.
    emitted: list = []
    fence: Fence = Fence(TraceFenceConfig(), emit=emitted.extend, annotate_span=lambda payload, view, extra: (view.name, extra),
                         service_name=lambda payload: "", component="test", review_sink=None, decision_wait_ms=0)  # fmt: skip
    ok = _view("bb" * 8, "execute_tool invoice.create", {**WRITE, "gen_ai.tool.name": "invoice.create", "gen_ai.tool.call.id": "k1",
               "gen_ai.tool.call.arguments": '{"a": 1}', "gen_ai.tool.call.result": '{"id": "i1"}'}, sequence=1)  # fmt: skip
    timeout = _view("bb" * 8, "execute_tool payments.charge", {**WRITE, "gen_ai.tool.name": "payments.charge", "gen_ai.tool.call.id": "k2",
                    "gen_ai.tool.call.arguments": '{"amt": 5}', "error.type": "timeout"}, status_code="ERROR", sequence=2)  # fmt: skip
    for view in (ok, timeout):
        fence.add(view, view, local_root=False)
    root = _view("aa" * 8, "invoke_agent", {"gen_ai.operation.name": "invoke_agent"}, None, sequence=3)
    fence.add(root, root, local_root=True)
    steps = {name: (extra["tracefence.step.decision"], extra["tracefence.step.reasons"], extra["tracefence.step.status"], extra["tracefence.step.effect"])
             for name, extra in emitted if "tracefence.step.decision" in extra}  # fmt: skip
    assert steps == {
        "execute_tool invoice.create": ("review", ["malformed_span_id"], "ok", "write"),
        "execute_tool payments.charge": ("review", ["malformed_span_id", "write_timeout"], "timeout", "write"),
    }
    assert {extra["tracefence.replay.class"] for _, extra in emitted} == {"review"}
