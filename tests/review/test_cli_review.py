"""``tracefence review list|show|resolve`` through ``python -m otel_tracefence``, against a real database file."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import json_format

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.model import Decision, Effect, EffectSource, ReplayClass, StepDecision, ToolStatus, ToolStep, TracePlan
from otel_tracefence.review import SQLiteReviewStore

T0 = 1_700_000_000_123_456_789  # 2023-11-14T22:13:20.123456789Z
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
ARGS = '{"amount_cents":1250}'
ARGS_SHA = "95ea3adad0f5a1dfbc893c81031692d97e8bb570ea8f670dd856c002f6644db1"


def _plan(trace_id: str, *, status: ToolStatus = ToolStatus.TIMEOUT, tool: str = "payments.charge") -> TracePlan:
    step = ToolStep(
        trace_id=trace_id,
        call_id="call_1",
        span_id="00f067aa0ba902b7",
        tool=tool,
        effect=Effect.WRITE,
        effect_source=EffectSource.DECLARED,
        status=status,
        idempotency_key="order-17",
        arguments_json=ARGS,
        arguments_sha256=hashlib.sha256(ARGS.encode()).hexdigest(),
        arguments_unavailable=None,
        start_time_unix_nano=1_700_000_000_000_000_000,
    )
    if status is ToolStatus.TIMEOUT:
        return TracePlan(trace_id, ReplayClass.REVIEW, (StepDecision(step, Decision.REVIEW, ("write_timeout",)),))
    return TracePlan(trace_id, ReplayClass.STATIC, (StepDecision(step, Decision.SKIP, ("write_committed", "result_not_recorded")),))


SHOW_JSON = (
    '{"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "plan": {"schemaVersion": "1", "traceId": "4bf92f3577b34da6a3ce929d0e0e4736", '
    '"replayClass": "REPLAY_CLASS_REVIEW", "steps": [{"step": {"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "callId": "call_1", '
    '"spanId": "00f067aa0ba902b7", "tool": "payments.charge", "effect": "EFFECT_WRITE", "effectSource": "EFFECT_SOURCE_DECLARED", '
    '"status": "TOOL_STATUS_TIMEOUT", "idempotencyKey": "order-17", '
    '"argumentsSha256": "95ea3adad0f5a1dfbc893c81031692d97e8bb570ea8f670dd856c002f6644db1", "attempts": 1, '
    '"startTimeUnixNano": "1700000000000000000", "argumentsUnavailable": "", "resultRecorded": false, "resultSha256": "", '
    '"requestedOnly": false, "malformed": [], "argumentsJson": "", "resultValue": ""}, "decision": "DECISION_REVIEW", '
    '"reasons": ["write_timeout"], "relatedCallIds": [], "relatedTraces": []}], "partial": false}, "state": "REVIEW_STATE_OPEN", '
    '"serviceName": "billing", "createdTime": "2023-11-14T22:13:20.123456789Z", "updatedTime": "2023-11-14T22:13:20.123456789Z", '
    '"resolvedBy": "", "resolutionNote": "", "verdict": "VERDICT_UNSPECIFIED", "verdictBy": "", "verdictEvidence": "", "duplicateEffectFound": false, "laterTraces": []}\n'
)

SHOW_TABLE = """\
trace        4bf92f3577b34da6a3ce929d0e0e4736
state        open
class        review
service      billing
created      2023-11-14T22:13:20.123456789Z
updated      2023-11-14T22:13:20.123456789Z
resolved_by  -
resolved     -
note         -

call_id  tool             effect  status   decision  reasons        related
call_1   payments.charge  write   timeout  review    write_timeout  -

reasons
write_timeout: a write timed out: the caller stopped hearing back, so the outcome is unknown; check: look the call up in the owning system (by its idempotency key, else its arguments and time): did it take effect once, not at all, or twice

history
time                            event         actor    state  class   verdict  note
2023-11-14T22:13:20.123456789Z  plan_written  billing  open   review  -        -
"""

LIST_TABLE = """\
trace                             state     class   service  held  updated                         resolved_by
t-static                          open      static  billing  0/1   2023-11-14T22:13:22.123456789Z  -
t-support                         resolved  review  support  1/1   2023-11-14T22:13:21.123456789Z  ada
4bf92f3577b34da6a3ce929d0e0e4736  open      review  billing  1/1   2023-11-14T22:13:20.123456789Z  -
"""


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Three items: TRACE (open, review, billing, T0), t-support (resolved at T0+1s), t-static (open, static, T0+2s)."""
    path = tmp_path / "queue.db"
    clock = Clock()
    store = SQLiteReviewStore(path, clock=clock)
    store.upsert(_plan(TRACE), service_name="billing")
    store.upsert(_plan("t-support", tool="email.send"), service_name="support")
    clock.now = T0 + 1_000_000_000
    store.resolve("t-support", resolved_by="ada", note="sent once")
    clock.now = T0 + 2_000_000_000
    store.upsert(_plan("t-static", status=ToolStatus.OK), service_name="billing")
    store.close()
    return path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_TRACEFENCE_")}
    env.update(extra)
    return env


def tracefence(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "otel_tracefence", "review", *args], capture_output=True, text=True, timeout=60, cwd=cwd, env=_env(**env)
    )


def test_show_json_is_canonical_protobuf_json(db: Path):
    assert hashlib.sha256(ARGS.encode()).hexdigest() == ARGS_SHA
    proc = tracefence("show", TRACE, "--db", str(db), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert proc.stdout == SHOW_JSON
    item = json_format.Parse(proc.stdout, pb.ReviewItem())
    with SQLiteReviewStore(db) as store:
        assert item == store.get(TRACE)


def test_show_table(db: Path):
    proc = tracefence("--db", str(db), "show", TRACE)  # --db before the action works too
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == SHOW_TABLE


def test_list_json_one_item_per_line_newest_first(db: Path):
    proc = tracefence("list", "--db", str(db), "--format", "json", "--state", "all")
    assert proc.returncode == 0, proc.stderr
    with SQLiteReviewStore(db) as store:
        expected = [store.get(t) for t in ("t-static", "t-support", TRACE)]
    assert proc.stdout == "".join(json_format.MessageToJson(i, indent=None, always_print_fields_with_no_presence=True) + "\n" for i in expected)
    lines = proc.stdout.splitlines()
    assert lines[2] + "\n" == SHOW_JSON
    support = json.loads(lines[1])
    assert (support["traceId"], support["state"], support["resolvedBy"], support["resolutionNote"], support["resolvedTime"]) == (
        "t-support",
        "REVIEW_STATE_RESOLVED",
        "ada",
        "sent once",
        "2023-11-14T22:13:21.123456789Z",
    )


@pytest.mark.parametrize(
    "args,expected",
    [
        ((), ["t-static", TRACE]),  # default: open only
        (("--state", "resolved"), ["t-support"]),
        (("--state", "all", "--class", "review"), ["t-support", TRACE]),
        (("--state", "all", "--class", "static,review"), ["t-static", "t-support", TRACE]),
        (("--class", "static"), ["t-static"]),
        (("--state", "all", "--service", "support"), ["t-support"]),
        (("--state", "all", "--limit", "2"), ["t-static", "t-support"]),
        (("--class", "dynamic"), []),
    ],
)
def test_list_filters(db: Path, args: tuple[str, ...], expected: list[str]):
    proc = tracefence("list", "--db", str(db), "--format", "json", *args)
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line)["traceId"] for line in proc.stdout.splitlines()] == expected


def test_list_table(db: Path):
    proc = tracefence("list", "--db", str(db), "--state", "all")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == LIST_TABLE
    empty = tracefence("list", "--db", str(db), "--class", "dynamic")
    assert (empty.returncode, empty.stdout) == (0, "no review items\n")


def test_resolve(db: Path):
    proc = tracefence("resolve", TRACE, "--db", str(db), "--by", "ada@example.invalid", "--note", "one charge in the ledger", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    printed = json_format.Parse(proc.stdout, pb.ReviewItem())
    with SQLiteReviewStore(db) as store:
        stored = store.get(TRACE)
    assert printed == stored
    assert stored.state == pb.REVIEW_STATE_RESOLVED
    assert (stored.resolved_by, stored.resolution_note) == ("ada@example.invalid", "one charge in the ledger")
    assert stored.resolved_time.ToNanoseconds() == stored.updated_time.ToNanoseconds() > T0
    assert stored.created_time.ToNanoseconds() == T0
    listed = tracefence("list", "--db", str(db), "--format", "json")
    assert [json.loads(line)["traceId"] for line in listed.stdout.splitlines()] == ["t-static"]


def test_resolve_table_output(db: Path):
    proc = tracefence("resolve", "t-static", "--db", str(db), "--by", "ops-bot", "--note", "line1\nline2\x1b[31m")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1] == "state        resolved"
    assert lines[6] == "resolved_by  ops-bot"
    assert lines[8] == "note         line1\\u000aline2\\u001b[31m"  # control characters never reach the terminal raw


def test_db_from_environment(db: Path, tmp_path: Path):
    proc = tracefence("show", TRACE, "--format", "json", OTEL_TRACEFENCE_REVIEW_DB=str(db))
    assert (proc.returncode, proc.stdout) == (0, SHOW_JSON)
    # Neither --db nor the variable: tracefence-review.db in the working directory.
    work = tmp_path / "work"
    work.mkdir()
    (work / "tracefence-review.db").write_bytes(db.read_bytes())
    proc = tracefence("show", TRACE, "--format", "json", cwd=work)
    assert (proc.returncode, proc.stdout) == (0, SHOW_JSON)


def _assert_clean_failure(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr


def test_missing_database_fails_cleanly_and_creates_nothing(tmp_path: Path):
    missing = tmp_path / "nope.db"
    for args in (("list",), ("show", TRACE), ("resolve", TRACE, "--by", "ada", "--note", "x")):
        proc = tracefence(*args, "--db", str(missing))
        _assert_clean_failure(proc, f"tracefence review {args[0]}: {missing}: no review database there")
    proc = tracefence("list", cwd=tmp_path)
    _assert_clean_failure(proc, "tracefence-review.db: no review database there", "OTEL_TRACEFENCE_REVIEW_DB")
    assert list(tmp_path.iterdir()) == []


def test_unknown_trace_id_fails_cleanly(db: Path):
    _assert_clean_failure(tracefence("show", "f" * 32, "--db", str(db)), f"no review item for trace id '{'f' * 32}'")
    _assert_clean_failure(tracefence("resolve", "f" * 32, "--db", str(db), "--by", "ada", "--note", "x"), "no review item for trace id")
    with SQLiteReviewStore(db) as store:
        assert store.get("f" * 32) is None
        items, _ = store.list(state=pb.REVIEW_STATE_UNSPECIFIED)
        assert len(items) == 3


def test_other_failures_are_clean(db: Path, tmp_path: Path):
    _assert_clean_failure(tracefence("resolve", TRACE, "--db", str(db), "--by", " ", "--note", "x"), "resolved_by must name who")
    junk = tmp_path / "junk.db"
    junk.write_text("this is not a database, only some text\n" * 5)
    _assert_clean_failure(tracefence("list", "--db", str(junk)), "not a SQLite database")
    proc = tracefence("list", "--db", str(db), "--class", "review,bogus")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "dynamic, injected, static, review" in proc.stderr
    proc = tracefence("resolve", TRACE, "--db", str(db), "--note", "x")
    assert proc.returncode == 2 and "--by" in proc.stderr


def test_db_from_config_file(db: Path, tmp_path: Path):
    config = tmp_path / "tracefence.yaml"
    config.write_text(f"review_db: {json.dumps(str(db))}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "otel_tracefence", "--config", str(config), "review", "show", TRACE, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=_env(),
    )
    assert (proc.returncode, proc.stdout) == (0, SHOW_JSON), proc.stderr
