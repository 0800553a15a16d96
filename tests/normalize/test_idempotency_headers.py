"""Idempotency evidence on HTTP (and gRPC) requests below a tool step (issue 24, kind B; docs/DECISIONS.md 420-423).

The request's ``Idempotency-Key`` header, recorded as the HTTP semantic conventions record request headers
(``http.request.header.<key>``: lower case, an array of strings) or in the spellings producers use, is the step's
idempotency key when the step records none: two writes sharing one key with different arguments are a key conflict.
Records of the key that disagree hold the step. A response the server says it replayed is noted, never deciding.
Exact decisions, reasons and classes, through the CLI (``tracefence plan`` as a subprocess), the processor and the
service (the door checks of tests/cases/test_cases_doors.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run
from otlp_json_helpers import json_span

from otel_tracefence.normalize.http import KeyEvidence, key_evidence, reconciled_key
from tests.cases.test_cases_doors import test_processor_door_agrees_with_the_cli, test_service_door_agrees_with_the_cli

TRACE = "7e" * 16
ROOT = "a0" * 8
KEY = "payout-V-3391-2026-05"


def _file(path: Path, *spans: dict) -> Path:
    path.write_text(json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "s"}, "spans": list(spans)}]}]}))
    return path


def _at(span: dict, ms: int, kind: int | None = None, length_ms: int = 10) -> dict:
    """``span`` started ``ms`` milliseconds in, ``length_ms`` long, of SpanKind ``kind`` (OTLP numbers: 2 server, 3 client)."""
    start = 1700000000000000000 + ms * 1_000_000
    span["startTimeUnixNano"], span["endTimeUnixNano"] = str(start), str(start + length_ms * 1_000_000)
    if kind is not None:
        span["kind"] = kind
    return span


def _root() -> dict:
    """The agent's span, around every other (the processor decides a trace when its root ends)."""
    return _at(json_span(TRACE, ROOT, "invoke_agent payouts", **{"gen_ai.operation.name": "invoke_agent"}), 0, length_ms=1000)


def _payout(span_id: str, call_id: str, amount: int, ms: int, **extra: Any) -> dict:
    return _at(json_span(TRACE, span_id, "execute_tool payouts.send", ROOT, **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "payouts.send", "gen_ai.tool.call.id": call_id, "tracefence.effect": "write",
        "gen_ai.tool.call.arguments": json.dumps({"vendor": "V-3391", "amount": amount}), "gen_ai.tool.call.result": '{"payout": "po_1"}', **extra}), ms)  # fmt: skip


def _post(span_id: str, parent: str, ms: int, **headers: Any) -> dict:
    return _at(json_span(TRACE, span_id, "POST", parent, **{"http.request.method": "POST", "url.full": "https://api.example/v2/payouts",
                                                             "http.response.status_code": 201, **headers}), ms, 3)  # fmt: skip


def _plan(path: Path) -> dict:
    proc = run("plan", str(path))
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    return json.loads(line)


def _steps(plan: dict) -> list[tuple[str, str, list[str], str | None]]:
    return [(s["step"]["callId"], s["decision"], s["reasons"], s["step"].get("idempotencyKey")) for s in plan["steps"]]


def _doors(path: Path, upstream: Any, tmp_path: Path) -> None:
    """The processor (with and without on_start) and the service annotate every span as the CLI plans it."""
    test_processor_door_agrees_with_the_cli(path, path, False)
    test_processor_door_agrees_with_the_cli(path, path, True)
    test_service_door_agrees_with_the_cli(path, path, upstream, tmp_path)


def _two_payouts(path: Path, first: dict, second: dict, *, second_amount: int = 21500, grandchild: bool = False) -> Path:
    """Two payouts with different amounts, each with an HTTP POST below it carrying ``first`` / ``second`` as its
    header attributes; ``grandchild``: each POST below a plain span of the tool's HTTP library, not the tool span."""
    spans = [_root()]
    for n, (tool_id, call_id, amount, headers) in enumerate((("b1" * 8, "call-1", 12500, first), ("b2" * 8, "call-2", second_amount, second))):
        spans.append(_payout(tool_id, call_id, amount, 100 * (n + 1)))
        parent = tool_id
        if grandchild:
            parent = ("c1", "c2")[n] * 8
            spans.append(_at(json_span(TRACE, parent, "payouts-sdk request", tool_id), 100 * (n + 1) + 1))
        spans.append(_post(("d1", "d2")[n] * 8, parent, 100 * (n + 1) + 2, **headers))
    return _file(path, *spans)


# The spellings of one Idempotency-Key header: the current HTTP conventions (lower case, dashes, an array), the
# pre-1.21 ones (underscores), a plain string, the header's own case, the X- form, the IETF draft's sf-string, and
# gRPC metadata (RPC conventions) on an RPC client span.
SPELLINGS = {
    "semconv-array": {"http.request.header.idempotency-key": [KEY]},
    "underscores": {"http.request.header.idempotency_key": [KEY]},
    "plain-string": {"http.request.header.idempotency-key": KEY},
    "header-case": {"http.request.header.Idempotency-Key": [KEY]},
    "x-form": {"http.request.header.x-idempotency-key": [KEY]},
    "sf-string": {"http.request.header.idempotency-key": [f'"{KEY}"']},
    "padded": {"http.request.header.idempotency-key": [f" {KEY} "]},
}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
@pytest.mark.parametrize("grandchild", [False, True], ids=["child", "grandchild"])
def test_one_key_sent_with_two_amounts_is_a_key_conflict_through_every_door(tmp_path: Path, upstream: Any, spelling: str, grandchild: bool) -> None:
    headers = SPELLINGS[spelling]
    path = _two_payouts(tmp_path / "t.json", headers, headers, grandchild=grandchild)
    plan = _plan(path)
    assert plan["replayClass"] == "review"
    assert _steps(plan) == [
        ("call-1", "conflict", ["idempotency_key_conflict"], KEY),
        ("call-2", "conflict", ["idempotency_key_conflict"], KEY),
    ]
    assert plan["steps"][0]["relatedCallIds"] == ["call-2"]
    if spelling in ("semconv-array", "underscores") and not grandchild:
        _doors(path, upstream, tmp_path)


def test_the_key_in_grpc_metadata_below_a_step_is_read(tmp_path: Path, upstream: Any) -> None:
    spans = [_root()]
    for n, (tool_id, call_id, amount) in enumerate((("b1" * 8, "call-1", 12500), ("b2" * 8, "call-2", 21500))):
        spans.append(_payout(tool_id, call_id, amount, 100 * (n + 1)))
        spans.append(_at(json_span(TRACE, ("d1", "d2")[n] * 8, "payouts.v1.Payouts/Send", tool_id, **{
            "rpc.system": "grpc", "rpc.service": "payouts.v1.Payouts", "rpc.method": "Send", "rpc.grpc.status_code": 0,
            "rpc.grpc.request.metadata.idempotency-key": [KEY]}), 100 * (n + 1) + 2, 3))  # fmt: skip
    path = _file(tmp_path / "g.json", *spans)
    plan = _plan(path)
    assert (plan["replayClass"], _steps(plan)) == ("review", [
        ("call-1", "conflict", ["idempotency_key_conflict"], KEY), ("call-2", "conflict", ["idempotency_key_conflict"], KEY)])  # fmt: skip
    _doors(path, upstream, tmp_path)


def test_one_key_sent_with_the_same_arguments_is_a_repeat_and_other_keys_are_no_conflict(tmp_path: Path) -> None:
    headers = {"http.request.header.idempotency-key": [KEY]}
    plan = _plan(_two_payouts(tmp_path / "same.json", headers, headers, second_amount=12500))
    assert _steps(plan) == [
        ("call-1", "skip", ["write_committed", "repeated_later"], KEY),
        ("call-2", "review", ["repeats_earlier_write"], KEY),
    ]
    plan = _plan(_two_payouts(tmp_path / "other.json", headers, {"http.request.header.idempotency-key": ["payout-V-3391-2026-06"]}))
    assert (plan["replayClass"], _steps(plan)) == ("injected", [
        ("call-1", "skip", ["write_committed"], KEY), ("call-2", "skip", ["write_committed"], "payout-V-3391-2026-06")])  # fmt: skip


def test_a_key_the_step_declares_and_a_different_one_its_request_sent_hold_the_step(tmp_path: Path) -> None:
    spans = [
        _root(),
        _payout("b1" * 8, "call-1", 12500, 100, **{"tracefence.idempotency_key": "declared-1"}),
        _post("d1" * 8, "b1" * 8, 102, **{"http.request.header.idempotency-key": [KEY]}),
    ]
    plan = _plan(_file(tmp_path / "t.json", *spans))
    assert (plan["replayClass"], _steps(plan)) == ("review", [("call-1", "review", ["malformed_idempotency_key"], "declared-1")])
    assert plan["steps"][0]["step"]["malformed"] == [{"field": "idempotency_key", "message": (
        f"the idempotency keys recorded disagree: 'declared-1' (the step's own record), '{KEY}' "
        f"(span {'d1' * 8} ('POST'), http.request.header.idempotency-key)")}]  # fmt: skip
    # The same key declared and sent: one key, nothing held.
    spans[1] = _payout("b1" * 8, "call-1", 12500, 100, **{"tracefence.idempotency_key": KEY})
    plan = _plan(_file(tmp_path / "same.json", *spans))
    assert _steps(plan) == [("call-1", "skip", ["write_committed"], KEY)]


@pytest.mark.parametrize("headers,why", [
    ({"http.request.header.idempotency-key": ["k-1", "k-2"]}, "the request sent several idempotency keys: http.request.header.idempotency-key='k-1', http.request.header.idempotency-key='k-2'"),
    ({"http.request.header.idempotency-key": ["k-1"], "http.request.header.x-idempotency-key": ["k-2"]},
     "the request sent several idempotency keys: http.request.header.idempotency-key='k-1', http.request.header.x-idempotency-key='k-2'"),
    ({"http.request.header.idempotency-key": [""]}, "http.request.header.idempotency-key=[''] holds an empty key"),
    ({"http.request.header.idempotency-key": 7}, "http.request.header.idempotency-key=7 is no string or array of strings"),
], ids=["two-values", "two-headers", "empty", "number"])
def test_headers_that_give_no_one_key_hold_the_step(tmp_path: Path, headers: dict, why: str) -> None:
    spans = [
        _root(),
        _payout("b1" * 8, "call-1", 12500, 100),
        _post("d1" * 8, "b1" * 8, 102, **headers),
    ]
    plan = _plan(_file(tmp_path / "t.json", *spans))
    assert (plan["replayClass"], _steps(plan)) == ("review", [("call-1", "review", ["malformed_idempotency_key"], None)])
    assert plan["steps"][0]["step"]["malformed"] == [{"field": "idempotency_key", "message": f"span {'d1' * 8} ('POST'): {why}"}]


def test_two_requests_of_one_step_sending_different_keys_hold_it(tmp_path: Path) -> None:
    spans = [
        _root(),
        _payout("b1" * 8, "call-1", 12500, 100),
        _post("d1" * 8, "b1" * 8, 102, **{"http.request.header.idempotency-key": ["k-1"]}),
        _at(json_span(TRACE, "d2" * 8, "POST", "b1" * 8, **{"http.request.method": "POST", "url.full": "https://api.example/v2/fees",
                                                          "http.response.status_code": 201, "http.request.header.idempotency-key": ["k-2"]}), 103, 3),  # fmt: skip
    ]
    plan = _plan(_file(tmp_path / "t.json", *spans))
    assert _steps(plan) == [("call-1", "review", ["malformed_idempotency_key"], None)]
    assert plan["steps"][0]["step"]["malformed"][0]["message"] == (
        f"the idempotency keys recorded disagree: 'k-1' (span {'d1' * 8} ('POST') (http.request.header.idempotency-key)), "
        f"'k-2' (span {'d2' * 8} ('POST'), http.request.header.idempotency-key)")  # fmt: skip


@pytest.mark.parametrize("marker", [{"http.response.header.idempotent-replayed": ["true"]}, {"http.response.header.Idempotent-Replayed": "True"},
                                    {"http.response.header.idempotent_replayed": ["true"]}], ids=["semconv", "case", "underscores"])  # fmt: skip
def test_a_replayed_response_is_noted_and_decides_nothing(tmp_path: Path, upstream: Any, marker: dict) -> None:
    spans = [
        _root(),
        _payout("b1" * 8, "call-1", 12500, 100),
        _post("d1" * 8, "b1" * 8, 102, **{"http.request.header.idempotency-key": [KEY], **marker}),
    ]
    path = _file(tmp_path / "t.json", *spans)
    plan = _plan(path)
    assert (plan["replayClass"], _steps(plan)) == ("injected", [("call-1", "skip", ["write_committed", "response_replayed"], KEY)])
    # "false" (or any other value) is no marker.
    spans[2] = _post("d1" * 8, "b1" * 8, 102, **{"http.request.header.idempotency-key": [KEY], "http.response.header.idempotent-replayed": ["false"]})
    assert _steps(_plan(_file(tmp_path / "f.json", *spans))) == [("call-1", "skip", ["write_committed"], KEY)]
    if "http.response.header.idempotent-replayed" in marker:
        _doors(path, upstream, tmp_path)


def test_a_replayed_response_never_lifts_a_hold(tmp_path: Path) -> None:
    # Same key and arguments twice, the second answered as a replay: still held as a possible second effect (the
    # marker is the server's word about one request; the rules that hold stand, DECISIONS 422).
    headers = {"http.request.header.idempotency-key": [KEY]}
    plan = _plan(_two_payouts(tmp_path / "t.json", headers, {**headers, "http.response.header.idempotent-replayed": ["true"]}, second_amount=12500))
    assert _steps(plan) == [
        ("call-1", "skip", ["write_committed", "repeated_later"], KEY),
        ("call-2", "review", ["repeats_earlier_write", "response_replayed"], KEY),
    ]


def test_the_key_on_a_tool_span_that_is_itself_the_http_request_is_read(tmp_path: Path, upstream: Any) -> None:
    spans = [_root()]
    for n, (tool_id, call_id, amount) in enumerate((("b1" * 8, "call-1", 12500), ("b2" * 8, "call-2", 21500))):
        spans.append(_at(_payout(tool_id, call_id, amount, 0, **{"http.request.method": "POST", "url.full": "https://api.example/v2/payouts",
                                                                 "http.response.status_code": 201, "http.request.header.idempotency_key": [KEY]}), 100 * (n + 1), 3))  # fmt: skip
    path = _file(tmp_path / "t.json", *spans)
    plan = _plan(path)
    assert _steps(plan) == [("call-1", "conflict", ["idempotency_key_conflict"], KEY), ("call-2", "conflict", ["idempotency_key_conflict"], KEY)]
    _doors(path, upstream, tmp_path)


def test_key_evidence_reads_only_the_named_headers() -> None:
    assert key_evidence({"http.request.method": "POST", "http.request.header.content-type": ["application/json"]}) is None
    assert key_evidence({"http.response.header.idempotency-key": [KEY]}) is None  # a response header is no request's key
    assert key_evidence({"http.request.header.idempotent-replayed": ["true"]}) is None  # nor a request header a replay
    assert key_evidence({"rpc.request.metadata.idempotency-key": [KEY]}) == KeyEvidence(KEY, None, False, "rpc.request.metadata.idempotency-key")
    assert key_evidence({"http.request.header.idempotency-key": [KEY, KEY]}) == KeyEvidence(KEY, None, False, "http.request.header.idempotency-key")
    assert key_evidence({"http.response.header.x-idempotent-replayed": ["true"]}) == KeyEvidence(None, None, True)
    # The step's own key stands when the requests send none; the requests' is the step's when it records none.
    assert reconciled_key("k", [("span x", KeyEvidence(None, None, True))]) == ("k", None)
    assert reconciled_key(None, [("span x", KeyEvidence("k", None, False, "h"))]) == ("k", None)


def test_a_late_request_carrying_the_key_gives_the_late_step_its_key(tmp_path: Path) -> None:
    """A POST below a payout that ends after its trace was decided (the processor, no wait): the step, fenced as
    decided before complete, carries the key the late request sent (trace.late_request reads it as in time)."""
    from opentelemetry import trace as otel_trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
    from otel_tracefence.review.store import SQLiteReviewStore
    from otel_tracefence.sdk import TraceFenceSpanProcessor

    exporter = InMemorySpanExporter()
    store = SQLiteReviewStore(tmp_path / "review.db")
    processor = TraceFenceSpanProcessor(SimpleSpanProcessor(exporter), review_sink=store, decision_wait_ms=0)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("agent")
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "payouts.send", "gen_ai.tool.call.id": "call-1", "tracefence.effect": "write",
            "gen_ai.tool.call.arguments": '{"amount": 12500}', "gen_ai.tool.call.result": "{}"}  # fmt: skip
    with tracer.start_as_current_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}):
        outer = tracer.start_span("execute_tool payouts.send", attributes=tool)
        with otel_trace.use_span(outer, end_on_exit=False):
            post = tracer.start_span("POST", kind=otel_trace.SpanKind.CLIENT, attributes={
                "http.request.method": "POST", "url.full": "https://api.example/v2/payouts", "http.response.status_code": 201,
                "http.request.header.idempotency-key": (KEY,), "http.response.header.idempotent-replayed": ("true",)})  # fmt: skip
        outer.end()
    post.end()
    (item,) = store.list()[0]
    (decision,) = item.plan.steps
    assert (decision.step.call_id, decision.step.idempotency_key, decision.decision, list(decision.reasons)) == (
        "call-1", KEY, pb.DECISION_REVIEW, ["decided_before_complete", "response_replayed"])  # fmt: skip
    provider.shutdown()
    store.close()
