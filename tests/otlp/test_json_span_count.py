"""Issue 30 (JSON bodies counted while read): the OTLP/JSON pre-scan counts what the reader reads as spans."""

from __future__ import annotations

import json

from otel_tracefence.otlp.json_span_count import count_json_spans

SPAN = {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "op", "attributes": [{"key": "spans", "value": {"stringValue": "[1,2]"}}]}


def body(*resource_spans: object) -> str:
    return json.dumps({"resourceSpans": list(resource_spans)})


def test_counts_every_element_of_every_spans_array_in_both_spellings() -> None:
    text = body(
        {"resource": {"attributes": [{"key": "spans", "value": {"arrayValue": {"values": [{"intValue": "1"}]}}}]},
         "scopeSpans": [{"scope": {"name": "a"}, "spans": [SPAN, SPAN, SPAN]}, {"spans": []}, {"scope": {}}]},
        {"scope_spans": [{"spans": [SPAN, 7, "x"]}], "instrumentationLibrarySpans": [{"spans": [SPAN]}]},
    )  # fmt: skip
    assert count_json_spans(text) == 7  # 3 + 3 (two not readable: still sent) + 1 (OTLP 0.x)
    assert count_json_spans(json.dumps({"resource_spans": [{"scopeSpans": [{"spans": [SPAN] * 4}]}]})) == 4


def test_keys_that_are_not_span_containers_are_not_counted() -> None:
    text = json.dumps({"resourceSpans": [{"unknown": [{"spans": [SPAN]}], "scopeSpans": [{"other": [SPAN], "spans": {"0": SPAN}}]}], "spans": [SPAN]})
    assert count_json_spans(text) == 0
    assert count_json_spans(json.dumps({"resourceSpans": {"scopeSpans": [{"spans": [SPAN]}]}})) == 0  # not an array: the reader refuses it
    assert count_json_spans(" {}\n") == 0


def test_what_it_cannot_walk_is_left_to_the_reader() -> None:
    assert count_json_spans("") is None
    assert count_json_spans("[]") is None
    assert count_json_spans('{"resourceSpans": [') is None
    assert count_json_spans('{"resourceSpans": []} trailing') is None
    assert count_json_spans('{"resourceSpans": [{"scopeSpans": [{"spans": [' + "[" * 100_000 + "]" * 100_000 + "]}]}]}") is None  # too deep
