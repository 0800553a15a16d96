"""Calls into code the SDK door does not own (a downstream processor, the wrapped exporter), bounded by a deadline.

``shutdown(timeout)`` must return within its timeout whatever the wrapped exporter does (issue 30: a hanging
exporter made ``shutdown(5000)`` take 30 s). Each such call runs on a daemon thread of its own and is waited for
until the deadline; one still running then is left to finish in the background (a daemon thread: it never holds
the interpreter's exit), counted and logged by the caller. The whole call returns within its timeout and
:data:`MARGIN_S` more (thread start and join).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

MARGIN_S = 0.5
"""The most a bounded shutdown or flush may take past its timeout, in seconds (stated, and pinned by the tests)."""


def run_until(action: Callable[[], object], deadline: float, name: str) -> bool:
    """Run ``action()`` on a daemon thread named ``name`` until ``deadline`` (``time.monotonic()`` seconds); True
    when it returned (or raised: the exception is the action's own business, report it inside ``action``) in time."""
    thread = threading.Thread(target=action, name=name, daemon=True)
    thread.start()
    thread.join(timeout=max(0.0, deadline - time.monotonic()))
    return not thread.is_alive()


__all__ = ["MARGIN_S", "run_until"]
