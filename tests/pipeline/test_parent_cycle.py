"""A trace whose spans' parents form a cycle (the agent's span naming its own tool span as its parent, or two spans
naming each other) has no readable ancestry (docs/DECISIONS.md 506): its plan is partial, whatever else it holds,
and where no span is a root its writes are held ``trace_root_missing``, the message naming the span that closes the
cycle. Before, every parent was in the file, so the trace read as whole and its write passed as committed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_helpers import run
from otlp_json_helpers import json_span
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.normalize.rootless import absent_parent, parent_cycle
from otel_tracefence.pipeline.plan import plan_spans
from otel_tracefence.pipeline.documents import plan_text
from tests.cases import test_cases_doors as doors  # the module, not its tests: pytest would collect them here

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
ROOT, TOOL, OTHER = "a3ce929d0e0e4736", "00f067aa0ba902b7", "b7ad6b7169203331"


def _tool(parent: str, span_id: str = TOOL, call_id: str = "c1") -> dict:
    return json_span(TRACE, span_id, "execute_tool invoice.create", parent=parent, **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "invoice.create", "gen_ai.tool.call.id": call_id,
        "tracefence.effect": "write", "gen_ai.tool.call.arguments": '{"amount": 1250}', "gen_ai.tool.call.result": '{"id": "in_1"}',
    })  # fmt: skip


def _text(*spans: dict) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]})


def _cycle_through_the_root() -> str:
    root = json_span(TRACE, ROOT, "invoke_agent billing", parent=TOOL, **{"gen_ai.operation.name": "invoke_agent"})
    return _text(root, _tool(ROOT))


def test_a_cycle_through_the_root_is_partial_and_holds_the_write():
    (plan,), errors = plan_text(_cycle_through_the_root(), "otlp-json", TraceFenceConfig())
    assert errors == []
    (step,) = plan.steps
    assert (plan.partial, plan.replay_class.value, step.decision.value, step.reasons) == (True, "review", "review", ("trace_root_missing",))
    (why,) = step.step.malformed
    assert why.field == "parent_span_id"
    assert why.message == (
        f"no span of the trace is its root: span {ROOT} names the parent {TOOL}, which closes a parent cycle; "
        "the part of the trace not seen may hold an earlier attempt of this call, so it cannot be judged"
    )


def test_the_cli_flags_it_and_fail_on_does_not_pass(tmp_path):
    path = tmp_path / "cycle.json"
    path.write_text(_cycle_through_the_root())
    proc = run("plan", str(path), "--fail-on", "review")
    assert proc.returncode == 1, proc.stderr
    (plan,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert (plan["partial"], plan["replayClass"], plan["steps"][0]["reasons"]) == (True, "review", ["trace_root_missing"])


def test_a_cycle_beside_a_real_root_makes_the_trace_partial():
    root = json_span(TRACE, ROOT, "invoke_agent billing", **{"gen_ai.operation.name": "invoke_agent"})
    a, b = _tool(OTHER, TOOL, "c1"), _tool(TOOL, OTHER, "c2")
    (plan,), _ = plan_text(_text(root, a, b), "otlp-json", TraceFenceConfig())
    assert plan.partial is True


def test_parent_cycle_finds_cycles_of_any_length_and_passes_a_tree():
    def views(pairs):
        return [SpanView(TRACE, span_id, "s", {}, parent_span_id=parent) for span_id, parent in pairs]

    assert parent_cycle(views([("1", ""), ("2", "1"), ("3", "2"), ("4", "2"), ("5", "gone")])) is None
    assert parent_cycle(views([("1", ""), ("2", "1"), ("3", "4"), ("4", "5"), ("5", "3")])).span_id == "3"
    assert parent_cycle(views([("1", "3"), ("2", "1"), ("3", "2")])).span_id == "1"
    assert parent_cycle(views([("1", "1")])).span_id == "1"
    long_chain = [(str(i), str(i - 1) if i else "") for i in range(5000)]
    assert parent_cycle(views(long_chain)) is None
    assert parent_cycle(views([*long_chain[1:], ("0", "4999")])).span_id == "0"
    # Two spans under one id (one naming a parent on the cycle, one none): a cycle in any input order (a fuzz find).
    clash = [("1", "2"), ("2", "1"), ("1", "")]
    assert parent_cycle(views(clash)).span_id == parent_cycle(views(clash[::-1])).span_id == "1"


def _cycle_by_brute_force(pairs: list[tuple[str, str]]) -> bool:
    """True when following parents (every parent any span under an id names) from some span id comes back to it."""
    parents: dict[str, set[str]] = {}
    for span_id, parent in pairs:
        parents.setdefault(span_id, set()).update({parent} if parent else set())
    for start in parents:
        seen, todo = set(), list(parents[start])
        while todo:
            node = todo.pop()
            if node == start:
                return True
            if node in parents and node not in seen:
                seen.add(node)
                todo.extend(parents[node])
    return False


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("123456"), st.sampled_from(["", "1", "2", "3", "4", "5", "6", "gone"])), min_size=1, max_size=9))
def test_parent_cycle_finds_a_cycle_exactly_when_there_is_one(pairs):
    # The one-pass proof of trees (rootless._trees) and the walk behind it agree with a brute-force search on any
    # parent graph: several spans under one id, self-parents, parents outside the trace.
    views = [SpanView(TRACE, span_id, "s", {}, parent_span_id=parent) for span_id, parent in pairs]
    found = parent_cycle(views)
    assert (found is not None) == _cycle_by_brute_force(pairs)


@pytest.mark.parametrize("starts", [False, True], ids=["ends", "starts-and-ends"])
@pytest.mark.parametrize("through_the_root", [True, False], ids=["through-the-root", "beside-a-root"])
def test_the_processor_and_the_service_door_agree_with_the_cli(tmp_path, upstream, starts, through_the_root):
    path = tmp_path / "cycle.json"
    if through_the_root:
        path.write_text(_cycle_through_the_root())
    else:
        root = json_span(TRACE, ROOT, "invoke_agent billing", **{"gen_ai.operation.name": "invoke_agent"})
        path.write_text(_text(root, _tool(OTHER, TOOL, "c1"), _tool(TOOL, OTHER, "c2")))
    doors.test_processor_door_agrees_with_the_cli(path, path, starts)
    if not starts and not through_the_root:  # no root: the service decides it (partial) when its wait runs out, past 15 s
        doors.test_service_door_agrees_with_the_cli(path, path, upstream, tmp_path)


def test_a_span_whose_parent_is_absent_makes_the_trace_partial_unless_the_parent_is_remote():
    """DECISIONS 980: a root in hand and a span naming a parent no span is (a span never ended, Mastra's suspended step)
    is partial at every door (``plan_spans``), as the file door flags it; a remote parent (the processor's local root,
    called from another process) is no hole."""
    root = SpanView(TRACE, ROOT, "invoke_agent billing", {"gen_ai.operation.name": "invoke_agent"})

    def tool(parent: str, remote: bool) -> SpanView:
        attributes = {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "invoice.create", "gen_ai.tool.call.id": "c1", "tracefence.effect": "write",
            "gen_ai.tool.call.arguments": '{"amount": 1250}', "gen_ai.tool.call.result": '{"id": "in_1"}',
        }  # fmt: skip
        return SpanView(TRACE, TOOL, "execute_tool invoice.create", attributes, parent_span_id=parent, parent_is_remote=remote, start_time_unix_nano=1, end_time_unix_nano=2, status_code="ok")

    hole = plan_spans(TRACE, [root, tool(OTHER, False)], TraceFenceConfig()).plan
    assert (hole.partial, hole.replay_class.value, hole.steps[0].decision.value, hole.steps[0].reasons) == (True, "injected", "skip", ("write_committed",))
    assert absent_parent([root, tool(OTHER, False)]).span_id == TOOL
    whole = plan_spans(TRACE, [root, tool(ROOT, False)], TraceFenceConfig()).plan
    remote = plan_spans(TRACE, [tool(OTHER, True)], TraceFenceConfig()).plan
    assert (whole.partial, remote.partial) == (False, False)
    assert absent_parent([tool(OTHER, True)]) is None
