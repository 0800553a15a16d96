"""``tracefence plan`` on a large OTLP/JSON file against Python's ``json.loads`` of the same file (issue 29).

Builds one OTLP/JSON document of about ``--megabytes`` MB by repeating OTLP/JSON documents (the repository's examples
and test fixtures, and ``--cases DIR``'s ``*.otlp.json``) with new trace ids for every copy, then runs, paired and
interleaved in each round: ``python -c "json.loads(...)"`` of the file (the baseline), and ``tracefence plan FILE``
(output to /dev/null). Each is a process of its own; its wall time (seconds) and peak resident memory (``ru_maxrss``
from ``wait4``, bytes) are taken. Prints min/median/max of each, the ratio of each round's pair, and peak memory over
the file's size.

    .venv/bin/python bench/plan_file.py [--megabytes 50] [--rounds 3] [--cases ../shared/cases] [--keep FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _documents(cases: Path | None) -> list[dict]:
    """Every OTLP/JSON document (a ``resourceSpans`` object) among the examples, the fixtures and ``cases``."""
    paths = [*ROOT.glob("examples/*.otlp.json"), *ROOT.glob("tests/fixtures/**/*.json")]
    if cases is not None:
        paths += sorted(cases.glob("*.otlp.json"))
    found = []
    for path in sorted(paths):
        try:
            document = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(document, dict) and isinstance(document.get("resourceSpans"), list):
            found.append(document)
    return found


def _renamed(document: dict, rng: random.Random) -> list:
    """``document``'s resource spans with each trace id replaced by a new one (the same new id for every span of it)."""
    text = json.dumps(document["resourceSpans"])
    for old in {span["traceId"] for rs in document["resourceSpans"] for ss in rs.get("scopeSpans", []) for span in ss.get("spans", []) if "traceId" in span}:
        text = text.replace(f'"{old}"', f'"{rng.getrandbits(128):032x}"')
    return json.loads(text)


def build(path: Path, megabytes: float, cases: Path | None, seed: int = 29) -> int:
    """Write the document to ``path``; returns its size in bytes."""
    documents = _documents(cases)
    if not documents:
        raise SystemExit("no OTLP/JSON documents found")
    rng = random.Random(seed)
    target = int(megabytes * 1024 * 1024)
    with path.open("w") as out:
        out.write('{"resourceSpans": [')
        size, first = 0, True
        while size < target:
            for document in documents:
                for resource_spans in _renamed(document, rng):
                    text = json.dumps(resource_spans, separators=(",", ":"))
                    out.write(text if first else "," + text)
                    first, size = False, size + len(text) + 1
        out.write("]}")
    return path.stat().st_size


def _run(argv: list[str]) -> tuple[float, int]:
    """Wall time (seconds) and peak resident memory (bytes) of one process; raises on a non-zero exit."""
    with tempfile.TemporaryFile() as errors:  # a file, not a pipe: a pipe nobody reads stops a chatty child
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        if code not in (0, 1):  # plan exits 1 with --fail-on only; a crash or a refusal is 2
            errors.seek(0)
            raise SystemExit(f"{argv[:3]} exited {code}: {errors.read().decode(errors='replace')[-500:]}")
    return wall, usage.ru_maxrss * 1024


def _line(name: str, values: list[float], unit: str) -> str:
    return f"{name:<22} min {min(values):8.2f}  median {statistics.median(values):8.2f}  max {max(values):8.2f} {unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", type=Path, help="a folder of *.otlp.json to repeat too (../shared/cases)")
    parser.add_argument("--keep", type=Path, help="write the file here and keep it (default: a temporary file)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = options.keep or Path(tmp) / "plan_file.otlp.json"
        size = build(path, options.megabytes, options.cases)
        print(f"file: {size / 1e6:.1f} MB of OTLP/JSON ({path})")
        loads = [sys.executable, "-c", "import json, sys; json.loads(open(sys.argv[1], encoding='utf-8').read())", str(path)]
        plan = [str(Path(sys.executable).with_name("tracefence")), "plan", str(path)]
        rounds = [(_run(loads), _run(plan)) for _ in range(options.rounds)]
    base_wall, plan_wall = [b[0] for b, _ in rounds], [p[0] for _, p in rounds]
    base_rss, plan_rss = [b[1] for b, _ in rounds], [p[1] for _, p in rounds]
    print(_line("json.loads", base_wall, "s"))
    print(_line("tracefence plan", plan_wall, "s"))
    ratios = [p / b for b, p in zip(base_wall, plan_wall)]
    print(_line("plan / json.loads", ratios, "x (wall, per round)"))
    print(_line("json.loads peak / file", [r / size for r in base_rss], "x"))
    print(_line("plan peak / file", [r / size for r in plan_rss], "x"))


if __name__ == "__main__":
    main()
