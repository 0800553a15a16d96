"""Verdicts on a held write's effect, apart from any database (issue 25, DECISIONS 700-702).

A verdict says what the system that owns an effect answered: :class:`Verdict`. The rules, shared by every
store (SQLite, PostgreSQL) as :mod:`otel_tracefence.review.transitions` are:

* :func:`apply_verdict` (``record_verdict``: a reconciler's, or a person's): ``found_once`` and ``absent``
  resolve the item (event ``resolved``); ``found_twice`` keeps it open (a resolved item stays resolved),
  sets ``duplicate_effect_found`` and writes event ``verdict``; ``undetermined`` keeps it as it is with the
  evidence (event ``verdict``);
* a person's resolution (``resolve(..., verdict=...)``) always resolves: a person overrules any verdict;
  its verdict, when given, is recorded the same way (``found_twice`` still sets ``duplicate_effect_found``).

The item carries the latest verdict (``verdict``, ``verdict_by``, ``verdict_evidence``); its history
keeps every one.
"""

from __future__ import annotations

import enum
import logging

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb

logger = logging.getLogger(__name__)


class Verdict(str, enum.Enum):
    """What the owning system says of a held write's effect (a str: ``Verdict.FOUND_ONCE == "found_once"``)."""

    FOUND_ONCE = "found_once"
    ABSENT = "absent"
    FOUND_TWICE = "found_twice"
    UNDETERMINED = "undetermined"

    def __str__(self) -> str:
        return self.value


RESOLVING = frozenset({Verdict.FOUND_ONCE, Verdict.ABSENT})
"""The verdicts that resolve an item: the effect is known (happened once, or not at all)."""

DUPLICATE_EFFECT_FOUND = "duplicate_effect_found"
"""The mark (and the counter's kind) of an item whose effect was found twice."""


def parse_verdict(value: object, *, allow_none: bool = False) -> Verdict | None:
    """The :class:`Verdict` ``value`` names: a :class:`Verdict`, its value (``"found_once"``) or the CLI's spelling
    (``"found-once"``, any letter case). ``""`` / ``None`` give ``None`` when ``allow_none``. Raises
    :class:`ValueError` for anything else (naming the four), :class:`TypeError` for a value that is no str."""
    if isinstance(value, Verdict):
        return value
    if value is None or value == "":
        if allow_none:
            return None
        raise ValueError(f"a verdict is required: one of {', '.join(v.value for v in Verdict)}")
    if not isinstance(value, str):
        raise TypeError(f"verdict must be a str, not {type(value).__name__}")
    try:
        return Verdict(value.strip().lower().replace("-", "_"))
    except ValueError:
        raise ValueError(f"verdict {value!r} is not one of {', '.join(v.value for v in Verdict)}") from None


def verdict_to_proto(verdict: Verdict | None) -> int:
    """The ``tracefence.v1.Verdict`` value (``VERDICT_UNSPECIFIED`` for ``None``)."""
    return pb.VERDICT_UNSPECIFIED if verdict is None else pb.Verdict.Value("VERDICT_" + verdict.name)


def verdict_from_proto(value: int) -> str:
    """The verdict's str (``"found_once"``), ``""`` for ``VERDICT_UNSPECIFIED``; :class:`ValueError` for an unknown value."""
    if value == pb.VERDICT_UNSPECIFIED:
        return ""
    return Verdict[pb.Verdict.Name(value).removeprefix("VERDICT_")].value


def mark(item: pb.ReviewItem, verdict: Verdict, *, by: str, evidence: str) -> None:
    """Put ``verdict`` on ``item`` as its latest (in place); ``found_twice`` also sets ``duplicate_effect_found``."""
    item.verdict = verdict_to_proto(verdict)
    item.verdict_by = by
    item.verdict_evidence = evidence
    if verdict is Verdict.FOUND_TWICE:
        item.duplicate_effect_found = True


def clear(item: pb.ReviewItem) -> None:
    """Drop the latest verdict (a reopened item: the verdict was given on another plan); ``duplicate_effect_found`` stays."""
    item.ClearField("verdict")
    item.ClearField("verdict_by")
    item.ClearField("verdict_evidence")


def check_verdict(actor: object, verdict: object, evidence: object) -> Verdict:
    """The verdict of a ``record_verdict`` call; :class:`ValueError` for a blank actor or no or an unknown verdict,
    :class:`TypeError` for evidence that is no str."""
    if not isinstance(actor, str) or not actor.strip():
        raise ValueError("actor must name who gave the verdict (a reconciler or a person)")
    if not isinstance(evidence, str):
        raise TypeError(f"evidence must be a str, not {type(evidence).__name__}")
    parsed = parse_verdict(verdict)
    assert parsed is not None
    return parsed



_duplicates: object = None  # the tracefence.review.duplicate_effects counter, made at first use


def report(trace_id: str, actor: str, verdict: Verdict | None, evidence: str, *, resolved: bool = False) -> None:
    """After a verdict was stored: a ``found_twice`` one is logged at WARNING, naming the item's state as stored
    (``resolved``: a person's resolution resolves whatever its verdict), and counted in
    ``tracefence.review.duplicate_effects`` (never raises)."""
    global _duplicates
    if verdict is not Verdict.FOUND_TWICE:
        return
    state = "is resolved" if resolved else "stays open"
    logger.warning("review item %s: %s found the effect twice (%s): the item %s, marked %s", trace_id, actor, evidence, state, DUPLICATE_EFFECT_FOUND)
    try:
        if _duplicates is None:
            from opentelemetry import metrics

            from otel_tracefence.core.telemetry import instrument

            _duplicates = instrument(metrics.get_meter("otel_tracefence"), "tracefence.review.duplicate_effects")
        _duplicates.add(1)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - counting must not change the outcome
        logger.debug("tracefence.review.duplicate_effects not counted", exc_info=True)
