"""``tracefence serve`` refuses to start, in one line and with exit code 2, when its SQLite review database cannot
be written: its folder read-only, its ``-shm`` file read-only (SQLite would map it read-only and the process die
later of SIGBUS, with no log line), or its volume short of ``review_db_min_free_bytes`` (issue 30, DECISIONS 511,
512). Read-only is made with chmod for an unprivileged user, and with a read-only mount for root (whom chmod does
not stop); skipped visibly when neither works.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from otel_tracefence.review.store import SQLiteReviewStore
from service_helpers import fatal, free_port, tracefence


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot make a read-only mount here: {done.stderr.strip()}")


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` (a folder or a file) read-only for this process, root or not."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    _mount("--bind", str(path), str(path))
    try:
        _mount("-o", "remount,bind,ro", str(path))
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def serve_refused(tmp_path: Path, db: Path, **env: str) -> subprocess.CompletedProcess:
    return tracefence(
        "serve", "--endpoint", "127.0.0.1:0", "--upstream", f"http://127.0.0.1:{free_port()}", "--review-db", str(db),
        cwd=tmp_path, timeout=60, **env,
    )  # fmt: skip


def test_a_read_only_folder_of_the_review_db_refuses_the_start_in_one_line(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    with read_only(folder):
        done = serve_refused(tmp_path, folder / "review.db")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert fatal(lines[0]).startswith(f"tracefence serve: cannot start: review database {folder / 'review.db'}: its folder {folder} is not writable")


def test_a_read_only_shm_file_refuses_the_start_in_one_line_not_a_sigbus_later(tmp_path):
    db = tmp_path / "review.db"
    SQLiteReviewStore(db).close()
    shm = Path(f"{db}-shm")
    shm.write_bytes(b"\0" * 32768)  # as a crashed writer leaves it
    with read_only(shm):
        done = serve_refused(tmp_path, db)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert fatal(lines[0]).startswith(f"tracefence serve: cannot start: review database {db}: {shm} is not writable")


def test_a_volume_short_of_the_configured_free_space_refuses_the_start(tmp_path):
    db = tmp_path / "review.db"
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    done = serve_refused(tmp_path, db, OTEL_TRACEFENCE_REVIEW_DB_MIN_FREE_BYTES=str(free * 4))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "its volume has" in fatal(lines[0]) and f"less than review_db_min_free_bytes ({free * 4})" in fatal(lines[0])
    assert not db.exists()  # refused before anything was written


def test_a_folder_that_takes_no_new_file_is_named_so_not_missing(tmp_path):
    """/proc exists, and creating a file in it fails with ENOENT: the folder is there, it takes no file."""
    done = serve_refused(tmp_path, Path("/proc/review.db"))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert fatal(line) == (
        "tracefence serve: cannot start: review database /proc/review.db: its folder /proc takes no new file "
        "(No such file or directory); choose a folder on a writable volume"
    )
