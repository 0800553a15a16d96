"""The generated code in otel_tracefence/_proto is what ``make proto`` makes from proto/, byte for byte."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATED = Path("otel_tracefence/_proto/tracefence/v1")
FILES = ("tracefence_pb2.py", "tracefence_pb2.pyi", "tracefence_pb2_grpc.py")


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("proto")
    # The Makefile's `proto` target, with a scratch directory for the output.
    command = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        "-Iotel_tracefence/_proto=proto",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        "proto/tracefence/v1/tracefence.proto",
    ]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return out


def test_makefile_proto_target_is_the_command_used_here():
    makefile = (ROOT / "Makefile").read_text()
    assert (
        "-m grpc_tools.protoc -Iotel_tracefence/_proto=proto --python_out=. --pyi_out=. --grpc_python_out=. proto/tracefence/v1/tracefence.proto"
        in makefile
    )


def test_regenerating_makes_exactly_the_files_committed(regenerated):
    made = sorted(p.relative_to(regenerated) for p in regenerated.rglob("*") if p.is_file())
    assert made == [GENERATED / name for name in sorted(FILES)]


@pytest.mark.parametrize("name", FILES)
def test_committed_generated_code_is_up_to_date(regenerated, name):
    fresh = (regenerated / GENERATED / name).read_bytes()
    committed = (ROOT / GENERATED / name).read_bytes()
    assert fresh == committed, f"{GENERATED / name} is stale: run `make proto` (or restore proto/ to what generated it)"
