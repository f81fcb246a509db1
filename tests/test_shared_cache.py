"""The shared Postgres cache under diskcache, against a real PostgreSQL started by the fixture."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg

from tests.helpers import REPO, cli, rows, run_args, write_config, write_dataset
from tests.mock_openai import MockServer


def _host_env(home: Path, cache_url: str) -> dict[str, str]:
    """Another machine: its own HOME and XDG cache (so its own local diskcache), the same Postgres."""
    env = {k: v for k, v in os.environ.items() if k != "EVALSWEEP_CACHE_DIR"}
    home.mkdir(parents=True, exist_ok=True)
    return env | {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "EVALSWEEP_CACHE_URL": cache_url}


def test_second_host_rerun_into_new_dir_sends_no_calls(tmp_path: Path, pg_url: str):
    srv = MockServer().start()
    try:
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a", "ok-b"])
        data = write_dataset(tmp_path / "d.jsonl", 30)
        a = _host_env(tmp_path / "host-a", pg_url)
        r = cli(*run_args(data, "ok-a,ok-b", cfg, tmp_path / "run-a", "--samples", "2"), env=a)
        assert r.returncode == 0, r.stderr
        assert srv.total == 30 * 2  # n=2 in one call per item and model
        assert (tmp_path / "host-a" / ".cache" / "evalsweep").is_dir()  # host A's own local layer

        b = _host_env(tmp_path / "host-b", pg_url)
        r = cli(*run_args(data, "ok-a,ok-b", cfg, tmp_path / "run-b", "--samples", "2"), env=b)
        assert r.returncode == 0, r.stderr
        assert srv.total == 60  # host B sent nothing: every answer came from Postgres
        rb = rows(tmp_path / "run-b")
        assert len(rb) == 120 and all(x["cached"] and x["error"] is None for x in rb)
        key = lambda x: (x["model"], x["item"], x["sample"])  # noqa: E731
        assert {key(x): x["text"] for x in rb} == {key(x): x["text"] for x in rows(tmp_path / "run-a")}

        # host B's local layer now holds them too: a third run there needs no server at all
        b3 = {k: v for k, v in b.items() if k != "EVALSWEEP_CACHE_URL"}
        r = cli(*run_args(data, "ok-a,ok-b", cfg, tmp_path / "run-b2", "--samples", "2"), env=b3)
        assert r.returncode == 0 and srv.total == 60, r.stderr
    finally:
        srv.stop()


def test_cache_stats_and_prune_on_postgres(tmp_path: Path, pg_url: str):
    srv = MockServer().start()
    try:
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a", "ok-b"])
        data = write_dataset(tmp_path / "d.jsonl", 5)
        env = _host_env(tmp_path / "h", pg_url)
        assert cli(*run_args(data, "ok-a,ok-b", cfg, tmp_path / "run"), env=env).returncode == 0
    finally:
        srv.stop()
    r = cli("cache", "stats", "--json", env=env)
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)["shared"]
    assert st["entries"] == 10 and st["per_model"] == {"ok-a": 5, "ok-b": 5} and st["bytes"] > 0
    assert "evalsweep@" in st["url"]
    r = cli("cache", "prune", "--model", "ok-a", env=env)
    assert r.returncode == 0 and "removed 5 entries from the shared cache" in r.stdout, r.stdout
    r = cli("cache", "prune", "--older-than", "1", env=env)
    assert "removed 0 entries from the shared cache" in r.stdout  # all written a moment ago
    with psycopg.connect(pg_url) as c:
        assert c.execute("SELECT model, count(*) FROM evalsweep_cache GROUP BY model").fetchall() == [("ok-b", 5)]
    r = cli("cache", "prune", "--all", env=env)
    assert "removed 5 entries from the shared cache" in r.stdout
    bad = env | {"EVALSWEEP_CACHE_URL": "mysql://x"}
    r = cli("cache", "stats", env=bad)
    assert r.returncode == 2 and "EVALSWEEP_CACHE_URL" in r.stderr and "postgresql://" in r.stderr


def test_lost_connection_degrades_to_local_and_loses_nothing(tmp_path: Path, pg_url: str):
    """The run's Postgres sessions are killed mid-run: one warning, the run completes, every row lands,
    and the answers are in the local cache (a rerun with the server still down sends nothing)."""
    srv = MockServer(latency_s=0.02).start()
    try:
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"], extra_endpoint="max_concurrency = 4\n")
        data = write_dataset(tmp_path / "d.jsonl", 120)
        env = _host_env(tmp_path / "h", pg_url)
        out = tmp_path / "run"
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli", *run_args(data, "ok-a", cfg, out)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        t0 = time.monotonic()
        while not (out / "results.jsonl").exists() or len(rows(out)) < 30:
            assert time.monotonic() - t0 < 60 and proc.poll() is None
            time.sleep(0.02)
        with psycopg.connect(pg_url, autocommit=True) as c:  # a real lost connection: the server ends it
            killed = c.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()[0]
        assert killed >= 1
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "shared cache" in err and "local cache only" in err
        rs = rows(out)
        assert len(rs) == 120 and all(r["error"] is None for r in rs)
        assert srv.total == 120
        r = cli(*run_args(data, "ok-a", cfg, tmp_path / "run2"), env=env | {"EVALSWEEP_CACHE_URL": ""})
        assert r.returncode == 0 and srv.total == 120, r.stderr  # all 120 answers kept locally
    finally:
        srv.stop()


def test_unreachable_at_start_runs_local_only(tmp_path: Path):
    srv = MockServer().start()
    try:
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"])
        data = write_dataset(tmp_path / "d.jsonl", 3)
        env = _host_env(tmp_path / "h", f"postgresql://nobody@/db?host={tmp_path}/nowhere")
        r = cli(*run_args(data, "ok-a", cfg, tmp_path / "run"), env=env)
        assert r.returncode == 0 and "local cache only" in r.stderr and len(rows(tmp_path / "run")) == 3
    finally:
        srv.stop()


def test_concurrent_first_runs_create_the_table_once(pg_url: str):
    """Two processes' first connection at once: the advisory lock makes CREATE TABLE race-free."""
    import asyncio

    from cache.pg import PgCache

    errors: list[BaseException] = []

    def one() -> None:
        async def go() -> None:
            c = await PgCache(pg_url).open()
            assert not c.down
            c.put("k", {"text": "x", "model": "m", "t": 1.0})
            await c.aclose()

        try:
            asyncio.run(go())
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=one) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    with psycopg.connect(pg_url) as c:
        assert c.execute("SELECT count(*) FROM evalsweep_cache").fetchone() == (1,)
