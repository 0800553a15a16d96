"""A real PostgreSQL server for the tests: Debian's ``postgresql`` package (installed with apt-get when
``initdb`` is missing and we are root), a cluster made by ``initdb`` in a temporary folder, listening on
127.0.0.1 only, on a free port, with its unix socket in that folder. initdb and postgres refuse to run
as root: as root they run as the ``postgres`` system user the package creates, and the folder is
theirs (the processes are started as that user directly, as ``runuser -u postgres`` would, so that a
signal reaches postgres itself). Trust authentication (loopback only, a throwaway cluster); fsync
off unless asked for (nothing a test writes must survive a power cut)."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from pathlib import Path

from service_helpers import free_port, wait_for

USER = "tracefence"


def _bin_dir() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name))
    return Path(candidates[-1]).parent if candidates else None


def ensure_postgres() -> Path:
    """The directory of ``initdb`` and ``postgres``, installing Debian's ``postgresql`` when missing (as root).
    Raises :class:`RuntimeError` naming the package when it is missing and cannot be installed."""
    found = _bin_dir()
    if found is not None:
        return found
    if os.geteuid() != 0:
        raise RuntimeError("PostgreSQL's initdb is not installed and we are not root: apt-get install postgresql")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "postgresql"]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=True)
        subprocess.run(install, env=env, capture_output=True, check=True)
    found = _bin_dir()
    if found is None:
        raise RuntimeError("apt-get install postgresql left no initdb in /usr/lib/postgresql/*/bin")
    return found


class PostgresServer:
    """One throwaway cluster; :meth:`start`, :meth:`stop` (fast shutdown), :meth:`restart` on the same port."""

    def __init__(self, *, fsync: bool = False) -> None:
        """``fsync``: on for benchmarks (a commit costs what it costs in production), off for tests."""
        self.bin = ensure_postgres()
        self.fsync = fsync
        self.dir = Path(tempfile.mkdtemp(prefix="tracefence-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self._as: dict[str, object] = {"cwd": self.dir}
        if os.geteuid() == 0:
            import pwd

            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self._as.update(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[])
        subprocess.run(
            [str(self.bin / "initdb"), "-D", str(self.data), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"],
            capture_output=True,
            check=True,
            **self._as,
        )
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port),
                "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.dir}",
                "-c", f"fsync={'on' if self.fsync else 'off'}", "-c", "max_connections=200",
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(self.dir / "server.log", "ab"),  # noqa: SIM115 - the child holds it
            **self._as,
        )
        wait_for(self._ready, timeout=60, interval=0.1, what=f"PostgreSQL on 127.0.0.1:{self.port}")

    def _ready(self) -> bool:
        import psycopg

        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"postgres exited {self.proc.returncode}: {(self.dir / 'server.log').read_text()[-2000:]}")
        try:
            psycopg.connect(self.url("postgres"), connect_timeout=2).close()
            return True
        except psycopg.OperationalError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown: disconnects clients, checkpoints
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def url(self, database: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh empty database; its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:16]
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        import psycopg

        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
