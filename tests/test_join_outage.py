"""`--join` workers sharing a key through Redis, Redis lost mid-run for good: the workers that held
none of the key's leases may send nothing (the key's cap holds), so they hand their work units back and
the workers that may send finish them. Real Postgres (leases), real redis-server, the local mock."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import orjson

from runner.results import final_rows, results_files
from tests.helpers import run_args, spawn, write_config, write_dataset
from tests.mock_openai import MockServer
from tests.servers import RedisServer

KEY = "join-outage-key"
WORKERS, CAP, N = 4, 2, 120


def _lines(out: Path) -> int:
    return sum(len(p.read_bytes().splitlines()) for p in results_files(out)) if out.exists() else 0


def test_workers_that_may_not_send_hand_their_units_back(tmp_path: Path, pg_url: str, redis_server: RedisServer):
    srv = MockServer(latency_s=0.3).start()
    procs: list[subprocess.Popen[str]] = []
    try:
        data = write_dataset(tmp_path / "d.jsonl", N)
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a"], key_env="JOIN_OUTAGE_KEY",
                           extra_endpoint=f"max_concurrency = {CAP}\nrpm = 6000\n")
        cfg.write_text(cfg.read_text() + f'\n[shared]\ncache_url = "{pg_url}"\nredis_url = "{redis_server.url}"\n'
                       "lease_s = 2\n")
        out = tmp_path / "run"
        args = run_args(data, "ok-a", cfg, out, "--join")
        for i in range(WORKERS):
            procs.append(spawn(args, {**os.environ, "JOIN_OUTAGE_KEY": KEY,
                                      "EVALSWEEP_CACHE_DIR": str(tmp_path / f"cache-{i}")}))
        t0 = time.monotonic()
        while _lines(out) < 15:
            assert all(p.poll() is None for p in procs), [p.communicate()[1] for p in procs if p.poll() is not None]
            assert time.monotonic() - t0 < 90
            time.sleep(0.05)
        stopped_at = time.monotonic()
        redis_server.stop()  # for good: the rest of the run paces locally, within the leases each held
        errs = []
        deadline = time.monotonic() + 120
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.2)
        for p in procs:  # before: the workers holding no lease kept their units and the run never ended
            if p.poll() is None:
                p.kill()
            _, err = p.communicate(timeout=30)
            errs.append(err)
        assert all(p.returncode == 0 for p in procs), "\n=====\n".join(e[-2500:] for e in errs)
        rows = list(final_rows(out / "results.jsonl"))
        assert len(rows) == N and all(r["error"] is None for r in rows)
        assert srv.total <= N + CAP * WORKERS  # nothing re-sent but calls cut short on the wire
        assert max(seen for _m, _done, seen in srv.seen_on_arrival) <= CAP  # the key's cap held throughout
        assert srv.rejected_429 == 0
        sent = sorted(t for t, *_ in srv.arrivals if t > stopped_at)
        gaps = [b - a for a, b in zip([stopped_at, *sent], sent, strict=False)]
        assert max(gaps) < 8.0, max(gaps)  # the workers that may send never sit idle while work is left
        assert any("handed back" in e for e in errs), errs  # some worker held no lease and gave its unit up
        assert sum(1 for p in results_files(out) for x in p.read_bytes().splitlines()
                   if orjson.loads(x)["error"] is not None) == 0  # a handed-back call writes no row
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        srv.stop()
