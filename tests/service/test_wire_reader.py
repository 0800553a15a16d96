"""The service's reader of the OTLP span wire format (issue 29) against protobuf's parser, the reference: every span of
every case and fixture, hand-made tricky and malformed encodings, seeded mutations of the cases' bytes, and the
service run with each reader (``service.span_reader``)."""

from __future__ import annotations

import random
import struct

import pytest
from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from conftest import SHARED_CASES
from service_helpers import RecordingUpstream, separate_runs, service_config, trace_stub
from tests.service.test_service_bytes import _otlp_fixtures
from wire_agreement import SEQUENCE, disagreement, read_by_the_reader
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.otlp.json_reader import read_otlp_json
from otel_tracefence.service.otlp_bytes import LazyRequest
from otel_tracefence.service.otlp_spans import OtlpItem, planning_view, read_request, wire_planning_view
from otel_tracefence.service.server import TraceFenceService
from otel_tracefence.service.wire_span import read_span

TRACE, SPAN = bytes.fromhex("0af7651916cd43dd8448eb211c80319c"), bytes.fromhex("b7ad6b7169203331")


def _varint(value: int) -> bytes:
    out = b""
    while True:
        byte, value = value & 0x7F, value >> 7
        if not value:
            return out + bytes([byte])
        out += bytes([byte | 0x80])


def _tag(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _ld(field: int, payload: bytes) -> bytes:
    return _tag(field, 2) + _varint(len(payload)) + payload


def _kv(key: str, value: AnyValue) -> bytes:
    return _ld(9, KeyValue(key=key, value=value).SerializeToString())


_IDS = _ld(1, TRACE) + _ld(2, SPAN)
_TOOL = Span(trace_id=TRACE, span_id=SPAN, name="execute_tool pay", kind=Span.SPAN_KIND_CLIENT, start_time_unix_nano=10, end_time_unix_nano=20,
             status=Status(code=Status.STATUS_CODE_ERROR, message="timed out"), flags=0x300,
             attributes=[KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="execute_tool")),
                         KeyValue(key="gen_ai.tool.name", value=AnyValue(string_value="pay")),
                         KeyValue(key="tracefence.effect", value=AnyValue(string_value="write"))],
             events=[Span.Event(name="exception", time_unix_nano=15, attributes=[KeyValue(key="exception.type", value=AnyValue(string_value="TimeoutError"))])],
             ).SerializeToString()  # fmt: skip
_UNKNOWN = _tag(40, 0) + _varint(1 << 62) + _tag(41, 1) + b"\x01" * 8 + _ld(42, b"\xff\xfe") + _tag(43, 5) + b"\x02" * 4 \
    + _tag(44, 3) + _tag(1, 0) + b"\x05" + _tag(45, 3) + _ld(2, b"x") + _tag(45, 4) + _tag(44, 4)  # every wire type, nested groups
_KVLIST = AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key="a", value=AnyValue(int_value=1))]))
_ARRAY = AnyValue(array_value=ArrayValue(values=[AnyValue(string_value="x"), AnyValue(bool_value=True), AnyValue()]))


def _fields(data: bytes) -> list[bytes]:
    """The top-level fields of a serialized message, each with its tag (length-delimited and fixed ones only, as
    protobuf writes them: enough for the spans built here)."""
    fields, at = [], 0
    while at < len(data):
        start, key = at, 0
        shift = 0
        while True:
            byte = data[at]
            at += 1
            key |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        wire = key & 7
        if wire == 0:
            while data[at] & 0x80:
                at += 1
            at += 1
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        else:
            size, shift = 0, 0
            while True:
                byte = data[at]
                at += 1
                size |= (byte & 0x7F) << shift
                shift += 7
                if byte < 0x80:
                    break
            at += size
        fields.append(data[start:at])
    return fields


READ = {  # bytes protobuf reads, with what makes them tricky: the reader must read them itself, and alike
    "a tool span": _TOOL,
    "no field at all": b"",
    "fields in reverse order": b"".join(reversed(_fields(_TOOL))),
    "unknown fields of every wire type, groups nested": _UNKNOWN + _TOOL + _UNKNOWN,
    "unknown fields inside the status, an attribute, its value, an array, a kvlist and an event":
        _IDS + _ld(15, _UNKNOWN + _tag(3, 0) + b"\x02") + _ld(9, _UNKNOWN + _ld(1, b"k") + _ld(2, _UNKNOWN + _ld(5, _UNKNOWN + _ld(1, _UNKNOWN))))
        + _ld(9, _ld(1, b"l") + _ld(2, _ld(6, _UNKNOWN + _ld(1, _UNKNOWN + _ld(1, b"m"))))) + _ld(11, _UNKNOWN + _ld(2, b"ev") + _ld(3, _UNKNOWN)),
    "a scalar field repeated keeps its last value": _IDS + _ld(5, b"first") + _ld(5, b"second") + _ld(1, bytes(range(16))) + _tag(6, 0) + b"\x01" + _tag(6, 0) + b"\x03",
    "the status given twice merges": _IDS + _ld(15, _tag(3, 0) + b"\x02") + _ld(15, _ld(2, b"why")) + _ld(15, b""),
    "an attribute's value given twice merges (kvlist)": _IDS + _ld(9, _ld(1, b"k") + _ld(2, _KVLIST.SerializeToString()) + _ld(2, _KVLIST.SerializeToString())),
    "the oneof keeps its last member": _IDS + _ld(9, _ld(1, b"k") + _ld(2, _ARRAY.SerializeToString() + _ld(1, b"now a string")))
        + _ld(9, _ld(1, b"j") + _ld(2, _ld(1, b"s")) + _ld(2, _ARRAY.SerializeToString()) + _ld(2, _ARRAY.SerializeToString())),
    "known fields with another wire type are skipped (kind packed, times as varints, flags as a varint)":
        _IDS + _ld(6, _varint(3) + _varint(2)) + _tag(7, 0) + b"\x05" + _tag(8, 5) + b"\x00" * 4 + _tag(16, 0) + b"\x05" + _tag(15, 0) + b"\x01"
        + _tag(9, 0) + b"\x01" + _tag(11, 5) + b"\x00" * 4 + _tag(5, 0) + b"\x01" + _ld(9, _tag(1, 0) + b"\x01" + _tag(2, 0) + b"\x01"),
    "unpacked kind after a packed one": _IDS + _ld(6, _varint(2)) + _tag(6, 0) + _varint(2),
    "ten-byte varints: a negative kind, counts cut to 32 bits": _IDS + _tag(6, 0) + b"\xff" * 9 + b"\x01" + _tag(10, 0) + _varint((1 << 40) + 3)
        + _tag(12, 0) + b"\xff" * 9 + b"\x7f" + _ld(15, _tag(3, 0) + _varint((1 << 35) + 7)),
    "overlong tags and lengths (5 bytes)": b"\x8a\x80\x80\x80\x00" + b"\x90\x80\x80\x80\x00" + TRACE + _ld(2, SPAN) + b"\xaa\x80\x80\x80\x00\x01n",
    "an unknown kind and status code": _IDS + _tag(6, 0) + b"\x09" + _ld(15, _tag(3, 0) + b"\x07"),
    "a repeated attribute key": _IDS + _kv("k", AnyValue(string_value="a")) + _kv("k", AnyValue(int_value=-5)) + _kv("j", AnyValue()),
    "every value type": _IDS + _kv("s", AnyValue(string_value="é")) + _kv("b", AnyValue(bool_value=True)) + _kv("i", AnyValue(int_value=-(1 << 63)))
        + _kv("d", AnyValue(double_value=-0.0)) + _kv("n", AnyValue(double_value=float("nan"))) + _kv("a", _ARRAY) + _kv("m", _KVLIST)
        + _kv("y", AnyValue(bytes_value=b"\x00\xff")) + _kv("x", AnyValue(string_value_strindex=-3)) + _ld(9, _ld(1, b"z") + _tag(3, 0) + b"\x04"),
    "a bool from a large varint": _IDS + _ld(9, _ld(1, b"k") + _ld(2, _tag(2, 0) + _varint(1 << 40))),
    "nested kvlists and arrays": _IDS + _kv("deep", AnyValue(array_value=ArrayValue(values=[_KVLIST, _ARRAY, AnyValue(array_value=ArrayValue(values=[_KVLIST]))]))),
    "events repeated, out of order, with a repeated key": _IDS + _ld(11, _tag(4, 0) + b"\x02" + _ld(3, _ld(1, b"a")) + _ld(2, b"e") + _ld(3, _ld(1, b"a") + _ld(2, _ld(1, b"v"))))
        + _ld(11, b"") + _ld(11, _tag(1, 1) + b"\x01" * 8),
    "not UTF-8 where no reading looks (trace_state, a link)": _IDS + _ld(3, b"\xff") + _ld(13, _ld(5, b"\xff")),
    "a string holding NUL and the last code point": _IDS + _ld(5, "a\x00\U0010ffff".encode()),
}

REFUSED = {  # bytes protobuf refuses (in every reading): the reader leaves them to it, which refuses them with its reason
    "a truncated varint": _IDS + _tag(6, 0) + b"\xff",
    "an eleven-byte varint": _IDS + _tag(6, 0) + b"\xff" * 10 + b"\x01",
    "a truncated fixed64": _IDS + _tag(7, 1) + b"\x00" * 4,
    "a truncated fixed32": _IDS + _tag(16, 5) + b"\x00",
    "a length past the end": _IDS + _ld(5, b"abc")[:-1],
    "a six-byte length": _IDS + _tag(40, 2) + b"\x80\x80\x80\x80\x80\x00",
    "a length of 2^32": _IDS + _tag(40, 2) + b"\x80\x80\x80\x80\x10",
    "a six-byte tag": _IDS + b"\x88\x80\x80\x80\x80\x00\x01",
    "a tag past 32 bits": _IDS + b"\xf8\xff\xff\xff\x7f\x01",
    "field number 0": _IDS + b"\x00\x01",
    "wire type 6": _IDS + _tag(40, 6),
    "wire type 7": _IDS + _tag(40, 7),
    "an end of group alone": _IDS + _tag(40, 4),
    "a group ended by another number": _IDS + _tag(40, 3) + _tag(41, 4),
    "a group never ended": _IDS + _tag(40, 3) + _tag(1, 0) + b"\x01",
    "a name not UTF-8": _IDS + _ld(5, b"\xff"),
    "a name with a surrogate": _IDS + _ld(5, b"\xed\xa0\x80"),
    "a name with an overlong form": _IDS + _ld(5, b"\xc0\x80"),
    "a status message not UTF-8": _IDS + _ld(15, _ld(2, b"\xf4\x90\x80\x80")),
    "a truncated status": _IDS + _ld(15, _tag(3, 0) + b"\x80"),
}

REFUSED_IN_FULL = {  # bytes protobuf refuses only when it reads attributes and events (SpanHead skips them)
    "an attribute key not UTF-8": _IDS + _ld(9, _ld(1, b"\xff")),
    "a string value not UTF-8": _IDS + _ld(9, _ld(1, b"k") + _ld(2, _ld(1, b"\xc3"))),
    "a string inside a kvlist not UTF-8": _IDS + _ld(9, _ld(1, b"k") + _ld(2, _ld(6, _ld(1, _ld(1, b"\xff"))))),
    "a truncated double": _IDS + _ld(9, _ld(1, b"k") + _ld(2, _tag(4, 1) + b"\x00" * 7)),
    "an attribute truncated inside": _IDS + _ld(9, _ld(1, b"k") + _tag(2, 2) + b"\x05\x0a"),
    "an event name not UTF-8": _IDS + _ld(11, _ld(2, b"\xfe")),
    "an event attribute with field number 0": _IDS + _ld(11, _ld(3, b"\x00\x00")),
    "an oneof member dropped later still checked": _IDS + _ld(9, _ld(1, b"k") + _ld(2, _ld(1, b"\xff") + _ld(7, b"ok"))),
}


def _nested(depth: int) -> bytes:
    """A span with one attribute whose value is ``depth`` kvlists deep (built by hand: protobuf's encoder refuses
    past its own recursion limit)."""
    value = _ld(1, b"x")
    for _ in range(depth):
        value = _ld(6, _ld(1, _ld(1, b"k") + _ld(2, value)))
    return _IDS + _ld(9, _ld(1, b"deep") + _ld(2, value))


def _case_spans() -> list[bytes]:
    spans = []
    for path in _otlp_fixtures():
        request = read_otlp_json(path.read_text(encoding="utf-8")).request
        spans += [s.SerializeToString() for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    return spans


CASE_SPANS = _case_spans()


def test_the_reader_reads_every_span_of_every_case_and_fixture_as_protobuf_does():
    assert SHARED_CASES.is_dir() and len(CASE_SPANS) >= 150
    for data in CASE_SPANS:
        assert disagreement(data) is None
        assert read_by_the_reader(data), data  # none left to protobuf: the cases are what the service gets


def test_read_request_takes_the_same_items_and_refusals_through_either_reader():
    for path in _otlp_fixtures():
        request = LazyRequest.FromString(read_otlp_json(path.read_text(encoding="utf-8")).request.SerializeToString())
        (wire, wire_refused), (reference, refused) = read_request(request, wire=True), read_request(request)
        assert [(i.span, i.ids) for i in wire] == [(i.span, i.ids) for i in reference], path
        assert repr(wire_refused) == repr(refused), path


@pytest.mark.parametrize("data", list(READ.values()), ids=list(READ))
def test_tricky_encodings_read_as_protobuf_reads_them(data):
    assert disagreement(data) is None
    assert read_by_the_reader(data)


def test_the_tricky_encodings_mean_what_they_say():
    view = read_span(READ["known fields with another wire type are skipped (kind packed, times as varints, flags as a varint)"], 0)
    assert (view.kind, view.start_time_unix_nano, view.end_time_unix_nano, view.parent_is_remote, view.status_code, view.name) == ("unspecified", 0, None, False, "unset", "")
    assert dict(view.attributes) == {"": None}
    view = read_span(READ["ten-byte varints: a negative kind, counts cut to 32 bits"], 0)
    assert (view.kind, view.dropped_attributes, view.dropped_events, view.status_code, view.status_undefined) == ("unspecified", 3, 0xFFFFFFFF, "error", 7)
    view = read_span(READ["the oneof keeps its last member"], 0)
    assert dict(view.attributes) == {"k": "now a string", "j": ["x", True, None, "x", True, None]}
    view = read_span(READ["the status given twice merges"], 0)
    assert (view.status_code, view.status_message) == ("error", "why")
    view = read_span(READ["a repeated attribute key"], 0)
    assert (dict(view.attributes), view.duplicate_keys) == ({"k": -5, "j": None}, ("k",))
    view = read_span(READ["a scalar field repeated keeps its last value"], 0)
    assert (view.name, view.trace_id, view.kind) == ("second", bytes(range(16)).hex(), "client")


@pytest.mark.parametrize("data", list(REFUSED.values()) + list(REFUSED_IN_FULL.values()), ids=list(REFUSED) + list(REFUSED_IN_FULL))
def test_malformed_encodings_are_left_to_protobuf_which_refuses_them_with_its_reason(data):
    assert disagreement(data) is None
    assert read_span(data, SEQUENCE, True) is None
    item = OtlpItem(None, data)  # type: ignore[arg-type]
    with pytest.raises(DecodeError) as wire:
        wire_planning_view(None, item)
    with pytest.raises(DecodeError) as reference:
        planning_view(None, item)
    assert str(wire.value) == str(reference.value)
    assert str(wire.value).startswith("Error parsing message with type ")


def test_a_span_refused_only_in_full_is_read_by_its_head_as_spanhead_reads_it():
    for data in REFUSED_IN_FULL.values():
        assert read_span(data, 0, full=False) is not None


@pytest.mark.parametrize("depth", [5, 15, 16, 40])
def test_deep_nesting_is_read_within_the_readers_bound_and_left_to_protobuf_past_it(depth):
    data = _nested(depth)
    assert disagreement(data) is None
    assert (read_span(data, 0) is not None) == (depth * 3 < 46)  # three messages a level, under the bound of 48


def _mutate(rng: random.Random, data: bytes, donors: list[bytes]) -> bytes:
    """One random change: bytes flipped, set to an edge value, inserted, deleted, truncated, or spliced from another span."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(6)
        at = rng.randrange(len(out) + 1)
        if choice == 0 and out:
            out[min(at, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif choice == 1 and out:
            out[min(at, len(out) - 1)] = rng.choice((0x00, 0x7F, 0x80, 0xFF, 0x08, 0x0A, 0x12, 0xC0, 0xED))
        elif choice == 2:
            out[at:at] = rng.choice((b"\x80", b"\xff" * rng.randint(1, 11), _tag(rng.randint(1, 20), rng.randrange(8)), struct.pack("<d", rng.random())))
        elif choice == 3:
            del out[at : at + rng.randint(1, 8)]
        elif choice == 4:
            del out[at:]
        else:
            donor = rng.choice(donors)
            start = rng.randrange(len(donor) + 1)
            out[at:at] = donor[start : start + rng.randint(1, 40)]
    return bytes(out)


def test_seeded_mutations_of_the_cases_bytes_agree_with_protobuf():
    rng = random.Random(29)
    seeds = CASE_SPANS + list(READ.values())
    read = 0
    for _ in range(2000):
        data = _mutate(rng, rng.choice(seeds), seeds)
        assert disagreement(data) is None, data
        read += read_span(data, 0) is not None
    assert read > 200  # many mutants are still spans: the reader reads them, not only refuses


def test_the_span_reader_setting_is_read_from_the_environment(monkeypatch):
    assert TraceFenceConfig().service.span_reader == "wire"
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__SPAN_READER", "protobuf")
    assert TraceFenceConfig().service.span_reader == "protobuf"


def _forwarded(reader: str, requests: list, tmp_path) -> dict[tuple[str, str], list[tuple[str, object]]]:
    upstream = RecordingUpstream()
    upstream.start()
    service = TraceFenceService(separate_runs(service_config(upstream, tmp_path / f"{reader}.db", span_reader=reader, decision_wait_ms=0, max_wait_ms=300)))
    service.start()
    try:
        channel, stub = trace_stub(f"127.0.0.1:{service.port}")
        with channel:
            for request in requests:
                stub.Export(request, timeout=10)
        spans = upstream.wait_spans(sum(len(ss.spans) for r in requests for rs in r.resource_spans for ss in rs.scope_spans), timeout=30)
    finally:
        service.stop()
        upstream.stop()
    return {(s.trace_id, s.span_id): sorted((k, repr(v)) for k, v in s.tf.items()) for s in spans}


def test_the_service_forwards_the_same_annotations_with_either_reader(tmp_path):
    requests = [read_otlp_json(path.read_text(encoding="utf-8")).request for path in _otlp_fixtures()[:12]]
    wire, reference = _forwarded("wire", requests, tmp_path), _forwarded("protobuf", requests, tmp_path)
    assert wire == reference
    assert any(("tracefence.replay.class", "'review'") in labels for labels in wire.values())
