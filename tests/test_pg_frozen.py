"""A Postgres that freezes (SIGSTOP) under a run sharing its cache: the run warns within seconds and
goes on with the local cache, instead of stalling for as long as the server hangs; when the server
comes back (SIGCONT) the cache shares again."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, rows, run_args, spawn, write_config, write_dataset
from tests.mock_openai import MockServer
from tests.servers import PgServer


def _pids(srv: PgServer) -> list[int]:
    main = int((srv.data / "postmaster.pid").read_text().split()[0])
    kids = subprocess.run(["pgrep", "-P", str(main)], capture_output=True, text=True).stdout.split()
    return [main, *map(int, kids)]


@pytest.fixture
def own_pg():
    srv = PgServer().start()
    yield srv
    if (srv.data / "postmaster.pid").exists():
        for pid in _pids(srv):  # never leave it frozen
            os.kill(pid, signal.SIGCONT)
    srv.close()


def test_a_frozen_postgres_degrades_in_seconds_and_recovers(tmp_path: Path, own_pg: PgServer):
    mock = MockServer(latency_s=0.05).start()
    try:
        url = own_pg.new_db()
        cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint="max_concurrency = 2\n")
        cfg.write_text(cfg.read_text() + f'\n[shared]\ncache_url = "{url}"\n')
        data = write_dataset(tmp_path / "d.jsonl", 500)
        p = spawn(run_args(data, "ok-a", cfg, tmp_path / "run"),
                  {**os.environ, "PYTHONPATH": str(REPO), "EVALSWEEP_CACHE_DIR": str(tmp_path / "cache")})
        t0 = time.monotonic()
        while mock.total < 30:
            assert time.monotonic() - t0 < 60 and p.poll() is None
            time.sleep(0.02)
        pids = _pids(own_pg)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        time.sleep(6.0)
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        assert len(rows(tmp_path / "run")) == 500
        ts = sorted(t for t, *_ in mock.arrivals)
        during = [b - a for a, b in zip(ts, ts[1:], strict=False) if a >= frozen_at - 1]
        assert max(during) < 4.5, max(during)  # stalled at most one statement deadline (3 s), not 6 s
        assert "unreachable (no answer in 3s)" in err and err.count("unreachable") == 1
        assert "reachable again" in err
    finally:
        mock.stop()


def test_a_join_worker_waits_out_a_lost_postgres(tmp_path: Path, own_pg: PgServer):
    """The leases of `--join` live in Postgres: stopped under a worker (a crash, a restart), the worker
    warns, waits, and finishes the run when the server is back, instead of aborting with a traceback."""
    mock = MockServer(latency_s=0.05).start()
    try:
        url = own_pg.new_db()
        cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint="max_concurrency = 2\n")
        cfg.write_text(cfg.read_text() + f'\n[shared]\ncache_url = "{url}"\nlease_s = 30\n')
        data = write_dataset(tmp_path / "d.jsonl", 300)
        p = spawn(run_args(data, "ok-a", cfg, tmp_path / "run", "--join"),
                  {**os.environ, "PYTHONPATH": str(REPO), "EVALSWEEP_CACHE_DIR": str(tmp_path / "cache")})
        t0 = time.monotonic()
        while mock.total < 30:
            assert time.monotonic() - t0 < 60 and p.poll() is None
            time.sleep(0.02)
        own_pg.stop()
        time.sleep(6.0)
        assert p.poll() is None  # still there, waiting
        own_pg.start()
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        assert "Traceback" not in err and "waiting for Postgres" in err
        from runner.results import final_rows

        assert len(list(final_rows(tmp_path / "run" / "results.jsonl"))) == 300
    finally:
        mock.stop()
