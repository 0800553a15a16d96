"""What both atheris harnesses share: the configurations, the plan's safety promises, the libFuzzer run.

Import it inside ``atheris.instrument_imports(include=["otel_tracefence"])`` so the
project modules it pulls in are instrumented.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterable

import atheris

from otel_tracefence.core.config import Limits, ToolRule, TraceFenceConfig
from otel_tracefence.core.model import Decision, Effect, ReplayClass, ToolStatus, TracePlan
from otel_tracefence.core.schema import plan_to_json

ROOT = Path(__file__).resolve().parent.parent
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


def _escape(word: str) -> str:
    """A libFuzzer dictionary entry: printable ASCII as is, everything else as \\xNN bytes."""
    return "".join(c if 0x20 <= ord(c) < 0x7F and c not in '"\\' else "".join(f"\\x{b:02X}" for b in c.encode("utf-8")) for c in word)


def run(name: str, test_one_input: Callable[[bytes], None], seeds: Iterable[tuple[str, bytes]], words: Iterable[str]) -> None:
    """Seed the corpus, write the dictionary, and fuzz for ``FUZZ_SECONDS`` (default 60); exit 0 when nothing crashed."""
    work = Path(os.environ.get("FUZZ_WORKDIR") or Path(tempfile.gettempdir()) / "tracefence-fuzz" / name)
    corpus = work / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for seed_name, data in seeds:
        (corpus / f"seed-{seed_name}").write_bytes(data)
    dict_path = work / "words.dict"
    dict_path.write_text("".join(f'"{_escape(w)}"\n' for w in words), encoding="utf-8")
    extra = sys.argv[1:]
    inputs = [a for a in extra if not a.startswith("-")]
    args = [sys.argv[0], f"-max_total_time={int(os.environ.get('FUZZ_SECONDS', '60'))}", "-timeout=30", "-rss_limit_mb=2048"]
    args += [f"-dict={dict_path}", f"-artifact_prefix={work}/", "-print_final_stats=1", *extra]
    if not inputs:
        args.append(str(corpus))
    print(f"fuzz_{name}: work directory {work}", flush=True)
    atheris.Setup(args, test_one_input)
    atheris.Fuzz()
