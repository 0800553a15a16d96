"""A hinted or rule-given read contradicted by what the trace shows (issue 24, kind E; docs/DECISIONS.md 424).

MCP's tool annotations are untrusted hints: an HTTP client span below a read whose effect came from ``readOnlyHint``,
a safe HTTP method on its span or the operator's tool rule (matched by name) that sends a method that is not safe
(RFC 9110 section 9.2.1) is evidence the tool writes: the step is held, ``effect_contradicted_by_dispatch``, naming
the span. A read the producer declared (``tracefence.effect=read``) is held the same (DECISIONS 989); RPC requests and an MCP
client's own transport requests contradict nothing. Exact decisions, reasons and classes through the three doors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run
from otlp_json_helpers import json_span

from otel_tracefence.pipeline.documents import plan_text
from otel_tracefence.core.config import TraceFenceConfig, ToolRule
from tests.normalize.test_idempotency_headers import TRACE, ROOT, _at, _doors, _file, _root

TOOL = "b1" * 8
HINTED = {"mcp.tool.annotations.readOnlyHint": True}


def _lookup(span_id: str = TOOL, ms: int = 100, tool: str = "crm.lookup", **labels: Any) -> dict:
    return _at(json_span(TRACE, span_id, f"execute_tool {tool}", ROOT, **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool, "gen_ai.tool.call.id": f"call-{span_id[:2]}",
        "gen_ai.tool.call.arguments": '{"customer": "acme"}', "gen_ai.tool.call.result": '{"name": "Acme"}', **labels}), ms)  # fmt: skip


def _request(span_id: str, parent: str, method: str, ms: int = 102, url: str = "https://crm.example/v1/customers/acme/touch", kind: int = 3, **extra: Any) -> dict:
    return _at(json_span(TRACE, span_id, method, parent, **{"http.request.method": method, "url.full": url, "http.response.status_code": 200, **extra}), ms, kind)


def _plan(path: Path) -> dict:
    proc = run("plan", str(path))
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    return json.loads(line)


def _steps(plan: dict) -> list[tuple[str, str, list[str]]]:
    return [(s["step"]["tool"], s["decision"], s["reasons"]) for s in plan["steps"]]


def _why(request_span: str, method: str, source: str = "mcp_hint", url: str = "https://crm.example/v1/customers/acme/touch", more: str = "") -> list[dict]:
    return [{"field": "effect", "message": (f"the step's effect is read by {source}, but span {request_span} ({method!r}) below it sent {method} {url}{more}: "
                                            "a method that is not safe is evidence the tool writes")}]  # fmt: skip


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "_OTHER"])
def test_a_readonly_hinted_read_that_sends_an_unsafe_method_is_held_through_every_door(tmp_path: Path, upstream: Any, method: str) -> None:
    path = _file(tmp_path / "t.json", _root(), _lookup(**HINTED), _request("d1" * 8, TOOL, method))
    plan = _plan(path)
    assert (plan["replayClass"], _steps(plan)) == ("review", [("crm.lookup", "review", ["effect_contradicted_by_dispatch"])])
    assert plan["steps"][0]["step"]["effect"] == "read" and plan["steps"][0]["step"]["effectSource"] == "mcp_hint"
    assert plan["steps"][0]["step"]["malformed"] == _why("d1" * 8, method)
    if method in ("POST", "DELETE"):
        _doors(path, upstream, tmp_path)


def test_safe_methods_below_a_hinted_read_contradict_nothing(tmp_path: Path, upstream: Any) -> None:
    spans = [_root(), _lookup(**HINTED)] + [_request(f"d{n}" * 8, TOOL, method, 102 + n) for n, method in enumerate(("GET", "HEAD", "OPTIONS"), 1)]
    path = _file(tmp_path / "t.json", *spans)
    assert _steps(plan := _plan(path)) == [("crm.lookup", "replay", ["hinted_read"])] and plan["replayClass"] == "dynamic"
    _doors(path, upstream, tmp_path)


@pytest.mark.parametrize("source", ["declared", "config"])
def test_a_declared_read_is_held_as_a_rule_given_one_is(source: str) -> None:
    # One rule for the producer's declaration and the operator's tool rule (DECISIONS 989, was 424's exemption).
    url = "https://api.stripe.com/v1/charges"
    labels = {"tracefence.effect": "read"} if source == "declared" else {}
    spans = [_root(), _lookup(**labels), _request("d1" * 8, TOOL, "POST", url=url)]
    text = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": spans}]}]})
    config = TraceFenceConfig(tool_rules=[ToolRule(match="crm.*", effect="read")] if source == "config" else [])
    (plan,), errors = plan_text(text, "auto", config)
    assert [(e.field, e.span_id, e.planned) for e in errors] == [("effect", TOOL, True)]
    assert (plan.replay_class.value, [(d.step.effect.value, d.step.effect_source.value, d.decision.value, d.reasons) for d in plan.steps]) == (
        "review", [("read", source, "review", ("effect_contradicted_by_dispatch",))])
    assert plan.steps[0].step.malformed[0].message == _why("d1" * 8, "POST", source, url)[0]["message"]


def test_a_declared_read_with_a_get_below_it_replays(tmp_path: Path) -> None:
    plan = _plan(_file(tmp_path / "t.json", _root(), _lookup(**{"tracefence.effect": "read"}), _request("d1" * 8, TOOL, "GET")))
    assert _steps(plan) == [("crm.lookup", "replay", ["declared_read"])] and plan["replayClass"] == "dynamic"


def test_the_request_may_be_a_grandchild_and_the_first_one_is_named(tmp_path: Path) -> None:
    spans = [_root(), _lookup(**HINTED), _at(json_span(TRACE, "c1" * 8, "crm-sdk call", TOOL), 101),
             _request("d2" * 8, "c1" * 8, "PATCH", 104), _request("d1" * 8, "c1" * 8, "POST", 103)]  # fmt: skip
    plan = _plan(_file(tmp_path / "t.json", *spans))
    assert _steps(plan) == [("crm.lookup", "review", ["effect_contradicted_by_dispatch"])]
    assert plan["steps"][0]["step"]["malformed"] == _why("d1" * 8, "POST", more=" (and 1 more request(s) with a method that is not safe)")


def test_a_safe_method_on_the_tool_span_is_a_hint_a_post_below_contradicts(tmp_path: Path) -> None:
    tool = _at(json_span(TRACE, TOOL, "GET /customers", ROOT, **{"openinference.span.kind": "TOOL", "tool.name": "crm.lookup", "http.request.method": "GET",
                                                               "input.value": '{"customer": "acme"}', "output.value": '{"name": "Acme"}'}), 100, 3)  # fmt: skip
    plan = _plan(_file(tmp_path / "t.json", _root(), tool, _request("d1" * 8, TOOL, "POST")))
    assert _steps(plan) == [("crm.lookup", "review", ["effect_contradicted_by_dispatch"])]
    assert plan["steps"][0]["step"]["malformed"] == _why("d1" * 8, "POST", source="http_method")


def test_a_read_the_operators_tool_rule_gives_is_contradicted_too(tmp_path: Path) -> None:
    text = json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": [_root(), _lookup(), _request("d1" * 8, TOOL, "DELETE")]}]}]})
    config = TraceFenceConfig(tool_rules=[ToolRule(match="crm.*", effect="read")])
    (plan,), errors = plan_text(text, "auto", config)
    assert [(e.field, e.span_id, e.planned) for e in errors] == [("effect", TOOL, True)]  # named, as every held malformed field is
    assert [(d.step.effect.value, d.step.effect_source.value, d.decision.value, d.reasons) for d in plan.steps] == [
        ("read", "config", "review", ("effect_contradicted_by_dispatch",))]
    assert plan.steps[0].step.malformed[0].message == _why("d1" * 8, "DELETE", source="config")[0]["message"]


def test_rpc_requests_contradict_no_read(tmp_path: Path) -> None:
    rpc = _at(json_span(TRACE, "d1" * 8, "crm.v1.Customers/Get", TOOL, **{"rpc.system": "grpc", "rpc.service": "crm.v1.Customers", "rpc.method": "Get",
                                                                       "rpc.grpc.status_code": 0}), 102, 3)  # fmt: skip
    assert _steps(_plan(_file(tmp_path / "t.json", _root(), _lookup(**HINTED), rpc))) == [("crm.lookup", "replay", ["hinted_read"])]


def test_an_mcp_clients_transport_post_contradicts_nothing_but_the_servers_own_request_does(tmp_path: Path, upstream: Any) -> None:
    # langchain-mcp-adapters over streamable HTTP: the step, the MCP client span (tools/call), its transport POST
    # /mcp. Below the MCP server span, the handler's own POST is the tool's effect.
    client = _at(json_span(TRACE, "c1" * 8, "tools/call crm.lookup", TOOL, **{"mcp.method.name": "tools/call", "gen_ai.tool.name": "crm.lookup"}), 101, 3)
    transport = _request("d1" * 8, "c1" * 8, "POST", url="https://mcp.example/mcp")
    path = _file(tmp_path / "t.json", _root(), _lookup(**HINTED), client, transport)
    assert _steps(_plan(path)) == [("crm.lookup", "replay", ["hinted_read"])]
    _doors(path, upstream, tmp_path)
    server = _at(json_span(TRACE, "e1" * 8, "tools/call crm.lookup", "d1" * 8, **{"mcp.method.name": "tools/call", "gen_ai.tool.name": "crm.lookup"}), 103, 2)
    own = _request("f1" * 8, "e1" * 8, "POST", 104)
    plan = _plan(_file(tmp_path / "s.json", _root(), _lookup(**HINTED), client, transport, server, own))
    assert _steps(plan) == [("crm.lookup", "review", ["effect_contradicted_by_dispatch"])]
    assert plan["steps"][0]["step"]["malformed"] == _why("f1" * 8, "POST")
    # An MCP step span (the client's tools/call span itself is the step) with its transport POST below: no contradiction.
    step = _at(json_span(TRACE, TOOL, "tools/call crm.lookup", ROOT, **{"mcp.method.name": "tools/call", "gen_ai.tool.name": "crm.lookup", **HINTED,
                                                                      "gen_ai.tool.call.arguments": '{"customer": "acme"}'}), 100, 3)  # fmt: skip
    plan = _plan(_file(tmp_path / "m.json", _root(), step, _request("d1" * 8, TOOL, "POST", url="https://mcp.example/mcp")))
    assert [(tool, decision) for tool, decision, _ in _steps(plan)] == [("crm.lookup", "replay")]


def test_a_request_below_a_model_span_inside_the_tool_is_not_the_tools(tmp_path: Path) -> None:
    # A read tool that asks a model (its own chat span) POSTs to the model's API: that request is the model's.
    chat = _at(json_span(TRACE, "c1" * 8, "chat gpt-4.1", TOOL, **{"gen_ai.operation.name": "chat"}), 101)
    post = _request("d1" * 8, "c1" * 8, "POST", url="https://api.openai.example/v1/chat/completions")
    assert _steps(_plan(_file(tmp_path / "t.json", _root(), _lookup(**HINTED), chat, post))) == [("crm.lookup", "replay", ["hinted_read"])]
