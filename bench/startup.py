"""How long ``tracefence --help`` takes to start, against a bare ``python -c pass`` (issue 28, part 5; DECISIONS 890).

Paired and interleaved: each round runs ``python -c pass`` then ``tracefence --help`` (the installed console script,
beside the interpreter), so both meet the same load. Prints each command's min, median and max wall time in seconds
over the rounds, and the ratio of the medians, and of each round's pair (min, median, max).

    .venv/bin/python bench/startup.py --rounds 20
    .venv/bin/python bench/startup.py --rounds 20 -- plan --help    # another command line after `tracefence`
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def _line(name: str, values: list[float]) -> str:
    return f"{name:<28} min {min(values):.3f}  median {statistics.median(values):.3f}  max {max(values):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("args", nargs="*", default=["--help"], help="the command line after `tracefence` (default --help)")
    options = parser.parse_args()
    script = str(Path(sys.executable).with_name("tracefence"))
    bare, command = [sys.executable, "-c", "pass"], [script, *options.args]
    _wall(bare), _wall(command)  # warm the page cache and the bytecode
    pairs = [(_wall(bare), _wall(command)) for _ in range(options.rounds)]
    base, ours = [a for a, _ in pairs], [b for _, b in pairs]
    ratios = [b / a for a, b in pairs]
    print(_line("python -c pass", base))
    print(_line("tracefence " + " ".join(options.args), ours))
    print(f"ratio of medians {statistics.median(ours) / statistics.median(base):.2f}; per pair "
          f"min {min(ratios):.2f} median {statistics.median(ratios):.2f} max {max(ratios):.2f} ({options.rounds} rounds)")


if __name__ == "__main__":
    main()
