"""``SpanView`` and the service's view builders, the same in the compiled and the pure-Python engine
(docs/DECISIONS.md, 155 and 157).

``SpanView`` is a Cython extension type when compiled and the standard library's dataclass in pure Python;
``otel_tracefence/service/otlp_spans.py`` is compiled with the engine. Each engine runs the same checks in a
subprocess of its own: fields, their order and defaults, ``dataclasses.replace`` / ``fields`` / ``is_dataclass``,
``==`` by value, no hash, the exact ``repr``, assignment (a view is not frozen), and a span read the service's
way (``read_request``, ``held_view``, ``planning_view``) from the same bytes.
"""

from __future__ import annotations

import textwrap

import pytest

from test_compiled_engine import _c_compiler, run_child

_CHILD = textwrap.dedent(
    """
    import dataclasses, importlib.machinery, json
    import otel_tracefence
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span
    from otel_tracefence.normalize.span_view import SpanEvent, SpanView
    from otel_tracefence.service import otlp_spans
    from otel_tracefence.service.otlp_bytes import LazyRequest

    view = SpanView("ab" * 16, "cd" * 8, "execute_tool refund", {"gen_ai.tool.name": "refund"}, "ef" * 8, start_time_unix_nano=5,
                    events=(SpanEvent("log", {"message": "x"}),), kind="client")
    same = SpanView(trace_id="ab" * 16, span_id="cd" * 8, name="execute_tool refund", attributes={"gen_ai.tool.name": "refund"},
                    parent_span_id="ef" * 8, start_time_unix_nano=5, events=(SpanEvent("log", {"message": "x"}),), kind="client")
    bare = SpanView("ab" * 16, "cd" * 8, "plain", {})
    out = {"engine": otel_tracefence.engine(),
           "extension": isinstance(otlp_spans.__spec__.loader, importlib.machinery.ExtensionFileLoader),
           "view_extension": not isinstance(SpanView.__init__, type(lambda: 0))}
    out["fields"] = [f.name for f in dataclasses.fields(SpanView)]
    out["defaults"] = [repr(getattr(bare, f.name)) for f in dataclasses.fields(SpanView)[4:]]
    out["shared_default"] = bare.events is SpanView("x", "y", "z", {}).events
    out["equal"] = [view == same, view != dataclasses.replace(view, sequence=1), view == ("ab" * 16,), dataclasses.is_dataclass(SpanView)]
    try:
        hash(view)
        out["hash"] = "hashable"
    except TypeError:
        out["hash"] = "unhashable"
    out["repr"] = repr(view)
    out["replaced"] = repr(dataclasses.replace(bare, attributes={"a": 1}, unreadable=("span_id", "bad")))
    bare.sequence = 9
    bare.attributes = {"k": "v"}
    out["assigned"] = [bare.sequence, bare.attributes]

    span = Span(trace_id=b"\\x01" * 16, span_id=b"\\x02" * 8, parent_span_id=b"\\x03" * 8, name="execute_tool refund", kind=3,
                start_time_unix_nano=10, end_time_unix_nano=20, flags=0x300)
    span.status.code = 2
    span.attributes.extend([KeyValue(key="gen_ai.tool.name", value=AnyValue(string_value="refund")),
                            KeyValue(key="gen_ai.tool.name", value=AnyValue(string_value="again"))])
    plain = Span(trace_id=b"\\x01" * 16, span_id=b"\\x04" * 8, name="render", start_time_unix_nano=11)
    request = LazyRequest()
    request.resource_spans.add(resource=b"").scope_spans.add(scope=b"").spans.extend([span.SerializeToString(), plain.SerializeToString()])
    items, refused = otlp_spans.read_request(request)
    held = [repr(otlp_spans.held_view(item, i)) for i, item in enumerate(items)]
    out["service"] = [held, [repr(otlp_spans.planning_view(None, item)) for item in items], [item.full for item in items], refused]
    print(json.dumps(out))
    """
)


@pytest.mark.parametrize("pure", [False, True], ids=["installed", "pure"])
def test_views_behave_the_same_in_both_engines(pure):
    got = run_child(_CHILD, pure)
    if pure:
        assert (got["engine"], got["extension"], got["view_extension"]) == ("python", False, False)
    elif _c_compiler() is not None:
        assert (got["engine"], got["extension"], got["view_extension"]) == ("compiled", True, True)  # compiled, not the fallback
    del got["engine"], got["extension"], got["view_extension"]
    head = (
        "SpanView(trace_id='01010101010101010101010101010101', span_id='{span}', name='{name}', attributes={attributes}, "
        "parent_span_id={parent}, parent_is_remote={remote}, start_time_unix_nano={start}, end_time_unix_nano={end}, status_code='{status}', "
        "status_message='', events=(), sequence={sequence}, duplicate_keys={duplicates}, kind='{kind}', unreadable=None, dropped_attributes=0, dropped_events=0, value_length_limit=None, status_undefined=None)"
    )
    tool = dict(span="0202020202020202", name="execute_tool refund", parent="'0303030303030303'", remote=True, start=10, end=20,
                status="error", sequence=0, kind="client")
    render = dict(span="0404040404040404", name="render", attributes="mappingproxy({})", parent=None, remote=False, start=11, end=None, status="unset",
                  sequence=1, duplicates="()", kind="unspecified")
    assert got == {
        "fields": [
            "trace_id", "span_id", "name", "attributes", "parent_span_id", "parent_is_remote", "start_time_unix_nano", "end_time_unix_nano",
            "status_code", "status_message", "events", "sequence", "duplicate_keys", "kind", "unreadable", "dropped_attributes", "dropped_events",
            "value_length_limit",
            "status_undefined",
        ],
        "defaults": ["None", "False", "0", "None", "'unset'", "''", "()", "0", "()", "'unspecified'", "None", "0", "0", "None", "None"],
        "shared_default": True,
        "equal": [True, True, False, True],
        "hash": "unhashable",
        "repr": (
            "SpanView(trace_id='abababababababababababababababab', span_id='cdcdcdcdcdcdcdcd', name='execute_tool refund', "
            "attributes={'gen_ai.tool.name': 'refund'}, parent_span_id='efefefefefefefef', parent_is_remote=False, start_time_unix_nano=5, "
            "end_time_unix_nano=None, status_code='unset', status_message='', events=(SpanEvent(name='log', attributes={'message': 'x'}, dropped_attributes=0),), "
            "sequence=0, duplicate_keys=(), kind='client', unreadable=None, dropped_attributes=0, dropped_events=0, value_length_limit=None, status_undefined=None)"
        ),
        "replaced": (
            "SpanView(trace_id='abababababababababababababababab', span_id='cdcdcdcdcdcdcdcd', name='plain', attributes={'a': 1}, "
            "parent_span_id=None, parent_is_remote=False, start_time_unix_nano=0, end_time_unix_nano=None, status_code='unset', "
            "status_message='', events=(), sequence=0, duplicate_keys=(), kind='unspecified', unreadable=('span_id', 'bad'), dropped_attributes=0, dropped_events=0, value_length_limit=None, status_undefined=None)"
        ),
        "assigned": [9, {"k": "v"}],
        "service": [
            [  # held_view: the ids alone (docs/DECISIONS.md, 222)
                "HeldSpan(trace_id='01010101010101010101010101010101', span_id='0202020202020202', parent_span_id='0303030303030303')",
                "HeldSpan(trace_id='01010101010101010101010101010101', span_id='0404040404040404', parent_span_id=None)",
            ],
            [head.format(attributes="{'gen_ai.tool.name': 'again'}", duplicates="('gen_ai.tool.name',)", **tool), head.format(**render)],
            [True, False],
            [],
        ],
    }
