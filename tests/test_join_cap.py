"""`--join` workers beyond their key's cap (#40): 6 workers on a key capped at 4 concurrent calls, shared
through Redis. A worker whose calls all wait for a lease of the key (none on the wire) while more
processes want its leases than it has hands its units back, and claims again only when a lease is
likely: the units go to the workers that can send, instead of every worker holding units and waiting
its turn. Real Postgres (the units), real redis-server (the key's budget), the local mock."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import orjson
import psycopg

from runner.results import final_rows, results_files
from suites.jsonl import prompt_of
from tests.helpers import REPO, run_args, write_config, write_dataset
from tests.mock_openai import MockServer
from tests.servers import RedisServer

KEY = "join-cap-key"
WORKERS, CAP, N = 6, 4, 200


def _owners(pg_url: str) -> set[str]:
    """The pids of the workers holding a unit now."""
    with psycopg.connect(pg_url) as c:
        try:
            rows = c.execute("SELECT DISTINCT owner FROM evalsweep_units WHERE owner IS NOT NULL AND NOT done "
                             "AND expires > now()").fetchall()
        except psycopg.errors.UndefinedTable:
            return set()
    return {o.rsplit("-", 2)[1] for (o,) in rows}


def test_workers_beyond_the_cap_leave_the_units_to_those_holding_leases(
    tmp_path: Path, pg_url: str, redis_server: RedisServer
):
    srv = MockServer(latency_s=0.5).start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        data = write_dataset(tmp_path / "d.jsonl", N)
        item_of = {prompt_of(d): d["id"] for d in map(orjson.loads, data.read_bytes().splitlines())}
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"], key_env="JOIN_CAP_KEY",
                           extra_endpoint=f"max_concurrency = {CAP}\nrpm = 6000\n")
        cfg.write_text(cfg.read_text() + f'\n[shared]\ncache_url = "{pg_url}"\nredis_url = "{redis_server.url}"\n'
                       "lease_s = 2\n")
        out = tmp_path / "run"
        args = run_args(data, "ok-a", cfg, out, "--join")
        errs = [tmp_path / f"worker{i}.err" for i in range(WORKERS)]
        for i in range(WORKERS):
            env = {**os.environ, "JOIN_CAP_KEY": KEY, "EVALSWEEP_CACHE_DIR": str(tmp_path / f"cache-{i}")}
            with errs[i].open("wb") as f:
                procs.append(subprocess.Popen([sys.executable, "-m", "cli", *args], cwd=REPO, env=env,
                                              stdout=subprocess.DEVNULL, stderr=f))
        while srv.total < 2 * N // 3:  # (the processes' own deadline: the test runner's timeout)
            assert all(p.poll() is None for p in procs), [e.read_text() for e in errs]
            time.sleep(0.05)
        holding = _owners(pg_url)
        while not holding:
            time.sleep(0.05)
            holding = _owners(pg_url)
        killed = next(p for p in procs if str(p.pid) in holding)  # one sending, killed mid-unit
        killed.kill()
        killed.wait(10)
        for p in procs:
            p.wait(180)
        texts = [e.read_text(errors="replace") for e in errs]
        assert all(p.returncode == 0 for p in procs if p is not killed), "\n=====\n".join(t[-2500:] for t in texts)

        rows = list(final_rows(out / "results.jsonl"))
        assert len(rows) == N and all(r["error"] is None for r in rows)  # every unit finished, the killed one's too
        assert sum(1 for p in results_files(out) for x in p.read_bytes().splitlines()
                   if orjson.loads(x)["error"] is not None) == 0  # a handed-back call writes no row
        assert max(srv.prompts.values()) <= 2 and srv.total <= N + CAP  # re-sent: only calls cut short by the kill
        assert max(seen for _m, _done, seen in srv.seen_on_arrival) <= CAP and srv.rejected_429 == 0

        # Before: leases went round in turns, each of the 6 workers holding units and idle a third of the
        # time, none handing any back; every worker sent in any stretch of the run. Then, handing back
        # only after waiting a whole turn: with calls as long as a turn, 5 workers often took turns for
        # ever, each sending a fifth of the calls. Now the 4 that hold the leases send (nearly) all of
        # them; another sends one now and then, as it claims a unit when a lease looked likely.
        assert any("waited for a lease of the key" in t for t in texts), texts
        worker_of = {orjson.loads(x)["item"]: p.name for p in results_files(out) for x in p.read_bytes().splitlines()}
        middle = Counter(worker_of[item_of[prompt]] for _t, _m, prompt, _n in srv.arrivals[N // 3: 2 * N // 3])
        busiest = sum(sorted(middle.values())[-CAP:])
        assert busiest >= 0.9 * sum(middle.values()), middle  # (taking turns: 4/5 or 4/6 of them)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        srv.stop()
