"""Errors found while reading an input file: where (line or span) and which field."""

from __future__ import annotations

from dataclasses import dataclass

from otel_tracefence.core.canonical import printable


@dataclass(frozen=True, slots=True)
class InputError:
    """A row or span that was rejected, never guessed.

    ``line`` is the 1-based line of the file where the row or span starts (0
    when unknown); ``span_id`` names an OTLP span; ``field`` the field at fault.
    ``planned`` is true when the row or span is still planned, as a ``review``
    step (a malformed field); false when it could not be read at all and is
    missing from the plans. ``trace_id`` (hex) is the trace of an OTLP span that
    could not be parsed but whose trace id could: its trace is planned with a
    ``review`` step standing for it. ``repeat`` is true for the same span again, standing in a second trace it
    names (``traceId`` and ``trace_id`` both given, differently): it is not listed or counted twice.
    ``parent_span_id`` (hex): the parent a span names when none of its trace ids could be read (the service
    stands it in its parent's trace, docs/DECISIONS.md 207); ``""`` otherwise.
    ``field`` and ``message`` may quote the input: a lone surrogate in them (JSON's ``"\\ud800"``) is written as
    its escape (``canonical.printable``), so the error can be printed, stored and sent as UTF-8.
    """

    line: int
    field: str
    message: str
    span_id: str = ""
    planned: bool = False
    trace_id: str = ""
    repeat: bool = False
    parent_span_id: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "field", printable(self.field))
        object.__setattr__(self, "message", printable(self.message))

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "input"
        if self.span_id:
            where += f", span {self.span_id}"
        return f"{where}: {self.field}: {self.message}"


class UnreadableInput(ValueError):
    """The file as a whole cannot be read (not UTF-8, not the declared format)."""


def decode_utf8(data: bytes) -> str:
    """Decode UTF-8 (a leading byte-order mark is dropped); raises :class:`UnreadableInput` naming the line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UnreadableInput(f"line {line}: invalid UTF-8 at byte {exc.start}") from None


def decode_text_file(data: bytes) -> str:
    """A file given to ``tracefence plan``, ``tools`` or the inspector, as :func:`decode_utf8` decodes it; raises
    :class:`UnreadableInput` for a NUL byte too, naming its line: no text format read here has one (JSON forbids it
    unescaped, a CSV row of a tool call has no use for it), so it is binary data, such as a binary protobuf export,
    not a CSV row. Of a NUL byte and invalid UTF-8, the one that comes first in the file is reported (an ELF or
    protobuf file has a NUL before its first byte that is not UTF-8: it is named binary, not bad text)."""
    nul = data.find(b"\0")
    text = decode_utf8(data[:nul] if nul >= 0 else data)
    if nul >= 0:
        line = data[:nul].count(b"\n") + 1
        raise UnreadableInput(
            f"line {line}: a NUL byte at byte {nul}: binary data, not OTLP/JSON, JSON, NDJSON or CSV text "
            "(binary OTLP protobuf goes to tracefence serve)"
        )
    return text
