"""What a SQLite review database needs from its disk, checked before ``tracefence serve`` starts (issue 30).

:func:`check_writable` refuses, with a message naming the file, a database whose folder, file, ``-wal`` or
``-shm`` cannot be written: SQLite opens a read-only ``-shm`` read-only and the process dies later of SIGBUS
with no log line, and an unwritable folder makes every item fail (DECISIONS 512). It tries the operations
themselves (opening read-write, creating a file) rather than asking ``os.access``, which says yes to root.
:func:`check_free_space` refuses a volume with less free space than the configured minimum
(``review_db_min_free_bytes``, DECISIONS 511). :func:`free_bytes` is what the store reads when it decides
whether to trim its write-ahead log.
"""

from __future__ import annotations

import os
from pathlib import Path


class ReviewDbUnusable(OSError):
    """The review database cannot be used as it is on this disk; the message says why and names the file."""


def free_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes free for an unprivileged writer on the volume of ``path``'s folder. Raises ``OSError``."""
    st = os.statvfs(Path(path).parent or ".")
    return st.f_bavail * st.f_frsize


def check_writable(path: str | os.PathLike[str]) -> None:
    """Raise :class:`ReviewDbUnusable` unless the folder of the SQLite file ``path`` takes a new file and the file,
    its ``-wal`` and its ``-shm`` (those that exist) open read-write."""
    db = Path(path)
    folder = db.parent if str(db.parent) else Path(".")
    probe = folder / f".{db.name}.probe-{os.getpid()}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except FileNotFoundError as exc:
        if not folder.is_dir():
            raise ReviewDbUnusable(f"review database {db}: its folder {folder} does not exist") from None
        # A folder that exists and takes no new file (/proc, /sys: a kernel's file system, ENOENT on create).
        raise ReviewDbUnusable(f"review database {db}: its folder {folder} takes no new file ({exc.strerror}); choose a folder on a writable volume") from None
    except OSError as exc:
        raise ReviewDbUnusable(f"review database {db}: its folder {folder} is not writable ({exc.strerror}); SQLite needs to create {db.name}-wal and {db.name}-shm there") from None
    for name in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        try:
            os.close(os.open(name, os.O_RDWR))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise ReviewDbUnusable(f"review database {db}: {name} is not writable ({exc.strerror})") from None


def check_free_space(path: str | os.PathLike[str], min_free_bytes: int) -> None:
    """Raise :class:`ReviewDbUnusable` when the volume of ``path`` has less than ``min_free_bytes`` free (0: no check)."""
    if min_free_bytes <= 0:
        return
    free = free_bytes(path)
    if free < min_free_bytes:
        raise ReviewDbUnusable(
            f"review database {path}: its volume has {free} bytes free, less than review_db_min_free_bytes ({min_free_bytes}); "
            "free some space, move the database, or lower the setting"
        )


MAKE_AT = 2  # a reserve is made only with this many times its size free


class SpaceReserve:
    """A file of ``size`` bytes kept beside a SQLite database (``<database>.reserve``, mode 0600) and given back to
    the file system when the volume is full: a checkpoint that must copy the write-ahead log into the file (which
    may grow) or a deletion that must write to the log then has room, and their space comes back with the log
    truncated (DECISIONS 511, 513). Made again, quietly, once there is room. Thread-safe when its owner's lock is
    held around calls."""

    def __init__(self, database: str | os.PathLike[str], size: int) -> None:
        self.path = Path(f"{os.fspath(database)}.reserve")
        self.size = size

    def make(self) -> bool:
        """Write the reserve unless it is there; whether it is there now (False: no room for it yet: it is made only
        while the volume has ``MAKE_AT`` times its size free, so that making it never takes the room a write needs)."""
        try:
            if self.path.stat().st_size == self.size:
                return True
        except OSError:
            pass
        try:
            if free_bytes(self.path) < MAKE_AT * self.size:
                return False
        except OSError:
            return False
        try:
            with open(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb", buffering=0) as out:
                out.write(b"\0" * self.size)
                os.fsync(out.fileno())
            return True
        except OSError:
            try:
                os.unlink(self.path)
            except OSError:
                pass
            return False

    def give_back(self) -> bool:
        """Delete the reserve; whether there was one to delete."""
        try:
            os.unlink(self.path)
        except OSError:
            return False
        return True
