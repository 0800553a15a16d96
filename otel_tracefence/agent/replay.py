"""The replay guard of seed 000: fail closed before a replay, inject recorded results, never re-fire a write.

A forensic replay or a retry harness asks this module before it re-executes
anything. The verdicts are the plan's (:mod:`otel_tracefence.planner`); this
module turns them into what a harness needs:

* :func:`assert_replayable` / :func:`assert_dynamically_replayable` refuse a
  replay mode the trace does not allow, with :class:`NonReplayableTraceError`
  naming the first step, in trace order, that breaks it, and listing the others;
* :class:`ReplayGuard` answers each call the replayed agent makes, in trace
  order: :class:`Execute` (a read, safe to run live) or :class:`Inject` (the
  recorded result, byte for byte; the tool is never called); it raises
  :class:`NonReplayableTraceError` for a step in review or conflict, or an
  injection whose result was not recorded, and :class:`ReplayDivergedError` for a
  call the trace does not have at that point. :meth:`ReplayGuard.wrap` puts it
  around a tool function (sync or async).

The two modes (seed 000, "Condition of validity" and "Decision boundary"):

* ``dynamic``: re-execute every call. Allowed only when every step is
  ``replay``: a declared read whose results are stable (class ``dynamic``).
* ``injected``: re-execute the reads, inject the recorded result of every
  ``skip`` step (a committed write, a read with unstable results). Allowed when
  no step is ``review`` or ``conflict`` and every skipped step's result was
  recorded (class ``dynamic`` or ``injected``).

A trace of class ``static`` or ``review`` allows neither, nor does a partial
plan: only static inspection of the recorded steps. Steps are numbered from 1 in
trace order (the plan's order), as the seed numbers them ("step 7"). The rules
are in docs/DECISIONS.md, items 60 to 62.

The parts: plans as the guard reads them (:mod:`.replay_steps`), the errors (:mod:`.replay_errors`), the check of a
whole plan and its refusals (:mod:`.replay_check`), a trace file planned for the guard (:mod:`.replay_file`); every
public name is importable from here.

Plans are :class:`otel_tracefence.core.model.TracePlan` values, or the protobuf
``tracefence.v1.TracePlan`` / ``ReviewItem`` the CLI and the review store give.
This module never calls a tool itself and never authorizes a write.
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, TypeVar

from otel_tracefence.agent.replay_check import assert_dynamically_replayable, assert_replayable, refusal
from otel_tracefence.agent.replay_errors import NonReplayableTraceError, ReplayDivergedError
from otel_tracefence.agent.replay_file import check_recorded_class, plan_from_file
from otel_tracefence.agent.replay_steps import PlanStep, ReplayMode, StepRef, parse_mode, plan_steps, verdict_sentence
from otel_tracefence.core.canonical import canonicalize, parse_json_text, sha256_text
from otel_tracefence.core.model import Decision

__all__ = [
    "Execute",
    "Inject",
    "NonReplayableTraceError",
    "ReplayDivergedError",
    "ReplayGuard",
    "ReplayMode",
    "ReplaySummary",
    "StepRef",
    "assert_dynamically_replayable",
    "assert_replayable",
]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Execute:
    """Run the tool live: the step is a declared read whose result is stable."""

    step: StepRef


@dataclass(frozen=True, slots=True)
class Inject:
    """Do not call the tool: return its recorded result.

    ``result`` is the recorded text, byte for byte as the trace holds it (JSON
    text as recorded, or canonical JSON for a structured value); its SHA-256 was
    checked against the plan's ``result_sha256``. :meth:`value` decodes it.
    """

    step: StepRef
    result: str

    def value(self) -> Any:
        """The recorded result decoded from JSON; the text itself when it is not JSON."""
        try:
            return parse_json_text(self.result)
        except (ValueError, RecursionError):
            return self.result


@dataclass(frozen=True, slots=True)
class ReplaySummary:
    """What a guard did so far: call ids executed, injected and refused (in order), and whether the replay diverged.

    ``remaining`` are the call ids of steps the replay has not reached.
    """

    trace_id: str
    mode: ReplayMode
    executed: tuple[str, ...]
    injected: tuple[str, ...]
    refused: tuple[str, ...]
    diverged: bool
    remaining: tuple[str, ...]

    def __str__(self) -> str:
        state = "diverged" if self.diverged else ("complete" if not self.remaining else f"{len(self.remaining)} step(s) not reached")
        return (
            f"replay of {self.trace_id or 'trace'} ({self.mode.value}): executed {len(self.executed)}, "
            f"injected {len(self.injected)}, refused {len(self.refused)}; {state}"
        )


# -- the guard -----------------------------------------------------------------------------------


def _arguments_hash(arguments: Any) -> str:
    """SHA-256 of the RFC 8785 canonical form of a call's arguments: a JSON value, or JSON text; ``None``
    is ``{}`` (a call without arguments). Values JSON lacks are taken as their ``str()``, as
    :func:`otel_tracefence.agent.instrument.tool_call` records them. Raises ``ValueError`` for text that is
    not JSON or a value without a canonical form (integers beyond 2**53, NaN)."""
    if arguments is None:
        arguments = {}
    if isinstance(arguments, (str, bytes)):
        arguments = parse_json_text(arguments.decode() if isinstance(arguments, bytes) else arguments)
    try:
        canonical = canonicalize(arguments)
    except (TypeError, ValueError):
        canonical = canonicalize(json.loads(json.dumps(arguments, default=str)))
    if canonical.text is None or canonical.sha256 is None:
        raise ValueError(f"arguments have no canonical JSON form ({canonical.unavailable})")
    return canonical.sha256


class ReplayGuard:
    """Answers each tool call of a replay from a trace's plan and its recorded results (seed 000).

    ``plan`` is a :class:`~otel_tracefence.core.model.TracePlan` or a protobuf
    ``TracePlan`` / ``ReviewItem``. ``results`` maps call ids to recorded result
    text; without it, the plan's own ``result_value`` (kept with
    ``store_raw_values``) is used. Use :meth:`from_file` to read a trace file and
    :meth:`from_review_item` for the review store.

    ``mode`` is ``"injected"`` (default) or ``"dynamic"``. With ``check`` (the
    default) the whole plan is checked first, :func:`assert_replayable`, so a
    replay the trace does not allow fails before any call. ``check=False`` lets a
    harness replay up to the first step it may not pass (to reconstruct context),
    where :meth:`on_call` raises.

    ``window`` (default 1: strict trace order) lets a call match any of the next
    ``window`` steps not yet reached, for frameworks that run the tool calls of one
    model turn concurrently (pydantic-ai does), whose replayed calls may arrive in
    another order than they started in the trace. A call takes the first of those
    steps with its tool and arguments.

    Thread-safe; once a call was refused or diverged, every later call raises the
    same error. Raises :class:`NonReplayableTraceError` (with ``check``),
    :class:`ValueError` for an unknown mode.
    """

    def __init__(
        self,
        plan: Any,
        results: Mapping[str, str] | None = None,
        *,
        mode: ReplayMode | str = ReplayMode.INJECTED,
        check: bool = True,
        window: int = 1,
    ) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an integer of at least 1, not {window!r}")
        self.mode = parse_mode(mode)
        self.window = window
        self.trace_id, self._steps, _ = plan_steps(plan)
        self._verdict = verdict_sentence(plan)  # a review item's latest verdict, named when a held step is refused
        if check:
            assert_replayable(plan, self.mode)
        self._results = dict(results) if results is not None else {}
        self._lock = threading.Lock()
        self._pending: list[int] = list(range(len(self._steps)))  # steps not reached yet, in trace order
        self._calls = 0
        self._executed: list[str] = []
        self._injected: list[str] = []
        self._refused: list[str] = []
        self._diverged = False
        self._halted: BaseException | None = None

    # -- construction from stored traces ---------------------------------------------------------

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        trace_id: str | None = None,
        *,
        config: Any = None,
        mode: ReplayMode | str = ReplayMode.INJECTED,
        check: bool = True,
        window: int = 1,
    ) -> "ReplayGuard":
        """Plan a trace file (OTLP/JSON, JSON, NDJSON or CSV rows; auto-detected, as ``tracefence plan``) and
        guard one of its traces with the results it recorded.

        ``trace_id`` may be left out when the file holds one trace with tool steps; it is taken in any letter
        case, or as a prefix only one of the file's traces with tool steps has, as ``tracefence review show``
        takes it (docs/DECISIONS.md 272). A trace some of whose spans carry ``tracefence.trace.late``,
        ``tracefence.trace.partial`` (any value but ``false``) or ``tracefence.trace.reasons`` (a file the service,
        the processor or the exporter wrote: spans that came after their trace was decided, a trace decided before
        it was complete or not planned) is planned partial (``tracefence plan``'s rule,
        :func:`otel_tracefence.pipeline.documents.incomplete`), so the guard refuses it (docs/DECISIONS.md 271, 287); and
        with ``check``, a trace whose spans record a ``tracefence.replay.class`` more restrictive than ``mode`` takes
        is refused, whatever its steps allow (the door that wrote the file saw what the file may not hold: spans it
        refused, a review item; the plan takes that class, :func:`otel_tracefence.pipeline.documents.recorded_class`,
        docs/DECISIONS.md 287, 355).
        ``config`` (a :class:`~otel_tracefence.core.config.TraceFenceConfig`) supplies the
        tool rules; results are read raw (never redacted: they are injected byte
        for byte, in memory only). Raises :class:`ValueError` when the trace is not
        in the file, a prefix several have, or several are and none was named; the readers' errors
        (:class:`~otel_tracefence.readers.errors.UnreadableInput`) when the file
        cannot be read; :class:`NonReplayableTraceError` as the constructor.
        ``mode``, ``check`` and ``window`` are the constructor's.
        """
        plan = plan_from_file(path, trace_id, config)
        guard = cls(plan, mode=mode, check=check, window=window)  # the re-plan's own refusals first: they name the step
        if check:
            check_recorded_class(plan, guard.mode)
        return guard

    @classmethod
    def from_review_item(cls, item: Any, *, mode: ReplayMode | str = ReplayMode.INJECTED, check: bool = True, window: int = 1) -> "ReplayGuard":
        """Guard the trace of a review-store item (``tracefence.v1.ReviewItem``). Its results can be injected
        only when the store kept raw values (``store_raw_values``) unredacted: a stored value whose hash is
        not the recorded result's is refused, never injected."""
        return cls(item, mode=mode, check=check, window=window)

    # -- the calls -------------------------------------------------------------------------------

    def on_call(self, tool: str, arguments: Any = None) -> Execute | Inject:
        """The guard's answer for the replay's next call: ``tool`` and its ``arguments`` (a JSON value or JSON
        text; ``None`` for ``{}``).

        Calls are matched to the plan's steps in trace order (within ``window``), by
        tool name and the SHA-256 of the RFC 8785 canonical arguments (a step whose
        arguments were not recorded matches any arguments, after a step whose
        arguments match exactly; a ``skip`` step without them is refused, since its
        recorded result could belong to another call). Returns :class:`Execute`
        for a ``replay`` step, :class:`Inject` for a ``skip`` step in ``injected``
        mode. Raises :class:`ReplayDivergedError` for another tool, other
        arguments, or one call too many; :class:`NonReplayableTraceError` for a step
        in review or conflict, a ``skip`` step in ``dynamic`` mode, or an injection
        whose result was not recorded (or whose stored value is not the recorded
        bytes).
        """
        with self._lock:
            if self._halted is not None:
                raise self._halted
            self._calls += 1
            try:
                answer = self._answer(tool, arguments)
            except (NonReplayableTraceError, ReplayDivergedError) as exc:
                self._halted = exc
                if isinstance(exc, ReplayDivergedError):
                    self._diverged = True
                else:
                    self._refused.append(exc.call_id)
                raise
            (self._executed if isinstance(answer, Execute) else self._injected).append(answer.step.call_id)
            return answer

    def _answer(self, tool: str, arguments: Any) -> Execute | Inject:
        number = self._calls
        digest = _arguments_hash(arguments)
        if not self._pending:
            raise ReplayDivergedError(
                f"replay diverged at call {number}: {tool!r} is one call too many; the trace has {len(self._steps)} tool call(s)",
                call_number=number, tool=tool, arguments_sha256=digest, expected=None, why="count",
            )
        candidates = self._pending[: self.window]
        same_tool = [i for i in candidates if self._steps[i].ref.tool == tool]
        matching = [i for i in same_tool if self._steps[i].arguments_sha256 in (None, digest)]
        if not matching:
            ref = self._steps[same_tool[0] if same_tool else candidates[0]].ref
            if not same_tool:
                raise ReplayDivergedError(
                    f"replay diverged at call {number}: the agent called {tool!r}, the trace has {ref.tool!r} there (step {ref.index}, call {ref.call_id})",
                    call_number=number, tool=tool, arguments_sha256=digest, expected=ref, why="tool",
                )
            raise ReplayDivergedError(
                f"replay diverged at call {number}: {tool!r} was called with other arguments than step {ref.index} "
                f"(call {ref.call_id}) recorded (canonical SHA-256 {digest} != {self._steps[same_tool[0]].arguments_sha256})",
                call_number=number, tool=tool, arguments_sha256=digest, expected=ref, why="arguments",
            )
        exact = [i for i in matching if self._steps[i].arguments_sha256 == digest]
        position = (exact or matching)[0]
        answer = self._decide(self._steps[position])
        self._pending.remove(position)
        return answer

    def _decide(self, step: PlanStep) -> Execute | Inject:
        ref = step.ref
        if step.decision is Decision.REPLAY:
            return Execute(ref)
        if step.decision is not Decision.SKIP or self.mode is ReplayMode.DYNAMIC or not step.result_recorded:
            raise refusal(self.trace_id, [step], None, self._verdict)
        if step.arguments_sha256 is None:
            raise NonReplayableTraceError(
                f"step {ref.index}: tool {ref.tool!r} (call {ref.call_id}) has no recorded arguments, so the guard cannot tell "
                f"that this call is the recorded one: its result is not injected. Use static inspection.",
                step=ref, trace_id=self.trace_id,
            )
        text = self._results.get(ref.call_id, step.result_value)
        if text is None:
            raise NonReplayableTraceError(
                f"step {ref.index}: tool {ref.tool!r} (call {ref.call_id}) recorded a result, but this guard was not given it "
                f"(hashes only: store_raw_values was off, or pass results=). Inject the recorded result of call {ref.call_id} "
                f"from the trace itself (ReplayGuard.from_file), or use static inspection.",
                step=ref, trace_id=self.trace_id,
            )
        if step.result_sha256 is not None and sha256_text(text) != step.result_sha256:
            raise NonReplayableTraceError(
                f"step {ref.index}: tool {ref.tool!r} (call {ref.call_id}): the result given is not the recorded one (its SHA-256 "
                f"differs: redacted or altered), so it is not injected. Inject the recorded bytes (ReplayGuard.from_file), "
                f"or use static inspection.",
                step=ref, trace_id=self.trace_id,
            )
        return Inject(ref, text)

    def wrap(self, func: F | None = None, *, tool: str | None = None, ignore: Iterable[str] = (), decode: Callable[[Inject], Any] | None = None) -> Any:
        """Wrap a tool function (sync or ``async def``) so every call goes through :meth:`on_call`.

        ``tool`` is the tool's name in the trace (default: the function's
        ``__name__``). The call's arguments are its parameters bound by name
        (``inspect.signature(func).bind``; defaults not applied, ``**kwargs``
        merged, a leading ``self``/``cls`` and the names in ``ignore`` such as a
        framework's context parameter left out). On :class:`Execute` the function
        runs; on :class:`Inject` it is not called and the wrapper returns the
        recorded text (what the model was given), or ``decode(inject)`` when
        given (e.g. ``Inject.value``). The guard's errors propagate. Usable as
        ``guard.wrap(fn, tool=...)`` or as a decorator ``@guard.wrap(tool=...)``.
        The wrapper keeps the function's signature (``functools.wraps``), so
        frameworks that read it (pydantic-ai) see the same tool.
        """
        if func is None:
            return lambda f: self.wrap(f, tool=tool, ignore=ignore, decode=decode)
        name = tool or func.__name__
        signature = inspect.signature(func)
        parameters = signature.parameters
        names = list(parameters)
        skipped = set(ignore) | ({names[0]} if names and names[0] in ("self", "cls") else set())

        def arguments_of(args: tuple, kwargs: dict) -> dict[str, Any]:
            bound = signature.bind(*args, **kwargs)
            out: dict[str, Any] = {}
            for key, value in bound.arguments.items():
                if key in skipped:
                    continue
                if parameters[key].kind is inspect.Parameter.VAR_KEYWORD and isinstance(value, Mapping):
                    out.update(value)
                else:
                    out[key] = value
            return out

        def injected(answer: Inject) -> Any:
            return decode(answer) if decode is not None else answer.result

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                answer = self.on_call(name, arguments_of(args, kwargs))
                if isinstance(answer, Inject):
                    return injected(answer)
                return await func(*args, **kwargs)

            return async_wrapper

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            answer = self.on_call(name, arguments_of(args, kwargs))
            if isinstance(answer, Inject):
                return injected(answer)
            return func(*args, **kwargs)

        return wrapper

    def summary(self) -> ReplaySummary:
        """What the guard executed, injected and refused so far, and which steps the replay has not reached."""
        with self._lock:
            return ReplaySummary(
                trace_id=self.trace_id,
                mode=self.mode,
                executed=tuple(self._executed),
                injected=tuple(self._injected),
                refused=tuple(self._refused),
                diverged=self._diverged,
                remaining=tuple(self._steps[i].ref.call_id for i in self._pending),
            )

    @property
    def steps(self) -> tuple[StepRef, ...]:
        """The plan's steps, in trace order, as the guard names them."""
        return tuple(s.ref for s in self._steps)
