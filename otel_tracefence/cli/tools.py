"""``tracefence tools FILE... | --db DB``: the tool surface as the traces show it.

One row per tool name: how many calls (steps) it made, its effect and which source
decided it, its status counts, how many of its steps were held (``review`` or
``conflict``), and an example call id (the least held one, else the least). Rows
are sorted by held steps, most first, then by tool name.

Below the table, an audit: each tool whose effect a hint or a tool rule gave as ``read`` while
a request below one of its calls sent a method that is not safe (``effect_contradicted_by_dispatch``,
docs/DECISIONS.md 424): the hint or rule its dispatches contradict, how many of its calls, and an
example. Left out when no call is contradicted.

``--rules-skeleton`` prints, instead of the table, a YAML ``tool_rules`` block with
one rule per tool whose effect nobody declared or labelled (effect ``unknown``,
source ``none``), each with ``effect: FILL_IN`` for a person to replace with
``read`` or ``write``: the configuration refuses to load until they have.

Files are read as ``tracefence plan`` reads them (any format, auto-detected); a
malformed row or span is counted as the ``review`` step the processor would make,
and named in a warning. ``--db`` reads the plans of every item in a review
database (open and resolved): only traces that were held are there.
``--format json`` prints one JSON object per tool and line instead of the table and the audit (:func:`json_lines`).
Files may be gzip-compressed (:mod:`otel_tracefence.cli.inputs`).
Exit 0 on success, 2 when a file or the database cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator, NamedTuple, Sequence

from otel_tracefence.cli.inputs import STDIN, read_input
from otel_tracefence.pipeline.documents import plan_text
from otel_tracefence.cli.table import cell
from otel_tracefence.core.reasons import EFFECT_CONTRADICTED_BY_DISPATCH
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.readers.detect import FORMATS
from otel_tracefence.readers.errors import InputError, UnreadableInput, decode_text_file

EXIT_OK, EXIT_ERROR = 0, 2
COLUMNS = ("tool", "calls", "effect", "source", "statuses", "review", "example")
HELD = ("review", "conflict")


class Call(NamedTuple):
    """One step as this command needs it: enum values as the plan's lowercase names."""

    tool: str
    call_id: str
    effect: str
    effect_source: str
    status: str
    decision: str
    contradicted: bool = False  # held effect_contradicted_by_dispatch: a request below it says the read writes


@dataclass
class ToolSummary:
    """What the traces show of one tool."""

    tool: str
    calls: int = 0
    effects: Counter = field(default_factory=Counter)
    sources: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    held: int = 0
    example: str = ""
    unlabelled: int = 0  # steps whose effect is unknown with no source: what a tool rule would settle
    contradicted: Counter = field(default_factory=Counter)  # effect source -> calls whose dispatches contradict it
    contradicted_example: str = ""  # the least contradicted call id

    def add(self, call: Call) -> None:
        self.calls += 1
        self.effects[call.effect] += 1
        self.sources[call.effect_source] += 1
        self.statuses[call.status] += 1
        if call.effect == "unknown" and call.effect_source == "none":
            self.unlabelled += 1
        if call.contradicted:
            self.contradicted[call.effect_source] += 1
            self.contradicted_example = min(self.contradicted_example, call.call_id) if self.contradicted_example else call.call_id
        # The example: a held call (the one worth looking at) when there is one, the least call id of
        # its kind, so the same traces give the same table whatever order their ids sort in.
        if call.decision in HELD:
            self.example = call.call_id if not self.held else min(self.example, call.call_id)
            self.held += 1
        elif not self.held:
            self.example = min(self.example, call.call_id) if self.example else call.call_id


def summarize(calls: Iterable[Call]) -> list[ToolSummary]:
    """One summary per tool name, most held steps first, then by name."""
    tools: dict[str, ToolSummary] = {}
    for call in calls:
        tools.setdefault(call.tool, ToolSummary(call.tool)).add(call)
    return sorted(tools.values(), key=lambda t: (-t.held, t.tool))


def _counts(counter: Counter, *, bare_when_one: bool) -> str:
    """``ok=2,timeout=1`` (most first, then by name); a single value alone when ``bare_when_one``."""
    if bare_when_one and len(counter) == 1:
        return next(iter(counter))
    return ",".join(f"{name}={n}" for name, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def render(summaries: Sequence[ToolSummary]) -> str:
    """The table: one row per tool, columns padded to fit."""
    rows = [COLUMNS]
    for t in summaries:
        rows.append(
            (
                cell(t.tool),
                str(t.calls),
                _counts(t.effects, bare_when_one=True),
                _counts(t.sources, bare_when_one=True),
                _counts(t.statuses, bare_when_one=False),
                str(t.held),
                cell(t.example),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)


AUDIT_HEAD = "effects the traces contradict (read by a hint or a tool rule; a request below sent a method that is not safe):"
AUDIT_COLUMNS = ("tool", "said_by", "calls", "contradicted", "example")


def audit(summaries: Sequence[ToolSummary]) -> str:
    """The audit of declared effects against observed behaviour: one row per tool whose hint or rule its dispatches
    contradict (in table order), or ``""`` when none is."""
    rows = [AUDIT_COLUMNS]
    for t in summaries:
        if t.contradicted:
            rows.append((cell(t.tool), _counts(t.contradicted, bare_when_one=True), str(t.calls), str(sum(t.contradicted.values())), cell(t.contradicted_example)))
    if len(rows) == 1:
        return ""
    widths = [max(len(row[i]) for row in rows) for i in range(len(AUDIT_COLUMNS))]
    return "\n".join([AUDIT_HEAD, *("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)])


def _count_map(counter: Counter) -> dict[str, int]:
    """A counter as a JSON object, most first, then by name (the table's order)."""
    return dict(sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


def json_lines(summaries: Sequence[ToolSummary]) -> str:
    """``--format json``: one JSON object per tool and line, in table order, with the table's and the audit's
    columns as fields (counts as objects, ``{"ok": 2, "timeout": 1}``; names as the traces spell them, not
    escaped for a terminal); ``""`` when there is no tool step."""
    lines = []
    for t in summaries:
        record = {
            "tool": t.tool,
            "calls": t.calls,
            "effects": _count_map(t.effects),
            "sources": _count_map(t.sources),
            "statuses": _count_map(t.statuses),
            "review": t.held,
            "example": t.example,
            "unlabelled": t.unlabelled,
            "contradicted": _count_map(t.contradicted),
            "contradictedExample": t.contradicted_example,
        }
        lines.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    return "".join(lines)


def glob_literal(name: str) -> str:
    """A ``fnmatch`` glob matching exactly ``name``: ``*``, ``?`` and ``[`` are bracketed."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


SKELETON_HEAD = """\
# tool_rules for otel-tracefence, written by `tracefence tools --rules-skeleton`: one rule
# per tool these traces show with no known effect (its calls are held as effect_unknown).
# For each rule, replace FILL_IN with `read` (safe to run again) or `write` (changes something
# outside), or delete the rule if you are not sure: a tool without a rule stays in review.
# The configuration does not load while an effect is FILL_IN. Rules are tried in order and
# the first match wins: put these before broader globs of your own.
tool_rules:
"""


def skeleton(summaries: Sequence[ToolSummary]) -> str:
    """The YAML ``tool_rules`` block for every named tool with unlabelled calls, in table order."""
    todo = [t for t in summaries if t.unlabelled and t.tool]
    if not todo:
        return "# every tool in these traces has a known effect: no tool_rules needed"
    parts = [SKELETON_HEAD.rstrip("\n")]
    for t in todo:
        parts.append(
            f"  # {cell(t.tool)}: {t.calls} call(s) ({_counts(t.statuses, bare_when_one=False)}), {t.held} held for review, e.g. {cell(t.example)}\n"
            f"  - match: {json.dumps(glob_literal(t.tool))}\n"
            "    effect: FILL_IN  # read or write\n"
            "    # idempotency_key_argument: idempotency_key  # a write's argument holding its idempotency key, if any"
        )
    return "\n".join(parts)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tools",
        help="list the tools the traces show: calls, effect and its source, statuses, steps held",
        description="One line per tool in the traces of FILE... (any format tracefence plan reads) or in a review "
        "database (--db): calls, effect and its source, status counts, steps held for review, an example call id. "
        "Files may be gzip-compressed. --format json prints one JSON object per tool and line. "
        "--rules-skeleton prints a YAML tool_rules block for the tools with no known effect instead. "
        "Exit 0 on success, 2 when an input cannot be read.",
    )
    parser.add_argument("files", nargs="*", metavar="FILE", help="trace files (OTLP/JSON, JSON rows, NDJSON rows, CSV rows; plain or gzip; - for standard input)")
    parser.add_argument("--db", metavar="DB", default=None, help="read the plans in this review database instead of files")
    parser.add_argument("--input-format", choices=("auto", *FORMATS), default="auto", help="format of every FILE (default: auto-detect each)")
    parser.add_argument("--format", choices=("table", "json"), default="table", help="table (default): for people, with the audit below; json: one object per tool and line (JSON Lines)")
    parser.add_argument("--rules-skeleton", action="store_true", help="print a YAML tool_rules block for every tool whose effect is unknown")
    parser.set_defaults(run=run)


def _fail(message: str) -> int:
    print(f"tracefence tools: {message}", file=sys.stderr)
    return EXIT_ERROR


def calls_in_files(paths: Sequence[str], input_format: str, config: TraceFenceConfig, warn: list[str]) -> list[Call]:
    """Every step planned from ``paths``; what could not be read is added to ``warn`` as lines.

    Raises :class:`UnreadableInput` (with the path in front) or :class:`OSError` for a file that cannot be read.
    """
    calls: list[Call] = []
    for path in paths:
        try:
            text = decode_text_file(read_input(path, config.limits.max_input_bytes))
            warnings: list[InputError] = []
            plans, errors = plan_text(text, input_format, config, warnings=warnings)
        except UnreadableInput as exc:
            raise UnreadableInput(f"{path}: {exc}") from None
        for problem in sorted([*warnings, *errors], key=lambda e: (e.line, e.span_id)):
            counted = "" if problem.planned else " (not counted: it could not be read)"
            warn.append(f"{path}: warning: {problem}{counted}")
        for plan in plans:
            for d in plan.steps:
                s = d.step
                calls.append(Call(s.tool, s.call_id, s.effect.value, s.effect_source.value, s.status.value, d.decision.value,
                                  EFFECT_CONTRADICTED_BY_DISPATCH in d.reasons))
    return calls


def calls_in_db(path: str, skipped: list | None = None) -> Iterator[Call]:
    """Every step of every item's plan in the review database at ``path`` (open and resolved items),
    by trace id. ``skipped``: when given, items that cannot be read are left out and appended to it
    (:class:`~otel_tracefence.review.store.UnreadableItem`); else the first raises.

    Raises :class:`FileNotFoundError` when there is no database there, :class:`sqlite3.Error` or
    :class:`~otel_tracefence.review.store.ReviewStoreError` when it cannot be read.
    """
    from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
    from otel_tracefence.review.open import open_review_store
    from otel_tracefence.review.paging import MAX_PAGE_SIZE

    def name(enum_type: object, value: int, prefix: str, unspecified: str = "unknown") -> str:
        text = enum_type.Name(value)  # type: ignore[attr-defined]
        return unspecified if text.endswith("_UNSPECIFIED") else text.removeprefix(prefix).lower()

    plans: list[pb.TracePlan] = []
    with open_review_store(path, create=False) as store:
        token = ""
        while True:
            items, token = store.list(page_size=MAX_PAGE_SIZE, page_token=token, skipped=skipped)
            plans.extend(item.plan for item in items)
            if not token:
                break
    for plan in sorted(plans, key=lambda p: p.trace_id):  # by trace id, as plans of files are
        for d in plan.steps:
            s = d.step
            yield Call(
                s.tool,
                s.call_id,
                name(pb.Effect, s.effect, "EFFECT_"),
                name(pb.EffectSource, s.effect_source, "EFFECT_SOURCE_", "none"),
                name(pb.ToolStatus, s.status, "TOOL_STATUS_"),
                name(pb.Decision, d.decision, "DECISION_"),
                EFFECT_CONTRADICTED_BY_DISPATCH in d.reasons,
            )


def run(args: argparse.Namespace, config: TraceFenceConfig) -> int:
    from otel_tracefence.review.targets import display_target, error_naming
    from otel_tracefence.review.store import ReviewStoreError

    if bool(args.files) == bool(args.db):
        return _fail("give trace files (FILE...) or a review database (--db DB), not both and not neither")
    if args.rules_skeleton and args.format == "json":
        return _fail("--rules-skeleton prints YAML: give it without --format json")
    if args.files.count(STDIN) > 1:
        return _fail("-: standard input given more than once: it can be read once; nothing was listed")
    warn: list[str] = []
    skipped: list = []  # review items that cannot be read: the others are summarized, and the exit is 2
    if args.db:
        try:
            calls = list(calls_in_db(args.db, skipped))
        except FileNotFoundError:
            return _fail(f"{display_target(args.db)}: no review database there")
        except (ReviewStoreError, sqlite3.Error, OSError) as exc:
            return _fail(error_naming(args.db, exc))
    else:
        try:
            calls = calls_in_files(args.files, args.input_format, config, warn)
        except UnreadableInput as exc:
            return _fail(f"{exc}; nothing was listed")
        except OSError as exc:
            return _fail(f"{exc.filename or ''}: {exc.strerror or exc}")
    for line in warn:
        print(f"tracefence tools: {line}", file=sys.stderr)
    summaries = summarize(calls)
    if args.rules_skeleton:
        print(skeleton(summaries))
    elif args.format == "json":
        sys.stdout.write(json_lines(summaries))
    elif summaries:
        print(render(summaries))
        contradicted = audit(summaries)
        if contradicted:
            print()
            print(contradicted)
    else:
        print("no tool steps")
    for unreadable in skipped:
        _fail(f"{display_target(args.db)}: {unreadable}: skipped")
    return EXIT_ERROR if skipped else EXIT_OK
