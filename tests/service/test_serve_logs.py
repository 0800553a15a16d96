"""``tracefence serve``'s logs (issue 28, part 3), on a real process: the level exactly as configured (flag, config
file, ``OTEL_TRACEFENCE_SERVICE__LOG_LEVEL``, ``OTEL_LOG_LEVEL``), the text format keeping every field, one handler
(each line once), fatal errors and the gRPC C-core's own lines through it, the trace context on a line logged
inside a span."""

from __future__ import annotations

import json
import logging
import re
import signal
import socket
import sys
import threading

from opentelemetry.sdk.trace import TracerProvider

from otel_tracefence.service import logs
from service_helpers import ServeProcess, fatal, free_port, tracefence, wait_for

NO_SCHEME = "127.0.0.1:9"  # an upstream with no scheme: its "upstream transport" line is a WARNING


def _serve(tmp_path, *args: str, **env: str) -> ServeProcess:
    return ServeProcess("--endpoint", "127.0.0.1:0", "--upstream", NO_SCHEME, "--review-db", str(tmp_path / "r.db"), *args, cwd=tmp_path, **env)


def _stopped(serve: ServeProcess) -> list[str]:
    """Every stderr line of a service stopped by SIGTERM (exit 0)."""
    try:
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=20) == 0, serve.stderr()
        serve._reader.join(timeout=5)
    finally:
        serve.stop()
    return serve.stderr().splitlines()


def test_the_config_file_sets_level_and_text_format_and_every_field_is_kept(tmp_path):
    config = tmp_path / "tracefence.yaml"
    config.write_text("service:\n  log_level: warn\n  log_format: text\n")
    serve = _serve(tmp_path, OTEL_TRACEFENCE_CONFIG=str(config), OTEL_LOG_LEVEL="debug")  # the file wins over OTEL_LOG_LEVEL
    wait_for(lambda: "upstream transport" in serve.stderr(), what="the upstream transport line")
    lines = _stopped(serve)
    assert len(lines) == 1, lines  # WARNING and up only: no INFO line (listening, stopping, stopped)
    found = re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z WARNING otel_tracefence\.service: upstream transport (.*)", lines[0])
    assert found, lines[0]
    assert found.group(1) == (
        f'upstream={NO_SCHEME} protocol=grpc transport=tls because="no scheme: TLS is the default; write http://{NO_SCHEME} for plaintext"'
    )


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_otel_log_level_applies_when_nothing_else_sets_the_level(tmp_path):
    port = free_port()
    serve = ServeProcess("--endpoint", f"127.0.0.1:{port}", "--upstream", NO_SCHEME, "--review-db", str(tmp_path / "r.db"), cwd=tmp_path, OTEL_LOG_LEVEL="ERROR")
    wait_for(lambda: _listening(port), what="the receiver listening")
    assert _stopped(serve) == []  # nothing at ERROR or above in a clean run: not the WARNING, no INFO line


def test_a_level_the_variable_does_not_name_is_said_once_and_info_applies(tmp_path):
    serve = _serve(tmp_path, OTEL_LOG_LEVEL="loud")
    serve.log("tracefence serve listening")
    entries = [json.loads(line) for line in _stopped(serve)]
    ignored = [e for e in entries if "OTEL_LOG_LEVEL" in e["message"]]
    assert [(e["level"], e["message"]) for e in ignored] == [
        ("WARNING", "OTEL_LOG_LEVEL=loud is ignored: 'loud': a log level is one of debug, info, warning, error, critical (or warn, fatal)")
    ]
    assert {e["level"] for e in entries} == {"INFO", "WARNING"}


def test_the_flag_wins_over_the_setting(tmp_path):
    port = free_port()
    serve = ServeProcess(
        "--endpoint", f"127.0.0.1:{port}", "--upstream", NO_SCHEME, "--review-db", str(tmp_path / "r.db"), "--log-level", "ERROR",
        cwd=tmp_path, OTEL_TRACEFENCE_SERVICE__LOG_LEVEL="debug",
    )  # fmt: skip
    wait_for(lambda: _listening(port), what="the receiver listening")
    assert _stopped(serve) == []


def test_every_line_is_json_once_and_grpc_core_lines_come_through_the_handler(tmp_path):
    """``GRPC_VERBOSITY=INFO`` (the operator's own, kept) makes the C-core write its warning that INFO is not for
    production, to descriptor 2: it comes as a JSON line of the logger ``grpc``, at its own severity."""
    serve = _serve(tmp_path, GRPC_VERBOSITY="INFO")
    serve.log("tracefence serve listening")
    lines = _stopped(serve)
    entries = [json.loads(line) for line in lines]  # every line: no plain text in the stream
    core = [e for e in entries if e["logger"] == "grpc" and e["message"].startswith("Log level INFO is not suitable for production")]
    assert [(e["level"], e["source"].split(":")[0]) for e in core] == [("WARNING", "log.cc")]
    messages = [e["message"] for e in entries if e["logger"] == "otel_tracefence.service"]
    assert [m for m in messages if m in ("tracefence serve listening", "stopping", "tracefence serve stopped")] == [
        "tracefence serve listening", "stopping", "tracefence serve stopped",
    ]  # each once: one handler


def test_a_fatal_error_is_a_json_line(tmp_path):
    db_folder = tmp_path / "missing"
    done = tracefence("serve", "--endpoint", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9", "--review-db", str(db_folder / "r.db"), cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1
    assert fatal(lines[0]) == f"tracefence serve: cannot start: review database {db_folder / 'r.db'}: its folder {db_folder} does not exist"


def test_the_text_format_keeps_fields_exceptions_and_the_trace_context():
    import io

    out = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, sys.excepthook, threading.excepthook)
    logs.configure("INFO", "text", stream=out)
    try:
        log = logging.getLogger("otel_tracefence.service")
        tracer = TracerProvider().get_tracer("t")
        with tracer.start_as_current_span("work") as span:
            log.info("a line", extra={"count": 3, "who": "two words", "items": [1, "a"], "flag": True})
        try:
            raise ValueError("boom")
        except ValueError:
            log.error("failed", exc_info=True)
    finally:  # this test process's own logging as it was
        root.handlers[:], level, sys.excepthook, threading.excepthook = saved
        root.setLevel(level)
    context = span.get_span_context()
    first, *rest = out.getvalue().splitlines()
    assert first.split(" ", 1)[1] == (
        f'INFO otel_tracefence.service: a line count=3 who="two words" items=[1, "a"] flag=true '
        f"trace_id={context.trace_id:032x} span_id={context.span_id:016x}"
    )
    assert rest[0].endswith("ERROR otel_tracefence.service: failed") and rest[-1] == "ValueError: boom"
