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

import atheris

with atheris.instrument_imports(include=["otel_tracefence"]):
    from fuzz_common import CONFIGS, ROOT, check, run
    from otel_tracefence.cli import table
    from otel_tracefence.pipeline.documents import plan_text
    from otel_tracefence.core.config import ConfigError
    from otel_tracefence.readers.errors import UnreadableInput, decode_utf8

NAME = "csv"


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


def main() -> None:
    run(NAME, test_one_input, seeds(), dictionary())


if __name__ == "__main__":
    main()
