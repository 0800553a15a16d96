"""The replay guard's two errors: a trace or step that cannot be replayed in the mode asked for, and a replay that
diverged from its trace (seed 000)."""

from __future__ import annotations

from typing import Sequence

from otel_tracefence.agent.replay_steps import ReplayMode, StepRef


class NonReplayableTraceError(RuntimeError):
    """A trace, or one of its steps, that cannot be replayed in the mode asked for (seed 000).

    ``step`` is the first step that breaks the mode (its ``index``, ``call_id``,
    ``tool``, ``decision`` and ``reasons`` are also attributes of the error), or
    ``None`` when the whole trace is refused: a partial plan (decided before its
    trace was complete), whose missing steps nobody can vouch for; then ``index``
    is 0 and the other attributes are empty. ``others`` the later steps that break it too; ``mode`` the mode asked for
    (``None`` when a :class:`ReplayGuard` refused one call). The message says what
    to do instead: static inspection, or injecting the recorded result, named by
    call id.
    """

    def __init__(self, message: str, *, step: StepRef | None, mode: ReplayMode | None = None, others: Sequence[StepRef] = (), trace_id: str = "") -> None:
        super().__init__(message)
        self.step = step
        self.mode = mode
        self.others = tuple(others)
        self.trace_id = trace_id

    @property
    def index(self) -> int:
        return self.step.index if self.step is not None else 0

    @property
    def call_id(self) -> str:
        return self.step.call_id if self.step is not None else ""

    @property
    def tool(self) -> str:
        return self.step.tool if self.step is not None else ""

    @property
    def decision(self) -> str:
        return self.step.decision if self.step is not None else ""

    @property
    def reasons(self) -> tuple[str, ...]:
        return self.step.reasons if self.step is not None else ()


class ReplayDivergedError(RuntimeError):
    """The replayed agent made a call the trace does not have at that point (seed 000: a divergent reconstruction).

    ``call_number`` counts the replay's calls from 1; ``tool`` and
    ``arguments_sha256`` are the call's (the hash of its RFC 8785 canonical
    arguments); ``expected`` is the step the trace
    has there (``None`` past its last step); ``why`` is ``"tool"``,
    ``"arguments"`` or ``"count"`` (one call too many).
    """

    def __init__(self, message: str, *, call_number: int, tool: str, arguments_sha256: str, expected: StepRef | None, why: str) -> None:
        super().__init__(message)
        self.call_number = call_number
        self.tool = tool
        self.arguments_sha256 = arguments_sha256
        self.expected = expected
        self.why = why

