"""Issue 13: ``review show`` by any letter case or a unique prefix; ``--endpoint http://`` and https://;
``--ca-file`` that is not PEM. The real CLI as a subprocess, a real SQLite queue, a real review API."""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_tracefence.core.config import ServiceSettings, TraceFenceConfig
from otel_tracefence.service.server import TraceFenceService
from test_cli_review import SHOW_TABLE, TRACE, db, tracefence  # noqa: F401 - db is a fixture


@pytest.mark.parametrize("given", [TRACE.upper(), TRACE[:6], TRACE[:6].upper(), "4BF92f35"])
def test_show_takes_any_case_and_a_unique_prefix(db: Path, given: str):
    proc = tracefence("show", given, "--db", str(db))
    assert (proc.returncode, proc.stderr, proc.stdout) == (0, "", SHOW_TABLE)


def test_an_ambiguous_prefix_names_the_items(db: Path):
    proc = tracefence("show", "T-", "--db", str(db))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"tracefence review show: {db}: trace id prefix 'T-' matches 2 items: t-static, t-support; give more of the id\n"


def test_a_prefix_nothing_has_is_unknown(db: Path):
    proc = tracefence("show", "4bf0", "--db", str(db))
    assert (proc.returncode, proc.stderr) == (2, f"tracefence review show: {db}: no review item for trace id '4bf0'\n")


def test_like_wildcards_in_a_prefix_are_literal(db: Path):
    proc = tracefence("show", "t_s", "--db", str(db))
    assert (proc.returncode, proc.stderr) == (2, f"tracefence review show: {db}: no review item for trace id 't_s'\n")


@pytest.fixture
def review_api(db: Path, tmp_path: Path):
    config = TraceFenceConfig(review_db=str(db), service=ServiceSettings(endpoint="127.0.0.1:0", http_endpoint="", output_file=str(tmp_path / "out.jsonl")))
    service = TraceFenceService(config)
    service.start()
    yield service
    service.stop(grace_s=0)


def test_review_endpoint_takes_http_scheme_as_serve_upstream_does(review_api):
    proc = tracefence("--endpoint", f"http://127.0.0.1:{review_api.port}", "show", TRACE[:8])
    assert (proc.returncode, proc.stderr, proc.stdout) == (0, "", SHOW_TABLE)
    proc = tracefence("--endpoint", f"http://127.0.0.1:{review_api.port}/", "show", "T-")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"tracefence review show: http://127.0.0.1:{review_api.port}/: trace id prefix 'T-' matches 2 items: t-static, t-support; give more of the id\n"


def test_http_endpoint_with_a_ca_file_is_refused_naming_the_fix(tmp_path: Path):
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    proc = tracefence("--endpoint", "http://review:4317", "--ca-file", str(ca), "list")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "tracefence review list: --endpoint http://review:4317 is plaintext (http://) but --ca-file asks for TLS: "
        "give https://review:4317 or leave --ca-file out\n"
    )


def test_an_unknown_scheme_is_refused(tmp_path: Path):
    proc = tracefence("--endpoint", "grpc://review:4317", "list")
    assert (proc.returncode, proc.stderr) == (
        2,
        "tracefence review list: --endpoint grpc://review:4317: give HOST:PORT, http://HOST:PORT (plaintext) or https://HOST:PORT (TLS)\n",
    )


@pytest.mark.parametrize(
    "endpoint, problem",
    [
        ("127.0.0.1:99999", "Port out of range 0-65535"),
        ("http://review:4317x", "Port could not be cast to integer value as '4317x'"),
        ("review", "no port"),
        ("https://review:0", "no port"),
    ],
)
def test_an_endpoint_without_a_port_in_range_is_refused_before_any_call(endpoint: str, problem: str):
    proc = tracefence("--endpoint", endpoint, "list")
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        2, "", f"tracefence review list: --endpoint {endpoint}: {problem}; give HOST:PORT with a port from 1 to 65535\n",
    )


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"not a certificate\n", "no '-----BEGIN CERTIFICATE-----' block"),
        (b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "a certificate block does not parse"),
    ],
)
def test_a_ca_file_that_is_not_pem_is_named_before_grpc_sees_it(tmp_path: Path, content: bytes, problem: str):
    ca = tmp_path / "ca.crt"
    ca.write_bytes(content)
    proc = tracefence("--endpoint", "127.0.0.1:9", "--ca-file", str(ca), "list")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        f"tracefence review list: --ca-file {ca}: not a PEM CA certificate file: {problem}; "
        "give the CA certificate(s) that signed the review API's certificate, in PEM\n"
    )


def test_show_against_a_review_api_without_the_history_says_so(db: Path):
    """An older ``tracefence serve`` has no ``GetReviewHistory``: ``show`` prints the item and says the history is not served."""
    from concurrent import futures

    import grpc

    from otel_tracefence._proto.tracefence.v1 import tracefence_pb2_grpc as pb_grpc
    from otel_tracefence.review import SQLiteReviewStore
    from otel_tracefence.service.review_api import ReviewService

    class OlderReviewService(ReviewService):
        GetReviewHistory = pb_grpc.ReviewServiceServicer.GetReviewHistory  # answers UNIMPLEMENTED

    store = SQLiteReviewStore(db)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_ReviewServiceServicer_to_server(OlderReviewService(store), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        proc = tracefence("--endpoint", f"http://127.0.0.1:{port}", "show", TRACE)
    finally:
        server.stop(0)
        store.close()
    head = SHOW_TABLE.partition("\nhistory\n")[0]
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == head + "\nhistory: not served by this review API (a tracefence serve older than GetReviewHistory)\n"


def test_get_review_history_takes_the_review_token(db: Path, tmp_path: Path):
    import grpc

    from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
    from otel_tracefence._proto.tracefence.v1 import tracefence_pb2_grpc as pb_grpc

    config = TraceFenceConfig(
        review_db=str(db), service=ServiceSettings(endpoint="127.0.0.1:0", output_file=str(tmp_path / "out.jsonl"), review_token="review-s3cret")
    )
    service = TraceFenceService(config)
    service.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{service.port}") as channel:
            stub = pb_grpc.ReviewServiceStub(channel)
            with pytest.raises(grpc.RpcError) as refused:
                stub.GetReviewHistory(pb.GetReviewHistoryRequest(trace_id=TRACE), timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            token = (("authorization", "Bearer review-s3cret"),)
            events = stub.GetReviewHistory(pb.GetReviewHistoryRequest(trace_id="t-support"), metadata=token, timeout=10).events
            assert [(e.kind, e.actor, e.note) for e in events] == [
                (pb.REVIEW_EVENT_KIND_PLAN_WRITTEN, "support", ""),
                (pb.REVIEW_EVENT_KIND_RESOLVED, "ada", "sent once"),
            ]
            with pytest.raises(grpc.RpcError) as unknown:
                stub.GetReviewHistory(pb.GetReviewHistoryRequest(trace_id="t-nothing"), metadata=token, timeout=10)
            assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        service.stop(grace_s=0)


def test_resolve_takes_the_unique_prefix_show_takes(db: Path):
    """Trial defect 17: ``resolve 4bf9`` said "no review item" where ``show 4bf9`` found the item."""
    proc = tracefence("resolve", TRACE[:4].upper(), "--db", str(db), "--by", "x", "--note", "n", "--format", "json")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert '"traceId": "%s"' % TRACE in proc.stdout and '"state": "REVIEW_STATE_RESOLVED"' in proc.stdout
    assert '"resolvedBy": "x", "resolutionNote": "n"' in proc.stdout


def test_resolve_refuses_an_ambiguous_prefix_and_resolves_nothing(db: Path):
    proc = tracefence("resolve", "t-s", "--db", str(db), "--by", "x", "--note", "n")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"tracefence review resolve: {db}: trace id prefix 't-s' matches 2 items: t-static, t-support; give more of the id\n"
    listed = tracefence("list", "--state", "open", "--db", str(db), "--format", "json").stdout
    assert '"traceId": "t-static"' in listed


@pytest.mark.parametrize("given", ["", "  "])
def test_an_empty_trace_id_names_no_item_and_resolves_nothing(db: Path, given: str):
    """Second trial: every id starts with "", so ``resolve "$ID"`` with ``ID`` unset resolved the item of a queue
    holding one. An empty or blank id is refused for show and resolve alike."""
    for command in (("show", given), ("resolve", given, "--by", "x", "--note", "n")):
        proc = tracefence(*command, "--db", str(db))
        assert (proc.returncode, proc.stdout) == (2, "")
        assert proc.stderr == f"tracefence review {command[0]}: {db}: an empty trace id names no review item; give the trace id or a prefix of it\n"
    assert '"state": "REVIEW_STATE_RESOLVED"' not in tracefence("list", "--db", str(db), "--format", "json").stdout


def test_resolve_by_prefix_through_the_review_api_with_the_servers_token_variable(db: Path, tmp_path: Path):
    """Trial defects 14 and 17: ``review`` reads OTEL_TRACEFENCE_SERVICE__REVIEW_TOKEN, as serve and ui do."""
    config = TraceFenceConfig(
        review_db=str(db), service=ServiceSettings(endpoint="127.0.0.1:0", http_endpoint="", output_file=str(tmp_path / "out.jsonl"), review_token="review-s3cret")
    )
    service = TraceFenceService(config)
    service.start()
    try:
        where = f"127.0.0.1:{service.port}"
        refused = tracefence("--endpoint", where, "resolve", TRACE[:6], "--by", "x", "--note", "n")
        assert refused.returncode == 2 and "give --token or set $OTEL_TRACEFENCE_SERVICE__REVIEW_TOKEN" in refused.stderr
        proc = tracefence("--endpoint", where, "resolve", TRACE[:6], "--by", "x", "--note", "n", OTEL_TRACEFENCE_SERVICE__REVIEW_TOKEN="review-s3cret")
        assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
        assert "resolved_by  x" in proc.stdout
        old = tracefence("--endpoint", where, "show", TRACE[:6], OTEL_TRACEFENCE_REVIEW_TOKEN="review-s3cret")
        assert (old.returncode, old.stderr) == (0, "")
    finally:
        service.stop(grace_s=0)
