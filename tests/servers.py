"""Real Redis and PostgreSQL servers for the tests, started in temp directories on unix sockets only.

`redis-server` comes from Debian's `redis-server` package, `initdb`/`pg_ctl` from `postgresql`
(under /usr/lib/postgresql/*/bin); `.ci/run` installs both. Where they are missing the tests that
need them skip, saying which binary is absent. PostgreSQL refuses to run as root, so as root the
cluster belongs to `nobody`.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    w = shutil.which("pg_ctl")
    return Path(w).parent if w else None


def _reap_after_us(cleanup: str, **user: str) -> None:
    """Run `cleanup` (sh) once this test process is gone, however it dies (SIGKILL, a timeout):
    a killed pytest must not leave a server behind."""
    subprocess.Popen(
        ["sh", "-c", f"while [ -d /proc/{os.getpid()} ]; do sleep 1; done; {cleanup}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        **user,  # type: ignore[arg-type]
    )


class RedisServer:
    """One redis-server on a unix socket; `stop()` kills it (a crashed Redis, mid-run)."""

    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            pytest.skip("redis-server not installed (apt-get install -y redis-server; .ci/run does it)")
        self.dir = Path(tempfile.mkdtemp(prefix="es-redis-"))
        self.sock = self.dir / "redis.sock"
        self.proc: subprocess.Popen[bytes] | None = None
        self.exe = exe

    @property
    def url(self) -> str:
        return f"unix://{self.sock}"

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(
            [self.exe, "--port", "0", "--unixsocket", str(self.sock), "--unixsocketperm", "700",
             "--save", "", "--appendonly", "no", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # Only that redis-server (its working directory is ours, `--dir`): once the tests are gone its pid
        # may be another process's, a test that restarts Redis leaves many, and pids wrap fast.
        pid, d = self.proc.pid, os.path.realpath(self.dir)
        _reap_after_us(f'[ "$(readlink /proc/{pid}/cwd)" = "{d}" ] && kill -9 {pid}; rm -rf {d}')
        t0 = time.monotonic()
        while not self.sock.exists():
            if self.proc.poll() is not None or time.monotonic() - t0 > 10:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class PgServer:
    """A throwaway PostgreSQL cluster (initdb + pg_ctl), listening on a unix socket only."""

    def __init__(self) -> None:
        b = _pg_bin()
        if b is None or not (b / "initdb").exists():
            pytest.skip("PostgreSQL server binaries not installed (apt-get install -y postgresql)")
        self.bin = b
        self.dir = Path(tempfile.mkdtemp(prefix="es-pg-"))
        self.data = self.dir / "data"
        self.user = {"user": "nobody", "group": "nogroup"} if os.geteuid() == 0 else {}
        if self.user:
            os.chown(self.dir, 65534, 65534)
        os.chmod(self.dir, 0o755)

    def _run(self, *args: str) -> None:
        r = subprocess.run(args, capture_output=True, text=True, cwd=self.dir, **self.user)  # type: ignore[call-overload]
        if r.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {r.stdout}{r.stderr}")

    def start(self) -> PgServer:
        if not self.data.exists():
            self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "evalsweep", "--auth=trust",
                      "--no-sync", "-E", "UTF8")
        _reap_after_us(f"{self.bin / 'pg_ctl'} -D {self.data} -m immediate stop; rm -rf {self.dir}", **self.user)
        opts = f"-k {self.dir} -c listen_addresses='' -c fsync=off -c full_page_writes=off"
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.dir / "log"),
                  "-w", "start")
        return self

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://evalsweep@/{db}?host={self.dir}"

    def new_db(self) -> str:
        """A fresh database for one test; returns its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def close(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    srv = RedisServer().start()
    yield srv
    srv.close()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgServer]:
    srv = PgServer().start()
    yield srv
    srv.close()


@pytest.fixture
def pg_url(pg_cluster: PgServer) -> str:
    """A fresh, empty database on the session's PostgreSQL server."""
    return pg_cluster.new_db()
