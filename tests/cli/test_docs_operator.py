"""The manual lists every metric the product emits (docs/configuration.md), its zero-code example turns off the
metrics and logs exporters that would otherwise fail without a collector (docs/processor.md), and the README says how
to run the installed command."""

from __future__ import annotations

import re

from conftest import ROOT


def _emitted_metric_names() -> set[str]:
    """tracefence's own instruments: those declared in the one table (core/telemetry.py's INSTRUMENTS), and any an
    older module still makes by name."""
    from otel_tracefence.core.telemetry import INSTRUMENTS

    names = {name for name in INSTRUMENTS if name.startswith("tracefence.")}
    for path in (ROOT / "otel_tracefence").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        names.update(re.findall(r'create_(?:counter|up_down_counter|histogram|observable_gauge|observable_counter|gauge)\(\s*"(tracefence\.[a-z0-9_.]+)"', text))
        names.update(re.findall(r'^[A-Z_]*METRIC = "(tracefence\.[a-z0-9_.]+)"', text, flags=re.M))
    return names


def test_every_metric_is_listed_in_the_readme():
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = page[page.index("## Self-telemetry") :]
    listed = set(re.findall(r"^\s*\* `(tracefence\.[a-z0-9_.]+)`", section, flags=re.M))
    emitted = _emitted_metric_names()
    assert "tracefence.review.pending" in emitted and "tracefence.declare.unrecorded" in emitted
    assert listed == emitted


def test_zero_code_example_turns_the_metrics_exporter_off():
    page = (ROOT / "docs" / "processor.md").read_text(encoding="utf-8")
    section = page[page.index("## Zero-code") :]
    assert "OTEL_METRICS_EXPORTER=none OTEL_LOGS_EXPORTER=none \\\nOTEL_TRACEFENCE_REVIEW_DB" in section


def test_readme_says_how_pydantic_ai_is_instrumented_and_how_to_run_tracefence():
    processor = (ROOT / "docs" / "processor.md").read_text(encoding="utf-8")
    assert "`Agent(..., instrument=True)`" in processor and "`Agent.instrument_all()`" in processor
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`.venv/bin/tracefence ...`" in readme and "`. .venv/bin/activate`" in readme
