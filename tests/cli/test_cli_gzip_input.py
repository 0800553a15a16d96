"""``tracefence plan`` and ``tracefence tools`` read gzip-compressed trace files (issue 28, part 5): by the stream's
own first bytes, so a ``*.gz`` file and a gzip stream on standard input alike; a ``.gz`` that is not gzip, or a
corrupt or cut-short one, is refused in one line naming the file."""

from __future__ import annotations

import gzip
import json

from conftest import ROOT
from cli_helpers import run
from test_cli import plans_of
from test_cli_tools import ROWS, TABLE
from test_cli_operator import ndjson

EXAMPLE = ROOT / "examples" / "pager_static.otlp.json"


def _gz(path, data: bytes, name: str):
    out = path / name
    out.write_bytes(gzip.compress(data, mtime=0))
    return out


def test_plan_reads_a_gz_file_as_the_plain_one(tmp_path):
    plain = run("plan", str(EXAMPLE))
    packed = run("plan", str(_gz(tmp_path, EXAMPLE.read_bytes(), "pager.otlp.json.gz")))
    assert packed.returncode == plain.returncode == 0, packed.stderr
    assert packed.stdout == plain.stdout and plans_of(packed)
    assert [p["replayClass"] for p in plans_of(packed).values()] == ["static"]


def test_plan_reads_gzip_on_standard_input(tmp_path):
    plain = run("plan", str(EXAMPLE))
    piped = run("plan", "-", stdin=gzip.compress(EXAMPLE.read_bytes()))
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == plain.stdout


def test_plan_reads_gzip_whatever_the_file_is_called(tmp_path):
    """A rotated file exporter's output renamed without .gz is gzip all the same: read by its first bytes."""
    packed = _gz(tmp_path, EXAMPLE.read_bytes(), "pager.otlp.json")
    assert run("plan", str(packed)).stdout == run("plan", str(EXAMPLE)).stdout


def test_tools_read_a_gz_file(tmp_path):
    rows = ndjson(tmp_path, ROWS)
    packed = _gz(tmp_path, rows.read_bytes(), "rows.ndjson.gz")
    proc = run("tools", str(packed))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == TABLE


def test_a_gz_name_on_a_plain_file_is_refused_in_one_line(tmp_path):
    fake = tmp_path / "spans.otlp.json.gz"
    fake.write_bytes(EXAMPLE.read_bytes())
    proc = run("plan", str(fake))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"tracefence plan: {fake}: gzip: the name ends in .gz but the file is not gzip (it does not start with the bytes 1f 8b); nothing was planned\n"


def test_a_cut_short_gzip_file_is_refused_in_one_line(tmp_path):
    whole = gzip.compress(EXAMPLE.read_bytes())
    cut = tmp_path / "cut.otlp.json.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    proc = run("plan", str(cut))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        f"tracefence plan: {cut}: gzip: not a whole gzip stream (Compressed file ended before the end-of-stream marker was reached); "
        "nothing of it was read; nothing was planned\n"
    )


def test_a_corrupt_gzip_file_is_refused_in_tools_too(tmp_path):
    whole = bytearray(gzip.compress(json.dumps(ROWS[0]).encode()))
    whole[-8] ^= 0xFF  # the CRC-32 of the data no longer matches
    bad = tmp_path / "rows.ndjson.gz"
    bad.write_bytes(bytes(whole))
    proc = run("tools", str(bad))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"tracefence tools: {bad}: gzip: not a whole gzip stream (CRC check failed")
    assert proc.stderr.count("\n") == 1


def test_the_input_bound_is_on_the_decompressed_bytes(tmp_path):
    """limits.max_input_bytes bounds what is held in memory: a small .gz of a large input is refused, naming it."""
    packed = _gz(tmp_path, b"[" + b" " * 5000 + b"]", "big.json.gz")
    config = tmp_path / "small.yaml"
    config.write_text("limits:\n  max_input_bytes: 1000\n")
    proc = run("plan", str(packed), "--config", str(config))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        f"tracefence plan: {packed}: the input is larger than limits.max_input_bytes (1000 bytes): not read; "
        "raise the limit or split the input; nothing was planned\n"
    )
