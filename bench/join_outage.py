"""`--join` workers through a Redis outage, at the issue's scale (#39 item 7).

Real Postgres (the work leases) and a real redis-server (the key's shared budget), both started as
tests/servers.py does; the local mock server (tests/mock_openai.py, in this process, so its arrival log
is at hand) answers after --latency. --workers `evalsweep run ... --out DIR --join` processes share one
API key capped at --cap concurrent calls. Once the run has sent for --before seconds, Redis is killed
(SIGKILL) for --outage seconds, then restarted empty on the same socket (--freeze: SIGSTOP, then SIGCONT,
its state kept). Printed from the mock's log:
the longest gap with no request sent while some worker may send (before the outage, during it when a
worker held leases, from the restart to the first request, after), requests paid twice (the same
prompt sent twice: one model, one sample per item, so the same request body), rows per worker,
hand-backs, the most calls on the wire at once, tracebacks in the workers' stderr and exit codes.

    python bench/join_outage.py [--outage 120] [--workers 6] [--cap 4] [--latency 1.0] [--before 15] [--freeze]
        [--late N: N of the workers start 10 s into the outage] [--redis-wait S] [--lease S] [--keep DIR]

--steady: no outage (#40): --workers always-busy workers on a key capped at --cap, --seconds of work at the
cap. Printed: per worker, the share of the time it held units (sampled in Postgres every 0.1 s) with none
of its calls on the wire (its rows tell which requests were its); the run's wall (first request to last
answer) over its cap limit (requests x latency / cap); Redis round trips per call (INFO commandstats);
requests paid twice (must be 0); per worker, from its first unit held, when the run's first request and its own
went out and when it let its last unit go (whether a worker beyond the cap held units before anyone could send).

    python bench/join_outage.py --steady [--workers 6] [--cap 4] [--latency 1.0] [--seconds 60]
        [--keep DIR: also the requests as sent, arrivals.json: (seconds from the first, worker pid)]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import orjson  # noqa: E402

from runner.results import final_rows, results_files  # noqa: E402
from suites.jsonl import prompt_of  # noqa: E402
from tests.helpers import run_args, write_config, write_dataset  # noqa: E402
from tests.mock_openai import MockServer  # noqa: E402
from tests.servers import PgServer, RedisServer  # noqa: E402

KEY_ENV = "BENCH_JOIN_OUTAGE_KEY"


class Redis(RedisServer):
    """tests.servers.RedisServer without its reaper: restarted, it would leave one per process, each
    SIGKILLing its old pid when this script ends, by then perhaps another process's (pids are reused)."""

    def start(self) -> Redis:
        self.sock.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [self.exe, "--port", "0", "--unixsocket", str(self.sock), "--unixsocketperm", "700",
             "--save", "", "--appendonly", "no", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        while not self.sock.exists():
            assert self.proc.poll() is None, "redis-server did not start"
            time.sleep(0.01)
        return self


def _wait_all(procs: list[subprocess.Popen[bytes]], deadline: float) -> None:
    """Every worker's end, or its kill at `deadline` (monotonic): a hung worker ends the bench, not the box."""
    while any(q.poll() is None for q in procs) and time.monotonic() < deadline:
        time.sleep(0.2)
    for q in procs:
        if q.poll() is None:
            q.kill()
            q.wait()


def _gaps(times: list[float], lo: float, hi: float) -> float:
    """The longest stretch in [lo, hi] with no arrival (its ends count as edges)."""
    inside = [t for t in times if lo <= t <= hi]
    edges = [lo, *inside, hi]
    return max((b - a for a, b in zip(edges, edges[1:], strict=False)), default=0.0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--outage", type=float, default=120.0, help="seconds Redis stays down")
    p.add_argument("--workers", type=int, default=6)
    p.add_argument("--cap", type=int, default=4, help="the key's max_concurrency")
    p.add_argument("--latency", type=float, default=1.0, help="the mock's answer time (s)")
    p.add_argument("--before", type=float, default=15.0, help="seconds of sending before Redis is killed")
    p.add_argument("--after", type=float, default=30.0, help="seconds of work left after the restart (at full rate)")
    p.add_argument("--lease", type=float, default=5.0, help="[shared] lease_s")
    p.add_argument("--rpm", type=float, default=6000.0)
    p.add_argument("--freeze", action="store_true", help="SIGSTOP Redis for the outage (its state kept), not kill it")
    p.add_argument("--late", type=int, default=0, help="of the workers, this many start 10 s into the outage")
    p.add_argument("--redis-wait", type=float, help="[shared] redis_wait_s (default: the project's)")
    p.add_argument("--keep", help="keep the run directory and the workers' stderr here")
    p.add_argument("--steady", action="store_true", help="no outage: idle-while-holding, wall vs the cap")
    p.add_argument("--seconds", type=float, default=60.0, help="--steady: seconds of work at the cap")
    a = p.parse_args()
    if a.steady:
        steady(a)
        return

    rate = a.cap / a.latency
    n = int(rate * (a.before + a.outage + a.after))
    pg, redis = PgServer().start(), Redis().start()
    srv = MockServer(latency_s=a.latency).start()
    procs: list[subprocess.Popen[bytes]] = []
    tmp = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="join-outage-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        data = write_dataset(tmp / "d.jsonl", n)
        cfg = write_config(tmp / "c.toml", srv.base_url, ["ok-a"], key_env=KEY_ENV,
                           extra_endpoint=f"max_concurrency = {a.cap}\nrpm = {a.rpm}\n")
        cfg.write_text(cfg.read_text() + f'\n[shared]\ncache_url = "{pg.new_db()}"\nredis_url = "{redis.url}"\n'
                       f"lease_s = {a.lease}\n" + (f"redis_wait_s = {a.redis_wait}\n" if a.redis_wait is not None else ""))
        out = tmp / "run"
        args = run_args(data, "ok-a", cfg, out, "--join")
        errs = [tmp / f"worker{i}.err" for i in range(a.workers)]

        def worker(i: int) -> None:
            env = {**os.environ, KEY_ENV: "join-outage-key", "EVALSWEEP_CACHE_DIR": str(tmp / f"cache-{i}")}
            with errs[i].open("wb") as f:
                procs.append(subprocess.Popen([sys.executable, "-m", "cli", *args], cwd=REPO, env=env,
                                              stdout=subprocess.DEVNULL, stderr=f))

        for i in range(a.workers - a.late):
            worker(i)
        t_start = time.monotonic()
        while not srv.arrivals:
            assert all(q.poll() is None for q in procs), "a worker ended before any request"
            time.sleep(0.05)
        first = srv.arrivals[0][0]
        while time.monotonic() < first + a.before:
            time.sleep(0.05)
        down = time.monotonic()
        assert redis.proc is not None
        os.kill(redis.proc.pid, signal.SIGSTOP) if a.freeze else redis.stop()
        print(f"Redis {'frozen' if a.freeze else 'killed'} {down - first:.1f}s after the first request ({srv.total} requests so far)", flush=True)
        while time.monotonic() < down + a.outage:
            if a.late and len(procs) < a.workers and time.monotonic() > down + 10:
                for i in range(a.workers - a.late, a.workers):
                    worker(i)
            time.sleep(0.2)
        up = time.monotonic()
        os.kill(redis.proc.pid, signal.SIGCONT) if a.freeze else redis.start()
        assert redis.proc is not None
        print(f"Redis {'thawed' if a.freeze else 'restarted'} after {up - down:.1f}s ({srv.total} requests so far)", flush=True)
        deadline = up + 600
        _wait_all(procs, deadline)
        end = time.monotonic()

        times = sorted(t for t, *_ in srv.arrivals)
        last = times[-1]
        (tmp / "arrivals.json").write_bytes(orjson.dumps([t - first for t in times]))
        texts = [e.read_text(errors="replace") for e in errs]
        cap_of = [[int(m) for m in re.findall(r"and at most (\d+) calls at once", t)] for t in texts]
        caps = [c for cs in cap_of for c in cs]
        fell = sum(t.count("pacing locally") for t in texts)
        twice = sum(1 for c in srv.prompts.values() if c > 1)
        rows = list(final_rows(out / "results.jsonl"))
        mine = {f.name.rsplit("-", 1)[-1].split(".")[0]: f for f in results_files(out)}
        per_worker = [sum(1 for _ in mine[str(q.pid)].open("rb")) if str(q.pid) in mine else 0 for q in procs]
        first_after = next((t for t in times if t >= up), None)
        print(f"items {n}, workers {a.workers}, cap {a.cap}, latency {a.latency}s, outage {a.outage:.0f}s, "
              f"lease_s {a.lease}; wall {end - t_start:.0f}s")
        print(f"requests {srv.total} for {n} items; distinct prompts {len(srv.prompts)}; paid twice {twice}; "
              f"final rows {len(rows)} (errors {sum(1 for r in rows if r['error'] is not None)})")
        print(f"most on the wire at once {max(s for _m, _d, s in srv.seen_on_arrival)} (cap {a.cap}); "
              f"429s {srv.rejected_429}")
        print(f"fallbacks {fell}, their caps {sorted(caps)} (sum {sum(caps)}): some worker may send during the "
              f"outage: {sum(caps) > 0}")
        print(f"longest gap: before the outage {_gaps(times, first, down):.2f}s; during it "
              f"{_gaps(times, down, up):.2f}s; restart -> first request "
              f"{(first_after - up) if first_after else float('nan'):.2f}s; after "
              f"{_gaps(times, up, last):.2f}s; whole run {_gaps(times, first, last):.2f}s")
        print(f"requests before/during/after the outage: {sum(1 for t in times if t < down)}/"
              f"{sum(1 for t in times if down <= t < up)}/{sum(1 for t in times if t >= up)}")
        print(f"rows per worker {per_worker}; units handed back {[t.count('handed back') for t in texts]}; "
              f"fallback caps {cap_of}")
        print(f"tracebacks {[t.count('Traceback') for t in texts]}; exit codes {[q.returncode for q in procs]}")
    finally:
        for q in procs:
            if q.poll() is None:
                q.kill()
        srv.stop()
        if redis.proc is not None and redis.proc.poll() is None:
            os.kill(redis.proc.pid, signal.SIGCONT)
        redis.close()
        pg.close()
        print(f"(workers' stderr in {tmp})")


def _held(url: str, stop: threading.Event, log: list[tuple[float, set[str]]]) -> None:
    """Every 0.1 s: which workers (pids) hold a unit not done (what they claimed and did not finish)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        while not stop.is_set():
            try:
                rows = c.execute("SELECT DISTINCT owner FROM evalsweep_units WHERE owner IS NOT NULL "
                                 "AND NOT done AND expires > now()").fetchall()
            except psycopg.errors.UndefinedTable:
                rows = []
            log.append((time.monotonic(), {o.rsplit("-", 2)[1] for (o,) in rows}))
            time.sleep(0.1)


def _below(times: list[float], latency: float, cap: int) -> str:
    """Seconds with fewer than `cap` calls on the wire: before it is first reached (the ramp), after it
    is last left (the tail), and between (gaps in the middle)."""
    edges = sorted([(t, 1) for t in times] + [(t + latency, -1) for t in times])
    spans: list[tuple[float, float]] = []  # (from, to) below the cap
    at_cap: list[float] = []  # when the cap is reached or left
    n, since = 0, edges[0][0]
    for t, d in edges:
        if n < cap and t > since:
            spans.append((since, t))
        if (n + d >= cap) != (n >= cap):
            at_cap.append(t)
        n += d
        since = t
    if not at_cap:
        return "the whole run"
    ramp = sum(min(hi, at_cap[0]) - lo for lo, hi in spans if lo < at_cap[0])
    tail = sum(hi - max(lo, at_cap[-1]) for lo, hi in spans if hi > at_cap[-1])
    return f"ramp {ramp:.1f}s, middle {sum(hi - lo for lo, hi in spans) - ramp - tail:.1f}s, tail {tail:.1f}s"


def steady(a: argparse.Namespace) -> None:
    """No outage: do workers that cannot get a lease of the key sit on units the others could run?"""
    import redis as redis_py

    n = int(a.cap / a.latency * a.seconds)
    pg, rs = PgServer().start(), Redis().start()
    srv = MockServer(latency_s=a.latency).start()
    procs: list[subprocess.Popen[bytes]] = []
    tmp = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="join-steady-"))
    tmp.mkdir(parents=True, exist_ok=True)
    stop, held = threading.Event(), []
    try:
        data = write_dataset(tmp / "d.jsonl", n)
        item_of = {prompt_of(d): d["id"] for d in map(orjson.loads, data.read_bytes().splitlines())}
        url = pg.new_db()
        cfg = write_config(tmp / "c.toml", srv.base_url, ["ok-a"], key_env=KEY_ENV,
                           extra_endpoint=f"max_concurrency = {a.cap}\nrpm = {a.rpm}\n")
        cfg.write_text(cfg.read_text() + f'\n[shared]\ncache_url = "{url}"\nredis_url = "{rs.url}"\n'
                       f"lease_s = {a.lease}\n")
        out = tmp / "run"
        args = run_args(data, "ok-a", cfg, out, "--join")
        errs = [tmp / f"worker{i}.err" for i in range(a.workers)]
        sampler = threading.Thread(target=_held, args=(url, stop, held), daemon=True)
        sampler.start()
        t_start = time.monotonic()
        for i in range(a.workers):
            env = {**os.environ, KEY_ENV: "join-steady-key", "EVALSWEEP_CACHE_DIR": str(tmp / f"cache-{i}")}
            with errs[i].open("wb") as f:
                procs.append(subprocess.Popen([sys.executable, "-m", "cli", *args], cwd=REPO, env=env,
                                              stdout=subprocess.DEVNULL, stderr=f))
        deadline = t_start + 10 * a.seconds + 120
        _wait_all(procs, deadline)
        end = time.monotonic()
        stop.set()
        sampler.join()
        client = redis_py.Redis(unix_socket_path=str(rs.sock))
        stats = client.info("commandstats")
        client.close()
        trips = {k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items() if k != "cmdstat_info"}

        pids = [str(q.pid) for q in procs]
        worker_of = {}  # item -> the pid whose file holds its row
        for f in results_files(out):
            pid = f.name.rsplit("-", 1)[-1].split(".")[0]
            for line in f.read_bytes().splitlines():
                worker_of[orjson.loads(line)["item"]] = pid
        wire: dict[str, list[tuple[float, float]]] = {pid: [] for pid in pids}
        for t, _m, prompt, _n in srv.arrivals:
            pid = worker_of.get(item_of.get(prompt, ""), "")
            if pid in wire:
                wire[pid].append((t, t + a.latency))
        idle = []
        for pid in pids:
            spans = sorted(wire[pid])
            holding = [t for t, owners in held if pid in owners]
            none_on = [t for t in holding if not any(lo <= t <= hi for lo, hi in spans)]
            idle.append((len(none_on) / len(holding) if holding else 0.0, len(holding) / 10))
        times = sorted(t for t, *_ in srv.arrivals)
        wall = times[-1] + a.latency - times[0]
        limit = srv.total * a.latency / a.cap
        twice = sum(1 for c in srv.prompts.values() if c > 1)
        rows = list(final_rows(out / "results.jsonl"))
        calls = max(1, srv.total)
        print(f"items {n}, workers {a.workers}, cap {a.cap}, latency {a.latency}s, lease_s {a.lease}; "
              f"processes' wall {end - t_start:.0f}s")
        print(f"requests {srv.total}; paid twice {twice}; final rows {len(rows)} "
              f"(errors {sum(1 for r in rows if r['error'] is not None)}); most on the wire at once "
              f"{max(s for _m, _d, s in srv.seen_on_arrival)} (cap {a.cap}); 429s {srv.rejected_429}")
        print(f"wall first request -> last answer {wall:.1f}s vs the cap's limit {limit:.1f}s: {wall / limit:.2f}x; "
              "time below the cap: " + _below(times, a.latency, a.cap))
        (tmp / "arrivals.json").write_bytes(orjson.dumps([[t - times[0], worker_of.get(item_of.get(pr, ""), "")]
                                                           for t, _m, pr, _n in srv.arrivals]))
        gap, at = max((b - a_, a_ - times[0]) for a_, b in zip(times, times[1:], strict=False))
        print(f"longest gap with no request sent {gap:.2f}s, {at:.1f}s after the first")
        print("per worker, idle while holding units (share of the time held; seconds held): "
              + ", ".join(f"{s:.2f} ({h:.0f}s)" for s, h in idle)
              + f"; all workers: {sum(s * h for s, h in idle):.1f}s of {sum(h for _s, h in idle):.0f}s held")
        starts = []  # from a worker's first unit held: the run's first request, its own, its last unit let go
        for pid in pids:
            holding = [t for t, owners in held if pid in owners]
            own = min((lo for lo, _hi in wire[pid]), default=None)
            if holding:
                starts.append(f"{times[0] - holding[0]:+.1f}/" + ("-" if own is None else f"{own - holding[0]:+.1f}")
                              + f"/{holding[-1] - holding[0]:.1f}")
        print("per worker, seconds from its first unit held to the run's first request / its own / its last unit "
              "let go: " + ", ".join(starts))
        sent = sum(v for k, v in trips.items() if k in ("evalsha", "eval", "blpop", "ping", "client", "hello",
                                                         "select", "script"))
        print(f"Redis round trips per call {sent / calls:.2f} (evalsha {trips.get('evalsha', 0) / calls:.2f}, "
              f"blpop {trips.get('blpop', 0) / calls:.2f}); all commands per call {sum(trips.values()) / calls:.2f}")
        print(f"rows per worker {[sum(1 for v in worker_of.values() if v == pid) for pid in pids]}; units handed "
              f"back {[e.read_text(errors='replace').count('handed back') for e in errs]}; tracebacks "
              f"{[e.read_text(errors='replace').count('Traceback') for e in errs]}; exit codes "
              f"{[q.returncode for q in procs]}")
    finally:
        stop.set()
        for q in procs:
            if q.poll() is None:
                q.kill()
        srv.stop()
        rs.close()
        pg.close()
        print(f"(workers' stderr in {tmp})")


if __name__ == "__main__":
    main()
