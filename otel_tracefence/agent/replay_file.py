"""A trace file planned for the replay guard (``ReplayGuard.from_file``): which trace, planned how, and the class its
spans record.

The file is planned as ``tracefence plan`` plans it (:func:`otel_tracefence.pipeline.documents.plan_text`), with raw
values kept in memory (results are injected byte for byte) and nothing redacted. A trace is named by its id in any
letter case or by a prefix only one of the file's traces with tool steps has (docs/DECISIONS.md 272); a trace whose
spans record a replay class more restrictive than the mode takes is refused, whatever its steps allow
(docs/DECISIONS.md 287, 355).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from otel_tracefence.agent.replay_errors import NonReplayableTraceError
from otel_tracefence.agent.replay_steps import ReplayMode
from otel_tracefence.core.model import ReplayClass, TracePlan

_ALLOWS = {ReplayMode.DYNAMIC: ReplayClass.DYNAMIC, ReplayMode.INJECTED: ReplayClass.INJECTED}  # the most restrictive class a mode takes


def plan_from_file(path: str | Path, trace_id: str | None, config: Any = None) -> TracePlan:
    """The plan of one trace with tool steps of the file at ``path`` (OTLP/JSON, JSON, NDJSON or CSV rows;
    auto-detected), planned with ``config`` (a :class:`~otel_tracefence.core.config.TraceFenceConfig`, default the
    defaults) keeping raw values unredacted. ``trace_id`` ``None`` when the file holds one such trace. Raises
    :class:`ValueError` when the trace is not in the file, a prefix several have, or several are and none was named;
    the readers' errors (:class:`~otel_tracefence.readers.errors.UnreadableInput`) when the file cannot be read."""
    from otel_tracefence.pipeline.documents import plan_text
    from otel_tracefence.core.config import TraceFenceConfig
    from otel_tracefence.core.redact import Redaction

    base = config if config is not None else TraceFenceConfig()
    raw = base.model_copy(update={"store_raw_values": True, "redaction": Redaction(keys=[], card_numbers=False, bearer_tokens=False)})
    text = Path(path).read_bytes().decode("utf-8")
    plans, _ = plan_text(text, "auto", raw)
    with_steps = {p.trace_id: p for p in plans if p.steps}
    if trace_id is None:
        if len(with_steps) != 1:
            raise ValueError(f"{path}: {len(with_steps)} traces with tool steps ({', '.join(sorted(with_steps)) or 'none'}): name one")
        (plan,) = with_steps.values()
        return plan
    return with_steps[_one_trace_id(path, trace_id, with_steps)]


def check_recorded_class(plan: TracePlan, mode: ReplayMode) -> None:
    """Raise :class:`NonReplayableTraceError` when ``plan`` is planned more restrictive than ``mode`` takes: only the
    class its spans record puts a plan past what its steps allow (:func:`otel_tracefence.pipeline.documents.recorded_class`)."""
    if plan.replay_class is None or plan.replay_class.rank <= _ALLOWS[mode].rank:
        return
    raise NonReplayableTraceError(
        f"{mode.value} replay refused: trace {plan.trace_id} is planned {plan.replay_class.value}, more restrictive "
        f"than the {mode.value} replay mode takes, though its steps in this file allow it: its spans record that class "
        f"(tracefence.replay.class, or a tracefence.plan.schema_version this version does not know). The door that wrote "
        f"this file planned it with what the file may not hold (spans it refused, late spans, a review item). "
        f"See its review item (tracefence review show {plan.trace_id}).",
        step=None, mode=mode, trace_id=plan.trace_id,
    )


def _one_trace_id(path: str | Path, given: str, trace_ids: Iterable[str]) -> str:
    """The one of ``trace_ids`` (lower-case hex) that ``given`` names: itself in any letter case, or a prefix only
    one has. Raises :class:`ValueError` for none, a prefix several have (naming up to 5), or a blank id."""
    wanted = given.strip().lower()
    if not wanted:
        raise ValueError(f"{path}: an empty trace id names no trace; give the trace id or a prefix of it")
    matches = sorted(t for t in trace_ids if t.lower().startswith(wanted))
    exact = [t for t in matches if t.lower() == wanted]
    if exact or len(matches) == 1:
        return (exact or matches)[0]
    if not matches:
        raise ValueError(f"{path}: no trace {given} with tool steps")
    raise ValueError(f"{path}: trace id prefix {given!r} matches {len(matches)} traces with tool steps: {', '.join(matches[:5])}{', ...' if len(matches) > 5 else ''}; give more of the id")

