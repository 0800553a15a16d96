"""One review queue in PostgreSQL shared by two ``tracefence serve`` processes (real OTLP gRPC exporters as
clients), read and resolved through the CLI and either replica's review API; ``review show`` prints the history."""

from __future__ import annotations

import json
from pathlib import Path

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.review import open_review_store
from service_helpers import Client, ServeProcess, agent_trace, fatal, tracefence, wait_for
from test_cli_review import SHOW_TABLE, T0, TRACE, Clock, _plan


def test_two_serve_replicas_write_one_postgres_queue(tmp_path: Path, pg_url: str):
    replicas = [
        ServeProcess(
            "--endpoint", "127.0.0.1:0", "--review-db", pg_url, "--output-file", str(tmp_path / f"out-{n}.jsonl"), "--decision-wait-ms", "50",
            cwd=tmp_path,
        )
        for n in range(2)
    ]
    clients: list[Client] = []
    try:
        ports = []
        for serve in replicas:
            listening = serve.log("tracefence serve listening")
            assert listening["review_db"] == pg_url  # no password in this URL: shown as given
            ports.append(listening["port"])
        clients = [Client(ports[0], "billing-agent"), Client(ports[1], "support-agent")]
        traces = {agent_trace(clients[0]): "billing-agent", agent_trace(clients[1]): "support-agent", agent_trace(clients[1]): "support-agent"}
        agent_trace(clients[0], review=False)  # injected: not queued
        with open_review_store(pg_url, create=False) as store:
            items = wait_for(lambda: (lambda page: page if len(page) == 3 else None)(store.list()[0]), timeout=30, what="3 review items in PostgreSQL")
            assert {i.trace_id: i.service_name for i in items} == traces
            assert all(i.state == pb.REVIEW_STATE_OPEN and i.plan.replay_class == pb.REPLAY_CLASS_REVIEW for i in items)
            first = next(t for t, s in traces.items() if s == "billing-agent")
            # Resolved through replica 1's review API, the item written by replica 0.
            resolved = tracefence("review", "--endpoint", f"http://127.0.0.1:{ports[1]}", "resolve", first, "--by", "ada", "--note", "charged once")
            assert resolved.returncode == 0, resolved.stderr
            assert store.get(first).resolved_by == "ada"
            assert [(e.kind, e.actor) for e in store.history(first)] == [("plan_written", "billing-agent"), ("resolved", "ada")]
        # Both replicas' review APIs and the CLI on the database show one queue.
        listed = []
        for source in (("--endpoint", f"http://127.0.0.1:{ports[0]}"), ("--endpoint", f"http://127.0.0.1:{ports[1]}"), ("--db", pg_url)):
            proc = tracefence("review", *source, "list", "--state", "all", "--format", "json")
            assert proc.returncode == 0, proc.stderr
            listed.append([(j["traceId"], j["state"], j["serviceName"]) for j in map(json.loads, proc.stdout.splitlines())])
        assert listed[0] == listed[1] == listed[2]
        assert sorted(listed[0]) == sorted((t, "REVIEW_STATE_RESOLVED" if t == first else "REVIEW_STATE_OPEN", s) for t, s in traces.items())
        shown = tracefence("review", "--endpoint", f"http://127.0.0.1:{ports[0]}", "show", first)
        assert shown.returncode == 0, shown.stderr
        history = shown.stdout.split("\n\nhistory\n", 1)[1].splitlines()
        assert [line.split()[1:3] for line in history[1:]] == [["plan_written", "billing-agent"], ["resolved", "ada"]]
        assert history[2].split()[-5:] == ["resolved", "review", "-", "charged", "once"]  # ... class, verdict (none), note
    finally:
        for client in clients:
            client.shutdown()
        for serve in replicas:
            serve.stop()
    for serve in replicas:
        assert "Traceback" not in serve.stderr()


def test_review_show_prints_the_history_from_postgres(pg_url: str):
    clock = Clock()
    with open_review_store(pg_url, clock=clock) as store:
        store.upsert(_plan(TRACE), service_name="billing")
        clock.now = T0 + 1_000_000_000
        store.resolve(TRACE, resolved_by="ada", note="charged once")
        clock.now = T0 + 2_000_000_000
        store.resolve(TRACE, resolved_by="bob", note="refunded the second charge")
    proc = tracefence("review", "--db", pg_url, "show", TRACE[:8].upper())
    assert (proc.returncode, proc.stderr) == (0, "")
    head, _, _ = SHOW_TABLE.partition("\nhistory\n")
    head = (
        head.replace("state        open", "state        resolved")
        .replace("updated      2023-11-14T22:13:20.123456789Z", "updated      2023-11-14T22:13:22.123456789Z")
        .replace("resolved_by  -", "resolved_by  bob")
        .replace("resolved     -", "resolved     2023-11-14T22:13:22.123456789Z")
        .replace("note         -", "note         refunded the second charge")
    )
    assert proc.stdout == head + (
        "\nhistory\n"
        "time                            event         actor    state     class   verdict  note\n"
        "2023-11-14T22:13:20.123456789Z  plan_written  billing  open      review  -        -\n"
        "2023-11-14T22:13:21.123456789Z  resolved      ada      resolved  review  -        charged once\n"
        "2023-11-14T22:13:22.123456789Z  resolved      bob      resolved  review  -        refunded the second charge\n"
    )



def test_review_against_an_unreachable_postgres_fails_in_one_line_without_the_password():
    proc = tracefence("review", "--db", "postgresql://tf:s3cret@127.0.0.1:9/queue?connect_timeout=2", "list")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.startswith("tracefence review list: postgresql://tf:***@127.0.0.1:9/queue?connect_timeout=2: cannot use the PostgreSQL review database: ")
    assert "s3cret" not in proc.stderr and proc.stderr.count("\n") == 1


def test_a_replica_holds_review_items_while_postgres_is_down_and_writes_them_when_it_is_back(tmp_path: Path, postgres_server, pg_url: str):
    serve = ServeProcess(
        "--endpoint", "127.0.0.1:0", "--review-db", pg_url, "--output-file", str(tmp_path / "out.jsonl"), "--decision-wait-ms", "50", cwd=tmp_path
    )
    client = None
    try:
        port = serve.log("tracefence serve listening")["port"]
        client = Client(port, "billing-agent")
        postgres_server.stop()
        try:
            trace = agent_trace(client)
            held = wait_for(
                lambda: next((e for e in serve.logs() if f"review item for trace {trace} not written" in e.get("message", "")), None),
                timeout=30,
                what="the failed review write logged",
            )
            assert held["level"] == "ERROR"
            assert "the PostgreSQL review database is unavailable" in held["message"] and "held in memory" in held["message"]
        finally:
            postgres_server.start()
        with open_review_store(pg_url, create=False) as store:
            item = wait_for(lambda: store.get(trace), timeout=30, what="the held review item written after PostgreSQL came back")
        assert (item.service_name, item.plan.replay_class, item.state) == ("billing-agent", pb.REPLAY_CLASS_REVIEW, pb.REVIEW_STATE_OPEN)
    finally:
        if client is not None:
            client.shutdown()
        serve.stop()


def test_serve_and_tools_with_an_unreachable_postgres_exit_2_without_the_password(tmp_path: Path):
    url = "postgresql://tf:s3cret@127.0.0.1:9/queue?connect_timeout=2"
    shown = "postgresql://tf:***@127.0.0.1:9/queue?connect_timeout=2"
    serve = tracefence("serve", "--endpoint", "127.0.0.1:0", "--review-db", url, "--output-file", str(tmp_path / "out.jsonl"), cwd=tmp_path)
    assert serve.returncode == 2
    assert len(serve.stderr.splitlines()) == 1
    assert fatal(serve.stderr).startswith(f"tracefence serve: cannot start: {shown}: cannot use the PostgreSQL review database: ")
    tools = tracefence("tools", "--db", url, cwd=tmp_path)
    assert tools.returncode == 2
    assert f"{shown}: cannot use the PostgreSQL review database: " in tools.stderr
    assert "s3cret" not in serve.stderr + tools.stderr


def test_an_in_process_span_processor_and_a_serve_replica_write_one_postgres_queue(tmp_path: Path, pg_url: str):
    """Every door writes the one queue: a TraceFenceSpanProcessor in an agent process, and tracefence serve."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from otel_tracefence.sdk.processor import TraceFenceSpanProcessor

    serve = ServeProcess("--endpoint", "127.0.0.1:0", "--review-db", pg_url, "--output-file", str(tmp_path / "out.jsonl"), "--decision-wait-ms", "50", cwd=tmp_path)
    client = None
    processor = TraceFenceSpanProcessor(SimpleSpanProcessor(InMemorySpanExporter()), review_db=pg_url, decision_wait_ms=0)
    try:
        client = Client(serve.log("tracefence serve listening")["port"], "serve-agent")
        local = Client(0, "inproc-agent", batch=True)  # batch: never exported over OTLP (send() is not called)
        local.provider.add_span_processor(processor)  # the agent's own processor
        in_process = agent_trace(local)
        via_serve = agent_trace(client)
        with open_review_store(pg_url, create=False) as store:
            wait_for(lambda: store.get(via_serve), timeout=30, what="the item written by serve")
            assert {i.trace_id: i.service_name for i in store.list()[0]} == {in_process: "inproc-agent", via_serve: "serve-agent"}
    finally:
        processor.shutdown()
        if client is not None:
            client.shutdown()
        serve.stop()
