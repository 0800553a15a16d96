"""The fifth fresh-user trial's findings (docs/DECISIONS.md 355-369): exact plans, guard refusals and CLI exits on
OTLP/JSON files a door might have written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from otel_tracefence.cli import main
from otel_tracefence.cli.plan import plan_text
from otel_tracefence.config import TraceFenceConfig
from otel_tracefence.replay import NonReplayableTraceError, ReplayGuard
from tests.test_trial22 import TRACE, _file, _read, _span


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
