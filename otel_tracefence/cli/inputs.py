"""What the commands take: trace files (a path or ``-``, standard input; plain or gzip-compressed), and the URLs of
their flags, checked before anything is opened (:func:`bad_url_flag`).

A gzip stream is recognised by its first two bytes (``1f 8b``, RFC 1952), whatever the file is called, so
``zcat``-less pipelines (``... | tracefence plan -``) work too; a file named ``*.gz`` that does not start so is
refused, saying so, rather than read as text. The bound (``limits.max_input_bytes``) is on the bytes after
decompression: what is held in memory.
"""

from __future__ import annotations

import contextlib
import gzip
import sys
import zlib
from typing import Any, BinaryIO, Callable, Iterator

from otel_tracefence.core.config_checks import check_trace_url_template, check_upstream_endpoint
from otel_tracefence.readers.errors import UnreadableInput
from otel_tracefence.review.targets import check_target

GZIP_MAGIC = b"\x1f\x8b"
STDIN = "-"


@contextlib.contextmanager
def _opened(path: str) -> Iterator[BinaryIO]:
    if path == STDIN:
        yield sys.stdin.buffer  # not closed: it is the process's
    else:
        with open(path, "rb") as handle:
            yield handle


def _starts_with_gzip(stream: BinaryIO) -> bool:
    peek = getattr(stream, "peek", None)
    head = peek(len(GZIP_MAGIC)) if peek is not None else b""
    return head[: len(GZIP_MAGIC)] == GZIP_MAGIC


def _read(stream: Any, size: int, progress: Callable[[int], None] | None) -> bytes:
    """At most ``size`` bytes of ``stream``, read in chunks of :data:`CHUNK` when ``progress`` is given (called with
    each chunk's length), else at once."""
    if progress is None:
        return stream.read(size)
    chunks = []
    while size > 0:
        chunk = stream.read(min(CHUNK, size))
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
        progress(len(chunk))
    return b"".join(chunks)


CHUNK = 1024 * 1024


def read_input(path: str, limit: int, progress: Callable[[int], None] | None = None) -> bytes:
    """The bytes of ``path`` (``-``: standard input), decompressed when they are gzip, at most ``limit``: one byte more
    is read to see there are more, never the rest. Raises :class:`UnreadableInput` for a larger (or endless) input,
    naming the limit (docs/DECISIONS.md 504), for a ``.gz`` file that is not gzip and for a gzip stream that is
    corrupt or cut short (docs/DECISIONS.md 654); ``OSError`` for a file that cannot be opened. ``progress``, when
    given, is called with the length of each chunk read (a progress bar; decompressed bytes for gzip)."""
    with _opened(path) as raw:
        if _starts_with_gzip(raw):
            try:
                data = _read(gzip.GzipFile(fileobj=raw, mode="rb"), limit + 1, progress)
            except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
                raise UnreadableInput(f"gzip: not a whole gzip stream ({exc}); nothing of it was read") from None
        elif path != STDIN and path.lower().endswith(".gz"):
            raise UnreadableInput("gzip: the name ends in .gz but the file is not gzip (it does not start with the bytes 1f 8b)")
        else:
            data = _read(raw, limit + 1, progress)
    if len(data) > limit:
        raise UnreadableInput(f"the input is larger than limits.max_input_bytes ({limit} bytes): not read; raise the limit or split the input")
    return data


def input_lines(path: str, limit: int, progress: Callable[[int], None] | None = None) -> Iterator[tuple[int, str]]:
    """The lines of ``path`` (``-``: standard input; gzip decompressed, as :func:`read_input` reads it), one at a time
    as ``(line number, text)``, the ending ``\n`` kept: no more than the line being read is held. ``progress``, when
    given, is called with each line's length in bytes (decompressed), for a progress bar. Raises :class:`UnreadableInput` for a line longer than ``limit`` (bytes), one that is not UTF-8 or
    holds a NUL byte, and a ``.gz`` file or gzip stream as :func:`read_input` does; ``OSError`` for a file that
    cannot be opened."""
    with _opened(path) as raw:
        stream: BinaryIO = raw
        if _starts_with_gzip(raw):
            stream = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
        elif path != STDIN and path.lower().endswith(".gz"):
            raise UnreadableInput("gzip: the name ends in .gz but the file is not gzip (it does not start with the bytes 1f 8b)")
        number = 0
        while True:
            try:
                data = stream.readline(limit + 1)
            except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
                raise UnreadableInput(f"line {number + 1}: gzip: not a whole gzip stream ({exc})") from None
            if not data:
                return
            number += 1
            if len(data) > limit:
                raise UnreadableInput(f"line {number}: longer than limits.max_input_bytes ({limit} bytes): not read; raise the limit")
            if b"\0" in data:
                raise UnreadableInput(f"line {number}: a NUL byte: binary data, not OTLP/JSON lines")
            try:
                text = data.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise UnreadableInput(f"line {number}: invalid UTF-8 at byte {exc.start} of the line") from None
            if progress is not None:
                progress(len(data))
            yield number, text


#: The flags that take a URL (by their ``dest``), as a command's error names them, and the check of one value
#: (it raises ``ValueError`` naming the value): the review database (serve's ``--review-db`` is ``--db`` too), the
#: upstreams, the UI's trace link. ``review --endpoint`` checks its own (:func:`otel_tracefence.cli.review.api_target`).
URL_FLAGS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "db": ("--db", check_target),
    "review_db": ("--db", check_target),
    "upstream": ("--upstream", check_upstream_endpoint),
    "trace_url_template": ("--trace-url-template", check_trace_url_template),
}


def bad_url_flag(args: object) -> str | None:
    """The first URL flag of ``args`` whose value no part of the product serves, as one line (``--db: 'mysql://...':
    a mysql:// URL is not a review store ...``), or None when every one is fine."""
    for dest, (flag, check) in URL_FLAGS.items():
        values = getattr(args, dest, None)
        for value in values if isinstance(values, list) else [values]:
            if not isinstance(value, str) or not value:
                continue
            try:
                check(value)
            except ValueError as exc:
                return f"{flag}: {exc}"
    return None
