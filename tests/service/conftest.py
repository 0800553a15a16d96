"""Fixtures of the service's tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from otel_tracefence.service.server import TraceFenceService
from service_helpers import RecordingUpstream, service_config


@pytest.fixture
def services(tmp_path: Path, upstream: RecordingUpstream) -> Iterator[Callable[..., TraceFenceService]]:
    """``services(**settings)``: a started in-process service forwarding to ``upstream``, a review database of its
    own under ``tmp_path``, the OTLP/HTTP receiver on a free loopback port unless ``http_endpoint`` says otherwise;
    each one stopped when the test ends."""
    made: list[TraceFenceService] = []

    def make(**settings: Any) -> TraceFenceService:
        settings.setdefault("http_endpoint", "127.0.0.1:0")
        service = TraceFenceService(service_config(upstream, tmp_path / f"r{len(made)}.db", **settings))
        made.append(service)
        service.start()
        return service

    yield make
    for service in made:
        service.stop(0)
