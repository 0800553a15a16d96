"""The second fresh-user trial of round 22 (t24), finding 11: with ``--workers``, a span refused for its trace id
whose parent is in the request stands under its parent step at the worker (``child_span_unread``), as in one
process; the router's stand-in carried the fault but not the parent (DECISIONS 387)."""

from __future__ import annotations

from typing import Any

from otel_tracefence.core.model import ReplayClass
from otel_tracefence.normalize.span_view import SpanView
from otel_tracefence.service.otlp_spans import Orphan, lazy_request, read_request
from otel_tracefence.service.router import RouterIntake
from tests.normalize.test_conventions_in_the_wild import ROOT, TRACE, plan

PARENT, CHILD = "b0b0b0b0b0b0b0b0", "c0c0c0c0c0c0c0c0"
READ = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "kb.search", "tracefence.effect": "read", "gen_ai.tool.call.arguments": '{"q":1}',
        "gen_ai.tool.call.id": "q1"}  # fmt: skip


class _Queue:
    """A worker's forwarder that keeps what it is given."""

    depth = 0

    def __init__(self) -> None:
        self.requests: list[Any] = []

    def put(self, request: Any, spans: int) -> int:
        self.requests.append(request)
        return len(self.requests)


def test_a_refused_child_stands_under_its_parent_at_its_worker_as_in_one_process() -> None:
    # t24's v5_router.py: one process held the read `review` with child_span_unread on its step; two workers held
    # the trace with the stand-in as a step of its own, the parent step's reasons only declared_read.
    one_process = Orphan(CHILD, PARENT, "POST", 5, "trace_id: the span's traceId 'zz' is not hex").view(TRACE)
    queues = [_Queue(), _Queue()]
    RouterIntake(queues, 100, 1 << 20).stand_in(one_process)  # type: ignore[arg-type]
    (request,) = [r for q in queues for r in q.requests]
    _, ((_, at_worker),) = read_request(lazy_request(request.SerializeToString()))
    assert isinstance(at_worker, SpanView)
    seen = lambda v: (v.trace_id, v.span_id, v.name, v.parent_span_id, v.start_time_unix_nano, v.unreadable)
    assert seen(at_worker) == seen(one_process)
    tool = SpanView(TRACE, PARENT, "execute_tool kb.search", READ, parent_span_id=ROOT.span_id, start_time_unix_nano=3, end_time_unix_nano=9)
    assert plan(tool, at_worker) == plan(tool, one_process) == (ReplayClass.REVIEW, [
        ("q1", "replay", ("declared_read",)), (CHILD, "review", ("child_span_unread", "effect_unknown", "arguments_not_recorded")),
    ])  # fmt: skip


def test_a_refused_child_whose_parent_is_not_in_the_request_goes_to_every_worker() -> None:
    # t24's v4b_unread_tid_write.py: the child came in a later request than its parent (a committed write); one
    # process held the trace `review` (child_span_unread, 296), the router dropped the child: `injected`, no item.
    problem = "traceId: the span's traceId 'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz' is not hex"
    orphans = [Orphan(CHILD, PARENT, "POST", 5, problem), Orphan("(none)", "d0" * 8, "GET", 6, "traceId: missing")]
    queues = [_Queue(), _Queue()]
    RouterIntake(queues, 100, 1 << 20).put([], orphans=orphans)  # type: ignore[arg-type]
    assert [len(q.requests) for q in queues] == [1, 1]
    fields = lambda o: (o.span_id, o.parent_span_id, o.name, o.start_time_unix_nano, o.problem)
    for queue in queues:
        accepted, refused = read_request(lazy_request(queue.requests[0].SerializeToString()))
        assert accepted == [] and [fields(view) for _, view in refused] == [fields(o) for o in orphans]
        assert all(isinstance(view, Orphan) for _, view in refused)


def test_a_protobuf_requests_orphan_reaches_each_worker_once() -> None:
    from service_helpers import raw_request, raw_span

    from test_workers import trace_for

    request = lazy_request(raw_request(raw_span(trace_for(1, 4), b"\x02" * 8), raw_span(b"", b"\x04" * 8, parent=b"\x09" * 8)))
    accepted, refused = read_request(request)
    orphans = [view for _, view in refused if isinstance(view, Orphan)]
    assert len(orphans) == 1
    queues = [_Queue(), _Queue()]
    intake = RouterIntake(queues, 100, 1 << 20)  # type: ignore[arg-type]
    intake.current.request = request
    intake.put(accepted, orphans=orphans)
    at = [[read_request(lazy_request(r.SerializeToString())) for r in q.requests] for q in queues]
    # each worker gets the orphan once: in the request (had it gone whole to worker 1) or as the router's copy
    assert [(sum(len(a) for a, _ in got), [type(v).__name__ for _, r in got for _, v in r]) for got in at] == [(0, ["Orphan"]), (1, ["Orphan"])]
