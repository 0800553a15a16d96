"""The review queue's gRPC API (``tracefence.v1.ReviewService`` in ``proto/``), over a review store."""

from __future__ import annotations

import logging

import grpc

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence._proto.tracefence.v1 import tracefence_pb2_grpc as pb_grpc
from otel_tracefence.review.events import ReviewStore, event_to_proto
from otel_tracefence.review.verdicts import verdict_from_proto

logger = logging.getLogger(__name__)


class ReviewService(pb_grpc.ReviewServiceServicer):
    """List, get and resolve review items, record verdicts, and give an item's history. Unknown trace id: NOT_FOUND; bad arguments: INVALID_ARGUMENT."""

    def __init__(self, store: ReviewStore) -> None:
        self._store = store

    def ListReviewItems(self, request: pb.ListReviewItemsRequest, context: grpc.ServicerContext) -> pb.ListReviewItemsResponse:
        skipped: list = []  # items that cannot be read: left out, named in the log (DECISIONS 359)
        try:
            items, token = self._store.list(
                state=request.state,
                replay_classes=tuple(request.replay_classes),
                service_name=request.service_name or None,
                page_size=request.page_size or 100,
                page_token=request.page_token,
                skipped=skipped,
            )
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        for unreadable in skipped:
            logger.warning("ListReviewItems: %s: left out", unreadable)
        return pb.ListReviewItemsResponse(items=items, next_page_token=token)

    def GetReviewItem(self, request: pb.GetReviewItemRequest, context: grpc.ServicerContext) -> pb.ReviewItem:
        item = self._store.get(request.trace_id)
        if item is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no review item for trace {request.trace_id!r}")
        return item

    def ResolveReviewItem(self, request: pb.ResolveReviewItemRequest, context: grpc.ServicerContext) -> pb.ReviewItem:
        try:
            verdict = verdict_from_proto(request.verdict)
            return self._store.resolve(request.trace_id, resolved_by=request.resolved_by, note=request.note, verdict=verdict)
        except KeyError:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no review item for trace {request.trace_id!r}")
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))

    def RecordReviewVerdict(self, request: pb.RecordReviewVerdictRequest, context: grpc.ServicerContext) -> pb.ReviewItem:
        try:
            verdict = verdict_from_proto(request.verdict)
            return self._store.record_verdict(request.trace_id, actor=request.actor, verdict=verdict, evidence=request.evidence)
        except KeyError:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no review item for trace {request.trace_id!r}")
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))

    def GetReviewHistory(self, request: pb.GetReviewHistoryRequest, context: grpc.ServicerContext) -> pb.GetReviewHistoryResponse:
        events = self._store.history(request.trace_id)
        if not events and self._store.get(request.trace_id) is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no review item for trace {request.trace_id!r}")
        return pb.GetReviewHistoryResponse(events=[event_to_proto(e) for e in events])
