"""Coverage-guided fuzzing (atheris / libFuzzer) of the CSV entry point of ``tracefence plan``.

Bytes → ``decode_utf8`` → ``plan_text(text, "csv", config)`` → each plan's canonical JSON, the
table and every error's message, as the CLI prints them; with two configurations (defaults; tool
rules, raw values and tight limits). ``UnreadableInput`` (not UTF-8, no usable header) and
``ConfigError`` are the expected answers to bad input, and rejected rows come back as
``InputError`` values; any other exception, or a plan that breaks a safety promise (a decision
that would re-fire a write, an uncertain write not fenced, a replay class other than the most
restrictive one), is a crash: libFuzzer stops, prints the traceback and writes the input to
``crash-*`` in the work directory.

Run (installs nothing; ``make fuzz`` installs the ``fuzz`` extra and runs both harnesses)::

    .venv/bin/python bench/fuzz_csv.py                   # FUZZ_SECONDS (default 60), then exit 0
    .venv/bin/python bench/fuzz_csv.py path/to/crash-...  # replay one input

The corpus (seeded with the examples and a few hand-made files) and crash files live in
``$FUZZ_WORKDIR`` (default ``$TMPDIR/tracefence-fuzz/csv``). Extra arguments are passed to libFuzzer.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["otel_tracefence"]):
    from otel_tracefence.cli import table
    from otel_tracefence.cli.plan import plan_text
    from otel_tracefence.config import ConfigError, Limits, ToolRule, TraceFenceConfig
    from otel_tracefence.model import Decision, Effect, ReplayClass, ToolStatus, TracePlan
    from otel_tracefence.readers.errors import UnreadableInput, decode_utf8
    from otel_tracefence.schema import plan_to_json

ROOT = Path(__file__).resolve().parent.parent
NAME = "csv"
CONFIGS = (
    TraceFenceConfig(),
    TraceFenceConfig(
        tool_rules=[ToolRule(match="read_*", effect="read"), ToolRule(match="pay*", effect="write", idempotency_key_argument="k")],
        store_raw_values=True,
        limits=Limits(max_argument_bytes=256, max_argument_depth=4, max_related_call_ids=2),
    ),
)
FENCING = (Decision.REVIEW, Decision.CONFLICT)


def check(plan: TracePlan) -> None:
    """The plan's safety promises; an AssertionError is a crash for libFuzzer."""
    rank = -1
    for d in plan.steps:
        s = d.step
        assert d.decision is not Decision.REPLAY or s.effect is Effect.READ, d
        assert d.decision is not Decision.SKIP or (s.effect, s.status) == (Effect.WRITE, ToolStatus.OK), d
        if s.effect is not Effect.READ and s.status is not ToolStatus.OK or s.effect is Effect.UNKNOWN or s.malformed:
            assert d.decision in FENCING, d
        if s.effect is Effect.WRITE and s.attempts > 1:
            assert d.decision in FENCING, d
        step_class = (
            ReplayClass.REVIEW
            if d.decision in FENCING
            else (ReplayClass.INJECTED if s.result_recorded else ReplayClass.STATIC)
            if d.decision is Decision.SKIP
            else ReplayClass.DYNAMIC
        )
        rank = max(rank, step_class.rank)
    assert (plan.replay_class.rank if plan.replay_class else -1) == rank, plan
    plan_to_json(plan).encode("utf-8")


def test_one_input(data: bytes) -> None:
    try:
        text = decode_utf8(data)
    except UnreadableInput:
        return
    for config in CONFIGS:
        try:
            plans, errors = plan_text(text, "csv", config)
        except (UnreadableInput, ConfigError):
            return
        for plan in plans:
            check(plan)
        table.render(plans).encode("utf-8")
        for error in errors:
            str(error).encode("utf-8", "backslashreplace")


# --- seeds and dictionary ---------------------------------------------------------------------

_HANDMADE = [
    "trace_id,call_id,tool,effect,status,idempotency_key,arguments,result,start_time\n"
    't1,c1,pay,write,ok,k1,"{""k"": ""k1"", ""n"": 1}",done,5\n'
    't1,c2,pay,write,ok,k1,"{""k"": ""k1"", ""n"": 2}",,2024-06-01T00:00:00Z\n'
    't1,c3,read_file,read,timeout,,"{""p"": ""a""}",,\n'
    't1,c3,mail,unknown,unknown,,"[1, 2.5, null, true]",x,7\n'
    "t2,c4,pay.now,,error,,,,\n",
    "id,tool,status\nc1,read_x,ok\nc1,read_x,ok\n",
    'call_id,tool,effect,arguments\nc1,pay,write,"{""a"": {""b"": {""c"": {""d"": {""e"": 1}}}}}"\nc2,pay,write,"{not json"\n',
    "\ufefftool,call_id,extra\r\nx,a,1\r\ny,b\r\nz,c,1,2\r\n",
]


def seeds() -> list[tuple[str, bytes]]:
    sources = sorted((ROOT / "examples").glob("*.csv")) + sorted((ROOT.parent / "shared" / "cases").glob("*.csv"))
    found = [(path.name, path.read_bytes()) for path in sources]
    return found + [(f"handmade-{i}", text.encode("utf-8")) for i, text in enumerate(_HANDMADE)]


def dictionary() -> list[str]:
    return [
        "trace_id", "call_id", "id", "tool", "effect", "status", "idempotency_key", "arguments", "result", "start_time",
        "read", "write", "unknown", "ok", "error", "timeout", "pay", "read_", "Z", "+00:00", "T00:00:00",
        "1970-01-01", "18446744073709551615", "18446744073709551616", "9007199254740993", "1e400", "NaN", "Infinity",
        "\\ud800", "\\u0000", "\xa0", "\u00b2", "{}", "[]", "null", "true", "\r\n",
    ]


def _escape(word: str) -> str:
    return "".join(c if 0x20 <= ord(c) < 0x7F and c not in '"\\' else "".join(f"\\x{b:02X}" for b in c.encode("utf-8")) for c in word)


def main() -> None:
    work = Path(os.environ.get("FUZZ_WORKDIR") or Path(tempfile.gettempdir()) / "tracefence-fuzz" / NAME)
    corpus = work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for name, data in seeds():
        (corpus / f"seed-{name}").write_bytes(data)
    dict_path = work / "words.dict"
    dict_path.write_text("".join(f'"{_escape(w)}"\n' for w in dictionary()), encoding="utf-8")
    extra = sys.argv[1:]
    inputs = [a for a in extra if not a.startswith("-")]
    args = [sys.argv[0], f"-max_total_time={int(os.environ.get('FUZZ_SECONDS', '60'))}", "-timeout=30", "-rss_limit_mb=2048"]
    args += [f"-dict={dict_path}", f"-artifact_prefix={work}/", "-print_final_stats=1", *extra]
    if not inputs:
        args.append(str(corpus))
    print(f"fuzz_{NAME}: work directory {work}", flush=True)
    atheris.Setup(args, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
