"""The command line behaves (issue 28, item 5): Ctrl-C ends a command with one line and exit 130, never a traceback;
``--log-level`` is honoured by every command (``serve`` defaults to INFO, the others to WARNING); ``serve`` takes the
review database as ``--db``, as the other commands name it (``--review-db`` kept)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from service_helpers import ServeProcess, clean_env, sigint_default, wait_for


def test_ctrl_c_exits_130_with_one_line(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "otel_tracefence", "plan", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=clean_env(),
                            preexec_fn=sigint_default)  # fmt: skip
    try:
        time.sleep(1.5)  # started and waiting on standard input
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (proc.returncode, out, err) == (130, "", "tracefence plan: interrupted\n")


def _stop(serve: ServeProcess) -> None:
    serve.proc.send_signal(signal.SIGTERM)
    assert serve.proc.wait(timeout=20) == 0


def test_serve_honours_log_level_warning_and_takes_db(tmp_path):
    db = tmp_path / "review.db"
    serve = ServeProcess("--endpoint", "127.0.0.1:0", "--http-endpoint", "none", "--upstream", "127.0.0.1:9", "--db", str(db), "--log-level", "WARNING", cwd=tmp_path)
    try:
        warning = serve.log("upstream transport")  # a no-scheme upstream is a WARNING: it is logged
        wait_for(db.exists, what="the review database --db names")
        _stop(serve)
    finally:
        serve.stop()
    assert warning["level"] == "WARNING"
    assert sorted({e.get("level") for e in serve.logs()}) == ["WARNING"]  # no INFO line (was: WARNING read as INFO)


def test_serve_logs_info_by_default(tmp_path):
    serve = ServeProcess("--endpoint", "127.0.0.1:0", "--http-endpoint", "none", "--upstream", "http://127.0.0.1:9", "--review-db", str(tmp_path / "r.db"), cwd=tmp_path)
    try:
        listening = serve.log("tracefence serve listening")
        _stop(serve)
    finally:
        serve.stop()
    assert listening["level"] == "INFO"


def test_ui_stops_on_sigterm_with_exit_0_as_serve_does(tmp_path):
    from otel_tracefence.review.store import SQLiteReviewStore

    SQLiteReviewStore(str(tmp_path / "review.db")).close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "otel_tracefence", "ui", "--db", str(tmp_path / "review.db"), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=clean_env(),
    )
    try:
        started = proc.stderr.readline()
        time.sleep(1.0)  # serving, most likely: before, the command's own handler exits 0 too
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert started.startswith("tracefence ui: review page for ")
    assert (proc.returncode, out, err) == (0, "", "")
