"""The inspector's planning: an uploaded file planned exactly as ``tracefence plan`` plans it.

Nothing here stores or logs the input: it is decoded, planned and dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from otel_tracefence.pipeline.documents import plan_document
from otel_tracefence.core.config import TraceFenceConfig
from otel_tracefence.core.model import TracePlan
from otel_tracefence.readers.detect import FORMATS
from otel_tracefence.readers.errors import UnreadableInput, decode_text_file

INPUT_FORMATS = ("auto", *FORMATS)
ON_MALFORMED = ("", "reject", "review")  # "": the format's default, as the command line


@dataclass(frozen=True)
class Inspection:
    """One input planned. ``output``: the bytes (UTF-8 text) ``tracefence plan --format json`` prints on standard
    output; ``messages``: its standard-error lines without the ``tracefence plan: FILE: `` lead; ``rejected``:
    nothing was planned (the command line's exit 2); ``plans``: what ``output`` holds."""

    output: str
    messages: list[str]
    rejected: bool
    plans: list[TracePlan] = field(default_factory=list)


class TooManySteps(Exception):
    """The input plans to more steps than the page shows (``ui.max_inspect_steps``); the message says so."""


def inspect(
    data: bytes, config: TraceFenceConfig, *, input_format: str = "auto", on_malformed: str = "", max_steps: int | None = None
) -> Inspection:
    """Plan ``data`` (the file's bytes) with :func:`otel_tracefence.pipeline.documents.plan_document`.

    ``input_format``: one of :data:`INPUT_FORMATS`; ``on_malformed``: one of :data:`ON_MALFORMED`.
    Raises :class:`ValueError` for another value of either, and :class:`TooManySteps` when the plans hold
    more than ``max_steps`` steps (checked before the output is built).
    """
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"input format {input_format!r}: give one of {', '.join(INPUT_FORMATS)}")
    if on_malformed not in ON_MALFORMED:
        raise ValueError(f"on_malformed {on_malformed!r}: give reject or review, or nothing for the format's default")
    try:
        outcome = plan_document(decode_text_file(data), input_format, config, on_malformed=on_malformed or None)
    except UnreadableInput as exc:  # the command line's own wording (cli/__init__.py)
        return Inspection("", [f"{exc}; nothing was planned"], True)
    steps = sum(len(plan.steps) for plan in outcome.plans)
    if max_steps is not None and steps > max_steps:
        raise TooManySteps(
            f"the input plans to {steps} steps, more than the page shows ({max_steps}, ui.max_inspect_steps): "
            "plan it with `tracefence plan`; nothing is shown"
        )
    return Inspection(outcome.json_lines(), outcome.messages, outcome.rejected, outcome.plans)


__all__ = ["INPUT_FORMATS", "ON_MALFORMED", "Inspection", "TooManySteps", "inspect"]
