"""``tracefence plan`` shows progress over the whole run on a terminal, reading included (issue 28, part 5;
docs/decisions/operations.md 892): standard error is a real pseudo-terminal here, standard output a pipe."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading

from conftest import ROOT
from service_helpers import clean_env
from test_plan_stream import _stream_file, _trace_lines


def _on_a_terminal(*args: str) -> tuple[int, str, str]:
    """Run ``tracefence ARGS`` with standard error on a pseudo-terminal: exit code, standard output, what the terminal showed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))  # a terminal 160 columns wide (a new one has none)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "otel_tracefence", *args], stdout=subprocess.PIPE, stderr=slave, cwd=ROOT, env=clean_env())
        os.close(slave)
        out: list[bytes] = []
        reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)  # a full pipe must not stop the child
        reader.start()
        shown = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        proc.wait(timeout=60)
        reader.join(timeout=60)
    finally:
        os.close(master)
    return proc.returncode, b"".join(out).decode(), re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", shown.decode(errors="replace"))


def test_reading_then_planning_on_a_terminal(tmp_path):
    path = _stream_file(tmp_path, *(_trace_lines(n, tools=3, pad=1000) for n in range(20)))
    code, out, shown = _on_a_terminal("plan", str(path))
    assert code == 0 and len(out.splitlines()) == 20
    assert f"tracefence plan: reading {path}" in shown  # the bytes of the file
    assert f"tracefence plan: reading spans of {path}" in shown  # the requests parsed
    assert re.search(r"tracefence plan: +\d+%.*trace", shown)  # the traces planned


def test_stream_shows_bytes_and_traces_on_a_terminal(tmp_path):
    path = _stream_file(tmp_path, *(_trace_lines(n, tools=3, pad=1000) for n in range(20)))
    code, out, shown = _on_a_terminal("plan", "--stream", str(path))
    assert code == 0 and len(out.splitlines()) == 20
    assert f"tracefence plan: reading {path}" in shown


def test_nothing_on_standard_error_off_a_terminal(tmp_path):
    path = _stream_file(tmp_path, _trace_lines(0))
    for args in (("plan", str(path)), ("plan", "--stream", str(path))):
        proc = subprocess.run([sys.executable, "-m", "otel_tracefence", *args], capture_output=True, text=True, cwd=ROOT, env=clean_env(), timeout=60)
        assert (proc.returncode, proc.stderr) == (0, "")
