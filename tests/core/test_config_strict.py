"""The configuration refuses a key given twice, and names unknown OTEL_TRACEFENCE_* variables
(docs/DECISIONS.md 191, 192)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from otel_tracefence.core.config import ConfigError, load_config

from conftest import ROOT

RULE_TWICE = """\
tool_rules:
  - match: "sessions.*"
    effect: read
    result: unstable
    result: stable
"""
SETTING_TWICE = """\
tool_rules:
  - match: "sessions.*"
    effect: read
    result: unstable
tool_rules:
  - match: "sessions.*"
    effect: read
"""


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in list(os.environ):
        if name.upper().startswith("OTEL_TRACEFENCE_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    ("text", "said"),
    [(RULE_TWICE, "line 5: key 'result' given twice (first on line 4)"), (SETTING_TWICE, "line 5: key 'tool_rules' given twice (first on line 1)")],
    ids=["in-a-rule", "a-setting"],
)
def test_a_key_given_twice_in_the_file_is_refused_with_its_lines(tmp_path, text, said):
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == f"config file {path}: {said}: a setting has one value"


def test_a_flow_mapping_with_a_key_twice_is_refused(tmp_path):
    path = tmp_path / "flow.yaml"
    path.write_text('limits: {max_argument_depth: 10, max_argument_depth: 99}\n')
    with pytest.raises(ConfigError, match=r"line 1: key 'max_argument_depth' given twice \(first on line 1\)"):
        load_config(path)


def test_yaml_merge_keys_may_still_be_overridden(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text("limits:\n  <<: {max_argument_depth: 10}\n  max_argument_depth: 12\n")
    assert load_config(path).limits.max_argument_depth == 12


def test_a_key_given_twice_in_a_variables_json_is_refused(monkeypatch):
    monkeypatch.setenv("OTEL_TRACEFENCE_TOOL_RULES", '[{"match":"sessions.*","effect":"read","result":"unstable","result":"stable"}]')
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert str(caught.value) == "environment: OTEL_TRACEFENCE_TOOL_RULES: key 'result' given twice: a setting has one value"
    assert caught.value.fields == ("tool_rules",)


def test_two_variables_differing_only_in_case_are_refused(monkeypatch):
    monkeypatch.setenv("OTEL_TRACEFENCE_MAX_TRACES", "5")
    monkeypatch.setenv("otel_tracefence_max_traces", "50")
    with pytest.raises(ConfigError) as caught:
        load_config()
    assert str(caught.value) == (
        "environment: OTEL_TRACEFENCE_MAX_TRACES and otel_tracefence_max_traces are one setting given twice "
        "(names are read in any case): a setting has one value"
    )


def test_an_unknown_variable_is_named_in_a_warning_and_ignored(monkeypatch, caplog):
    monkeypatch.setenv("OTEL_TRACEFENCE_TOOL_RULE", '[{"match":"*","effect":"read"}]')
    monkeypatch.setenv("OTEL_TRACEFENCE_LIMITS__MAX_ARGUMENT_BYTES", "65536")  # known: no warning
    monkeypatch.setenv("OTEL_TRACEFENCE_EXPORTER", "console")  # read by the zero-code exporter: no warning
    with caplog.at_level(logging.WARNING, logger="otel_tracefence.core.config"):
        config = load_config()
    assert config.tool_rules == []
    assert [r.getMessage() for r in caplog.records] == [
        "environment: OTEL_TRACEFENCE_TOOL_RULE names no setting and is ignored (misspelt, or for another version?)",
    ]


def test_an_unknown_nested_variable_stays_refused(monkeypatch):
    monkeypatch.setenv("OTEL_TRACEFENCE_LIMITS__MAX_ARGUMENT_BYTE", "10")
    with pytest.raises(ConfigError, match=r"limits\.max_argument_byte: Extra inputs are not permitted"):
        load_config()


def test_the_cli_refuses_the_trials_config_with_a_key_twice(tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text("trace_id,call_id,tool,status,arguments\nt,c1,sessions.create,ok,{}\n")
    path = tmp_path / "dup2.yaml"
    path.write_text(RULE_TWICE)
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("OTEL_TRACEFENCE_")}
    done = subprocess.run([sys.executable, "-m", "otel_tracefence", "plan", str(rows), "--config", str(path)], capture_output=True, text=True, cwd=ROOT, env=env)
    assert done.returncode == 2
    assert done.stdout == ""
    assert f"config file {path}: line 5: key 'result' given twice (first on line 4)" in done.stderr


def test_top_level_keys_differing_only_in_case_are_one_setting_given_twice(tmp_path):
    """Second trial: ``tool_rules`` and ``Tool_rules`` in one file were read as one setting, the first kept silently
    (a ``read`` rule beside a ``write`` one passed a write as replayable). Refused, naming both keys."""
    path = tmp_path / "case.yaml"
    path.write_text("tool_rules:\n  - {match: charge, effect: read}\nTool_rules:\n  - {match: charge, effect: write}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f"config file {path}: keys 'tool_rules' and 'Tool_rules' are one setting given twice (names are read in any case): a setting has one value"
    )
    assert caught.value.fields == ("tool_rules",)



def test_a_decision_wait_longer_than_the_maximum_wait_is_refused(monkeypatch):
    # A trial set SERVICE__DECISION_WAIT_MS=60000 beside the default max_wait_ms 30000: accepted, and never waited.
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__DECISION_WAIT_MS", "60000")
    with pytest.raises(ConfigError, match=r"decision_wait_ms 60000 is longer than max_wait_ms 30000: a trace is decided at max_wait_ms"):
        load_config()
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__MAX_WAIT_MS", "60000")
    assert (load_config().service.decision_wait_ms, load_config().service.max_wait_ms) == (60000, 60000)


def test_a_message_bound_under_one_kib_is_refused(monkeypatch):
    # A trial set SERVICE__MAX_MESSAGE_BYTES=10: accepted, and every Export refused as too large.
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__MAX_MESSAGE_BYTES", "10")
    with pytest.raises(ConfigError, match=r"service\.max_message_bytes: Input should be greater than or equal to 1024"):
        load_config()
