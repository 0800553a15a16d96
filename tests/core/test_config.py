"""Configuration: arguments over OTEL_TRACEFENCE_* variables over the YAML file over defaults."""

from __future__ import annotations

import os

import pytest

from otel_tracefence.core.config import ConfigError, Limits, ToolRule, TraceFenceConfig, load_config

from conftest import ROOT

FILE = """\
tool_rules:
  - match: "read_*"
    effect: read
  - match: "payments.*"
    effect: write
    idempotency_key_argument: request.id
idempotency_key_arguments: [from_file]
store_raw_values: true
limits:
  max_argument_depth: 10
  max_related_call_ids: 7
"""


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in list(os.environ):
        if name.startswith("OTEL_TRACEFENCE_"):
            monkeypatch.delenv(name)


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "tracefence.yaml"
    path.write_text(FILE)
    return path


def test_defaults_without_file_or_environment():
    config = load_config()
    assert config.tool_rules == []
    assert config.idempotency_key_arguments == ["idempotency_key"]
    assert config.store_raw_values is False
    assert config.limits == Limits(max_argument_bytes=1 << 20, max_argument_depth=64, max_related_call_ids=50)


def test_yaml_file_is_read(config_file):
    config = load_config(config_file)
    assert [(r.match, r.effect, r.idempotency_key_argument) for r in config.tool_rules] == [("read_*", "read", None), ("payments.*", "write", "request.id")]
    assert config.idempotency_key_arguments == ["from_file"]
    assert config.store_raw_values is True
    assert config.limits == Limits(max_argument_bytes=1 << 20, max_argument_depth=10, max_related_call_ids=7)


def test_file_named_by_the_environment(config_file, monkeypatch):
    monkeypatch.setenv("OTEL_TRACEFENCE_CONFIG", str(config_file))
    assert load_config().idempotency_key_arguments == ["from_file"]


def test_environment_wins_over_the_file_and_nested_values_merge(config_file, monkeypatch):
    monkeypatch.setenv("OTEL_TRACEFENCE_IDEMPOTENCY_KEY_ARGUMENTS", '["from_env"]')
    monkeypatch.setenv("OTEL_TRACEFENCE_STORE_RAW_VALUES", "false")
    monkeypatch.setenv("OTEL_TRACEFENCE_LIMITS__MAX_ARGUMENT_BYTES", "65536")
    monkeypatch.setenv("OTEL_TRACEFENCE_TOOL_RULES", '[{"match": "*", "effect": "write"}]')
    config = load_config(config_file)
    assert config.idempotency_key_arguments == ["from_env"]
    assert config.store_raw_values is False
    assert config.limits == Limits(max_argument_bytes=65536, max_argument_depth=10, max_related_call_ids=7)
    assert [(r.match, r.effect) for r in config.tool_rules] == [("*", "write")]


def test_arguments_win_over_the_environment(config_file, monkeypatch):
    monkeypatch.setenv("OTEL_TRACEFENCE_IDEMPOTENCY_KEY_ARGUMENTS", '["from_env"]')
    monkeypatch.setenv("OTEL_TRACEFENCE_STORE_RAW_VALUES", "false")
    config = load_config(config_file, idempotency_key_arguments=["from_argument"], store_raw_values=True)
    assert config.idempotency_key_arguments == ["from_argument"]
    assert config.store_raw_values is True
    assert config.limits.max_argument_depth == 10  # still from the file


def test_the_example_config_loads():
    config = load_config(ROOT / "examples" / "tracefence.yaml")
    assert [r.match for r in config.tool_rules] == ["read_*", "query_*", "sessions.create", "payments.*"]
    assert config.rule_for("payments.charge").idempotency_key_argument == "idempotency_key"
    assert (config.rule_for("sessions.create").effect, config.rule_for("sessions.create").result) == ("read", "unstable")
    assert config.limits.max_tokens_per_value == 64


def test_tool_rules_first_match_wins_and_globs_are_case_sensitive():
    config = TraceFenceConfig(tool_rules=[ToolRule(match="pay*", effect="write"), ToolRule(match="payments.get", effect="read")])
    assert config.rule_for("payments.get").effect == "write"
    assert config.rule_for("Payments.get") is None
    assert ToolRule(match="read_?").matches("read_a") and not ToolRule(match="read_?").matches("read_ab")


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError) as error:
        load_config(tmp_path / "nope.yaml")
    assert str(error.value) == f"config file {tmp_path / 'nope.yaml'}: not found"


def test_missing_file_named_by_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("OTEL_TRACEFENCE_CONFIG", str(tmp_path / "gone.yaml"))
    with pytest.raises(ConfigError, match="gone.yaml: not found"):
        load_config()


@pytest.mark.parametrize(
    "text,problem",
    [
        ("tool_rules: [\n  - match: x\n", "expected the node content, but found '-' at line 2, column 3"),
        ("a: [1\nb: 2\n", "expected ',' or ']', but got ':' at line 2, column 2"),
    ],
)
def test_bad_yaml_is_named_in_one_line_with_its_line_and_column(tmp_path, text, problem):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value) == f"config file {path}: not YAML: {problem}"


def test_a_folder_given_as_the_config_file_is_named_a_folder(tmp_path):
    with pytest.raises(ConfigError) as error:
        load_config(tmp_path)
    assert str(error.value) == f"config file {tmp_path}: a folder, not a file"


def test_top_level_that_is_not_a_mapping(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- read_*\n- write_*\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value) == f"config file {path}: the top level must be a mapping of settings"


def test_bad_effect_value_names_the_field(tmp_path):
    path = tmp_path / "effect.yaml"
    path.write_text('tool_rules:\n  - match: "read_*"\n    effect: read\n  - match: "x"\n    effect: delete\n')
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value) == f"configuration (file {path}, OTEL_TRACEFENCE_* variables): tool_rules.1.effect: Input should be 'read' or 'write'"


def test_bad_limit_names_the_field(tmp_path):
    path = tmp_path / "limits.yaml"
    path.write_text("limits:\n  max_argument_bytes: -1\n  max_argument_dept: 3\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    message = str(error.value)
    assert "limits.max_argument_bytes: Input should be greater than 0" in message
    assert "limits.max_argument_dept: Extra inputs are not permitted" in message


def test_a_key_that_names_no_setting_is_given_the_closest_one(tmp_path, monkeypatch):
    """A new user's OTEL_TRACEFENCE_SERVICE__UPSTREAM (the setting is upstreams) was told only "Extra inputs are
    not permitted": the closest setting of the same mapping is named, in a variable and in the file alike."""
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__UPSTREAM", "x")
    with pytest.raises(ConfigError) as error:
        load_config()
    assert str(error.value) == (
        "configuration (OTEL_TRACEFENCE_* variables): service.upstream: Extra inputs are not permitted; did you mean service.upstreams?"
    )
    monkeypatch.delenv("OTEL_TRACEFENCE_SERVICE__UPSTREAM")
    path = tmp_path / "typos.yaml"
    path.write_text('tool_rules:\n  - match: "x"\n    efect: read\nlimits:\n  zzz: 1\n')
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value) == (
        f"configuration (file {path}, OTEL_TRACEFENCE_* variables): tool_rules.0.efect: Extra inputs are not permitted; "
        "did you mean tool_rules.0.effect?; limits.zzz: Extra inputs are not permitted"
    )


def test_bad_effect_from_the_environment_names_the_field(monkeypatch):
    monkeypatch.setenv("OTEL_TRACEFENCE_TOOL_RULES", '[{"match": "x", "effect": "delete"}]')
    with pytest.raises(ConfigError, match=r"^configuration \(OTEL_TRACEFENCE_\* variables\): tool_rules\.0\.effect: Input should be 'read' or 'write'$"):
        load_config()


def test_environment_list_that_is_not_json_is_a_config_error(monkeypatch):
    monkeypatch.setenv("OTEL_TRACEFENCE_TOOL_RULES", "read_*=read")
    with pytest.raises(ConfigError) as raised:
        load_config()
    # The variable by its name, not the settings library's words for where it came from.
    assert str(raised.value) == "environment: OTEL_TRACEFENCE_TOOL_RULES is not JSON: OTEL_TRACEFENCE_* variables take JSON for lists and nested values"
    assert raised.value.fields == ("tool_rules",)


def test_empty_idempotency_key_path_is_rejected():
    with pytest.raises(ConfigError, match="idempotency_key_arguments: Value error, argument paths must be non-empty"):
        load_config(idempotency_key_arguments=["ok", ""])


def test_issue_9_settings_from_the_environment(monkeypatch):
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__INTAKE_QUEUE_BYTES", "1048576")
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__REVIEW_TOKEN", "r3view")
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__INSECURE_REVIEW_API", "true")
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__UPSTREAMS", '[{"endpoint": "http://tempo:4317", "max_message_bytes": 16777216}]')
    service = load_config().service
    assert (service.intake_queue_bytes, service.review_token, service.insecure_review_api) == (1048576, "r3view", True)
    assert service.upstreams[0].max_message_bytes == 16 * 1024 * 1024
    monkeypatch.delenv("OTEL_TRACEFENCE_SERVICE__UPSTREAMS")
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__UPSTREAMS", '[{"endpoint": "http://tempo:4317"}]')
    assert load_config().service.upstreams[0].max_message_bytes == 4 * 1024 * 1024  # gRPC's and the Collector's default


def test_an_empty_review_classes_list_is_refused(monkeypatch):
    """An unfilled template variable must not turn the review queue off silently (fail closed)."""
    from otel_tracefence.core.config import ConfigError, load_config

    monkeypatch.setenv("OTEL_TRACEFENCE_REVIEW_CLASSES", "")
    with pytest.raises(ConfigError, match="review_classes"):
        load_config()


def test_a_value_nested_too_deep_is_one_config_error_not_a_recursion_error(tmp_path, monkeypatch):
    # Found by a fresh user: 5,000 nested lists in a file or an OTEL_TRACEFENCE_* variable raised RecursionError.
    deep = "[" * 5000 + "]" * 5000
    path = tmp_path / "deep.yaml"
    path.write_text(f"tool_rules: {deep}\n")
    with pytest.raises(ConfigError, match=r"^config file .*deep\.yaml: nested too deep to read$"):
        load_config(path)
    monkeypatch.setenv("OTEL_TRACEFENCE_TOOL_RULES", deep)
    with pytest.raises(ConfigError, match=r"^environment: an OTEL_TRACEFENCE_\* value is nested too deep to read$"):
        load_config()
