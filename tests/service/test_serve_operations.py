"""``tracefence serve``'s operations surface (issue 28, part 3), on a real ``tracefence serve`` process with real HTTP
requests: ``/metrics`` (Prometheus text, read back by ``prometheus_client``'s own parser) with the semantic
conventions' SDK component metrics beside tracefence's, ``/healthz`` and ``/readyz`` through start, an upstream that
does not answer, a review store that takes no writes, and the stop. Every listener on 127.0.0.1."""

from __future__ import annotations

import re
import shutil
import signal
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from service_helpers import Client, RecordingUpstream, ServeProcess, agent_trace, free_port, wait_for

SERVICE_TYPE = "otel_tracefence.service.server.TraceFenceService"


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """``GET /metrics``: every sample by its name, (labels, value)."""
    response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def only(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> tuple[dict[str, str], float]:
    found = [(have, value) for have, value in samples.get(name, []) if all(have.get(k) == want for k, want in labels.items())]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


def readyz(port: int) -> tuple[int, dict[str, Any]]:
    response = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10)
    return response.status_code, response.json()


def test_metrics_are_prometheus_text_with_the_semantic_conventions_names(tmp_path, upstream):
    serve = ServeProcess("--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{upstream.port}", "--review-db", str(tmp_path / "r.db"), "--decision-wait-ms", "0", cwd=tmp_path)
    client = None
    try:
        listening = serve.log("tracefence serve listening")
        assert listening["metrics_port"] == listening["http_port"]  # on the OTLP/HTTP port by default
        client = Client(listening["port"], batch=True)
        trace_id = agent_trace(client, review=True)  # a root, a read, a timed-out write: 3 spans, review
        client.send()
        upstream.wait_spans(3, trace_id)
        samples = wait_for(lambda: (s := scrape(listening["http_port"])) and "otel_sdk_exporter_span_exported_total" in s and s, what="a scrape")
    finally:
        if client is not None:
            client.shutdown()
        serve.stop()
    processor = {"otel_component_type": SERVICE_TYPE, "tracefence_component": "service"}
    labels, processed = only(samples, "otel_sdk_processor_span_processed_total", **processor)
    assert processed == 3 and "error_type" not in labels
    assert re.fullmatch(re.escape(SERVICE_TYPE) + r"/\d+", labels["otel_component_name"])
    name = labels["otel_component_name"]  # one component: every metric of the service carries the same name
    assert only(samples, "otel_sdk_processor_span_queue_capacity", **processor)[1] == 100_000  # service.intake_queue_spans
    assert only(samples, "otel_sdk_processor_span_queue_size", **processor)[1] == 0
    assert only(samples, "tracefence_spans_received_total", otel_component_name=name)[1] == 3
    assert only(samples, "tracefence_traces_decided_total", otel_component_name=name, tracefence_replay_class="review")[1] == 1
    exporter = {"otel_component_type": "otlp_grpc_span_exporter", "tracefence_upstream": f"http://127.0.0.1:{upstream.port}"}
    labels, exported = only(samples, "otel_sdk_exporter_span_exported_total", **exporter)
    assert exported == 3 and "error_type" not in labels and re.fullmatch(r"otlp_grpc_span_exporter/\d+", labels["otel_component_name"])
    assert only(samples, "otel_sdk_exporter_span_inflight", **exporter)[1] == 0
    assert only(samples, "tracefence_forward_queue_size", otel_component_name=name)[1] == 0
    assert only(samples, "target_info")[0]["service_name"] == "tracefence"
    assert only(samples, "process_open_fds")[1] > 0


def test_spans_an_upstream_refuses_count_as_exported_with_their_error_type(tmp_path):
    """An upstream that refuses for good (UNIMPLEMENTED: no trace service there) drops the batch: counted in
    ``otel.sdk.exporter.span.exported`` with ``error.type`` the drop's reason, and in ``tracefence.forward.dropped``."""
    import grpc
    from concurrent import futures

    refusing = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=[("grpc.so_reuseport", 0)])
    port = refusing.add_insecure_port("127.0.0.1:0")
    refusing.start()
    serve = ServeProcess(
        "--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{port}", "--review-db", str(tmp_path / "r.db"), "--decision-wait-ms", "0",
        "--metrics-endpoint", "127.0.0.1:0", "--http-endpoint", "none", cwd=tmp_path,
    )  # fmt: skip
    client = None
    try:
        listening = serve.log("tracefence serve listening")
        assert (listening["http_port"], listening["metrics_endpoint"]) == (None, "127.0.0.1:0")
        client = Client(listening["port"], batch=True)
        agent_trace(client, review=False)
        client.send()
        upstream = {"tracefence_upstream": f"http://127.0.0.1:{port}"}

        def dropped():
            samples = scrape(listening["metrics_port"])
            return [(labels, value) for labels, value in samples.get("otel_sdk_exporter_span_exported_total", []) if labels.get("error_type")] and samples

        samples = wait_for(dropped, timeout=20, what="the refused spans counted")
    finally:
        if client is not None:
            client.shutdown()
        serve.stop()
        refusing.stop(0)
    assert only(samples, "otel_sdk_exporter_span_exported_total", error_type="rejected", **upstream)[1] == 3
    # The spans taken: none (the Prometheus exporter gives a family's points one label set: no error.type is "").
    assert only(samples, "otel_sdk_exporter_span_exported_total", **upstream, error_type="")[1] == 0
    assert only(samples, "tracefence_forward_dropped_total", reason="rejected", **upstream)[1] == 3


def test_readyz_follows_the_upstream_the_review_store_and_the_stop(tmp_path):
    port = free_port()  # nobody listens there yet
    folder = tmp_path / "db"
    folder.mkdir()
    serve = ServeProcess(
        "--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{port}", "--review-db", str(folder / "r.db"),
        "--metrics-endpoint", "127.0.0.1:0", cwd=tmp_path, OTEL_TRACEFENCE_SERVICE__DRAIN_TIMEOUT_S="4",
    )  # fmt: skip
    upstream = RecordingUpstream()
    try:
        ops = serve.log("tracefence serve listening")["metrics_port"]
        assert httpx.get(f"http://127.0.0.1:{ops}/healthz", timeout=5).text == "ok\n"
        status, body = wait_for(lambda: "starting" not in (r := readyz(ops))[1].get("problems", {}) and r, what="the first checks")
        assert (status, body["status"], list(body["problems"])) == (503, "not ready", [f"upstream http://127.0.0.1:{port}"])
        assert body["problems"][f"upstream http://127.0.0.1:{port}"].startswith(f"upstream http://127.0.0.1:{port} does not answer: ")
        upstream.start(port)
        assert wait_for(lambda: readyz(ops)[0] == 200, timeout=15, what="ready once the upstream answers")
        assert readyz(ops)[1] == {"status": "ready"}

        shutil.rmtree(folder)  # the review database's folder gone: the store takes no writes
        status, body = wait_for(lambda: (r := readyz(ops))[0] == 503 and r, timeout=15, what="not ready without the review store")
        assert list(body["problems"]) == ["review store"]
        assert "takes no new file" in body["problems"]["review store"]
        folder.mkdir()
        assert wait_for(lambda: readyz(ops)[0] == 200, timeout=15, what="ready again")

        upstream.stop()  # what the stop must forward waits for it: the drain takes its time
        client = Client(serve.log("tracefence serve listening")["port"], batch=True)
        agent_trace(client, review=False)
        client.send()
        client.shutdown()
        serve.proc.send_signal(signal.SIGTERM)
        serve.log("stopping")  # logged just before the stop begins: the state follows within moments
        status, body = wait_for(lambda: "stopping" in (r := readyz(ops))[1].get("problems", {}) and r, timeout=3, what="the stopping state")
        assert (status, body) == (503, {"status": "not ready", "problems": {"stopping": "the service is stopping: it takes no more calls"}})
        assert httpx.get(f"http://127.0.0.1:{ops}/healthz", timeout=5).status_code == 200  # alive while it drains
        assert serve.proc.wait(timeout=30) == 0
    finally:
        serve.stop()
        upstream.stop()


def test_metrics_can_be_turned_off_and_health_stays(tmp_path: Path, upstream):
    serve = ServeProcess(
        "--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{upstream.port}", "--review-db", str(tmp_path / "r.db"),
        cwd=tmp_path, OTEL_TRACEFENCE_SERVICE__PROMETHEUS_METRICS="false",
    )  # fmt: skip
    try:
        port = serve.log("tracefence serve listening")["http_port"]
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code == 404
        assert wait_for(lambda: readyz(port)[0] == 200, what="ready") is True
    finally:
        serve.stop()


def test_the_metrics_listener_needs_a_port_of_its_own():
    import pytest

    from otel_tracefence.core.config import ServiceSettings

    with pytest.raises(ValueError, match="metrics_endpoint 127.0.0.1:4318 is the http_endpoint 127.0.0.1:4318: give /metrics and health a port of its own"):
        ServiceSettings(metrics_endpoint="127.0.0.1:4318")
    with pytest.raises(ValueError, match="'loud': a log level is one of debug, info, warning, error, critical"):
        ServiceSettings(log_level="loud")
    assert (ServiceSettings(log_level="Warn").log_level, ServiceSettings(metrics_endpoint="none").metrics_endpoint) == ("WARNING", "")
