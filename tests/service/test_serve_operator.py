"""Issue 13 for ``tracefence serve`` and the top-level CLI: the transport of every upstream logged at
startup, a review endpoint on the receiver's own address refused, ``--version``. Real processes."""

from __future__ import annotations

import signal

import pytest

import otel_tracefence
from otel_tracefence.cli.serve import upstream_transport
from otel_tracefence.core.config import UpstreamSettings
from service_helpers import ServeProcess, tracefence


def test_version():
    proc = tracefence("--version")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"tracefence 0.1.0 ({otel_tracefence.engine()} engine)\n", "")


def test_each_upstreams_transport_is_logged_at_startup(tmp_path):
    serve = ServeProcess(
        "--endpoint", "127.0.0.1:0", "--upstream", "127.0.0.1:9", "--upstream", "http://127.0.0.1:9", "--upstream", "https://127.0.0.1:9",
        "--review-db", str(tmp_path / "r.db"),
        cwd=tmp_path,
    )
    try:
        serve.log("tracefence serve listening")
        engine_line = serve.log("engine")
        lines = [
            (e["level"], e["upstream"], e["transport"], e["because"]) for e in serve.logs() if e.get("message") == "upstream transport"
        ]
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=20) == 0
    finally:
        serve.stop()
    assert (engine_line["level"], engine_line["engine"]) == ("INFO", otel_tracefence.engine())  # compiled or python
    assert lines == [
        ("WARNING", "127.0.0.1:9", "tls", "no scheme: TLS is the default; write http://127.0.0.1:9 for plaintext"),
        ("INFO", "http://127.0.0.1:9", "plaintext", "http:// endpoint"),
        ("INFO", "https://127.0.0.1:9", "tls", "https:// endpoint"),
    ]


@pytest.mark.parametrize(
    "settings, environ, expected",
    [
        ({"endpoint": "collector:4317", "insecure": True}, {}, (False, "insecure: true")),
        ({"endpoint": "http://collector:4317", "insecure": False}, {}, (True, "insecure: false")),
        ({"endpoint": "https://collector:4317", "insecure": True}, {}, (True, "https:// endpoint")),
        ({"endpoint": "collector:4317"}, {"OTEL_EXPORTER_OTLP_INSECURE": "true"}, (False, "OTEL_EXPORTER_OTLP_INSECURE=true")),
        ({"endpoint": "collector:4317"}, {"OTEL_EXPORTER_OTLP_TRACES_INSECURE": "false", "OTEL_EXPORTER_OTLP_INSECURE": "true"}, (True, "OTEL_EXPORTER_OTLP_TRACES_INSECURE=false")),
        ({"endpoint": "collector:4317", "certificate_file": "ca.pem"}, {}, (True, "certificate_file given")),
    ],
)
def test_upstream_transport_follows_the_exporters_rule(settings, environ, expected):
    assert upstream_transport(UpstreamSettings(**settings), environ) == expected


@pytest.mark.parametrize(
    "endpoint, review_endpoint",
    [("0.0.0.0:4317", "127.0.0.1:4317"), ("127.0.0.1:4317", "localhost:4317"), ("10.0.0.1:4317", "10.0.0.1:4317"), ("127.0.0.1:4317", "[::]:4317")],
)
def test_a_review_endpoint_on_the_receivers_address_is_refused_naming_the_fix(tmp_path, endpoint, review_endpoint):
    proc = tracefence("serve", "--endpoint", endpoint, "--review-endpoint", review_endpoint, "--review-db", str(tmp_path / "r.db"), cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        f"tracefence: tracefence serve flags: review_endpoint {review_endpoint} is the receiver's endpoint {endpoint}: "
        "leave review_endpoint out to serve the review API beside the receiver, or give it a port of its own\n"
    )


def test_review_endpoints_apart_are_accepted():
    from otel_tracefence.core.config import ServiceSettings

    for endpoint, review in (("127.0.0.1:4317", "127.0.0.1:4319"), ("127.0.0.1:0", "127.0.0.1:0"), ("10.0.0.1:4317", "10.0.0.2:4317")):
        assert ServiceSettings(endpoint=endpoint, review_endpoint=review).review_endpoint == review
