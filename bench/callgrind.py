"""Instruction counts for the benchmarks: valgrind's callgrind counts instructions, not seconds, so a count
is the same for the same program and input whatever else the machine is doing."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence


def count_instructions(args: Sequence[str], env: dict[str, str] | None = None, cwd_in_tmp: bool = False) -> int:
    """Instructions callgrind counts for ``python <args>`` (all threads), with string hashing seeded the same in every
    run (``PYTHONHASHSEED=0``: set and dict orders, so the counts, move by up to 2% between seeds). Raises
    ``subprocess.CalledProcessError`` when the child fails."""
    env = {**(os.environ if env is None else env), "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, *args],
            capture_output=True, text=True, check=True, env=env, cwd=tmp if cwd_in_tmp else None,
        )  # fmt: skip
        totals = [line for line in out.read_text().splitlines() if line.startswith(("totals:", "summary:"))]
        return int(totals[-1].split()[1])


def print_against_baseline(mine: float, base: float | None) -> None:
    """This checkout's instructions per span, and the baseline's and the ratio when there is one."""
    print(f"this checkout: {mine:,.0f} instructions per span")
    if base is not None:
        print(f"baseline     : {base:,.0f} instructions per span")
        print(f"ratio this/baseline: {mine / base:.3f}")
