import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# ../shared/cases beside the project (CI lays shared/ beside the clone); override with TRACEFENCE_CASES.
SHARED_CASES = Path(os.environ.get("TRACEFENCE_CASES", ROOT.parent / "shared" / "cases"))


@pytest.fixture
def config():
    from otel_tracefence.core.config import TraceFenceConfig

    return TraceFenceConfig()


@pytest.fixture(autouse=True)
def _no_tracefence_env(monkeypatch):
    """Tests set the OTEL_TRACEFENCE_* and OTLP exporter variables they need; none leak in from the runner."""
    for name in list(os.environ):
        if name.startswith(("OTEL_TRACEFENCE_", "OTEL_EXPORTER_OTLP")):
            monkeypatch.delenv(name)


@pytest.fixture
def upstream():
    """A real gRPC TraceService on a free loopback port that records every request."""
    from service_helpers import RecordingUpstream

    up = RecordingUpstream()
    up.start()
    yield up
    up.stop()


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL server for the session (tests/postgres_server.py): Debian's package, installed when
    missing; initdb in a temporary folder, 127.0.0.1 on a free port; stopped and removed at the end."""
    from postgres_server import PostgresServer

    server = PostgresServer()
    yield server
    server.close()


@pytest.fixture
def pg_url(postgres_server) -> str:
    """The URL of a fresh, empty database on the session's PostgreSQL server (dropped after the test)."""
    url = postgres_server.new_database()
    yield url
    postgres_server.drop_database(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path) -> str:
    """A review database for each store: a SQLite file (not made yet), and a fresh database on the real PostgreSQL server."""
    return str(tmp_path / "review.db") if request.param == "sqlite" else request.getfixturevalue("pg_url")


@pytest.fixture
def services(tmp_path, upstream):
    """``services(**settings)``: a started in-process service forwarding to ``upstream``, a review database of its
    own under ``tmp_path``, the OTLP/HTTP receiver on a free loopback port unless ``http_endpoint`` says otherwise;
    each one stopped when the test ends."""
    from otel_tracefence.service.server import TraceFenceService
    from service_helpers import service_config

    made = []

    def make(**settings):
        settings.setdefault("http_endpoint", "127.0.0.1:0")
        service = TraceFenceService(service_config(upstream, tmp_path / f"r{len(made)}.db", **settings))
        made.append(service)
        service.start()
        return service

    yield make
    for service in made:
        service.stop(0)
