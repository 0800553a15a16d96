"""The replay guard's refusal names the review item's verdict and evidence (issue 25 section 2): a verdict never
makes a held step replayable, but whoever is refused learns what the owning system said."""

from __future__ import annotations

import pytest

from otel_tracefence.agent.replay import NonReplayableTraceError, ReplayGuard
from otel_tracefence.review import open_review_store

from reconcile.test_runner import TRACE, held

HELD = (
    "injected replay refused: step 2: tool 'invoice.create' (call call_1) is held for review (write_timeout): the trace cannot "
    "show what this call did to the world. Reconcile it with the owning system; until then use static inspection of the recorded "
    "steps. Neither dynamic nor injected replay is allowed."
)


def test_a_refusal_names_the_items_verdict_its_reconciler_and_evidence(tmp_path):
    with open_review_store(tmp_path / "review.db") as store:
        store.upsert(held())
        unverdicted = store.get(TRACE)
        store.record_verdict(TRACE, actor="billing_checks:find_invoice", verdict="undetermined", evidence="billing API unreachable")
        open_item = store.get(TRACE)
        resolved = store.record_verdict(TRACE, actor="billing_checks:find_invoice", verdict="found_once", evidence="invoice in_1 with key inv-9")
    messages = []
    for item in (unverdicted, open_item, resolved):
        with pytest.raises(NonReplayableTraceError) as caught:
            ReplayGuard.from_review_item(item)
        messages.append(str(caught.value))
    assert messages == [
        HELD,
        HELD + " Its review item is open; latest verdict undetermined, by billing_checks:find_invoice: billing API unreachable.",
        HELD + " Its review item is resolved; latest verdict found_once, by billing_checks:find_invoice: invoice in_1 with key inv-9.",
    ]
    guard = ReplayGuard.from_review_item(resolved, check=False)
    assert guard.on_call("customer.lookup").step.index == 1
    with pytest.raises(NonReplayableTraceError, match=r"is held for review \(write_timeout\).*latest verdict found_once, by billing_checks:find_invoice: invoice in_1 with key inv-9\.$"):
        guard.on_call("invoice.create", {"amount_cents": 1250})
