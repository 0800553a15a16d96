"""Asking the reconcilers about a review item's held writes, and recording what they answer as its verdict
(issue 25, docs/decisions/retries.md).

* The calls asked about are the item's steps decided ``review`` or ``conflict`` (:func:`held_requests`), one
  :class:`~otel_tracefence.reconcile.ReconcileRequest` each; each goes to the reconciler registered for its tool.
* Each call runs on a thread of its own and is waited for ``timeout_s`` seconds; at most ``max_concurrent`` run at
  once, counting calls still running past their timeout (a hung check keeps its slot until it returns).
* **Fail closed.** A reconciler that raises, runs past its timeout, or returns anything but a
  :class:`~otel_tracefence.reconcile.ReconcileResult` with a :class:`Verdict` and a str of evidence gives
  ``undetermined`` with the failure as its evidence. So does a call whose tool has no reconciler, on an item where
  another call has one, and a call that found no free slot. Each failure is counted
  (``tracefence.reconcile.failures``, by ``error.type``: ``raised``, ``timeout``, ``bad_return``, ``busy``) and
  logged at WARNING the first time for each reconciler and kind.
* **One verdict per item** (the review store keeps one per trace), from its calls' answers (:func:`combine`):
  ``found_twice`` if any call's effect was found twice, else ``undetermined`` if any call's answer is, else
  ``absent`` if no call's effect happened, else ``found_once``. The evidence names each call. An item none of whose
  held calls has a reconciler is left as it is.
* A verdict equal to the item's latest (same verdict, actor and evidence) is not written again: asking every few
  seconds does not fill the history with copies.
* A person overrules any verdict (:mod:`otel_tracefence.review.verdicts`); an item resolved while its checks ran is
  not touched.
"""

from __future__ import annotations

import json
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.reconcile import ReconcileRequest, ReconcileResult, RelatedCall
from otel_tracefence.reconcile.registry import Reconciler
from otel_tracefence.review.verdicts import Verdict, parse_verdict

logger = logging.getLogger(__name__)

MAX_EVIDENCE_CHARS = 500
"""A call's line of evidence is cut to this many characters (the item's carries one per call)."""
HELD = (pb.DECISION_REVIEW, pb.DECISION_CONFLICT)

RAISED, TIMEOUT, BAD_RETURN, BUSY = "raised", "timeout", "bad_return", "busy"


@dataclass(frozen=True)
class CallOutcome:
    """What one held call's check gave: ``reconciler`` is its name (``""`` when its tool has none)."""

    call_id: str
    tool: str
    reconciler: str
    verdict: Verdict
    evidence: str


@dataclass
class ItemOutcome:
    """What reconciling one item did. ``action``: ``resolved``, ``kept_open``, ``unchanged`` (the same verdict was
    already its latest), ``would_record`` (a dry run), ``no_reconciler`` (none of its held calls has one),
    ``skipped`` (resolved or gone meanwhile) or ``failed`` (the store refused the write: ``error`` says why).
    ``verdict`` / ``actor`` / ``evidence``: the item's combined verdict (``None`` with ``no_reconciler``)."""

    trace_id: str
    calls: list[CallOutcome] = field(default_factory=list)
    verdict: Verdict | None = None
    actor: str = ""
    evidence: str = ""
    action: str = "no_reconciler"
    error: str = ""
    updated_ns: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The outcome as JSON values (``tracefence reconcile --format json``)."""
        return {
            "trace_id": self.trace_id, "action": self.action, "verdict": self.verdict.value if self.verdict else None,
            "actor": self.actor, "evidence": self.evidence, "error": self.error,
            "calls": [{"call_id": c.call_id, "tool": c.tool, "reconciler": c.reconciler, "verdict": c.verdict.value, "evidence": c.evidence} for c in self.calls],
        }  # fmt: skip


def metrics_count(meter_provider: Any = None) -> Callable[[str, dict[str, str]], None]:
    """Count each ``verdict`` in ``tracefence.reconcile.verdicts`` and each ``failure`` in
    ``tracefence.reconcile.failures`` (the global meter provider unless one is given)."""
    from opentelemetry import metrics

    from otel_tracefence.core.telemetry import instrument

    meter = metrics.get_meter("otel_tracefence", meter_provider=meter_provider)
    tallies = {"verdict": instrument(meter, "tracefence.reconcile.verdicts"), "failure": instrument(meter, "tracefence.reconcile.failures")}

    def count(kind: str, attributes: dict[str, str]) -> None:
        tallies[kind].add(1, attributes)

    return count


def _cut(text: str, limit: int = MAX_EVIDENCE_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def held_requests(item: pb.ReviewItem) -> list[ReconcileRequest]:
    """One :class:`ReconcileRequest` per step of ``item``'s plan decided ``review`` or ``conflict``, in trace order.
    ``arguments``: the stored ``arguments_json`` as a JSON value (kept only with ``store_raw_values``), else ``None``."""
    requests = []
    for decision in item.plan.steps:
        if decision.decision not in HELD:
            continue
        step = decision.step
        arguments = None
        if step.arguments_json:
            try:
                arguments = json.loads(step.arguments_json)
            except ValueError:
                arguments = None
        requests.append(
            ReconcileRequest(
                trace_id=item.trace_id, call_id=step.call_id, tool=step.tool,
                idempotency_key=step.idempotency_key if step.HasField("idempotency_key") else None,
                arguments=arguments, arguments_sha256=step.arguments_sha256, start_time_ns=step.start_time_unix_nano,
                reasons=tuple(decision.reasons), decision="conflict" if decision.decision == pb.DECISION_CONFLICT else "review",
                related_traces=tuple(RelatedCall(r.trace_id, r.call_id, r.reason) for r in decision.related_traces),
            )
        )  # fmt: skip
    return requests


def combine(calls: Sequence[CallOutcome]) -> tuple[Verdict, str]:
    """The item's verdict and evidence from its calls' (at least one): see the module's rules."""
    verdicts = {c.verdict for c in calls}
    if Verdict.FOUND_TWICE in verdicts:
        verdict = Verdict.FOUND_TWICE
    elif Verdict.UNDETERMINED in verdicts:
        verdict = Verdict.UNDETERMINED
    elif verdicts == {Verdict.ABSENT}:
        verdict = Verdict.ABSENT
    else:
        verdict = Verdict.FOUND_ONCE
    if len(calls) == 1:
        return verdict, calls[0].evidence
    return verdict, "; ".join(f"{c.call_id} ({c.tool}): {c.verdict.value}: {c.evidence}" for c in calls)


class ReconcileRunner:
    """Runs reconcilers (tool -> :class:`~otel_tracefence.reconcile.registry.Reconciler`) with a timeout per call
    (``timeout_s`` seconds) and at most ``max_concurrent`` calls at once; :meth:`check` never raises.
    ``count(kind, attributes)``: told of each ``failure`` and ``verdict`` (default: :func:`metrics_count`)."""

    def __init__(
        self,
        reconcilers: Mapping[str, Reconciler],
        *,
        timeout_s: float = 10.0,
        max_concurrent: int = 4,
        count: Callable[[str, dict[str, str]], None] | None = None,
    ) -> None:
        self.reconcilers = dict(reconcilers)
        self.timeout_s = timeout_s
        self.max_concurrent = max_concurrent
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self._count = count or metrics_count()
        self._logged: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def _failed(self, reconciler: Reconciler, kind: str, why: str) -> str:
        self._count("failure", {"tracefence.reconciler": reconciler.name, "error.type": kind})
        with self._lock:
            first = (reconciler.name, kind) not in self._logged
            self._logged.add((reconciler.name, kind))
        logger.log(logging.WARNING if first else logging.DEBUG, "reconciler %s (tool %s): %s; the item stays open", reconciler.name, reconciler.tool, why)
        return _cut(why)

    def check(self, request: ReconcileRequest) -> CallOutcome:
        """Ask the reconciler of ``request.tool`` about the call: its verdict, or ``undetermined`` with why not."""
        reconciler = self.reconcilers.get(request.tool)
        if reconciler is None:
            return CallOutcome(request.call_id, request.tool, "", Verdict.UNDETERMINED, f"no reconciler is registered for tool {request.tool!r}")

        def undetermined(kind: str, why: str) -> CallOutcome:
            return CallOutcome(request.call_id, request.tool, reconciler.name, Verdict.UNDETERMINED, self._failed(reconciler, kind, why))

        if not self._slots.acquire(timeout=self.timeout_s):
            return undetermined(BUSY, f"not asked: all {self.max_concurrent} reconciler slots stayed busy for {self.timeout_s:g} s (checks running past their timeout)")
        answer: list[tuple[str, object]] = []

        def call() -> None:
            try:
                answer.append(("returned", reconciler.check(request)))
            except BaseException as exc:  # noqa: BLE001 - whatever the operator's check raises is its evidence
                answer.append(("raised", exc))
            finally:
                self._slots.release()

        worker = threading.Thread(target=call, name=f"tracefence-reconcile-{request.tool}", daemon=True)
        worker.start()
        worker.join(self.timeout_s)
        if not answer:
            return undetermined(TIMEOUT, f"{reconciler.name} did not answer within {self.timeout_s:g} s")
        how, value = answer[0]
        if how == "raised":
            return undetermined(RAISED, f"{reconciler.name} raised {type(value).__name__}: {value}")
        result, wrong = _result(value)
        if result is None:
            return undetermined(BAD_RETURN, f"{reconciler.name} returned {wrong}")
        self._count("verdict", {"tracefence.reconciler": reconciler.name, "tracefence.verdict": result.verdict.value})
        return CallOutcome(request.call_id, request.tool, reconciler.name, result.verdict, _cut(result.evidence))

    def check_item(self, item: pb.ReviewItem) -> ItemOutcome:
        """Every held call of ``item`` checked, and the item's combined verdict (``no_reconciler`` when none of them
        has one: nothing is asked)."""
        requests = held_requests(item)
        outcome = ItemOutcome(item.trace_id)
        if not any(r.tool in self.reconcilers for r in requests):
            outcome.evidence = f"no reconciler for {', '.join(sorted({r.tool for r in requests})) or 'any held call'}"
            return outcome
        outcome.calls = [self.check(r) for r in requests]
        outcome.verdict, outcome.evidence = combine(outcome.calls)
        outcome.actor = ", ".join(sorted({c.reconciler for c in outcome.calls if c.reconciler}))
        return outcome


def _result(value: object) -> tuple[ReconcileResult | None, str]:
    """``value`` as a ReconcileResult with a :class:`Verdict` (or its str value, ``"found_once"``: Verdict is a str
    enum) and str evidence, and ``""``; else ``None`` and what is wrong with it."""
    if not isinstance(value, ReconcileResult):
        return None, f"{_shown(value)}, not a ReconcileResult(verdict, evidence)"
    try:
        verdict = parse_verdict(value.verdict)
    except (TypeError, ValueError):
        return None, f"a ReconcileResult whose verdict {_cut(repr(value.verdict), 80)} is not one of {', '.join(v.value for v in Verdict)}"
    if not isinstance(value.evidence, str):
        return None, f"a ReconcileResult whose evidence is a {type(value.evidence).__name__}, not a str"
    assert verdict is not None
    return ReconcileResult(verdict, value.evidence), ""


def _shown(value: object) -> str:
    """A returned value as the evidence names it: its type, and its repr cut to 80 characters."""
    return f"{type(value).__name__} {_cut(repr(value), 80)}"


def record(store: Any, outcome: ItemOutcome, *, dry_run: bool = False) -> ItemOutcome:
    """Write ``outcome``'s verdict on its item (``record_verdict``), unless it has none, is a dry run, or is the
    item's latest verdict already; the item must still be open. Sets ``outcome.action`` (and ``error`` when the
    store refused); never raises."""
    if outcome.verdict is None:
        return outcome
    try:
        stored = store.get(outcome.trace_id)
    except Exception as exc:  # noqa: BLE001 - one item's store failure must not stop the others
        outcome.action, outcome.error = "failed", f"{type(exc).__name__}: {exc}"
        return outcome
    if stored is None or stored.state != pb.REVIEW_STATE_OPEN:
        outcome.action = "skipped"
        return outcome
    if stored.verdict == _proto_verdict(outcome.verdict) and stored.verdict_by == outcome.actor and stored.verdict_evidence == outcome.evidence:
        outcome.action = "unchanged"
        return outcome
    if dry_run:
        outcome.action = "would_record"
        return outcome
    try:
        item = store.record_verdict(outcome.trace_id, actor=outcome.actor, verdict=outcome.verdict, evidence=outcome.evidence)
    except KeyError:
        outcome.action = "skipped"
        return outcome
    except Exception as exc:  # noqa: BLE001 - reported on the outcome and logged; the item stays as it was
        outcome.action, outcome.error = "failed", f"{type(exc).__name__}: {exc}"
        logger.error("review item %s: the verdict of %s could not be recorded: %s", outcome.trace_id, outcome.actor, outcome.error)
        return outcome
    outcome.action = "resolved" if item.state == pb.REVIEW_STATE_RESOLVED else "kept_open"
    outcome.updated_ns = item.updated_time.ToNanoseconds()
    return outcome


def _proto_verdict(verdict: Verdict) -> int:
    return pb.Verdict.Value("VERDICT_" + verdict.name)


def open_items(store: Any, *, page_size: int = 200) -> Iterable[pb.ReviewItem]:
    """Every open item of ``store``, page by page (items it cannot read are left out: ``review list`` names them)."""
    token = ""
    while True:
        items, token = store.list(state=pb.REVIEW_STATE_OPEN, page_size=page_size, page_token=token, skipped=[])
        yield from items
        if not token:
            return


def reconcile_items(store: Any, items: Iterable[pb.ReviewItem], runner: ReconcileRunner, *, dry_run: bool = False) -> list[ItemOutcome]:
    """Check ``items`` (up to ``runner.max_concurrent`` at once) and record each verdict (one at a time, on this
    thread). Returns one :class:`ItemOutcome` per item, in the order given; never raises for one item's failure."""
    with ThreadPoolExecutor(max_workers=max(1, runner.max_concurrent), thread_name_prefix="tracefence-reconcile") as pool:
        checked = list(pool.map(runner.check_item, items))
    return [record(store, outcome, dry_run=dry_run) for outcome in checked]


__all__ = ["CallOutcome", "ItemOutcome", "ReconcileRunner", "metrics_count", "combine", "held_requests", "open_items", "reconcile_items", "record"]
