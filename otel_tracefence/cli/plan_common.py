"""What ``tracefence plan`` and ``tracefence plan --stream`` (:mod:`otel_tracefence.cli.plan_stream`) share: the exit
codes, the standard-error lines, the progress bars and the ``--fail-on`` gate."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Iterable, Iterator, Sequence, TypeVar

from otel_tracefence.cli import table
from otel_tracefence.cli.inputs import STDIN
from otel_tracefence.core.model import Decision, ReplayClass, TracePlan
from otel_tracefence.core.reasons import RESULT_NOT_RECORDED
from otel_tracefence.pipeline.annotate import REPLAY_CLASS

EXIT_OK, EXIT_FAIL_ON, EXIT_REJECTED = 0, 1, 2
T = TypeVar("T")


def say(path: str, message: str) -> None:
    """One line on standard error: ``tracefence plan: PATH: MESSAGE``."""
    print(f"tracefence plan: {path}: {message}", file=sys.stderr)


def terminal_progress(items: Sequence[T], total: int) -> Iterable[T]:
    """``items`` with a progress bar on standard error (tqdm) when it is a terminal; quiet otherwise.

    The bar is cleared when done. The ``TQDM_*`` variables tune it (``TQDM_DELAY=2``: only past 2 s).
    """
    if not sys.stderr.isatty():
        return items
    from tqdm import tqdm

    return tqdm(items, total=total, desc="tracefence plan", unit="trace", file=sys.stderr, leave=False, dynamic_ncols=True)


@contextlib.contextmanager
def reading_progress(path: str, total: int | None = None, what: str = "reading") -> Iterator[Any]:
    """A progress bar (tqdm) of ``what`` is done with ``path``, in bytes (characters once decoded), on standard error
    when it is a terminal, else ``None``. Its total: ``total``, else the file's size when it is a regular file;
    ``bar.update(n)`` advances it by ``n``. Cleared when done."""
    if not sys.stderr.isatty():
        yield None
        return
    from tqdm import tqdm

    if total is None and path != STDIN and os.path.isfile(path):
        total = os.path.getsize(path)
    with tqdm(total=total, desc=f"tracefence plan: {what} {path}", unit="B", unit_scale=True, unit_divisor=1024,
              file=sys.stderr, leave=False, dynamic_ncols=True) as bar:
        yield bar


FAIL_ON_REASONS = 3


def meets_fail_on(plan: TracePlan, fail_on: str) -> bool:
    """True when ``plan`` fails the ``--fail-on`` gate ``fail_on`` (a :class:`ReplayClass` value past ``dynamic``):
    its class is at or past ``fail_on``, or the plan is partial, whatever its class (none too). A partial plan is
    one :func:`~otel_tracefence.pipeline.documents.incomplete` flags (a span names a parent the trace in the file lacks; a ``tracefence.trace.partial``,
    ``.late`` or ``.reasons`` value that is not ``false``): steps may be missing, so no gate passes it, as the
    replay guard refuses it (docs/DECISIONS.md 287, 300)."""
    if plan.partial:
        return True
    return plan.replay_class is not None and plan.replay_class.rank >= ReplayClass(fail_on).rank


PARTIAL_CAUSE = "partial (decided before it was complete, or not whole in this file: steps may be missing)"


def fail_on_line(plan: TracePlan, fail_on: str) -> str:
    """Why ``plan`` met ``--fail-on``: its trace id, class, and the first reasons (with a call id
    each) of the steps that put it in that class, e.g.
    ``fail-on review: trace t1: class review: write_timeout (call c3), +1 more``; a partial plan whose class
    alone would not meet it gives :data:`PARTIAL_CAUSE` instead
    (``fail-on static: trace t1: class injected (partial): partial (...)``; ``class none`` with no tool step)."""
    cls = plan.replay_class
    partial = " (partial)" if plan.partial else ""
    lead = f"fail-on {fail_on}: trace {table.cell(plan.trace_id) if plan.trace_id else '(none)'}: class {cls.value if cls else 'none'}{partial}"
    if cls is None or cls.rank < ReplayClass(fail_on).rank:
        return f"{lead}: {PARTIAL_CAUSE}"
    if cls is ReplayClass.REVIEW:
        causes = [(d.reasons[0] if d.reasons else d.decision.value, d.step.call_id) for d in plan.steps if d.decision in (Decision.REVIEW, Decision.CONFLICT)]
    elif cls is ReplayClass.STATIC:
        causes = [(RESULT_NOT_RECORDED, d.step.call_id) for d in plan.steps if d.decision is Decision.SKIP and not d.step.result_recorded]
    else:
        causes = [(d.reasons[0] if d.reasons else d.decision.value, d.step.call_id) for d in plan.steps if d.decision is Decision.SKIP]
    firsts: dict[str, str] = {}
    for code, call_id in causes:
        firsts.setdefault(code, call_id)
    shown = [f"{code} (call {table.cell(call_id)})" for code, call_id in list(firsts.items())[:FAIL_ON_REASONS]]
    if len(firsts) > FAIL_ON_REASONS:
        shown.append(f"+{len(firsts) - FAIL_ON_REASONS} more")
    if not shown:  # no step puts it there: its spans record the class (recorded_class)
        shown.append(f"recorded by the door that wrote the file ({REPLAY_CLASS})")
    return f"{lead}: {', '.join(shown)}"
