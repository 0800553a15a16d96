"""The cyclic garbage collector as ``tracefence serve`` runs it (each process: the service, a router, a worker).

The service's data path frees what it makes by reference counting: a received span is an item holding its bytes,
its views and plans are trees. The cyclic collector finds nothing there, yet runs every ``700`` container objects
made (CPython's default gen-0 threshold), walking the young objects and, in its older generations, every span a
service holds. Measured on bench/service_path.py (bench/README.md, "Sixth round"): about 5% of the service's
instructions per span went to it. So a service process, once started, moves what it made at start (the modules,
the configuration, gRPC) out of the collector's sight (``gc.freeze``), and collects its youngest generation every
``GEN0_THRESHOLD`` container objects instead: a cycle made by a failure path is still freed, a little later.

Only ``tracefence serve`` does this: the span processor runs in the user's process, whose collector is theirs.
"""

from __future__ import annotations

import gc

GEN0_THRESHOLD = 50_000  # container objects made (less freed) between two collections of the youngest generation
GEN1_THRESHOLD = 20  # gen-0 collections between two of generation 1
GEN2_THRESHOLD = 100  # gen-1 collections between two full ones (CPython also waits for 25% more long-lived objects)


def tune_for_service() -> tuple[int, int, int]:
    """Set the collector for a started service process: what exists now is frozen (never walked again), the
    thresholds become ``GEN0_THRESHOLD``, ``GEN1_THRESHOLD``, ``GEN2_THRESHOLD``. Returns the thresholds set.
    Call it once the service has started (the objects made at start are then frozen)."""
    gc.collect()  # what start left as garbage is freed, not frozen
    gc.freeze()
    gc.set_threshold(GEN0_THRESHOLD, GEN1_THRESHOLD, GEN2_THRESHOLD)
    return gc.get_threshold()
