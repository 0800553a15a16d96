"""Security: what is stored (hashes by default, redacted raw values on opt-in), the bearer-token
check, TLS with the review API on its own address, and every input limit with its exact outcome.

Covered elsewhere and referenced from SECURITY.md, not repeated here:
``tests/service/test_service.py::test_bearer_token`` (missing / wrong token on Export and the review API,
health without a token), ``::test_tls_with_a_test_certificate`` (the SDK exporter and the review
CLI over TLS, plaintext refused), ``::test_tls_half_configured_fails_closed...``,
``::test_review_api_on_its_own_address`` (plaintext), ``::test_a_request_above_max_message_bytes_is_resource_exhausted``,
``::test_huge_attributes_are_accepted_and_oversized_arguments_reported``, and
``tests/review/test_review_store.py::test_raw_values_are_stripped_by_default`` (the store's own stripping).
"""

from __future__ import annotations

import hashlib
import json
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence._proto.tracefence.v1 import tracefence_pb2_grpc as pb_grpc
from otel_tracefence.core.canonical import canonicalize
from otel_tracefence.core.config import ConfigError, ServiceSettings, TraceFenceConfig, UpstreamSettings, load_config
from otel_tracefence.agent.instrument import tool_call
from otel_tracefence.core.model import Decision
from otel_tracefence.normalize import normalize_trace
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.normalize.values import arguments_from_value, kept_arguments
from otel_tracefence.planner import plan_trace
from otel_tracefence.readers.rows import read_rows
from otel_tracefence.core.redact import DEFAULT_KEYS, REDACTED, Redaction, luhn_valid, redact_result_text, redact_value
from otel_tracefence.review.store import SQLiteReviewStore
from otel_tracefence.sdk import TraceFenceSpanProcessor
from otel_tracefence.core import exposure
from otel_tracefence.service import auth as auth_module
from otel_tracefence.service.server import TraceFenceService
from service_helpers import (
    attrs,
    clean_env,
    make_certificate,
    raw_request,
    raw_tool_span,
    tf_attrs,
    trace_stub,
    tracefence,
    wait_for,
)

# -- a realistic tool call full of secrets --------------------------------------------------------

PASSWORD = "Tr0ub4dor&3-horse-battery"
API_KEY = "sk_live_51HxQ2eKx9mZpL3vR7tYw0aB"
BASIC_AUTH = "Basic YWRhOmNvcnJlY3QtaG9yc2UtYmF0dGVyeQ=="
CARD = "4539 1488 0343 6467"  # a Luhn-valid test Visa number, written as people write it
BEARER = "ghp_R2d2C3poBB8yKz1Lq0Wm4Xn7Vt6Us5"
COOKIE = "sid=8f1e2d3c4b5a69788796a5b4; HttpOnly; Secure"

CHARGE = "payments.charge"
CHARGE_ARGS = {
    "customer_id": "cus_8842",
    "amount_cents": 1250,
    "password": PASSWORD,
    "api_key": API_KEY,
    "http": {
        "method": "POST",
        "url": "https://payments.example/v1/charges",
        "headers": {"Authorization": BASIC_AUTH, "Content-Type": "application/json"},
    },
    "note": f"Customer called: please charge card {CARD} for order 17, thanks",
    "idempotency_key": "order-17",
}
CHARGE_ARGS_REDACTED = {
    **CHARGE_ARGS,
    "password": REDACTED,
    "api_key": REDACTED,
    "http": {**CHARGE_ARGS["http"], "headers": {"Authorization": REDACTED, "Content-Type": "application/json"}},
    "note": f"Customer called: please charge card {REDACTED} for order 17, thanks",
}
NOTE = "crm.add_note"
NOTE_ARGS = {"customer_id": "cus_8842", "text": "Card declined twice; customer will call back"}
NOTE_RESULT = {
    "note_id": "note_5521",
    "debug": f"crm answered 201 to the call made with Bearer {BEARER} after one retry",
    "session": {"Set-Cookie": COOKIE},
}
NOTE_RESULT_REDACTED = {
    "note_id": "note_5521",
    "debug": f"crm answered 201 to the call made with Bearer {REDACTED} after one retry",
    "session": {"Set-Cookie": REDACTED},
}
SECRETS = (PASSWORD, API_KEY, BASIC_AUTH, CARD, CARD.replace(" ", ""), BEARER, COOKIE, "8f1e2d3c4b5a69788796a5b4")


def canonical(value: Any) -> str:
    """RFC 8785 for values of ASCII keys, strings and small integers: sorted keys, no spaces."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def leaves(value: Any) -> list[str]:
    """Every string in a JSON value, keys aside."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in leaves(v)]
    if isinstance(value, list):
        return [s for v in value for s in leaves(v)]
    return [value] if isinstance(value, str) else []


# Every raw string an argument or result holds, but the idempotency key: the review item keeps
# that one by design (a reviewer reconciles with it), and the producer declared it as an attribute.
RAW_STRINGS = sorted({s for s in leaves(CHARGE_ARGS) + leaves(NOTE_ARGS) + leaves(NOTE_RESULT) if len(s) >= 6 and s != "order-17"})


def db_files(db: Path) -> dict[str, tuple[str, bytes]]:
    """The database and its -wal / -shm files: name -> (mode, every byte)."""
    return {p.name: (oct(stat.S_IMODE(p.stat().st_mode)), p.read_bytes()) for p in sorted(db.parent.iterdir()) if p.name.startswith(db.name)}


def billing_turn(provider: TracerProvider) -> str:
    """An agent turn: a payment that timed out (arguments full of secrets) and a committed note
    whose recorded result holds a bearer token and a cookie. Returns the trace id."""
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("invoke_agent billing", attributes={"gen_ai.operation.name": "invoke_agent"}) as root:
        try:
            with tool_call(CHARGE, effect="write", idempotency_key="order-17", arguments=CHARGE_ARGS, call_id="call_charge", tracer_provider=provider):
                raise TimeoutError("payments gateway did not answer")
        except TimeoutError:
            pass
        with tool_call(NOTE, effect="write", idempotency_key="note-17", arguments=NOTE_ARGS, call_id="call_note", record_result=True, tracer_provider=provider) as call:
            call.set_result(NOTE_RESULT)
    return format(root.get_span_context().trace_id, "032x")


def run_processor(db: Path, **settings: Any) -> tuple[str, list, dict[str, tuple[str, bytes]]]:
    """One billing turn through the span processor with a real SQLite review queue: the trace id,
    the exported spans, and the database files read while the store was still open (the item in the WAL)."""
    exported = InMemorySpanExporter()
    processor = TraceFenceSpanProcessor(SimpleSpanProcessor(exported), review_db=str(db), **settings)
    provider = TracerProvider(resource=Resource.create({"service.name": "billing-agent"}))
    provider.add_span_processor(processor)
    trace_id = billing_turn(provider)
    open_files = wait_for(lambda: (files := db_files(db)) and f"{db.name}-wal" in files and trace_id.encode() in files[f"{db.name}-wal"][1] and files, what="the review item in the WAL")
    provider.shutdown()
    return trace_id, list(exported.get_finished_spans()), open_files


OUR_ANNOTATIONS = ("tracefence.replay.class", "tracefence.plan.schema_version", "tracefence.step.", "tracefence.trace.")


def our_annotations(span) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in span.attributes.items() if k.startswith(OUR_ANNOTATIONS)}


# -- 1. hashes only by default -----------------------------------------------------------------------


def test_by_default_neither_the_review_queue_nor_the_annotations_hold_a_raw_value(tmp_path):
    db = tmp_path / "review.db"
    trace_id, spans, open_files = run_processor(db)
    by_name = {s.name: s for s in spans}
    # The producer's own attributes are handed on as they came (we never change them) ...
    assert json.loads(by_name[f"execute_tool {CHARGE}"].attributes["gen_ai.tool.call.arguments"]) == CHARGE_ARGS
    # ... and what we add is decisions, reasons, ids and labels: no argument or result value.
    assert our_annotations(by_name[f"execute_tool {CHARGE}"]) == {
        "tracefence.replay.class": "review",
        "tracefence.plan.schema_version": "1",
        "tracefence.step.decision": "review",
        "tracefence.step.reasons": ["write_timeout"],
        "tracefence.step.related_call_ids": [],
        "tracefence.step.effect": "write",
        "tracefence.step.status": "timeout",
    }
    added = json.dumps([our_annotations(s) for s in spans], default=list)
    for raw in RAW_STRINGS + list(SECRETS):
        assert raw not in added, raw
    # The review queue: every byte of the SQLite file and its WAL (only their owner can read them),
    # while the store is open (the item in the WAL) and after it closed (checkpointed into the file).
    assert {name: mode for name, (mode, _) in open_files.items()} == {"review.db": "0o600", "review.db-shm": "0o600", "review.db-wal": "0o600"}
    for files in (open_files, db_files(db)):
        data = b"".join(content for _, content in files.values())
        assert trace_id.encode() in data and b"call_charge" in data  # the item is there ...
        for raw in RAW_STRINGS + list(SECRETS):
            assert raw.encode() not in data, raw  # ... without a raw value
    with SQLiteReviewStore(db, create=False) as store:
        item = store.get(trace_id)
    steps = {d.step.call_id: d.step for d in item.plan.steps}
    assert steps["call_charge"].arguments_json == "" and steps["call_note"].result_value == ""
    assert steps["call_charge"].arguments_sha256 == sha256(canonical(CHARGE_ARGS))  # the hash of the original
    assert steps["call_note"].result_sha256 == sha256(by_name[f"execute_tool {NOTE}"].attributes["gen_ai.tool.call.result"])


# -- 2. raw values on opt-in: redacted, hashes of the originals ----------------------------------------


def test_opted_in_raw_values_are_redacted_in_the_review_item_and_the_cli_json(tmp_path):
    db = tmp_path / "review.db"
    trace_id, spans, open_files = run_processor(db, store_raw_values=True)
    by_name = {s.name: s for s in spans}
    recorded_result = by_name[f"execute_tool {NOTE}"].attributes["gen_ai.tool.call.result"]
    # We never change the producer's attributes, redaction or not: they go on as they came.
    assert json.loads(by_name[f"execute_tool {CHARGE}"].attributes["gen_ai.tool.call.arguments"]) == CHARGE_ARGS
    assert json.loads(recorded_result) == NOTE_RESULT

    with SQLiteReviewStore(db, create=False) as store:
        item = store.get(trace_id)
    steps = {d.step.call_id: d.step for d in item.plan.steps}
    charge, note = steps["call_charge"], steps["call_note"]
    assert charge.arguments_json == canonical(CHARGE_ARGS_REDACTED)
    assert charge.arguments_sha256 == sha256(canonical(CHARGE_ARGS))  # the unredacted canonical arguments
    assert charge.arguments_sha256 != sha256(canonical(CHARGE_ARGS_REDACTED))
    assert note.arguments_json == canonical(NOTE_ARGS)  # nothing secret: kept as is
    assert json.loads(note.result_value) == NOTE_RESULT_REDACTED
    assert note.result_sha256 == sha256(recorded_result)  # the result as recorded, before redaction
    for files in (open_files, db_files(db)):
        data = b"".join(content for _, content in files.values())
        assert b"cus_8842" in data and REDACTED.encode() in data  # raw values are kept ...
        for secret in SECRETS:
            assert secret.encode() not in data, secret  # ... but no secret, in the file or its WAL

    # `tracefence review show --format json` prints the same redacted item.
    shown = tracefence("review", "show", trace_id, "--db", str(db), "--format", "json")
    assert shown.returncode == 0, shown.stderr
    cli_steps = {s["step"]["callId"]: s["step"] for s in json.loads(shown.stdout)["plan"]["steps"]}
    assert cli_steps["call_charge"]["argumentsJson"] == canonical(CHARGE_ARGS_REDACTED)
    assert cli_steps["call_charge"]["argumentsSha256"] == sha256(canonical(CHARGE_ARGS))
    assert json.loads(cli_steps["call_note"]["resultValue"]) == NOTE_RESULT_REDACTED
    for secret in SECRETS:
        assert secret not in shown.stdout


def test_opted_in_raw_values_are_redacted_in_tracefence_plan_json(tmp_path):
    rows = tmp_path / "calls.ndjson"
    rows.write_text(
        "\n".join(
            json.dumps(row)
            for row in (
                {"trace_id": "t1", "call_id": "c1", "tool": CHARGE, "effect": "write", "status": "timeout", "arguments": CHARGE_ARGS},
                {"trace_id": "t1", "call_id": "c2", "tool": NOTE, "effect": "write", "status": "ok", "arguments": NOTE_ARGS, "result": NOTE_RESULT},
            )
        )
    )
    raw = tracefence("plan", str(rows), OTEL_TRACEFENCE_STORE_RAW_VALUES="true")
    hashed = tracefence("plan", str(rows))
    assert raw.returncode == hashed.returncode == 0, raw.stderr + hashed.stderr
    raw_steps = [d["step"] for d in json.loads(raw.stdout)["steps"]]
    hashed_steps = [d["step"] for d in json.loads(hashed.stdout)["steps"]]
    assert raw_steps[0]["argumentsJson"] == canonical(CHARGE_ARGS_REDACTED)
    assert raw_steps[1]["resultValue"] == canonical(NOTE_RESULT_REDACTED)  # a structured result: canonical JSON
    assert [s["argumentsJson"] for s in hashed_steps] == ["", ""] and hashed_steps[1]["resultValue"] == ""
    # The same hashes with or without raw values, and they are the originals'.
    assert [s["argumentsSha256"] for s in raw_steps] == [s["argumentsSha256"] for s in hashed_steps] == [sha256(canonical(CHARGE_ARGS)), sha256(canonical(NOTE_ARGS))]
    assert raw_steps[1]["resultSha256"] == hashed_steps[1]["resultSha256"] == sha256(canonical(NOTE_RESULT))
    for secret in SECRETS:
        assert secret not in raw.stdout and secret not in hashed.stdout


def test_redaction_never_makes_two_different_calls_compare_equal():
    """Same tool and idempotency key, different passwords: the redacted texts are equal, the hashes
    are not, and the planner still fences the pair as a key conflict."""
    config = TraceFenceConfig(store_raw_values=True)
    rows = "\n".join(
        json.dumps({"trace_id": "t", "call_id": cid, "tool": "accounts.reset", "effect": "write", "status": "ok", "idempotency_key": "r-1", "arguments": {"user": "ada", "password": pw}})
        for cid, pw in (("c1", "first-Passw0rd"), ("c2", "second-Passw0rd"))
    )
    read = read_rows(rows, "ndjson", config)
    assert not read.errors
    plan = plan_trace("t", read.steps["t"])
    first, second = (d.step for d in plan.steps)
    assert first.arguments_json == second.arguments_json == '{"password":"[REDACTED]","user":"ada"}'
    assert first.arguments_sha256 != second.arguments_sha256
    assert [(d.decision, d.reasons, d.related_call_ids) for d in plan.steps] == [
        # "second-Passw0rd" has the shape of an id (normalize/tokens.py) and first appears in c2, after c1's
        # unrecorded result: the data-flow notes say c2 may have used it, through hashes only.
        (Decision.CONFLICT, ("idempotency_key_conflict", "result_not_recorded", "unrecorded_result_may_be_consumed"), ("c2",)),
        (Decision.CONFLICT, ("idempotency_key_conflict", "result_not_recorded", "may_consume_unrecorded_result"), ("c1",)),
    ]


def test_the_service_door_redacts_through_the_same_normalizer(tmp_path, serve, upstream):
    service = serve(top={"store_raw_values": True})
    tid, sid = bytes.fromhex("5e" * 16), b"\x01" * 8
    span = raw_tool_span(tid, sid, CHARGE, effect="write", status="timeout", **{"gen_ai.tool.call.arguments": json.dumps(CHARGE_ARGS), "gen_ai.tool.call.id": "call_charge"})
    channel, stub = trace_stub(f"127.0.0.1:{service.port}")
    with channel:
        stub.Export(raw_request(span), timeout=5)
        received = upstream.wait_spans(1, tid.hex())
        review = pb_grpc.ReviewServiceStub(channel)
        item = wait_for(lambda: _get_item(review, tid.hex()), what="review item")
    assert json.loads(attrs(received[0].span.attributes)["gen_ai.tool.call.arguments"]) == CHARGE_ARGS  # forwarded as it came
    assert tf_attrs(received[0].span)["tracefence.step.reasons"] == ["write_timeout"]
    step = item.plan.steps[0].step
    assert (step.arguments_json, step.arguments_sha256) == (canonical(CHARGE_ARGS_REDACTED), sha256(canonical(CHARGE_ARGS)))


def _get_item(review, trace_id: str):
    try:
        return review.GetReviewItem(pb.GetReviewItemRequest(trace_id=trace_id), timeout=5)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.NOT_FOUND:
            return None
        raise


# -- redaction rules -----------------------------------------------------------------------------------


def test_default_keys_match_at_any_depth_whatever_the_case_dashes_or_underscores():
    value = {
        "Password": "a",
        "X_API_KEY": "b",
        "apiKey": "c",
        "Access-Token": {"nested": "whole object"},
        "list": [{"CVV": 123}, {"client_secret": ["x", "y"]}, {"ssn": None}],
        "deep": {"a": {"b": {"c": {"Set-Cookie": "x"}}}},
        "max_tokens": 5,
        "tokenizer": "cl100k",
        "passwordless": True,
    }
    assert redact_value(value, Redaction()) == (
        {
            "Password": REDACTED,
            "X_API_KEY": REDACTED,
            "apiKey": REDACTED,
            "Access-Token": REDACTED,
            "list": [{"CVV": REDACTED}, {"client_secret": REDACTED}, {"ssn": REDACTED}],
            "deep": {"a": {"b": {"c": {"Set-Cookie": REDACTED}}}},
            "max_tokens": 5,  # keys match whole, not as substrings ...
            "tokenizer": "cl100k",
            "passwordless": True,
        },
        True,
    )
    # ... unless a configured key is a glob.
    assert redact_value({"db_password": "x", "passwordless": True}, Redaction(keys=["*password*"]))[0] == {"db_password": REDACTED, "passwordless": REDACTED}
    assert set(DEFAULT_KEYS) >= {"password", "token", "authorization", "api_key", "cookie", "card_number", "cvv", "ssn"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pay with 4242424242424242 now", f"pay with {REDACTED} now"),
        ("pay with 4242 4242 4242 4242 now", f"pay with {REDACTED} now"),
        ("pay with 4242-4242-4242-4242.", f"pay with {REDACTED}."),
        ("amex 3782 822463 10005", f"amex {REDACTED}"),  # 15 digits
        ("order 100 4111 1111 1111 1111 done", f"order 100 {REDACTED} done"),  # the card inside a longer run
        ("4242 4242 4242 4241", "4242 4242 4242 4241"),  # fails the Luhn check
        ("424242424242", "424242424242"),  # 12 digits: too short
        ("42424242424242424242", "42424242424242424242"),  # 20 digits, no groups: not a card
        ("call +1 415 555 2671 on 2024-01-15", "call +1 415 555 2671 on 2024-01-15"),
        ("Authorization: Bearer eyJhbGciOi.eyJzdWIi.SflKxw-_~+/==", f"Authorization: Bearer {REDACTED}"),
        ("bearer abc123", f"bearer {REDACTED}"),  # the scheme is case-insensitive
        ("no token here", "no token here"),
    ],
)
def test_value_patterns_in_free_text(text, expected):
    assert redact_result_text(text, Redaction()) == expected


def test_card_numbers_as_integers_and_json_inside_strings():
    value = {"n": 4242424242424242, "ts_ms": 1700000000123, "body": '{"password": "x", "n": 1}', "plain": "[not json"}
    assert luhn_valid("4242424242424242") and not luhn_valid("1700000000123")
    assert redact_value(value, Redaction())[0] == {"n": REDACTED, "ts_ms": 1700000000123, "body": '{"password":"[REDACTED]","n":1}', "plain": "[not json"}


def test_redaction_can_be_narrowed_or_switched_off():
    value = {"password": "p", "pin": "1234", "note": "card 4242 4242 4242 4242, Bearer abc"}
    assert redact_value(value, Redaction(extra_keys=["PIN"]))[0] == {"password": REDACTED, "pin": REDACTED, "note": f"card {REDACTED}, Bearer {REDACTED}"}
    assert redact_value(value, Redaction(keys=["pin"], card_numbers=False))[0] == {"password": "p", "pin": REDACTED, "note": f"card 4242 4242 4242 4242, Bearer {REDACTED}"}
    off = Redaction(keys=[], card_numbers=False, bearer_tokens=False)
    assert redact_value(value, off) == (value, False)


def test_redaction_fails_closed_on_a_value_it_cannot_walk():
    deep: Any = "leaf"
    for _ in range(sys.getrecursionlimit() + 100):
        deep = [deep]
    assert redact_value(deep, Redaction()) == (REDACTED, True)


def test_redaction_settings_from_the_environment_and_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_TRACEFENCE_REDACTION__KEYS", '["pin", "otp"]')
    monkeypatch.setenv("OTEL_TRACEFENCE_REDACTION__CARD_NUMBERS", "false")
    config = load_config()
    assert (config.redaction.keys, config.redaction.extra_keys, config.redaction.card_numbers, config.redaction.bearer_tokens) == (["pin", "otp"], [], False, True)
    monkeypatch.delenv("OTEL_TRACEFENCE_REDACTION__KEYS")
    monkeypatch.delenv("OTEL_TRACEFENCE_REDACTION__CARD_NUMBERS")
    file = tmp_path / "tracefence.yaml"
    file.write_text("store_raw_values: true\nredaction:\n  extra_keys: [iban]\n  bearer_tokens: false\n")
    config = load_config(file)
    assert config.redaction.keys == list(DEFAULT_KEYS) and config.redaction.extra_keys == ["iban"] and not config.redaction.bearer_tokens
    file.write_text("redaction:\n  keys: password\n")
    with pytest.raises(ConfigError, match="redaction.keys"):
        load_config(file)
    file.write_text("redaction:\n  patterns: [x]\n")
    with pytest.raises(ConfigError, match="redaction.patterns"):
        load_config(file)


# -- 3. the bearer token, TLS, the review API on its own address ----------------------------------------


@pytest.fixture
def serve(tmp_path, upstream):
    services: list[TraceFenceService] = []

    def make(*, top: dict[str, Any] | None = None, **settings: Any) -> TraceFenceService:
        settings.setdefault("endpoint", "127.0.0.1:0")
        settings.setdefault("http_endpoint", "")
        settings.setdefault("decision_wait_ms", 50)
        settings.setdefault("drain_timeout_s", 2)
        settings.setdefault("upstreams", [UpstreamSettings(endpoint=f"http://127.0.0.1:{upstream.port}", timeout_s=2)])
        service = TraceFenceService(TraceFenceConfig(review_db=str(tmp_path / "r.db"), service=ServiceSettings(**settings), **(top or {})))
        service.start()
        services.append(service)
        return service

    yield make
    for service in services:
        service.stop(grace_s=0)


def test_the_bearer_token_decision_is_hmac_compare_digest(serve, upstream, monkeypatch):
    """Missing or wrong token: UNAUTHENTICATED; every check goes through ``hmac.compare_digest``
    (constant time), and its answer alone decides: forced false, even the right token is refused."""
    calls: list[tuple[bytes, bytes]] = []
    real = auth_module.hmac.compare_digest
    forced: dict[str, bool | None] = {"answer": None}

    def spy(given, expected):
        calls.append((given, expected))
        answer = real(given, expected)
        return answer if forced["answer"] is None else forced["answer"]

    monkeypatch.setattr(auth_module.hmac, "compare_digest", spy)
    service = serve(bearer_token="s3cret-T0ken")
    tid = bytes.fromhex("b0" * 16)
    request = raw_request(raw_tool_span(tid, b"\x01" * 8, "search"))
    channel, stub = trace_stub(f"127.0.0.1:{service.port}")
    expected = b"s3cret-T0ken"  # the credentials after the scheme
    with channel:
        for metadata, given in (
            ((), b""),
            ((("authorization", "Bearer s3cret-T0kem"),), b"s3cret-T0kem"),  # one character off
            ((("authorization", "Bearer s3cret"),), b"s3cret"),  # a prefix
            ((("authorization", "s3cret-T0ken"),), b""),  # no scheme
            ((("authorization", "Basic s3cret-T0ken"),), b"s3cret-T0ken"),  # another scheme: compared, then refused
        ):
            calls.clear()
            with pytest.raises(grpc.RpcError) as denied:
                stub.Export(request, metadata=metadata, timeout=5)
            assert denied.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert denied.value.details() == "missing or wrong bearer token"
            assert calls == [(given, expected)]
        calls.clear()
        stub.Export(request, metadata=(("authorization", "Bearer s3cret-T0ken"),), timeout=5)
        assert calls == [(expected, expected)]
        forced["answer"] = False
        with pytest.raises(grpc.RpcError) as denied:
            stub.Export(request, metadata=(("authorization", "Bearer s3cret-T0ken"),), timeout=5)
        assert denied.value.code() == grpc.StatusCode.UNAUTHENTICATED
        forced["answer"] = None
    assert [r.span_id for r in upstream.wait_spans(1, tid.hex())] == ["01" * 8]  # only the accepted call's span


def test_review_api_on_its_own_address_with_tls_and_token(serve, upstream, tmp_path):
    cert, key = make_certificate(tmp_path)  # openssl CLI: a self-signed certificate for 127.0.0.1
    service = serve(review_endpoint="127.0.0.1:0", tls_certificate_file=str(cert), tls_key_file=str(key), bearer_token="tok-Ingest-1", review_token="tok-Review-1")
    assert service.review_port not in (0, service.port)
    credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
    token = (("authorization", "Bearer tok-Review-1"),)
    ingest = (("authorization", "Bearer tok-Ingest-1"),)
    tid = bytes.fromhex("c0" * 16)
    request = raw_request(raw_tool_span(tid, b"\x01" * 8, "payments.charge", effect="write", status="timeout"))
    with grpc.secure_channel(f"127.0.0.1:{service.port}", credentials) as receiver, grpc.secure_channel(f"127.0.0.1:{service.review_port}", credentials) as review_channel:
        # The receiver's port serves no review API, even to a caller with TLS and the token.
        with pytest.raises(grpc.RpcError) as absent:
            pb_grpc.ReviewServiceStub(receiver).ListReviewItems(pb.ListReviewItemsRequest(), metadata=token, timeout=5)
        assert absent.value.code() == grpc.StatusCode.UNIMPLEMENTED
        trace_stub(f"127.0.0.1:{service.port}", credentials)[1].Export(request, metadata=ingest, timeout=5)
        # The review port: TLS and the review token (not the ingest token), and no OTLP receiver.
        review = pb_grpc.ReviewServiceStub(review_channel)
        for metadata in ((), ingest):
            with pytest.raises(grpc.RpcError) as denied:
                review.ListReviewItems(pb.ListReviewItemsRequest(), metadata=metadata, timeout=5)
            assert denied.value.code() == grpc.StatusCode.UNAUTHENTICATED
        items = wait_for(lambda: review.ListReviewItems(pb.ListReviewItemsRequest(), metadata=token, timeout=5).items, what="review item")
        assert [i.trace_id for i in items] == [tid.hex()]
        with pytest.raises(grpc.RpcError) as absent:
            trace_stub(f"127.0.0.1:{service.review_port}", credentials)[1].Export(request, metadata=ingest, timeout=5)
        assert absent.value.code() == grpc.StatusCode.UNIMPLEMENTED
    with grpc.insecure_channel(f"127.0.0.1:{service.review_port}") as plaintext:
        with pytest.raises(grpc.RpcError) as refused:
            pb_grpc.ReviewServiceStub(plaintext).ListReviewItems(pb.ListReviewItemsRequest(), metadata=token, timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


# -- the review API fails closed (issue 9) -------------------------------------------------------------------


@pytest.mark.parametrize(
    "address, loopback",
    [("127.0.0.1:4317", True), ("127.8.9.10:1", True), ("localhost:4317", True), ("[::1]:4317", True),
     ("0.0.0.0:4317", False), ("[::]:4317", False), ("10.0.0.7:4317", False), ("tracefence:4317", False)],
)
def test_what_counts_as_loopback(address, loopback):
    assert exposure.is_loopback(address) is loopback


def test_a_review_api_beyond_loopback_without_a_review_token_refuses_to_start(tmp_path, upstream, caplog):
    upstreams = [UpstreamSettings(endpoint=f"http://127.0.0.1:{upstream.port}", timeout_s=2)]
    for addresses in ({"endpoint": "0.0.0.0:0"}, {"endpoint": "127.0.0.1:0", "review_endpoint": "0.0.0.0:0"}):
        config = TraceFenceConfig(review_db=str(tmp_path / "r.db"), service=ServiceSettings(upstreams=upstreams, http_endpoint="", **addresses))
        with pytest.raises(ConfigError, match="refusing to start: the review API would listen on 0.0.0.0:0, beyond loopback, with no service.review_token"):
            TraceFenceService(config)
        # The ingest token does not stand in for the review token.
        with pytest.raises(ConfigError, match="--insecure-review-api"):
            TraceFenceService(config.model_copy(update={"service": config.service.model_copy(update={"bearer_token": "ingest"})}))
    # Fine: the review API on loopback while the receiver listens on all addresses; no review queue at all;
    # a review token; or the explicit insecure flag, which logs a warning.
    caplog.set_level("INFO")
    fine = [
        ({"endpoint": "0.0.0.0:0", "review_endpoint": "127.0.0.1:0"}, "r.db"),
        ({"endpoint": "0.0.0.0:0"}, ""),
        ({"endpoint": "0.0.0.0:0", "review_token": "r3view"}, "r.db"),
        ({"endpoint": "0.0.0.0:0", "insecure_review_api": True}, "r.db"),
    ]
    for addresses, db in fine:
        service = TraceFenceService(TraceFenceConfig(review_db=db and str(tmp_path / db), service=ServiceSettings(upstreams=upstreams, http_endpoint="", **addresses)))
        try:
            service.start()
        finally:
            service.stop(0)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "review API without a token" in r.getMessage()]
    assert len(warnings) == 1 and "allowed by insecure_review_api" in warnings[0]


def test_serve_refuses_a_review_api_left_open_unless_told_insecure(tmp_path):
    refused = tracefence("serve", "--endpoint", "0.0.0.0:0", "--review-db", str(tmp_path / "r.db"), cwd=tmp_path, timeout=30)
    assert refused.returncode == 2 and refused.stdout == ""
    assert "refusing to start" in refused.stderr and "OTEL_TRACEFENCE_SERVICE__REVIEW_TOKEN" in refused.stderr and "Traceback" not in refused.stderr
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_tracefence", "serve", "--endpoint", "0.0.0.0:0", "--review-db", str(tmp_path / "r.db"), "--insecure-review-api"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=clean_env(),
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any("tracefence serve listening" in x for x in list(lines)) or process.poll() is not None, 30, what="listening line")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        reader.join(timeout=5)
    entries = [json.loads(x) for x in lines if x.startswith("{")]
    warning = [e for e in entries if e["level"] == "WARNING" and "review API without a token" in e["message"]]
    assert warning and "0.0.0.0:0" in warning[0]["message"], lines
    assert process.returncode == 0


def test_resolving_beyond_loopback_needs_the_review_token(tmp_path, upstream):
    config = TraceFenceConfig(
        review_db=str(tmp_path / "r.db"),
        service=ServiceSettings(
            endpoint="0.0.0.0:0", http_endpoint="", review_token="r3view-T0ken", decision_wait_ms=0, drain_timeout_s=2,
            upstreams=[UpstreamSettings(endpoint=f"http://127.0.0.1:{upstream.port}", timeout_s=2)],
        ),
    )
    service = TraceFenceService(config)
    service.start()
    try:
        tid = bytes.fromhex("d0" * 16)
        channel, stub = trace_stub(f"127.0.0.1:{service.port}")
        with channel:
            stub.Export(raw_request(raw_tool_span(tid, b"\x01" * 8, "payments.charge", effect="write", status="timeout")), timeout=5)  # no ingest token set
            review = pb_grpc.ReviewServiceStub(channel)
            good = (("authorization", "Bearer r3view-T0ken"),)
            wait_for(lambda: review.ListReviewItems(pb.ListReviewItemsRequest(), metadata=good, timeout=5).items, what="the review item")
            resolve = pb.ResolveReviewItemRequest(trace_id=tid.hex(), resolved_by="mallory", note="looks fine")
            for metadata in ((), (("authorization", "Bearer wrong"),)):
                with pytest.raises(grpc.RpcError) as denied:
                    review.ResolveReviewItem(resolve, metadata=metadata, timeout=5)
                assert denied.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert review.GetReviewItem(pb.GetReviewItemRequest(trace_id=tid.hex()), metadata=good, timeout=5).state == pb.REVIEW_STATE_OPEN
            resolved = review.ResolveReviewItem(pb.ResolveReviewItemRequest(trace_id=tid.hex(), resolved_by="ada", note="one charge"), metadata=good, timeout=5)
            assert (resolved.state, resolved.resolved_by) == (pb.REVIEW_STATE_RESOLVED, "ada")
    finally:
        service.stop(0)


# -- 4. input limits: configurable, enforced, reported -----------------------------------------------------


def tool_span(attributes: dict[str, Any], span_id: str = "00000000000000a1") -> SpanView:
    return SpanView(trace_id="ab" * 16, span_id=span_id, name="execute_tool t", attributes=attributes, start_time_unix_nano=1, end_time_unix_nano=2)


def decide(config: TraceFenceConfig, *spans: SpanView) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    steps = normalize_trace(list(spans), config).steps
    plan = plan_trace("ab" * 16, steps)
    return [(d.decision.value, d.reasons, tuple(f"{m.field}: {m.message}" for m in d.step.malformed)) for d in plan.steps]


def committed_write(**extra: Any) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "invoice.create",
        "tracefence.effect": "write",
        "tracefence.status": "ok",
        "tracefence.idempotency_key": "inv-1",
        **extra,
    }


def test_max_attributes_per_span_exactly_at_and_past_the_limit():
    config = TraceFenceConfig(limits={"max_attributes_per_span": 8})
    at_limit = committed_write(**{f"x.{i}": i for i in range(3)})
    assert len(at_limit) == 8
    assert decide(config, tool_span(at_limit)) == [("skip", ("write_committed", "result_not_recorded", "arguments_not_recorded"), ())]
    past = {**at_limit, "x.3": 3}
    assert decide(config, tool_span(past)) == [
        (
            "review",
            ("malformed_attributes", "result_not_recorded", "arguments_not_recorded"),
            ("attributes: 9 attributes, more than limits.max_attributes_per_span (8): only the first 8 were read",),
        )
    ]
    # What lies past the limit is not read: here the declared effect and status, so the step cannot be
    # taken for a committed write. The span is still a step: its tool marker counts wherever it is.
    filler_first = {**{f"x.{i}": i for i in range(8)}, **committed_write()}
    assert decide(config, tool_span(filler_first)) == [
        (
            "review",
            ("malformed_attributes", "effect_unknown", "arguments_not_recorded"),
            ("attributes: 13 attributes, more than limits.max_attributes_per_span (8): only the first 8 were read",),
        )
    ]
    assert TraceFenceConfig().limits.max_attributes_per_span == 1024


def test_max_attributes_per_span_through_the_service(serve, upstream):
    service = serve()  # the default limit, 1024
    tid = bytes.fromhex("a7" * 16)
    many = {f"app.attr.{i}": i for i in range(1100)}
    ok = raw_tool_span(tid, b"\x01" * 8, "search", **{f"app.attr.{i}": i for i in range(1000)})
    too_many = raw_tool_span(tid, b"\x02" * 8, "invoice.create", effect="write", status="ok", **many)
    channel, stub = trace_stub(f"127.0.0.1:{service.port}")
    with channel:
        stub.Export(raw_request(ok, too_many), timeout=5)
    received = {r.span_id: r for r in upstream.wait_spans(2, tid.hex())}
    assert tf_attrs(received["01" * 8].span)["tracefence.step.decision"] == "replay"
    annotated = tf_attrs(received["02" * 8].span)
    assert (annotated["tracefence.step.decision"], annotated["tracefence.step.reasons"]) == (
        "review",
        ["malformed_attributes", "result_not_recorded", "arguments_not_recorded"],
    )
    assert annotated["tracefence.replay.class"] == "review"
    assert len(received["02" * 8].span.attributes) == len(too_many.attributes) + 7  # forwarded whole, ours added


def test_max_argument_bytes_exactly_at_and_past_the_limit():
    config = TraceFenceConfig(limits={"max_argument_bytes": 64})
    at_limit = json.dumps({"customer": "c" * 49}, separators=(",", ":"))
    assert len(at_limit) == 64
    past = json.dumps({"customer": "c" * 50}, separators=(",", ":"))
    assert decide(config, tool_span(committed_write(**{"gen_ai.tool.call.arguments": at_limit}))) == [("skip", ("write_committed", "result_not_recorded"), ())]
    assert decide(config, tool_span(committed_write(**{"gen_ai.tool.call.arguments": past}))) == [
        ("skip", ("write_committed", "result_not_recorded", "arguments_too_large"), ())
    ]
    # Two calls with the same key whose arguments are too large are never taken as equal, nor as different (DECISIONS 501).
    pair = [tool_span(committed_write(**{"gen_ai.tool.call.arguments": past, "gen_ai.tool.call.id": f"c{i}"}), f"00000000000000b{i}") for i in (1, 2)]
    assert [d[:2] for d in decide(config, *pair)] == [
        ("review", ("idempotency_key_reused_arguments_unavailable", "repeat_arguments_uncompared", "result_not_recorded", "arguments_too_large")),
        ("review", ("idempotency_key_reused_arguments_unavailable", "repeat_arguments_uncompared", "result_not_recorded", "arguments_too_large")),
    ]


def test_max_argument_depth_exactly_at_and_past_the_limit():
    config = TraceFenceConfig(limits={"max_argument_depth": 4})
    at_limit = json.dumps({"a": {"b": {"c": [1]}}})  # 4 levels of objects and arrays
    past = json.dumps({"a": {"b": {"c": [[1]]}}})
    assert decide(config, tool_span(committed_write(**{"gen_ai.tool.call.arguments": at_limit}))) == [("skip", ("write_committed", "result_not_recorded"), ())]
    assert decide(config, tool_span(committed_write(**{"gen_ai.tool.call.arguments": past}))) == [
        ("skip", ("write_committed", "result_not_recorded", "arguments_too_deep"), ())
    ]


def test_the_listening_log_line_reports_every_limit(tmp_path):
    """``tracefence serve`` as a subprocess, limits from its config file; max_message_bytes itself is
    enforced in tests/service/test_service.py::test_a_request_above_max_message_bytes_is_resource_exhausted."""
    config = tmp_path / "tracefence.yaml"
    config.write_text(
        "max_traces: 500\nmax_spans_per_trace: 200\nstore_raw_values: true\n"
        "limits: {max_attributes_per_span: 256, max_argument_bytes: 65536, max_argument_depth: 16, max_related_call_ids: 20}\n"
        "service: {max_message_bytes: 4194304, intake_queue_spans: 5000, intake_queue_bytes: 8388608, forward_queue_spans: 9000, bearer_token: not-logged-T0ken}\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "otel_tracefence", "serve", "--endpoint", "127.0.0.1:0", "--review-db", str(tmp_path / "r.db")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=clean_env(OTEL_TRACEFENCE_CONFIG=str(config)),
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True)
    reader.start()
    try:
        line = wait_for(lambda: next((json.loads(x) for x in list(lines) if "tracefence serve listening" in x), None) or process.poll() is not None, 30, what="listening line")
        assert isinstance(line, dict), "".join(lines)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        reader.join(timeout=5)
    assert line["limits"] == {
        "max_message_bytes": 4194304,
        "max_attributes_per_span": 256,
        "max_argument_bytes": 65536,
        "max_argument_depth": 16,
        "max_related_call_ids": 20,
        "max_tokens_per_value": 64,
        "max_traces": 500,
        "max_spans_per_trace": 200,
        "decided_cache_size": 10000,
        "intake_queue_spans": 5000,
        "intake_queue_bytes": 8388608,
        "forward_queue_spans": 9000,
    }
    assert (line["bearer_token"], line["store_raw_values"], line["tls"]) == (True, True, False)
    assert "not-logged-T0ken" not in "".join(lines)  # the token itself is never logged
    assert process.returncode == 0


def test_a_late_write_of_a_forgotten_trace_keeps_the_earlier_uncertain_write_in_review(tmp_path):
    db = tmp_path / "review.db"
    processor = TraceFenceSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), review_db=str(db), decided_cache_size=1)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("agent")

    def timed_out_write(name: str) -> None:
        try:
            with tool_call(name, effect="write", arguments={"order": name}, call_id=f"call_{name}", tracer_provider=provider):
                raise TimeoutError("no answer")
        except TimeoutError:
            pass

    root = tracer.start_span("invoke_agent billing", attributes={"gen_ai.operation.name": "invoke_agent"})
    with trace.use_span(root, end_on_exit=False):
        timed_out_write("payments.first")
    root.end()
    with tracer.start_as_current_span("invoke_agent other", attributes={"gen_ai.operation.name": "invoke_agent"}):
        pass  # one more decided trace: the first is forgotten (decided_cache_size=1)
    with trace.use_span(root, end_on_exit=False):
        timed_out_write("payments.second")  # a late span of the first trace
    provider.shutdown()
    with SQLiteReviewStore(db, create=False) as store:
        item = store.get(format(root.get_span_context().trace_id, "032x"))
    assert sorted(d.step.tool for d in item.plan.steps) == ["payments.first", "payments.second"]
    assert item.plan.partial and item.plan.replay_class == pb.REPLAY_CLASS_REVIEW


# -- redaction never raises, and its output is stable ----------------------------------------------------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
    | st.sampled_from(["4242 4242 4242 4242", "Bearer abc.def", '{"password": "x"}', "[1, 2", "4111111111111111"]),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8) | st.sampled_from(["Password", "api-key", "TOKEN", "note"]), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_json_values)
def test_redaction_of_any_json_value_never_raises_and_is_idempotent(value):
    once, _ = redact_value(value, Redaction())
    assert redact_value(once, Redaction()) == (once, False)
    config = TraceFenceConfig(store_raw_values=True)
    arguments = arguments_from_value(value, config.limits)
    kept = kept_arguments(arguments, config)
    if arguments.json is None:
        assert kept is None
        return
    json.loads(kept)  # JSON text
    redacted, changed = redact_value(arguments.value, Redaction())
    assert kept == (canonicalize(redacted).text if changed else arguments.json)
    assert arguments.sha256 == sha256(arguments.json)  # the hash is the original's
