"""Two traces with one key, planned at the same moment by two workers or replicas, meet each other (DECISIONS 818):
the write index's lookup and write are one transaction that holds other meetings of the same keys off, on a SQLite
file (its write lock) and on the real PostgreSQL server the suite starts (advisory locks per key)."""

from __future__ import annotations

import threading
import time


from otel_tracefence.pipeline import write_index as write_index_module
from otel_tracefence.pipeline.write_index import StoreWriteIndex
from otel_tracefence.review import open_review_store
from otel_tracefence.review.open import open_write_index_backend

from test_write_index_sqlite import SHA_A, SHA_B, _decided, _plan


def test_a_trace_planned_while_another_with_its_key_is_being_planned_waits_and_meets_it(target, monkeypatch):
    open_review_store(target).close()
    first, second = (StoreWriteIndex(open_write_index_backend(target), retention_s=86_400) for _ in range(2))
    real = write_index_module.against_earlier
    inside, results = threading.Event(), {}

    def slow_first(plan, lookup, max_related):  # the first meeting holds its transaction while the second starts
        if plan.trace_id == "t1":
            inside.set()
            time.sleep(0.3)
        return real(plan, lookup, max_related)

    monkeypatch.setattr(write_index_module, "against_earlier", slow_first)
    one = threading.Thread(target=lambda: results.setdefault("t1", first.plan_against(_plan("t1", sha=SHA_A))))
    one.start()
    assert inside.wait(5)
    results["t2"] = second.plan_against(_plan("t2", sha=SHA_B))  # the same key, other arguments, another process
    one.join(5)
    assert _decided(results["t1"]) == ("skip", ("write_committed",), [])
    assert _decided(results["t2"]) == ("conflict", ("idempotency_key_reused_across_traces",), [("t1", "idempotency_key_reused_across_traces")])
    assert (first.failures, second.failures) == (0, 0)
    first.close()
    second.close()
