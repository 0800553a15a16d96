"""The cyclic collector as ``tracefence serve`` sets it once started (docs/DECISIONS.md, 220): what exists at start
frozen, the youngest generation collected every ``GEN0_THRESHOLD`` container objects. The span processor, which runs
in the user's process, leaves their collector alone."""

from __future__ import annotations

import gc
import inspect

from otel_tracefence.cli import serve
from otel_tracefence.service.gc_settings import GEN0_THRESHOLD, GEN1_THRESHOLD, GEN2_THRESHOLD, tune_for_service


def test_a_started_service_freezes_what_it_made_and_collects_its_youngest_objects_less_often():
    before = gc.get_threshold()
    try:
        assert tune_for_service() == (50_000, 20, 100) == (GEN0_THRESHOLD, GEN1_THRESHOLD, GEN2_THRESHOLD)
        assert gc.get_threshold() == (50_000, 20, 100)
        assert gc.get_freeze_count() > 1000  # the modules, the configuration: never walked again
        assert gc.isenabled()  # cycles are still collected
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_serve_sets_it_once_started_and_the_processor_does_not():
    source = inspect.getsource(serve._run)  # run() sets up the logs, then _run() the service
    assert source.index("tune_for_service()") > source.index("service.start()")
    from otel_tracefence import sdk

    for module in (sdk, *(m for name, m in vars(sdk).items() if inspect.ismodule(m))):
        assert "gc_settings" not in inspect.getsource(module)
