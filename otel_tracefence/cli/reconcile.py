"""``tracefence reconcile``: ask the operator's reconcilers about the open review items and record their verdicts.

The reconcilers are the config's ``reconcilers`` (tool -> ``module:function``) over the entry points of
``tracefence.reconcilers`` (:mod:`otel_tracefence.reconcile.registry`); each held call (a step decided ``review`` or
``conflict``) of an open item goes to the one of its tool, with the config's ``reconcile_timeout_s`` and
``reconcile_max_concurrent``; what the answers make of the item: :mod:`otel_tracefence.reconcile.runner`.
``found_once`` / ``absent`` resolve it, ``found_twice`` / ``undetermined`` keep it open with the evidence.
``--dry-run`` asks and prints, and records nothing. ``--trace`` checks one item (its id or a prefix only it has).

The database is ``--db``, else ``review_db`` (the config file, ``$OTEL_TRACEFENCE_REVIEW_DB``), else
``tracefence-review.db``; never created here. Exit 0 when every check ran (whatever it found), 2 for a reconciler
that does not load, a database that cannot be opened, an unknown trace id, or a verdict the store refused.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.cli.review import unique_trace_id
from otel_tracefence.cli.table import cell
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.reconcile.registry import ReconcilerLoadError, load_reconcilers
from otel_tracefence.reconcile.runner import ItemOutcome, ReconcileRunner, open_items, reconcile_items
from otel_tracefence.review.open import open_review_store
from otel_tracefence.review.store import ReviewStoreError
from otel_tracefence.review.targets import display_target, error_naming

EXIT_OK, EXIT_ERROR = 0, 2
ACTIONS = {
    "resolved": "resolved", "kept_open": "kept open", "unchanged": "unchanged", "would_record": "would record",
    "no_reconciler": "left open", "skipped": "skipped", "failed": "failed",
}  # fmt: skip


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "reconcile",
        help="ask the reconcilers whether held writes took effect, and record their verdicts",
        description="Ask each open review item's held calls of the system that owns their effect, through the reconcilers "
        "the config registers per tool (reconcilers: {tool: module:function}) or the tracefence.reconcilers entry points. "
        "found_once and absent resolve the item; found_twice and undetermined keep it open with the evidence.",
    )
    parser.add_argument("--db", default=None, help="review database: a SQLite file or a postgresql:// URL (default: review_db, else tracefence-review.db)")
    parser.add_argument("--trace", metavar="TRACE_ID", help="only this item: its trace id, or a prefix of it only it has")
    parser.add_argument("--dry-run", action="store_true", help="ask the reconcilers and print what they say; record nothing")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="table (default), or json: one outcome per line")
    parser.set_defaults(run=run)


def _fail(message: str) -> int:
    print(f"tracefence reconcile: {message}", file=sys.stderr)
    return EXIT_ERROR


def run(args: argparse.Namespace, config: TraceFenceConfig) -> int:
    try:
        reconcilers = load_reconcilers(config.reconcilers)
    except ReconcilerLoadError as exc:
        return _fail(str(exc))
    if not reconcilers:
        return _fail("no reconciler is registered: name one per tool in the config (reconcilers: {invoice.create: billing_checks:find_invoice}) or install one under the tracefence.reconcilers entry points")
    target = args.db or config.review_db or "tracefence-review.db"
    where = display_target(target)
    try:
        store = open_review_store(target, create=False, store_raw_values=config.store_raw_values)
    except FileNotFoundError:
        return _fail(f"{where}: no review database there (give --db PATH)")
    except (ReviewStoreError, sqlite3.Error, OSError) as exc:
        return _fail(error_naming(target, exc))
    runner = ReconcileRunner(reconcilers, timeout_s=config.reconcile_timeout_s, max_concurrent=config.reconcile_max_concurrent)
    try:
        with store:
            if args.trace is not None:
                trace_id, why = unique_trace_id(store, args.trace)
                if trace_id is None:
                    return _fail(why)
                item = store.get(trace_id)
                items = [item] if item is not None and item.state == pb.REVIEW_STATE_OPEN else []
                if not items:
                    return _fail(f"review item {trace_id} is resolved: nothing to reconcile")
            else:
                items = list(open_items(store))
            outcomes = reconcile_items(store, items, runner, dry_run=args.dry_run)
    except (ReviewStoreError, sqlite3.Error) as exc:
        return _fail(error_naming(target, exc))
    _print(outcomes, args.format, where, dry_run=args.dry_run)
    return EXIT_ERROR if any(o.action == "failed" for o in outcomes) else EXIT_OK


def _print(outcomes: list[ItemOutcome], form: str, where: str, *, dry_run: bool) -> None:
    if form == "json":
        for outcome in outcomes:
            print(json.dumps(outcome.as_dict(), ensure_ascii=False, sort_keys=True))
        return
    checked = [o for o in outcomes if o.action != "no_reconciler"]
    print(f"reconcile {where}: {len(outcomes)} open item(s), {len(checked)} with a reconciler{' (dry run: nothing recorded)' if dry_run else ''}")
    for outcome in outcomes:
        action = ACTIONS[outcome.action]
        if outcome.verdict is None:
            print(f"  {cell(outcome.trace_id)}  {action:<13} {cell(outcome.evidence)}")
            continue
        print(f"  {cell(outcome.trace_id)}  {action:<13} {outcome.verdict.value:<12} by {cell(outcome.actor)}")
        for call in outcome.calls:  # control characters escaped, as review show does: the evidence is the reconciler's text
            print(f"      {cell(call.call_id)} {cell(call.tool)}: {call.verdict.value}: {cell(call.evidence)}")
        if outcome.error:
            print(f"      not recorded: {cell(outcome.error)}")
