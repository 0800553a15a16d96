"""The planner's settings: operators' tool rules, the result shapes that say a call failed, and the input bounds
(parts of :class:`~otel_tracefence.core.config.TraceFenceConfig`)."""

from __future__ import annotations

import fnmatch
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from otel_tracefence.core.canonical import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH
from otel_tracefence.core.textfold import folded_word


class ToolRule(BaseModel):
    """An operator's rule for tools whose name matches ``match`` (an ``fnmatch`` glob, case-sensitive)."""

    model_config = ConfigDict(extra="forbid")

    match: str = Field(min_length=1)
    effect: Literal["read", "write"] | None = None
    idempotency_key_argument: str | None = None
    """Dotted path into the call's arguments whose value is the idempotency key."""
    result: Literal["stable", "unstable"] | None = None
    """``unstable``: the tool returns values that differ between executions (page ids, transaction ids,
    timestamps: handles the agent may branch on, seed 000), so a read is never re-executed by a replay
    (decision ``skip``, reason ``unstable_result``); ``None`` or ``stable``: results are taken as stable."""

    _regex: re.Pattern[str] = PrivateAttr()

    def model_post_init(self, context: Any) -> None:
        self._regex = re.compile(fnmatch.translate(self.match))

    def matches(self, tool: str) -> bool:
        """True when ``tool`` matches this rule's glob."""
        return self._regex.fullmatch(tool) is not None


class ResultErrorShape(BaseModel):
    """A shape of recorded result that says the call failed although its span says ok.

    The shape matches an object of the result (JSON) that has ``key`` with a value that
    ``equals`` (strings compared folded: case, separators, white space), or a number within
    [``at_least``, ``below``), or, with ``present``, any non-empty object, string or
    ``true``. Only the result's top-level object is looked at unless ``anywhere``
    (then every object down to 8 levels). The defaults are in
    ``otel_tracefence/normalize/result_errors.py``; ``result_error_shapes`` adds to them.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(min_length=1)
    equals: str | bool | int | None = None
    at_least: float | None = None
    below: float | None = None
    present: bool = False
    anywhere: bool = False

    def says_error(self, value: Any) -> bool:
        """True when ``value`` (found under ``key``) says the call failed. Read as producers write them
        (docs/DECISIONS.md 371): a number may be a decimal string (``"504"``), a string is compared folded
        (``textfold.folded_word``: ``"timed out"``, ``"TimedOut"`` and ``"timeout "`` are ``timed_out`` and
        ``timeout``), and a boolean may be the string ``"true"`` or ``"false"`` (any case)."""
        if self.present:
            return value is True or (isinstance(value, (dict, list, str)) and len(value) > 0)
        if self.at_least is not None or self.below is not None:
            number = _number(value)
            if number is None:
                return False
            return (self.at_least is None or number >= self.at_least) and (self.below is None or number < self.below)
        if isinstance(self.equals, str):
            return isinstance(value, str) and folded_word(value) == folded_word(self.equals)
        if isinstance(self.equals, bool):
            return value is self.equals or (isinstance(value, str) and folded_word(value) == ("true" if self.equals else "false"))
        return value == self.equals and not isinstance(value, bool)


def _number(value: Any) -> int | float | None:
    """A JSON number, or a decimal integer written as a string (``"504"``, ``" 504 "``); ``None`` for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str) and len(value) <= 16 and (digits := value.strip()).isascii() and digits.isdigit():
        return int(digits)
    return None


DEFAULT_MAX_INPUT_BYTES = 256 * 1024 * 1024  # 256 MiB: a file past it is refused, not read (limits.max_input_bytes)


class Limits(BaseModel):
    """Input bounds: beyond them a value is reported, never parsed."""

    model_config = ConfigDict(extra="forbid")

    max_argument_bytes: int = Field(default=DEFAULT_MAX_BYTES, gt=0)
    """Largest arguments or result text read, in bytes; larger arguments are 'unavailable'."""
    max_argument_depth: int = Field(default=DEFAULT_MAX_DEPTH, gt=0, le=512)
    """Deepest nesting of arrays and objects read in arguments."""
    max_related_call_ids: int = Field(default=50, gt=0)
    """Most related call ids listed on one decision (keeps planning linear in big groups)."""
    max_tokens_per_value: int = Field(default=64, ge=0)
    """Most id-like tokens (``normalize/tokens.py``) kept from one step's arguments, and from its result, for
    the data-flow notes (``consumes_result_of``); the first ones in the value, the rest not linked. 0 turns linking off."""
    max_attributes_per_span: int = Field(default=1024, gt=0)
    """Most attributes read from one tool span; a tool span with more is malformed (``malformed_attributes``)."""
    max_input_bytes: int = Field(default=DEFAULT_MAX_INPUT_BYTES, gt=0)
    """Largest input ``tracefence plan`` and ``tracefence tools`` read from one file or standard input, in bytes; a
    larger one (or an endless one, ``/dev/zero``) is refused with one line and exit 2, never read whole
    (docs/DECISIONS.md 504)."""
