"""Coverage-guided fuzzing (atheris / libFuzzer) of the service's wire reader of spans against protobuf (issue 29).

Bytes -> the reader (``otel_tracefence.service.wire_span``: the full view, the head view, the ids) and the
reference (protobuf: ``otlp_spans.full_view``, ``SpanHead``); any disagreement (tests/wire_agreement.py: a view
the reader gives that protobuf does not, or a different refusal on the service's path) is a crash: libFuzzer
stops, prints it and writes the input to ``crash-*`` in the work directory.

The reader is instrumented as Python: run it with ``TRACEFENCE_PURE_PYTHON=1`` for coverage guidance (the
compiled module is the same source; tests/service/test_wire_reader.py runs both). Seeds: every span of the
cases and fixtures, and the test's hand-made tricky encodings.

    TRACEFENCE_PURE_PYTHON=1 .venv/bin/python bench/fuzz_wire_span.py                 # FUZZ_SECONDS (default 60)
    TRACEFENCE_PURE_PYTHON=1 FUZZ_SECONDS=600 .venv/bin/python bench/fuzz_wire_span.py
    .venv/bin/python bench/fuzz_wire_span.py path/to/crash-...                          # replay one input

The corpus lives in ``$FUZZ_WORKDIR`` (default ``$TMPDIR/tracefence-fuzz/wire_span``). Extra arguments go to libFuzzer.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

ROOT = Path(__file__).resolve().parent.parent
sys.path[1:1] = [str(ROOT / "tests"), str(ROOT)]  # wire_agreement and the tests' helpers, as under pytest

from fuzz_common import run  # noqa: E402 - after the path
from wire_agreement import disagreement  # noqa: E402

# The package's own import hook (TRACEFENCE_PURE_PYTHON: otel_tracefence.compiled) loads its modules before
# atheris's import hook sees them: every function loaded is instrumented instead, once imported.
atheris.instrument_all()

NAME = "wire_span"


def test_one_input(data: bytes) -> None:
    problem = disagreement(data)
    if problem is not None:
        raise AssertionError(problem)


def _seeds() -> list[tuple[str, bytes]]:
    from tests.service.test_wire_reader import CASE_SPANS, READ

    return [(f"case-{i}", data) for i, data in enumerate(CASE_SPANS)] + [(f"tricky-{i}", data) for i, data in enumerate(READ.values())]


WORDS = ["gen_ai.", "tool.", "tracefence.", "\x0a\x10", "\x12\x08", "\x4a", "\x5a", "\x7a", "\x85\x01", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"]

if __name__ == "__main__":
    run(NAME, test_one_input, _seeds(), WORDS)
