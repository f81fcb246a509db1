"""Two runs sharing one cache directory (two people starting the same sweep on one machine) pay once
for each call: the second waits for the first's answer instead of sending its own. Real processes,
the mock counting what it is sent."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cache.claims import Claims
from tests.helpers import REPO, rows, run_args, spawn, write_config, write_dataset
from tests.mock_openai import MockServer

N = 120

_NEWCOMER = """import sys
from pathlib import Path
from cache.claims import Claims
c = Claims(Path(sys.argv[1]))
print(c.arrived, flush=True)
sys.stdin.read()
"""
"""Another process registering on the directory (printing when it arrived), alive until its stdin closes."""


def test_a_look_never_vouches_for_a_newcomer_it_did_not_see(tmp_path: Path):
    """The racy order, driven step by step: A reads the other processes (none), B registers, then A says
    it has looked. B must not take A's stamp for a look made since B arrived: A never saw B, stays
    unshared, claims nothing, and both would send the same keys."""
    a = Claims(tmp_path)
    b = None
    try:
        assert a.others() == []  # A's look begins: alone
        b = subprocess.Popen([sys.executable, "-c", _NEWCOMER, str(tmp_path)], cwd=REPO, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
        b_arrived = float(b.stdout.readline())  # type: ignore[union-attr]
        a.looked()  # A's look ends after B registered
        con = sqlite3.connect(tmp_path / "claims.db")
        (a_seen,) = con.execute("SELECT seen FROM procs WHERE pid = ?", (os.getpid(),)).fetchone()
        con.close()
        assert a_seen < b_arrived  # B still waits for a look of A's that can see it
        assert a.others() != []  # ... which the next one does
        a.looked()
        con = sqlite3.connect(tmp_path / "claims.db")
        (a_seen,) = con.execute("SELECT seen FROM procs WHERE pid = ?", (os.getpid(),)).fetchone()
        con.close()
        assert a_seen >= b_arrived
    finally:
        if b is not None:
            b.communicate(timeout=30)
        a.close()


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
        errs = []
        for p in (a, b):
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            errs.append(err[-2000:])
        assert len(rows(tmp_path / "ra")) == N and len(rows(tmp_path / "rb")) == N
        assert srv.total == N, f"{srv.total} requests for {N} calls; the runs said: {errs}"
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
