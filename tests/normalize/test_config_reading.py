"""The configuration as the normalizer reads it, once per trace (``normalize/config_reading.py``; docs/DECISIONS.md, 175)."""

from __future__ import annotations

from otel_tracefence.core.config import Limits, ResultErrorShape, ToolRule, TraceFenceConfig
from otel_tracefence.normalize import SpanView, normalize_trace
from otel_tracefence.normalize.config_reading import ConfigReading, LimitsReading, read_config
from otel_tracefence.pipeline.plan import plan_spans


def _config() -> TraceFenceConfig:
    return TraceFenceConfig(
        tool_rules=[ToolRule(match="pay*", effect="write", idempotency_key_argument="order.id"), ToolRule(match="get_*", effect="read", result="unstable")],
        idempotency_key_arguments=["key", "meta.key"],
        result_error_shapes=[ResultErrorShape(key="outcome", equals="denied")],
        store_raw_values=True,
        limits=Limits(max_argument_bytes=900, max_argument_depth=7, max_related_call_ids=3, max_tokens_per_value=5, max_attributes_per_span=11),
    )


def test_a_reading_holds_the_values_the_config_holds():
    config = _config()
    reading = read_config(config)
    assert isinstance(reading, ConfigReading) and isinstance(reading.limits, LimitsReading)
    assert reading.config is config
    assert (reading.store_raw_values, reading.idempotency_key_arguments, reading.redaction) == (True, ["key", "meta.key"], config.redaction)
    assert reading.result_error_shapes == [ResultErrorShape(key="outcome", equals="denied")]
    limits = reading.limits
    assert (limits.max_argument_bytes, limits.max_argument_depth, limits.max_related_call_ids, limits.max_tokens_per_value, limits.max_attributes_per_span) == (
        900, 7, 3, 5, 11)
    # Anything else is read through, from the config and from its limits.
    assert (reading.review_db, reading.max_traces, reading.tool_rules) == (config.review_db, config.max_traces, config.tool_rules)
    assert limits.model_dump() == config.limits.model_dump()
    assert read_config(reading) is reading


def test_rule_for_gives_the_configs_rule_for_every_tool():
    config = _config()
    reading = read_config(config)
    for tool in ("pay_invoice", "payments", "get_page", "get_page", "send_email", "", "pay_invoice"):
        assert reading.rule_for(tool) is config.rule_for(tool)
    assert reading.rule_for("pay_invoice").idempotency_key_argument == "order.id"
    assert reading.rule_for("send_email") is None
    assert read_config(TraceFenceConfig()).rule_for("pay_invoice") is None


def _tool_span(span_id: str, tool: str, arguments: str, result: str) -> SpanView:
    return SpanView(
        trace_id="ab" * 16, span_id=span_id, parent_span_id="", name=f"execute_tool {tool}", start_time_unix_nano=int(span_id, 16),
        end_time_unix_nano=int(span_id, 16) + 5,
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.arguments": arguments,
                    "gen_ai.tool.call.result": result},
    )


def test_a_trace_plans_the_same_from_the_config_and_from_its_reading():
    spans = [
        _tool_span("01", "pay_invoice", '{"order": {"id": "ord_1234"}, "amount": 5}', '{"outcome": "denied"}'),
        _tool_span("02", "get_page", '{"key": "pg_8812"}', '{"id": "pg_8812", "text": "' + "x" * 2000 + '"}'),
        _tool_span("03", "pay_invoice", '{"order": {"id": "ord_1234"}, "amount": 6}', '{"ok": true}'),
    ]
    config = _config()
    from_config = normalize_trace(spans, config)
    assert normalize_trace(spans, read_config(config)) == from_config
    steps = {s.span_id: s for s in from_config.steps}
    assert (steps["01"].idempotency_key, steps["01"].status.value, steps["01"].notes) == ("ord_1234", "error", ("error_in_result",))
    assert (steps["02"].result_stable, steps["02"].effect.value, steps["02"].arguments_json) == (False, "read", '{"key":"pg_8812"}')
    assert steps["03"].result_value == '{"ok": true}'
    plan = plan_spans("ab" * 16, spans, config).plan
    assert [(d.step.span_id, d.decision.value, d.reasons) for d in plan.steps] == [
        ("01", "conflict", ("idempotency_key_conflict", "write_error", "error_in_result")),
        ("02", "skip", ("unstable_result", "result_unread")),  # its 2 KB JSON result is over this config's max_argument_bytes (DECISIONS 486)
        ("03", "conflict", ("idempotency_key_conflict",)),
    ]
