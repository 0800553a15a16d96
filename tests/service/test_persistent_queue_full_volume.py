"""The persistent queue on a small volume never wedges on its own log (issue 30, DECISIONS 513).

On tmpfs volumes of 1, 4 and 16 MiB (root only: skipped visibly otherwise), the volume filled by another file:
the forwarded rows are deleted all the same (the queue's reserve file gives the deletion its room, and freed
pages are not rewritten: ``secure_delete=FAST``), and the queue takes requests again by itself once there is
space. Before, no forwarded row could be deleted on a full volume. (The queue filling the volume by itself to
the last byte is not covered yet: see DECISIONS 513.)
"""

from __future__ import annotations

import os
import sqlite3
import subprocess

import pytest

from otel_tracefence.service.persistent_queue import PersistentQueue
from service_helpers import fill, raw_request, raw_span


@pytest.fixture
def volume(tmp_path, request):
    """A tmpfs of ``request.param`` MiB at tmp_path/vol (root only)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a small tmpfs")
    folder = tmp_path / "vol"
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={request.param}m", "tmpfs", str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def request_of(n: int):
    """Request ``n``: one trace of 4 spans carrying 2 KB each."""
    trace = n.to_bytes(16, "big")
    spans = [raw_span(trace, (n * 8 + i + 1).to_bytes(8, "big"), "op", padding="x" * 2048) for i in range(4)]
    return raw_request(*spans), spans


@pytest.mark.parametrize("volume", [1, 4, 16], indirect=True, ids=["1MiB", "4MiB", "16MiB"])
def test_the_queue_filled_to_the_last_byte_deletes_what_was_forwarded_and_takes_requests_again(volume):
    queue = PersistentQueue(volume, targets=1)
    written: list[list] = []
    try:
        while True:
            request, spans = request_of(len(written))
            try:
                queue.append(request, spans)
            except sqlite3.Error as exc:
                assert "full" in str(exc)
                break
            written.append(spans)
        assert len(written) > 10
        for spans in written:
            queue.settle(0, spans)
        assert queue.pending() == (0, 0)  # every forwarded row deleted, on a full volume
        request, spans = request_of(len(written))
        queue.append(request, spans)  # and the queue takes requests again
        assert queue.pending() == (1, 4)
    finally:
        queue.close()


@pytest.mark.parametrize("volume", [1, 4, 16], indirect=True, ids=["1MiB", "4MiB", "16MiB"])
def test_a_volume_filled_by_another_file_never_wedges_the_queue(volume):
    queue = PersistentQueue(volume, targets=1)
    try:
        batches = [request_of(n) for n in range(40)]
        for request, spans in batches:
            queue.append(request, spans)
        filler = fill(volume)
        for n in range(100, 1000):  # the WAL's file may still take a few; then refused (the intake answers UNAVAILABLE)
            try:
                batches.append(request_of(n))
                queue.append(*batches[-1])
            except sqlite3.Error as exc:
                assert "full" in str(exc)
                batches.pop()
                break
        else:
            pytest.fail("a full volume took 900 more requests")
        late, late_spans = request_of(99)
        for _, spans in batches:
            queue.settle(0, spans)
        assert queue.pending() == (0, 0)  # deleted with no space to spare: the reserve gave them room
        filler.unlink()
        queue.append(late, late_spans)  # space back: taken again, by itself
        assert queue.pending() == (1, 4)
    finally:
        queue.close()
    assert PersistentQueue.count(volume / "tracefence-queue.db") == (1, 4)  # kept for the next start
