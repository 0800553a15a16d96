"""Round 5 trial, the readers: keys OTLP/JSON does not define, keys given twice or in two spellings, JSON Lines
split at ``\\n`` only, and row fields misspelt by case or white space (docs/DECISIONS.md 180-184).

Each test runs ``tracefence plan`` on a file as a user does and asserts the exact decision, reasons and
replay class, or the exact error with its line and field.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli import TRACE, _request, _span, assert_rejected, decisions, plan, plans_of

OTHER = "dddddddddddddddddddddddddddddddd"
WRITE = {"tracefence__effect": "write", "tracefence__status": "timeout"}


def _read_and_write() -> tuple[dict, dict]:
    return _span("1111111111111111", "lookup", tracefence__effect="read"), _span("2222222222222222", "charge", **WRITE)


# -- defect 1: spans under a key OTLP/JSON does not define, or under a container given twice ----------------


def test_a_misspelt_container_on_its_own_line_rejects_the_file_naming_line_and_key(tmp_path: Path) -> None:
    read, write = _read_and_write()
    typo = _request(write)
    typo["resourceSpan"] = typo.pop("resourceSpans")
    path = tmp_path / "typo.jsonl"
    path.write_text(json.dumps(_request(read)) + "\n" + json.dumps(typo) + "\n")
    assert_rejected(
        plan(path, "--fail-on", "review"),
        f"{path}: line 2: resourceSpan: the request has a key OTLP/JSON does not define, holding an array: spans under it would be missed\n",
    )
    alone = tmp_path / "alone.json"  # with no resourceSpans at all: still OTLP/JSON, never an empty, passing plan
    alone.write_text(json.dumps(typo))
    assert_rejected(plan(alone), f"{alone}: line 1: resourceSpan: the request has a key OTLP/JSON does not define, holding an array")
    assert "not a row field" not in plan(alone).stderr  # not read as a row lacking tool and call_id
    typo["ResourceSpans"] = typo.pop("resourceSpan")
    alone.write_text(json.dumps(typo))
    assert_rejected(
        plan(alone),
        f"{alone}: line 1: a JSON object gives 'ResourceSpans', which OTLP/JSON does not define: it names resourceSpans "
        "but for case or underscores, write resourceSpans (in the request); nothing was planned\n",
    )


def test_an_unknown_key_holding_an_object_rejects_the_file(tmp_path: Path) -> None:
    read, write = _read_and_write()
    request = _request(read)
    request["resourceSpans"][0]["scopeSpans"][0]["span"] = write  # one span, not in an array, under a misspelt key
    path = tmp_path / "object.json"
    path.write_text(json.dumps(request))
    assert_rejected(plan(path), "line 1: span: scopeSpans has a key OTLP/JSON does not define, holding an object: spans under it would be missed\n")


def test_a_container_in_both_spellings_rejects_the_file(tmp_path: Path) -> None:
    read, write = _read_and_write()
    both = _request(read)
    both["resource_spans"] = _request(write)["resourceSpans"]
    path = tmp_path / "both.json"
    path.write_text(json.dumps(both))
    assert_rejected(
        plan(path),
        "line 1: a JSON object gives resourceSpans and resource_spans, one field in both spellings: which value was meant "
        "cannot be known (in the request)",
    )
    scope = _request(read)
    scope["resourceSpans"][0]["scope_spans"] = _request(write)["resourceSpans"][0]["scopeSpans"]
    path.write_text(json.dumps(scope))
    assert_rejected(
        plan(path),
        "line 1: a JSON object gives scopeSpans and scope_spans, one field in both spellings: which value was meant "
        "cannot be known (in resourceSpans)",
    )
    resource = _request(read, write)  # a resource attribute given in both spellings: whose spans these are is unknown
    resource["resourceSpans"][0]["resource"]["attributes"][0]["value"]["string_value"] = "other"
    path.write_text(json.dumps(resource))
    assert_rejected(
        plan(path),
        "line 1: a JSON object gives stringValue and string_value, one field in both spellings: which value was meant "
        "cannot be known (in a resource)",
    )


# -- defects 2 and 11: a key twice in a span, in one spelling or two ----------------------------------------


STAND_IN = ["effect_unknown", "arguments_not_recorded"]
READ = ("1111111111111111", "replay", ["declared_read", "arguments_not_recorded"], [])


def test_a_span_giving_its_trace_id_in_both_spellings_stands_in_both_traces(tmp_path: Path) -> None:
    read, write = _read_and_write()
    write["trace_id"] = OTHER
    path = tmp_path / "ids.json"
    path.write_text(json.dumps(_request(read, write)))
    proc = plan(path, "--fail-on", "review")
    assert proc.returncode == 1
    assert proc.stderr.count("traceId: a JSON object gives traceId and trace_id") == 1  # one span: listed once
    assert (
        f"{path}: warning: line 1, span 2222222222222222: traceId: a JSON object gives traceId and trace_id, one field "
        "in both spellings: which value was meant cannot be known\n"
    ) in proc.stderr
    plans = plans_of(proc)
    assert {trace: p["replayClass"] for trace, p in plans.items()} == {TRACE: "review", OTHER: "review"}
    stand_in = ("2222222222222222", "review", ["malformed_traceId", *STAND_IN], [])
    assert decisions(plans[TRACE]) == [stand_in, READ]
    assert decisions(plans[OTHER]) == [stand_in]


def test_every_id_and_any_field_in_both_spellings_makes_the_span_malformed(tmp_path: Path) -> None:
    for name, snake, value in (
        ("spanId", "span_id", "3333333333333333"),
        ("parentSpanId", "parent_span_id", "3333333333333333"),
        ("startTimeUnixNano", "start_time_unix_nano", "5"),
    ):
        read, write = _read_and_write()
        write["parentSpanId"] = "1111111111111111"
        write[snake] = value
        path = tmp_path / f"{snake}.json"
        path.write_text(json.dumps(_request(read, write)))
        proc = plan(path)
        assert f"warning: line 1, span 2222222222222222: {name}: a JSON object gives {name} and {snake}" in proc.stderr
        assert decisions(plans_of(proc)[TRACE]) == [("2222222222222222", "review", [f"malformed_{name}", *STAND_IN], []), READ]
    read, write = _read_and_write()
    write["attributes"][2]["value"]["string_value"] = "read"  # tracefence.effect: "write" or "read"?
    path = tmp_path / "anyvalue.json"
    path.write_text(json.dumps(_request(read, write)))
    assert decisions(plans_of(plan(path))[TRACE]) == [("2222222222222222", "review", ["malformed_stringValue", *STAND_IN], []), READ]


def test_a_key_twice_in_one_span_holds_that_span_and_plans_the_rest_of_the_file(tmp_path: Path) -> None:
    read, write = _read_and_write()
    other = _span("4444444444444444", "lookup", trace_id=OTHER, tracefence__effect="read")
    second = json.dumps(_request(other, write)).replace('{"stringValue": "charge"}', '{"stringValue": "charge", "stringValue": "refund"}')
    path = tmp_path / "dupkey.jsonl"
    path.write_text(json.dumps(_request(read)) + "\n" + second + "\n")
    proc = plan(path, "--fail-on", "review")
    assert proc.returncode == 1
    assert (
        f"{path}: warning: line 2, span 2222222222222222: stringValue: a JSON object gives the key 'stringValue' twice: "
        "which value was meant cannot be known\n"
    ) in proc.stderr
    plans = plans_of(proc)
    assert {trace: p["replayClass"] for trace, p in plans.items()} == {TRACE: "review", OTHER: "dynamic"}
    assert decisions(plans[TRACE]) == [("2222222222222222", "review", ["malformed_stringValue", *STAND_IN], []), READ]
    assert decisions(plans[OTHER]) == [("4444444444444444", "replay", ["declared_read", "arguments_not_recorded"], [])]


def test_a_span_key_misspelt_by_case_makes_the_span_malformed_never_ignored(tmp_path: Path) -> None:
    """Found on the way: protobuf's parser ignored ``"status": {"Code": 2}``, and a failed write read as committed
    (``static``, the write skipped on replay)."""
    for where, key, field in (("status", "Code", "code"), ("span", "Status", "status"), ("span", "TraceId", "traceId")):
        read, write = _read_and_write()
        del write["attributes"][3]  # no tracefence.status: the span's status alone says the write failed
        if where == "status":
            write["status"] = {key: 2}
        elif key == "Status":
            write[key] = write.pop("status") | {"code": 2}
        else:
            write[key] = OTHER
        path = tmp_path / f"{key}.json"
        path.write_text(json.dumps(_request(read, write)))
        proc = plan(path)
        assert (
            f"{path}: warning: line 1, span 2222222222222222: {field}: a JSON object gives {key!r}, which OTLP/JSON does not "
            f"define: it names {field} but for case or underscores, write {field}\n"
        ) in proc.stderr
        plans = plans_of(proc)
        stand_in = ("2222222222222222", "review", [f"malformed_{field}", *STAND_IN], [])
        assert decisions(plans[TRACE]) == [stand_in, READ]
        assert plans[TRACE]["replayClass"] == "review"
        if key == "TraceId":  # the trace the misspelt key names is held too
            assert decisions(plans[OTHER]) == [stand_in]


# -- defect 12: JSON Lines and NDJSON end a line at \n only -----------------------------------------------


SEPARATORS = "\u2028\u2029\x85\x0c\x1c\x0b"  # str.splitlines() splits at each of these


def test_otlp_json_lines_with_unicode_line_separators_in_strings_keep_their_lines(tmp_path: Path) -> None:
    read, write = _read_and_write()
    read["name"] = f"execute_tool lookup{SEPARATORS}"
    bad = _span("3333333333333333", "lookup", trace_id="abc", tracefence__effect="read")
    path = tmp_path / "u2028.jsonl"
    lines = [json.dumps(_request(read), ensure_ascii=False), json.dumps(_request(write), ensure_ascii=False), json.dumps(_request(bad))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = plan(path, "--on-malformed", "review")
    assert_rejected(proc, f"{path}: line 3, span 3333333333333333: traceId: the span's traceId must be 32 hex characters, got 'abc'\n")
    path.write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")
    plans = plans_of(plan(path))
    assert decisions(plans[TRACE]) == [READ, ("2222222222222222", "review", ["write_timeout", "arguments_not_recorded"], [])]


def test_ndjson_rows_with_unicode_line_separators_in_strings_keep_their_lines(tmp_path: Path) -> None:
    rows = [
        {"trace_id": "t", "call_id": "c1", "tool": "lookup", "effect": "read", "status": "ok", "arguments": {"q": SEPARATORS}},
        {"trace_id": "t", "call_id": "c2", "tool": "charge", "effect": "write", "status": "nope"},
    ]
    path = tmp_path / "u2028.ndjson"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert_rejected(plan(path), f"{path}: line 2: status: ")
    assert "line 1" not in plan(path).stderr


# -- defect 7: a row field misspelt by case or white space --------------------------------------------------


def test_a_field_misspelt_by_case_or_space_beside_the_field_makes_the_row_malformed(tmp_path: Path) -> None:
    ndjson = tmp_path / "case_dup.ndjson"
    ndjson.write_text('{"trace_id":"t1","call_id":"c1","tool":"charge","effect":"write","status":"ok","Status":"timeout"}\n')
    assert_rejected(plan(ndjson), f"{ndjson}: line 1: status: both status and 'Status' given: give one, spelt status\n")
    case_csv = tmp_path / "case_dup.csv"
    case_csv.write_text("trace_id,call_id,tool,effect,status,Status\nt1,c1,charge,write,ok,timeout\n")
    assert_rejected(plan(case_csv), f"{case_csv}: line 2: status: both status and 'Status' given: give one, spelt status\n")
    space_csv = tmp_path / "space_dup.csv"
    space_csv.write_text("trace_id,call_id,tool,effect,status,status \nt1,c1,charge,write,ok,timeout\n")
    assert_rejected(plan(space_csv), f"{space_csv}: line 2: status: both status and 'status ' given: give one, spelt status\n")
    proc = plan(space_csv, "--on-malformed", "review")
    assert "not a row field" not in proc.stderr  # no longer "ignored with a warning"
    assert plans_of(proc)["t1"]["replayClass"] == "review"
    assert decisions(plans_of(proc)["t1"]) == [("c1", "review", ["malformed_status", "result_not_recorded", "arguments_not_recorded"], [])]


def test_a_field_misspelt_by_case_alone_is_read_as_that_field_and_the_row_is_malformed(tmp_path: Path) -> None:
    path = tmp_path / "alone.ndjson"
    path.write_text(
        '{"trace_id":"t1","call_id":"c1","tool":"lookup","effect":"read","status":"ok"}\n'
        '{"Trace_ID":"t1","call_id":"c2","tool":"charge","effect":"write","status":"ok"}\n'
    )
    assert_rejected(plan(path), f"{path}: line 2: trace_id: 'Trace_ID' is not a field name: write trace_id, lower case, no spaces\n")
    plans = plans_of(plan(path, "--on-malformed", "review"))
    assert list(plans) == ["t1"]  # the write stays in its trace, which is held
    assert plans["t1"]["replayClass"] == "review"
    assert [(call, decision) for call, decision, _, _ in decisions(plans["t1"])] == [("c1", "replay"), ("c2", "review")]
    key = tmp_path / "key.ndjson"  # the misspelling decision 64 warned about: now read, and the row malformed
    key.write_text('{"trace_id":"t1","call_id":"c1","tool":"x","effect":"read","idempotencykey":"k"}\n')
    assert_rejected(plan(key), f"{key}: line 1: idempotency_key: 'idempotencykey' is not a field name: write idempotency_key, lower case, no spaces\n")


def test_a_field_with_an_invisible_character_in_its_name_is_that_field_and_the_row_is_malformed(tmp_path: Path) -> None:
    """s21 trial 6 (DECISIONS 208): a zero-width space (U+200B) or another format character in a field's name
    was "not a row field, ignored" (a warning): now it is that field misspelt, as a case or space misspelling is."""
    alone = tmp_path / "zw.ndjson"
    alone.write_text('{"trace_id":"t1","call_id":"c1","tool":"pay","effect":"write","status\u200b":"timeout"}\n')
    assert_rejected(plan(alone), f"{alone}: line 1: status: 'status\\u200b' is not a field name: write status, lower case, no spaces\n")
    beside = tmp_path / "zw_beside.ndjson"
    beside.write_text('{"trace_id":"t1","call_id":"c1","tool":"pay","effect":"write","status":"ok","status\u2060":"timeout"}\n')
    assert_rejected(plan(beside), f"{beside}: line 1: status: both status and 'status\\u2060' given: give one, spelt status\n")
    csv_path = tmp_path / "zw.csv"
    csv_path.write_text("trace_id,call_id,tool,effect,tr\u00adace_id\nt1,c1,pay,write,t2\n", encoding="utf-8")
    proc = plan(csv_path, "--on-malformed", "review")
    assert "not a row field" not in proc.stderr
    assert {trace: plan_["replayClass"] for trace, plan_ in plans_of(proc).items()} == {"t1": "review", "t2": "review"}


def test_a_row_naming_two_traces_in_two_spellings_is_held_in_both(tmp_path: Path) -> None:
    path = tmp_path / "two.ndjson"
    path.write_text(
        '{"trace_id":"t1","call_id":"c0","tool":"lookup","effect":"read","status":"ok"}\n'
        '{"trace_id":"t2","call_id":"c9","tool":"lookup","effect":"read","status":"ok"}\n'
        '{"trace_id":"t1","TRACE_ID":"t2","call_id":"c1","tool":"charge","effect":"write","status":"ok"}\n'
    )
    proc = plan(path, "--on-malformed", "review")
    assert f"{path}: warning: line 3: trace_id: both trace_id and 'TRACE_ID' given: give one, spelt trace_id\n" in proc.stderr
    plans = plans_of(proc)
    held = ("c1", "review", ["malformed_trace_id", "result_not_recorded", "arguments_not_recorded"], [])
    read = ["declared_read", "arguments_not_recorded"]
    assert decisions(plans["t1"]) == [("c0", "replay", read, []), held]
    assert decisions(plans["t2"]) == [("c9", "replay", read, []), held]
    assert {p["replayClass"] for p in plans.values()} == {"review"}


# -- defect 20 ---------------------------------------------------------------------------------------------


def test_a_call_id_that_is_not_a_string_says_so(tmp_path: Path) -> None:
    path = tmp_path / "call_id.ndjson"
    path.write_text('{"call_id":true,"tool":"t","effect":"read"}\n{"id":[1],"tool":"t","effect":"read"}\n{"tool":"t","effect":"read"}\n')
    assert_rejected(
        plan(path),
        f"{path}: line 1: call_id: call_id true is not a string or an integer\n",  # spelled as the row spells it
        f"{path}: line 2: call_id: call_id [1] is not a string or an integer\n",
        f"{path}: line 3: call_id: no call_id or id\n",
    )
