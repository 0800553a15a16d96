"""The model's public behaviour, the same in the compiled and the pure-Python engine (docs/DECISIONS.md, 142).

``ToolStep``, ``MalformedField``, ``StepDecision`` and ``TracePlan`` are Cython extension types when compiled and
the standard library's frozen dataclasses in pure Python. Each engine runs the same checks in a subprocess of
its own: fields and their order, ``dataclasses.replace`` / ``fields`` / ``asdict`` / ``is_dataclass``, ``==`` and
``hash`` by value, the exact ``repr``, assignment refused with an ``AttributeError``, and the enum constants the
rules read.
"""

from __future__ import annotations

import textwrap

import pytest

from test_compiled_engine import _c_compiler, run_child

_CHILD = textwrap.dedent(
    """
    import dataclasses, json
    import otel_tracefence
    from otel_tracefence.core import model
    from otel_tracefence.core.model import Decision, Effect, EffectSource, MalformedField, ReplayClass, StepDecision, ToolStatus, ToolStep, TracePlan

    bad = MalformedField("effect", "effect 'x' is not one of read, write, unknown")
    step = ToolStep("t1", "c1", "refund", Effect.WRITE, ToolStatus.OK, idempotency_key="k1", malformed=(bad,), argument_tokens=(3, 7))
    same = ToolStep(trace_id="t1", call_id="c1", tool="refund", effect=Effect.WRITE, status=ToolStatus.OK, idempotency_key="k1",
                    malformed=(MalformedField("effect", "effect 'x' is not one of read, write, unknown"),), argument_tokens=(3, 7))
    decision = StepDecision(step, Decision.SKIP, ("write_committed",))
    plan = TracePlan("t1", ReplayClass.INJECTED, (decision,))
    out = {"engine": otel_tracefence.engine(), "extension": not isinstance(ToolStep.__init__, type(lambda: 0))}
    out["fields"] = [f.name for f in dataclasses.fields(ToolStep)]
    out["plan_fields"] = [f.name for f in dataclasses.fields(plan)]
    out["equal"] = [step == same, hash(step) == hash(same), step != dataclasses.replace(step, attempts=2), step == ("t1",)]
    out["replaced"] = repr(dataclasses.replace(step, attempts=2, notes=("x",)))
    out["repr"] = [repr(step), repr(plan)]
    out["asdict"] = repr(dataclasses.asdict(decision))
    out["dataclass"] = [dataclasses.is_dataclass(c) for c in (ToolStep, MalformedField, StepDecision, TracePlan)]
    out["defaults"] = [plan.partial, plan.schema_version, step.arguments_unavailable, step.attempts, step.result_stable, step.effect_source is EffectSource.NONE]
    out["order_key"] = list(step.order_key) == list(model.step_order(step))
    refused = []
    for obj, name in ((step, "attempts"), (bad, "field"), (decision, "decision"), (plan, "partial")):
        try:
            setattr(obj, name, None)
            refused.append(False)
        except AttributeError:
            refused.append(getattr(obj, name) is not None)
    out["refused"] = refused
    out["reason_code"] = bad.reason_code
    out["constants"] = [model.READ is Effect.READ, model.EFFECT_UNKNOWN is Effect.UNKNOWN, model.STATUS_UNKNOWN is ToolStatus.UNKNOWN,
                        model.SOURCE_NONE is EffectSource.NONE, model.CONFLICT is Decision.CONFLICT, model.CLASS_REVIEW is ReplayClass.REVIEW]
    print(json.dumps(out))
    """
)


@pytest.mark.parametrize("pure", [False, True], ids=["installed", "pure"])
def test_the_model_behaves_the_same_in_both_engines(pure):
    got = run_child(_CHILD, pure)
    if pure:
        assert (got["engine"], got["extension"]) == ("python", False)
    elif _c_compiler() is not None:
        assert (got["engine"], got["extension"]) == ("compiled", True)  # the extension types, not the fallback
    del got["engine"], got["extension"]
    assert got == {
        "fields": [
            "trace_id", "call_id", "tool", "effect", "status", "effect_source", "span_id", "idempotency_key", "arguments_json",
            "arguments_sha256", "arguments_unavailable", "result_recorded", "result_sha256", "result_value", "attempts",
            "start_time_unix_nano", "sequence", "requested_only", "call_id_from_span", "result_call_id", "malformed", "notes", "result_stable",
            "argument_tokens", "result_tokens", "producer", "producer_records_results",  # the last two: docs/DECISIONS.md 401
        ],
        "plan_fields": ["trace_id", "replay_class", "steps", "partial", "schema_version"],
        "equal": [True, True, True, False],
        "replaced": (
            "ToolStep(trace_id='t1', call_id='c1', tool='refund', effect=<Effect.WRITE: 'write'>, status=<ToolStatus.OK: 'ok'>, "
            "effect_source=<EffectSource.NONE: 'none'>, span_id='', idempotency_key='k1', arguments_json=None, arguments_sha256=None, "
            "arguments_unavailable='arguments_not_recorded', result_recorded=False, result_sha256=None, result_value=None, attempts=2, "
            "start_time_unix_nano=0, sequence=0, requested_only=False, call_id_from_span=False, result_call_id=None, "
            "malformed=(MalformedField(field='effect', message=\"effect 'x' is not one of read, write, unknown\", reason=None),), "
            "notes=('x',), result_stable=True, argument_tokens=(3, 7), result_tokens=(), producer='', producer_records_results=None)"
        ),
        "repr": [
            "ToolStep(trace_id='t1', call_id='c1', tool='refund', effect=<Effect.WRITE: 'write'>, status=<ToolStatus.OK: 'ok'>, "
            "effect_source=<EffectSource.NONE: 'none'>, span_id='', idempotency_key='k1', arguments_json=None, arguments_sha256=None, "
            "arguments_unavailable='arguments_not_recorded', result_recorded=False, result_sha256=None, result_value=None, attempts=1, "
            "start_time_unix_nano=0, sequence=0, requested_only=False, call_id_from_span=False, result_call_id=None, "
            "malformed=(MalformedField(field='effect', message=\"effect 'x' is not one of read, write, unknown\", reason=None),), "
            "notes=(), result_stable=True, argument_tokens=(3, 7), result_tokens=(), producer='', producer_records_results=None)",
            "TracePlan(trace_id='t1', replay_class=<ReplayClass.INJECTED: 'injected'>, steps=(StepDecision(step=ToolStep(trace_id='t1', "
            "call_id='c1', tool='refund', effect=<Effect.WRITE: 'write'>, status=<ToolStatus.OK: 'ok'>, effect_source=<EffectSource.NONE: "
            "'none'>, span_id='', idempotency_key='k1', arguments_json=None, arguments_sha256=None, arguments_unavailable="
            "'arguments_not_recorded', result_recorded=False, result_sha256=None, result_value=None, attempts=1, start_time_unix_nano=0, "
            "sequence=0, requested_only=False, call_id_from_span=False, result_call_id=None, malformed=(MalformedField(field='effect', message=\"effect 'x' "
            "is not one of read, write, unknown\", reason=None),), notes=(), result_stable=True, argument_tokens=(3, 7), "
            "result_tokens=(), producer='', producer_records_results=None), decision=<Decision.SKIP: 'skip'>, reasons=('write_committed',), related_call_ids=(), related_traces=()),), partial=False, "
            "schema_version='1')",
        ],
        "asdict": got["asdict"],  # compared between the engines below
        "dataclass": [True, True, True, True],
        "defaults": [False, "1", "arguments_not_recorded", 1, True, True],
        "order_key": True,
        "refused": [True, True, True, True],
        "reason_code": "malformed_effect",
        "constants": [True, True, True, True, True, True],
    }
    assert got["asdict"].startswith("{'step': {'trace_id': 't1', 'call_id': 'c1', 'tool': 'refund'")


def test_asdict_is_the_same_in_both_engines():
    assert run_child(_CHILD, False)["asdict"] == run_child(_CHILD, True)["asdict"]

