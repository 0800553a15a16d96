"""``tracefence plan --stream`` (issue 28, part 5): OTLP/JSON lines whose traces each sit whole on consecutive lines are
planned a trace at a time; each trace's plan is printed as soon as the next trace begins, in memory bounded by the
largest trace (docs/decisions/inputs-outputs.md 891)."""

from __future__ import annotations

import gzip
import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from cli_helpers import run
from conftest import ROOT
from otlp_json_helpers import json_span
from service_helpers import clean_env, sigint_default

ROOT_SPAN = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "billing"}


def _tool(trace_id: str, span_id: str, tool: str, effect: str, parent: str, **more) -> dict:
    return json_span(trace_id, span_id, f"execute_tool {tool}", parent, **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                                                                          "gen_ai.tool.call.id": f"call_{span_id}", "tracefence.effect": effect, **more})  # fmt: skip


def _line(*spans: dict) -> str:
    return json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "t"}, "spans": list(spans)}]}]}, separators=(",", ":")) + "\n"


def _trace_lines(n: int, tools: int = 1, pad: int = 0) -> list[str]:
    """Trace ``n``'s lines: its root on one line, then its tool calls (reads) on the next, each with ``pad`` bytes of
    arguments."""
    trace_id = f"{n + 1:032x}"
    root = f"{n + 1:016x}"
    calls = [_tool(trace_id, f"{(n + 1) * 100_000 + i:016x}", "customer.lookup", "read", root, **{"gen_ai.tool.call.arguments": json.dumps({"q": "x" * pad})})
             for i in range(tools)]  # fmt: skip
    return [_line(json_span(trace_id, root, "invoke_agent billing", **ROOT_SPAN)), _line(*calls)]


def _stream_file(tmp_path: Path, *traces: list[str], name: str = "spans.otlp.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(line for trace in traces for line in trace))
    return path


def test_the_plans_are_those_of_plan_without_stream_in_the_order_of_the_file(tmp_path):
    path = _stream_file(tmp_path, _trace_lines(2), _trace_lines(0, tools=2), _trace_lines(1))
    streamed, whole = run("plan", "--stream", str(path)), run("plan", str(path))
    assert (streamed.returncode, streamed.stderr) == (0, "")
    assert [json.loads(line)["traceId"] for line in streamed.stdout.splitlines()] == [f"{3:032x}", f"{1:032x}", f"{2:032x}"]
    assert sorted(streamed.stdout.splitlines()) == sorted(whole.stdout.splitlines())


def test_gzip_and_several_files_and_the_fail_on_gate(tmp_path):
    plain = _stream_file(tmp_path, _trace_lines(0))
    packed = tmp_path / "more.otlp.jsonl.gz"
    packed.write_bytes(gzip.compress("".join(_trace_lines(1) + _trace_lines(2)).encode()))
    proc = run("plan", "--stream", "--fail-on", "injected", str(plain), str(packed))
    assert [json.loads(line)["traceId"] for line in proc.stdout.splitlines()] == [f"{n:032x}" for n in (1, 2, 3)]
    assert (proc.returncode, proc.stderr) == (0, "")  # reads only: class dynamic, under the gate


def test_a_trace_that_comes_again_is_refused_after_the_plans_before_it(tmp_path):
    first, second = _trace_lines(0), _trace_lines(1)
    path = _stream_file(tmp_path, [first[0]], second, [first[1]])
    proc = run("plan", "--stream", str(path))
    assert proc.returncode == 2
    # The first trace's plan (of its root alone) was printed when the second began; the second's when line 4 began
    # (it was whole: its lines were consecutive; a fresh user found it dropped); trace 1 comes again on line 4: refused.
    assert [json.loads(line)["traceId"] for line in proc.stdout.splitlines()] == [f"{1:032x}", f"{2:032x}"]
    # The root alone, an agent run that recorded no output in a trace with no model span, is held (DECISIONS 1010).
    assert proc.stderr == (
        f"tracefence plan: {path}: warning: line 1, span {1:016x}: span: span {1:016x} ('invoke_agent billing') requested tool "
        "calls that could not be read: an agent run that recorded no output, in a trace with no tool span and no model span: "
        "what it asked for is in no span\n"
        f"tracefence plan: {path}: line 4: trace {1:032x} comes again after its plan was printed: its spans are not on "
        "consecutive lines, so --stream cannot plan it whole; plan the input without --stream; nothing after it was planned\n"
    )


def test_an_input_that_is_not_otlp_json_lines_is_refused(tmp_path):
    rows = tmp_path / "rows.ndjson"
    rows.write_text('{"trace_id": "t1", "call_id": "c1", "tool": "x", "effect": "read", "status": "ok"}\n')
    proc = run("plan", "--stream", str(rows))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"tracefence plan: {rows}: line 1: reads as ndjson, not OTLP/JSON lines (one ExportTraceServiceRequest per line): "
                           "plan it without --stream; nothing after it was planned\n")  # fmt: skip
    proc = run("plan", "--stream", "--input-format", "csv", str(ROOT / "examples" / "reads_only.csv"))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.endswith("--stream reads OTLP/JSON lines, not --input-format csv; nothing was planned\n")


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _stream_through_pipe(lines: list[str], first_trace_lines: int) -> tuple[str, float, int, list[str]]:
    """Run ``plan --stream -`` with ``lines`` written to its standard input: the first trace and the next trace's
    first line, then (once the first plan is read) the rest. Returns the first plan's line, the share of the input
    written when it came, the child's peak resident memory (KiB) before its input ended, and every plan line."""
    proc = subprocess.Popen([sys.executable, "-m", "otel_tracefence", "plan", "--stream", "-"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=clean_env())  # fmt: skip
    out: queue.Queue[bytes] = queue.Queue()
    reader = threading.Thread(target=lambda: [out.put(line) for line in proc.stdout], daemon=True)
    reader.start()
    try:
        head = "".join(lines[: first_trace_lines + 1]).encode()
        proc.stdin.write(head)
        proc.stdin.flush()
        first = out.get(timeout=60).decode()  # printed while the input is still open, most of it not written
        written = len(head) / sum(len(line) for line in lines)
        rest = "".join(lines[first_trace_lines + 1 :]).encode()
        for start in range(0, len(rest), 1 << 20):
            proc.stdin.write(rest[start : start + (1 << 20)])
        proc.stdin.flush()
        expected = sum(1 for line in lines if '"invoke_agent' in line) - 1  # every trace but the last is printed before the input ends
        plans = [first]
        deadline = time.monotonic() + 240
        while len(plans) < expected and time.monotonic() < deadline:
            plans.append(out.get(timeout=max(0.1, deadline - time.monotonic())).decode())
        peak = _peak_rss_kib(proc.pid)
        proc.stdin.close()
        assert proc.wait(timeout=120) == 0, proc.stderr.read().decode()
        reader.join(timeout=30)
        while not out.empty():
            plans.append(out.get().decode())
        return first, written, peak, plans
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_50_mb_stream_prints_its_first_trace_before_the_input_ends_in_memory_bounded_by_the_largest_trace():
    # 50 traces of 1 MiB each (40 reads of 25 KiB arguments), one per two lines, as serve's output file holds them.
    lines = [line for n in range(50) for line in _trace_lines(n, tools=40, pad=25_000)]
    assert 50_000_000 < sum(len(line) for line in lines) < 60_000_000
    first, written, peak, plans = _stream_through_pipe(lines, first_trace_lines=2)
    assert json.loads(first)["traceId"] == f"{1:032x}" and json.loads(first)["replayClass"] == "dynamic"
    assert written < 0.03
    assert [json.loads(plan)["traceId"] for plan in plans] == [f"{n + 1:032x}" for n in range(50)]
    # The same command holding one such trace: the 50 MB stream holds no more than a few traces' worth beyond it.
    _, _, one_trace_peak, _ = _stream_through_pipe(_trace_lines(0, tools=40, pad=25_000) + _trace_lines(1), first_trace_lines=2)
    assert peak - one_trace_peak < 24 * 1024, (peak, one_trace_peak)  # KiB; the whole input is 50 MB


def test_ctrl_c_while_streaming_exits_130_with_one_line(tmp_path):
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "otel_tracefence", "plan", "--stream", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path, env=clean_env(), preexec_fn=sigint_default)  # fmt: skip
    try:
        proc.stdin.write("".join(_trace_lines(0) + _trace_lines(1)).encode())
        proc.stdin.flush()
        first = proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert json.loads(first)["traceId"] == f"{1:032x}"
    assert (proc.returncode, out, err) == (130, b"", b"tracefence plan: interrupted\n")



def test_a_reader_that_goes_away_ends_the_stream_quietly(tmp_path):
    path = _stream_file(tmp_path, *(_trace_lines(n) for n in range(2000)))
    proc = subprocess.Popen([sys.executable, "-m", "otel_tracefence", "plan", "--stream", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=ROOT, env=clean_env())  # fmt: skip
    try:
        first = proc.stdout.readline()
        proc.stdout.close()  # as `| head -1` does
        err = proc.stderr.read()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert json.loads(first)["traceId"] == f"{1:032x}"
    assert (proc.returncode, err) == (0, b"")
