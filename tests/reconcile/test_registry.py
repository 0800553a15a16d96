"""Which reconciler answers for which tool (issue 25 section 2): the config's ``reconcilers`` over the entry points
of ``tracefence.reconcilers``, and every reference that cannot be loaded named before anything is asked."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from otel_tracefence.core.config import ConfigError, load_config
from otel_tracefence.reconcile.registry import ENTRY_POINT_GROUP, ReconcilerLoadError, load_reconcilers
from programs import billing_checks

CHECKS = "programs.billing_checks"


def points(*pairs: tuple[str, str]):
    return lambda: [EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in pairs]


def test_the_config_names_a_function_per_tool_and_wins_over_an_entry_point_of_that_tool():
    loaded = load_reconcilers(
        {"invoice.create": f"{CHECKS}:find_invoice"},
        entry_points=points(("invoice.create", f"{CHECKS}:raises"), ("payment.capture", f"{CHECKS}:raises")),
    )
    assert {tool: (r.name, r.source, r.check) for tool, r in loaded.items()} == {
        "invoice.create": (f"{CHECKS}:find_invoice", "config", billing_checks.find_invoice),
        "payment.capture": (f"{CHECKS}:raises", "entry point", billing_checks.raises),
    }


def test_every_reference_that_cannot_be_loaded_is_named_at_once():
    with pytest.raises(ReconcilerLoadError) as caught:
        load_reconcilers(
            {"a": "no_such_module_here:f", "b": f"{CHECKS}:missing", "c": f"{CHECKS}:NOT_A_FUNCTION", "d": "nocolon"},
            entry_points=points(("e", f"{CHECKS}:raises"), ("e", f"{CHECKS}:hangs")),
        )
    assert str(caught.value) == (
        "reconcilers that cannot be loaded:\n"
        f"  tool 'e': entry points of tracefence.reconcilers disagree ({CHECKS}:hangs, {CHECKS}:raises); name one in the config's reconcilers\n"
        "  tool 'a' (config): 'no_such_module_here:f': module 'no_such_module_here' does not import (ModuleNotFoundError: No module named 'no_such_module_here')\n"
        f"  tool 'b' (config): '{CHECKS}:missing': '{CHECKS}' has no attribute 'missing'\n"
        f"  tool 'c' (config): '{CHECKS}:NOT_A_FUNCTION' is a int, not a function\n"
        "  tool 'd' (config): 'nocolon' is not a 'module:function' reference"
    )


def test_the_config_refuses_a_value_that_is_no_reference_and_reads_the_map_from_the_environment(monkeypatch):
    with pytest.raises(ConfigError, match=r"reconcilers\.invoice\.create: Value error, 'find_invoice' is not a 'module:function' reference"):
        load_config(None, reconcilers={"invoice.create": "find_invoice"})
    for setting, value in (("reconcile_timeout_s", 1e10), ("reconcile_max_concurrent", 0)):  # threading cannot wait 1e10 s
        with pytest.raises(ConfigError, match=setting):
            load_config(None, **{setting: value})
    with pytest.raises(ConfigError, match="service.reconcile_interval_s"):
        load_config(None, service={"reconcile_interval_s": 1e300})
    monkeypatch.setenv("OTEL_TRACEFENCE_RECONCILERS", '{"invoice.create": "billing_checks:find_invoice"}')
    monkeypatch.setenv("OTEL_TRACEFENCE_RECONCILE_TIMEOUT_S", "2.5")
    monkeypatch.setenv("OTEL_TRACEFENCE_SERVICE__RECONCILE_INTERVAL_S", "30")
    config = load_config(None)
    assert (config.reconcilers, config.reconcile_timeout_s, config.reconcile_max_concurrent, config.service.reconcile_interval_s) == (
        {"invoice.create": "billing_checks:find_invoice"}, 2.5, 4, 30.0,
    )  # fmt: skip
