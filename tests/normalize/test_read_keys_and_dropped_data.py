"""The t21 fresh-user trial's fail-open inputs (engine side): each now holds its trace, with the reason naming what
was not understood (docs/DECISIONS.md 250-). The inputs are the trial's files, in tests/fixtures/trial21/, planned
through ``tracefence plan`` (``plan_text``, what the command runs) and, where the defect was the span processor's,
through the processor."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_tracefence.pipeline.documents import plan_text
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import ReplayClass
from otel_tracefence.normalize import read_keys
from otel_tracefence.sdk import TraceFenceSpanProcessor

from conftest import ROOT

TRIAL = ROOT / "tests" / "fixtures" / "trial21"
CONFIG = TraceFenceConfig()
REVIEW = ReplayClass.REVIEW


def planned(name: str, config: TraceFenceConfig = CONFIG, form: str = "otlp-json"):
    """(class, [(tool, decision, reasons, malformed messages)]) of the one trace in a trial file."""
    plans, _ = plan_text((TRIAL / name).read_text(), form, config)
    assert len(plans) == 1
    plan = plans[0]
    return plan.replay_class, [(d.step.tool, d.decision.value, list(d.reasons), [m.message for m in d.step.malformed]) for d in plan.steps]


# --- 1. misspelt keys: read only after folding, or unknown in the tracefence namespace ----------------------------


@pytest.mark.parametrize(
    "name, key, resembles, reasons",
    [
        ("c_status_key_case.otlp.json", "tracefence.Status", "tracefence.status", ["malformed_attributes", "result_not_recorded", "arguments_not_recorded"]),
        ("c_status_key_space.otlp.json", "tracefence.status ", "tracefence.status", ["malformed_attributes", "result_not_recorded", "arguments_not_recorded"]),
        ("c_status_key_underscore.otlp.json", "tracefence_status", "tracefence.status", ["malformed_attributes", "result_not_recorded", "arguments_not_recorded"]),
        ("c_result_stable_key_camel.otlp.json", "tracefence.resultStable", "tracefence.result_stable", ["malformed_attributes", "arguments_not_recorded"]),
        ("c_result_stable_key_dash.otlp.json", "tracefence.result-stable", "tracefence.result_stable", ["malformed_attributes", "arguments_not_recorded"]),
    ],
)
def test_a_read_key_misspelt_by_case_separators_or_white_space_holds_its_step(name, key, resembles, reasons):
    replay_class, steps = planned(name)
    assert replay_class is REVIEW
    [(_, decision, got_reasons, messages)] = steps
    assert (decision, got_reasons) == ("review", reasons)
    assert messages == [f"attribute key {key!r} is {resembles!r} only after folding case, separators and white space: not understood, not read as it"]


def test_an_unknown_key_of_the_tracefence_namespace_holds_its_step():
    assert planned("c_result_stable_key_typo.otlp.json") == (
        REVIEW,
        [("session.new", "review", ["malformed_attributes", "arguments_not_recorded"],
          ["attribute key 'tracefence.results_stable' is in the tracefence namespace (or one letter from it) but is none of its keys: not understood"])],
    )


def test_a_misspelt_idempotency_key_cannot_hide_a_key_conflict():
    replay_class, steps = planned("c_idem_key_typo.otlp.json")
    assert replay_class is REVIEW
    assert [(tool, decision, reasons) for tool, decision, reasons, _ in steps] == [("invoice.create", "review", ["malformed_attributes", "result_not_recorded"])] * 2


def test_a_misspelt_operation_key_on_a_span_read_as_no_tool_step_holds_it():
    assert planned("c_genai_op_key_case.otlp.json") == (
        REVIEW,
        [("charge", "review", ["unrecognized_tool_span", "effect_unknown", "arguments_not_recorded"],
          ["span bbbbbbbbbbbbbbb1 ('charge') looks like tool activity (its attribute key 'gen_ai.Operation.name' is 'gen_ai.operation.name' "
           "only after folding case, separators and white space: not understood, not read as it), but no known convention reads it"])],
    )


def test_an_idempotency_key_argument_holding_an_object_is_malformed():
    replay_class, steps = planned("c3_key_in_args_obj.otlp.json")
    assert replay_class is REVIEW
    assert [(decision, reasons, messages) for _, decision, reasons, messages in steps] == [
        ("review", ["malformed_idempotency_key", "result_not_recorded"],
         ["idempotency key argument 'idempotency_key' holds an object of 1 key, not a non-empty string or an integer"])
    ] * 2


def test_the_fold_map_holds_every_read_key_and_the_annotations_are_known_keys():
    from otel_tracefence.pipeline import annotate

    written = {value for name, value in vars(annotate).items() if name.isupper() and isinstance(value, str) and value.startswith("tracefence.")}
    assert written == set(read_keys.TRACEFENCE_ANNOTATION_KEYS)
    assert all(read_keys.misread_key(key) is None for key in read_keys.READ_KEYS)
    assert read_keys.misread_key("tracefence.\u200bstatus") == "tracefence.status"  # a format character folded away
    assert read_keys.misread_key("service.name") is None


# --- 2. spans that say they dropped attributes or events -----------------------------------------------------------


def test_a_step_span_that_dropped_attributes_or_events_is_held_naming_the_counts():
    assert planned("c_dropped_attrs.otlp.json")[1] == [
        ("session.new", "review", ["span_data_dropped", "arguments_not_recorded"],
         ["span bbbbbbbbbbbbbbb1 ('execute_tool session.new') dropped 5 attribute(s) and 0 event(s) (a span limit?): what it lost cannot be read"])
    ]
    assert planned("c_dropped_events.otlp.json")[1] == [
        ("invoice.create", "review", ["span_data_dropped", "result_not_recorded", "arguments_not_recorded"],
         ["span bbbbbbbbbbbbbbb1 ('execute_tool invoice.create') dropped 0 attribute(s) and 3 event(s) (a span limit?): what it lost cannot be read"])
    ]


def test_a_span_that_is_no_step_and_dropped_attributes_holds_its_trace():
    text = (TRIAL / "c_dropped_attrs.otlp.json").read_text().replace('"execute_tool"', '"chat"').replace("execute_tool session.new", "chat m")
    plans, _ = plan_text(text, "otlp-json", CONFIG)
    [plan] = plans
    assert plan.replay_class is REVIEW
    assert [(d.decision.value, list(d.reasons)) for d in plan.steps] == [("review", ["span_data_dropped", "arguments_not_recorded"])]


def _processor(limits: SpanLimits) -> tuple[TracerProvider, InMemorySpanExporter, InMemorySpanExporter]:
    plain, fenced = InMemorySpanExporter(), InMemorySpanExporter()
    provider = TracerProvider(span_limits=limits)
    provider.add_span_processor(SimpleSpanProcessor(plain))
    provider.add_span_processor(TraceFenceSpanProcessor(SimpleSpanProcessor(fenced), review_db="", decision_wait_ms=0))
    return provider, plain, fenced


def test_the_processor_holds_a_step_whose_label_a_span_limit_evicted_and_its_copy_keeps_the_count():
    provider, plain, fenced = _processor(SpanLimits(max_span_attributes=4))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent"):
        with tracer.start_as_current_span("execute_tool x", attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "x",
                                                                      "tracefence.effect": "read", "tracefence.result_stable": False}) as span:
            for i in range(6):
                span.set_attribute(f"app.{i}", i)
    [original] = [s for s in plain.get_finished_spans() if s.name == "execute_tool x"]
    [copy] = [s for s in fenced.get_finished_spans() if s.name == "execute_tool x"]
    assert original.dropped_attributes == copy.dropped_attributes == 6
    assert copy.attributes["tracefence.replay.class"] == "review"
    # Every tool marker was evicted (the limit keeps the last 4 keys): the span is no step, and held as a span that dropped some.
    assert list(copy.attributes["tracefence.step.reasons"]) == ["span_data_dropped", "effect_unknown", "arguments_not_recorded"]


# --- 3. a failure flag that is not a boolean ---------------------------------------------------------------------

HS_CONFIG = TraceFenceConfig.model_validate({"tool_rules": [{"match": "create_invoice", "effect": "write"}]})


def test_a_haystack_failure_flag_that_is_not_a_boolean_makes_the_status_malformed():
    assert planned("c_haystack_error_str.otlp.json") == (
        REVIEW,
        [("invoice.create", "review", ["malformed_status", "write_status_unknown"],
          ["failure flag haystack.tool.error (a string of 4 characters) is not a boolean: whether the call failed cannot be known"])],
    )


@pytest.mark.parametrize(
    "name, status, reasons, message",
    [
        ("hs_err_str.otlp.json", "unknown", ["malformed_status", "write_status_unknown"], "failure flag haystack.tool.error (a string of 4 characters) is not a boolean: whether the call failed cannot be known"),
        ("hs_err_obj.otlp.json", "unknown", ["malformed_status", "write_status_unknown"],
         "failure flag haystack.tool.error (an object of 1 key) is not a boolean: whether the call failed cannot be known"),
        ("hs_err_true.otlp.json", "error", ["write_error"], None),
    ],
)
def test_a_tool_invoker_result_error_is_read_as_the_failure_flag(name, status, reasons, message):
    plans, _ = plan_text((TRIAL / name).read_text(), "otlp-json", HS_CONFIG)
    [plan] = plans
    [decision] = plan.steps
    assert (plan.replay_class, decision.step.status.value, list(decision.reasons)) == (REVIEW, status, reasons)
    assert [m.message for m in decision.step.malformed] == ([message] if message else [])


# --- 4. an HTTP tool span's own 5xx response --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["c_http_tool_504_self.otlp.json", "c_http_tool_504_old.otlp.json"])
def test_an_http_tool_spans_own_server_error_is_an_error_in_its_result(name):
    assert planned(name) == (REVIEW, [("billing.http", "review", ["write_error", "arguments_not_recorded", "error_in_result"], [])])


# --- 5. a declared ok against the span's own record; 6. an exception event misspelt ------------------------------

CONFLICT = ["status_evidence_conflict", "write_status_unknown", "arguments_not_recorded"]


@pytest.mark.parametrize(
    "name, evidence",
    [
        ("c_declared_ok_span_timeout.otlp.json", "status error (a string of 17 characters), error.type (a string of 12 characters): timeout"),
        ("c_declared_ok_exc_event.otlp.json", "an exception event: timeout"),
        ("c_declared_ok_no_end.otlp.json", "no end: how the call ended is not recorded"),
    ],
)
def test_a_declared_ok_contradicted_by_the_spans_own_record_is_held_naming_both(name, evidence):
    assert planned(name) == (REVIEW, [("invoice.create", "review", CONFLICT, [f"tracefence.status 'ok' is declared, but the span records {evidence}"])])


def test_an_exception_event_named_but_for_case_is_not_understood():
    assert planned("c_exc_event_nospelling.otlp.json") == (
        REVIEW,
        [("invoice.create", "review", ["malformed_status", "write_status_unknown", "arguments_not_recorded"],
          ["span event 'Exception' is 'exception' only after folding case, separators and white space: not understood"])],
    )


# --- 7. values cut off: a JSON string left open; a value at the SDK's attribute length limit ----------------------


def test_a_result_that_starts_as_a_json_string_and_is_cut_off_is_truncated():
    assert planned("c_result_cut_jsonstring.otlp.json") == (
        REVIEW,
        [("session.new", "review", ["result_truncated", "arguments_not_recorded"],
          ["the result is cut off: its JSON text does not parse to its end (an attribute length limit?)"])],
    )


def test_the_processor_holds_a_value_as_long_as_the_sdks_attribute_length_limit():
    from otel_tracefence.agent.instrument import tool_call

    provider, _, fenced = _processor(SpanLimits(max_attribute_length=24))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("invoke_agent pager"):
        with tool_call("invoice.create", effect="write", idempotency_key="inv-1", arguments={"n": "x" * 40}, record_result=True, tracer_provider=provider) as call:
            call.set_result(123456789012345678901234567890)  # recorded as its text, cut to 24 characters
        with tool_call("invoice.void", effect="write", idempotency_key="inv-2", arguments={"n": 1}, record_result=True, tracer_provider=provider) as call:
            call.set_result(1234)
    reasons = {s.name: list(s.attributes["tracefence.step.reasons"]) for s in fenced.get_finished_spans() if s.name.startswith("execute_tool")}
    assert reasons == {
        "execute_tool invoice.create": ["arguments_truncated", "result_truncated"],
        "execute_tool invoice.void": ["write_committed"],
    }


# --- 8. a status message with no code; row trace ids in upper case or with white space ----------------------------


def test_an_unset_status_with_a_message_is_not_read_as_ok():
    assert planned("c_status_msg_only.otlp.json") == (
        REVIEW,
        [("invoice.create", "review", ["malformed_status", "write_status_unknown", "arguments_not_recorded"],
          ["status unset with a message (a string of 7 characters): what the message says is not read"])],
    )


def test_a_row_trace_id_in_upper_case_is_the_trace_its_lower_case_names():
    plans, _ = plan_text((TRIAL / "r_traceid_case.ndjson").read_text(), "ndjson", CONFIG)
    [plan] = plans
    assert (plan.trace_id, plan.replay_class) == ("5b8efff798038103d269b633813fc60c", REVIEW)
    assert [(d.step.call_id, d.decision.value, list(d.reasons)) for d in plan.steps] == [
        ("c1", "conflict", ["idempotency_key_conflict", "result_not_recorded"]),
        ("c2", "conflict", ["idempotency_key_conflict", "result_not_recorded"]),
    ]


def test_a_row_trace_id_with_white_space_around_it_is_malformed_and_stays_in_its_trace():
    plans, _ = plan_text((TRIAL / "r_traceid_space.ndjson").read_text(), "ndjson", CONFIG)
    [plan] = plans
    assert (plan.trace_id, plan.replay_class) == ("5b8efff798038103d269b633813fc60c", REVIEW)
    assert [(d.step.call_id, d.decision.value, list(d.reasons), [m.message for m in d.step.malformed]) for d in plan.steps] == [
        ("c1", "conflict", ["idempotency_key_conflict", "result_not_recorded"], []),
        ("c2", "review", ["malformed_trace_id", "idempotency_key_conflict", "result_not_recorded"],
         ["trace_id ' 5b8efff798038103d269b633813fc60c' has white space around it"]),
    ]
