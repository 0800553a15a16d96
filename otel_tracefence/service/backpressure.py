"""When the service stops acknowledging because of its forward queues (``UNAVAILABLE``, retried by the client).

A forward queue past ``service.backpressure_ratio`` of its bound refuses; and so does what is acknowledged and not
forwarded when it would take an upstream more than ``STOP_SEND_SHARE`` of ``service.drain_timeout_s`` to take at its
measured rate (a stop hands it on beside its other work, about three times slower than sending alone, measured): a
stop can hand all of it on (docs/DECISIONS.md 195).
"""

from __future__ import annotations

from typing import Sequence

from otel_tracefence.service.forward import Forwarder

STOP_SEND_SHARE = 0.125
STOP_SEND_FLOOR = 8192  # ... and past one forward batch (MAX_BATCH_SPANS): less is never refused so


def forward_refusal(forwarders: Sequence[Forwarder], backlog: int, ratio: float, drain_timeout_s: float) -> str | None:
    """The reason to refuse an Export for the first of ``forwarders`` that cannot take more, or ``None``.

    ``backlog``: spans read and not yet forwarded (held or being decided, then queued to forward); ``ratio``:
    ``service.backpressure_ratio``; ``drain_timeout_s``: ``service.drain_timeout_s`` (seconds)."""
    within = drain_timeout_s * STOP_SEND_SHARE
    for forwarder in forwarders:
        if forwarder.depth >= ratio * forwarder.max_spans:
            return f"forward queue for {forwarder.target.name} is {forwarder.depth}/{forwarder.max_spans} spans full; retry later"
        rate = forwarder.send_rate  # None until a send succeeded
        if backlog + forwarder.depth > max(STOP_SEND_FLOOR, (rate or 0.0) * within):
            measured = f"at its measured {rate:.0f} spans/s" if rate is not None else "(no send measured yet)"
            return (
                f"{backlog + forwarder.depth} spans read wait to be forwarded to {forwarder.target.name}, more than {STOP_SEND_FLOOR} "
                f"and than it takes in {within:g}s (an eighth of service.drain_timeout_s) {measured}: more than a stop could hand on; retry later"
            )
    return None
