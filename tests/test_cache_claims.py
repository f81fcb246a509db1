"""Two runs sharing one cache directory (two people starting the same sweep on one machine) pay once
for each call: the second waits for the first's answer instead of sending its own. Real processes,
the mock counting what it is sent."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, rows, run_args, spawn, write_config, write_dataset
from tests.mock_openai import MockServer

N = 120


@pytest.mark.parametrize("apart_s", [0.0, 1.5])
def test_two_runs_on_one_cache_pay_once(tmp_path: Path, apart_s: float):
    srv = MockServer(latency_s=0.3).start()
    try:
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"], extra_endpoint="max_concurrency = 16\n")
        data = write_dataset(tmp_path / "d.jsonl", N)
        env = {**os.environ, "PYTHONPATH": str(REPO), "EVALSWEEP_CACHE_DIR": str(tmp_path / "cache")}
        a = spawn(run_args(data, "ok-a", cfg, tmp_path / "ra"), env)
        time.sleep(apart_s)
        b = spawn(run_args(data, "ok-a", cfg, tmp_path / "rb"), env)
        for p in (a, b):
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
        assert len(rows(tmp_path / "ra")) == N and len(rows(tmp_path / "rb")) == N
        assert srv.total == N, f"{srv.total} requests for {N} calls"
        paid = sum(not r["cached"] for r in rows(tmp_path / "ra") + rows(tmp_path / "rb"))
        assert paid == N
    finally:
        srv.stop()


def test_a_killed_claimant_frees_its_keys(tmp_path: Path):
    """A is SIGKILLed with calls in flight; B, on the same cache, takes over A's claims (A's process is
    gone) and completes every row."""
    srv = MockServer(latency_s=0.5).start()
    try:
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"], extra_endpoint="max_concurrency = 8\n")
        data = write_dataset(tmp_path / "d.jsonl", 40)
        env = {**os.environ, "PYTHONPATH": str(REPO), "EVALSWEEP_CACHE_DIR": str(tmp_path / "cache")}
        a = spawn(run_args(data, "ok-a", cfg, tmp_path / "ra"), env)
        t0 = time.monotonic()
        while srv.total < 8:
            assert time.monotonic() - t0 < 60 and a.poll() is None
            time.sleep(0.02)
        a.send_signal(signal.SIGKILL)
        a.wait(10)
        b = spawn(run_args(data, "ok-a", cfg, tmp_path / "rb"), env)
        _, err = b.communicate(timeout=120)
        assert b.returncode == 0, err
        assert len(rows(tmp_path / "rb")) == 40
    finally:
        srv.stop()


def test_two_hosts_sharing_only_postgres_pay_once(tmp_path: Path, pg_url: str):
    """Two "hosts" (each its own local cache) share only the Postgres cache: a key one is calling is
    claimed there, and the other waits for its answer instead of paying again."""
    srv = MockServer(latency_s=0.3).start()
    try:
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"], extra_endpoint="max_concurrency = 16\n")
        cfg.write_text(cfg.read_text() + f'\n[shared]\ncache_url = "{pg_url}"\n')
        data = write_dataset(tmp_path / "d.jsonl", N)
        procs = [spawn(run_args(data, "ok-a", cfg, tmp_path / f"r{h}"),
                       {**os.environ, "PYTHONPATH": str(REPO), "EVALSWEEP_CACHE_DIR": str(tmp_path / f"cache-{h}")})
                 for h in "ab"]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
        assert len(rows(tmp_path / "ra")) == N and len(rows(tmp_path / "rb")) == N
        assert srv.total == N, f"{srv.total} requests for {N} calls"
    finally:
        srv.stop()
