"""``/readyz``'s state machine (``service/readiness.py``) with real checks: starting until the service started and its
first checks finished, then each check's problem by name, and stopping once the service takes no more calls."""

from __future__ import annotations

import socket
import threading

import pytest

from otel_tracefence.service.readiness import Readiness, folder_check, host_port, upstream_check
from service_helpers import free_port, wait_for


def test_starting_then_the_checks_then_stopping(tmp_path):
    listener = socket.create_server(("127.0.0.1", 0))
    up = listener.getsockname()[1]
    down = free_port()
    accepting = threading.Event()
    accepting.set()
    release = threading.Event()

    def slow_first() -> None:
        release.wait(10)  # the first round is under way until the test lets it finish
        return None

    readiness = Readiness(
        {"slow": slow_first, "up": upstream_check(f"http://127.0.0.1:{up}"), "down": upstream_check(f"127.0.0.1:{down}"), "file": folder_check(str(tmp_path / "out.jsonl"))},
        accepting.is_set, every_s=0.05,
    )  # fmt: skip
    try:
        assert readiness.status() == (False, {"starting": "the service is starting"})
        readiness.start()
        assert readiness.status() == (False, {"starting": "the first checks have not finished"})
        release.set()
        ready, problems = wait_for(lambda: "starting" not in (s := readiness.status())[1] and s, what="the first round")
        assert (ready, list(problems)) == (False, ["down"])
        assert problems["down"].startswith(f"upstream 127.0.0.1:{down} does not answer: ")
        accepting.clear()
        assert readiness.status() == (False, {"stopping": "the service is stopping: it takes no more calls"})
    finally:
        readiness.close()
        listener.close()


def test_a_check_that_raises_is_a_problem_not_a_crash():
    def broken() -> None:
        raise RuntimeError("no")

    assert Readiness({"broken": broken}, lambda: True).check_now() == {"broken": "broken: the check failed: RuntimeError('no')"}


@pytest.mark.parametrize(
    "endpoint, expected",
    [("127.0.0.1:4317", ("127.0.0.1", 4317)), ("http://collector:4318/v1/traces", ("collector", 4318)), ("https://intake.example", ("intake.example", 443)), ("http://h", ("h", 80))],
)
def test_the_address_an_upstream_check_connects_to(endpoint, expected):
    assert host_port(endpoint) == expected
