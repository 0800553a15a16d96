"""Whether the service's wire reader of spans (``otel_tracefence.service.wire_span``) agrees with protobuf on some
bytes: shared by tests/service/test_wire_reader.py and the atheris harness bench/fuzz_wire_span.py.

The reference is the service's protobuf path: ``otlp_spans.full_view`` (``SpanBody``, then ``KeyValue`` and
``Span.Event`` per attribute and event) for a span read in full, ``from_otlp_head(SpanHead.FromString(...))`` for a
span read by its head, ``SpanHead``'s ids for ``read_request``. The reader agrees when, for each of the three, it
gives what the reference gives (views compared by ``repr``, which tells ``True`` from ``1`` and reads every NaN
alike), or gives nothing (``None``) and the service's path (``wire_planning_view``) then gives the reference's
outcome: the same view or the same ``DecodeError`` with the same message.
"""

from __future__ import annotations

from google.protobuf.message import DecodeError

from otel_tracefence.normalize.span_view import from_otlp_head
from otel_tracefence.service.otlp_bytes import SpanHead
from otel_tracefence.service.otlp_spans import OtlpItem, full_view, wire_planning_view
from otel_tracefence.service.wire_span import read_ids, read_span

SEQUENCE = 7


def _outcome(read, *args) -> tuple[str, str]:
    """``("read", repr of what it gave)`` or ``("refused", the DecodeError's message)``."""
    try:
        return "read", repr(read(*args))
    except DecodeError as exc:
        return "refused", str(exc)


def _head_view(data: bytes, sequence: int):
    return from_otlp_head(SpanHead.FromString(data), sequence)


def _head_ids(data: bytes) -> tuple[bytes, bytes, bytes]:
    head = SpanHead.FromString(data)
    return head.trace_id, head.span_id, head.parent_span_id


def _service_view(data: bytes, full: bool):
    item = OtlpItem(None, data)  # type: ignore[arg-type] - the origin is not read
    item.full, item.sequence = full, SEQUENCE
    return wire_planning_view(None, item)


def disagreement(data: bytes) -> str | None:
    """How the reader and protobuf disagree on ``data`` (a message naming the reading), or ``None``."""
    for full, reference in ((True, full_view), (False, _head_view)):
        expected = _outcome(reference, data, SEQUENCE)
        got = read_span(data, SEQUENCE, full)
        what = "full view" if full else "head view"
        if got is not None and expected != ("read", repr(got)):
            return f"{what}: the reader gave {got!r}, protobuf {expected}"
        service = _outcome(_service_view, data, full)
        if service != expected:
            return f"{what} on the service's path: {service}, protobuf {expected}"
    expected = _outcome(_head_ids, data)
    ids = read_ids(data)
    if ids is not None and expected != ("read", repr(ids)):
        return f"ids: the reader gave {ids!r}, protobuf {expected}"
    return None


def read_by_the_reader(data: bytes) -> bool:
    """True when the reader reads ``data`` itself in all three readings (none left to protobuf)."""
    return read_span(data, SEQUENCE, True) is not None and read_span(data, SEQUENCE, False) is not None and read_ids(data) is not None
