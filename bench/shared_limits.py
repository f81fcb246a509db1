"""Shared key budgets: K = 1, 2, 4 processes on one API key, with and without `[shared] redis_url`.

Each configuration starts K `evalsweep run` processes at once, each with its own dataset and each
configured with the key's full RPM, against the mock server (its own process) enforcing that RPM over
sliding 1-second windows; each has enough work to fill the key alone for --seconds. Printed side by
side: achieved rate / limit over the span when all K were sending, 429s received, and CPU per call. The CPU the Redis round trips add is the K=1 difference
(one process paces itself right either way, so neither has 429s to retry). Targets: >= 95% of the
limit, 0 x 429, <= 0.1 ms extra CPU per call.

    python bench/shared_limits.py [--rpm 12000] [--seconds 10] [--ks 1,2,4]

Concurrency on one key across processes (#40), each process a Lane on the shared budget whose calls
take --latency s (no server: the budget is what is measured), beside the same workload alone on the
key in the same run (its single-process figure):

    python bench/shared_limits.py --busy-idle 7 --cap 8     1 busy process beside 7 idle ones (they
        hold the key open and heartbeat, sending nothing): the busy one's calls/s over its rate alone
    python bench/shared_limits.py --join 6 --cap 4          6 busy processes (--join workers) on a cap
        of 4: each one's calls/s and share of time idle while it holds work (calls waiting, none on
        the wire), the key's leases in use while any process waits

Each prints Redis commands per API call (INFO commandstats before/after, every process's) and the
Redis path's CPU per call (the busy processes' CPU per call on Redis minus on a LocalBudget alone).

TPM on one key across processes (#40 item 4), no server (the budget is what is measured):

    python bench/shared_limits.py --tpm 600000 [--calls 160]
        one fixed workload of calls each charged --charge tokens at admission (prompt + max_tokens) whose
        usage is heavy-tailed (1 in 8 uses all of it, the others a tenth): one process on a LocalBudget,
        then K = 1, 2 processes on one Redis-shared key (the work split between them), in one run. Printed:
        wall / (total tokens used / TPM), the share of the TPM used while calls wait, and the 429s the
        key would have sent (its bucket, a second deep, replayed from every process's admissions and
        answers: charged at admission, settled at the answer), and Redis script calls per API call. (TPM
        used may pass 1 on a short run: every account starts with a full bucket, a second of the TPM.)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import orjson  # noqa: E402

from bench.throughput import start_mock, stop_mock  # noqa: E402
from tests.helpers import spawn  # noqa: E402
from tests.servers import RedisServer  # noqa: E402

WARM_S = 1.0  # the processes' figures are from this long after their start


def write_inputs(d: Path, i: int, n: int, port: int, rpm: float, redis_url: str | None) -> tuple[Path, Path]:
    data = d / f"data{i}.jsonl"
    with data.open("wb") as f:
        for j in range(n):
            f.write(orjson.dumps({"id": f"q{j}", "prompt": f"[p{i}] Question {j}?", "answer": "A"}) + b"\n")
    cfg = d / f"c{i}.toml"
    shared = f'\n[shared]\nredis_url = "{redis_url}"\n' if redis_url else ""
    cfg.write_text(
        f'[[endpoints]]\nname = "mock"\nbase_url = "http://127.0.0.1:{port}/v1"\napi_key_env = "BENCH_KEY"\n'
        f'rpm = {rpm}\ntpm = 1e12\nmax_concurrency = 64\n\n[[models]]\nname = "ok-bench"\nendpoint = "mock"\n'
        f"price_in = 1.0\nprice_out = 2.0\n{shared}"
    )
    return data, cfg


def stats(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as r:
        return orjson.loads(r.read())


def one(k: int, rpm: float, seconds: float, redis_url: str | None, per: int | None = None) -> dict:
    mock, port = start_mock(rpm, 0.01)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            per = per or max(1, int(rpm / 60 * seconds))  # each alone could fill the key for `seconds`
            env = {
                **os.environ,
                "BENCH_KEY": "bench-key",
                "EVALSWEEP_CACHE_DIR": str(d / "cache"),
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            }
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            procs = []
            for i in range(k):
                data, cfg = write_inputs(d, i, per, port, rpm, redis_url)
                args = ["run", f"jsonl:{data}", "--models", "ok-bench", "--config", str(cfg)]
                args += ["--out", str(d / f"run{i}"), "--no-live", "--no-cache"]
                procs.append(spawn(args, env))
            for p in procs:
                _, err = p.communicate(timeout=seconds * 20 + 120)
                if p.returncode != 0:
                    raise SystemExit(f"run failed ({p.returncode}): {err[-2000:]}")
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            times = [
                [orjson.loads(x)["t"] for x in (d / f"run{i}" / "results.jsonl").read_bytes().splitlines() if x]
                for i in range(k)
            ]
            n_ok = sum(map(len, times))
            # over the span when all K were sending (start-up skew excluded): every answer in it
            lo, hi = max(min(ts) for ts in times), min(max(ts) for ts in times)
            inside = sum(lo <= t <= hi for ts in times for t in ts)
            span_rate = (inside - 1) / (hi - lo) if hi - lo > 1.0 else float("nan")
            st = stats(port)
            return {
                "k": k,
                "shared": bool(redis_url),
                "calls": n_ok,
                "sent": st["total"],
                "r429": st["rejected_429"],
                "util": span_rate / (rpm / 60),
                "cpu_per_call_ms": cpu / n_ok * 1000,
                "cpu_s": cpu,
            }
    finally:
        stop_mock(mock)


async def _admit_many(b: object, n: int = 2000, conc: int = 64) -> tuple[float, float]:
    """CPU us per call and calls/s through a Lane on budget `b` (each call sleeps 10 ms)."""
    import asyncio

    sem = asyncio.Semaphore(conc)

    from runner.config import Endpoint
    from runner.lanes import Lane

    lane = Lane(Endpoint(name="bench", kind="sim"), None, None, provider=None)
    lane.budget = b

    async def noop() -> None:
        await asyncio.sleep(0.01)

    async def one() -> None:
        async with sem:
            await lane.call(noop, 0)

    t0, w0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return (time.process_time() - t0) / n * 1e6, n / (time.perf_counter() - w0)


def in_process(redis_url: str) -> None:
    """The same admissions through the local budget and the Redis one, in one process: the CPU
    difference is what the shared budget costs per call, without process start-up noise."""
    import asyncio

    import redis.asyncio as aioredis

    from runner.budgets.redis import RedisBudget, lane_id
    from runner.lanes import LocalBudget

    async def go() -> None:
        for rpm in (12000, 60000):
            lo = await _admit_many(LocalBudget(rpm, None, 64))
            rb = RedisBudget(aioredis.Redis.from_url(redis_url), lane_id("bench", str(rpm)), "bench", rpm, None, 64,
                             5.0, local_factory=LocalBudget)
            sh = await _admit_many(rb)
            await rb.aclose()
            print(f"in-process at {rpm:g} RPM: local {lo[0]:.0f} us/call ({lo[1]:.0f}/s), redis {sh[0]:.0f} us/call "
                  f"({sh[1]:.0f}/s, {rb.calls} round trips): +{sh[0] - lo[0]:.0f} us per call")

    asyncio.run(go())


async def _worker(spec: dict) -> dict:
    """One process on the key: `busy` keeps 2 x cap calls waiting or running for `seconds` (from the
    wall-clock `start`), each taking `latency` s; an idle one holds the key open (heartbeats) and sends
    nothing. Measures calls, time with calls waiting and none running, CPU and script calls."""
    from runner.budgets.redis import RedisBudget, lane_id
    from runner.budgets.redis_call import connect
    from runner.config import Endpoint
    from runner.lanes import Lane, LocalBudget

    cap, latency = spec["cap"], spec["latency"]
    if spec["url"]:
        b: object = RedisBudget(connect(spec["url"]), lane_id("bench", spec["key"]), "bench", spec["rpm"], None, cap,
                                5.0, local_factory=LocalBudget)
    else:
        b = LocalBudget(spec["rpm"], None, cap)
    lane = Lane(Endpoint(name="bench", kind="sim"), None, None, provider=None)
    lane.budget = b
    if spec["url"]:  # on the key from now: its heartbeat keeps it there
        async with b._call.lock:  # type: ignore[attr-defined]
            await b._eval(0)  # type: ignore[attr-defined]
        b._kick()  # type: ignore[attr-defined]
    print("ready", flush=True)  # the parent sends the start (wall clock) once every process is ready
    start = float(await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline))
    await asyncio.sleep(max(0.0, start - time.time()))
    end = start + spec["seconds"]
    st = {"calls": 0, "running": 0, "idle_s": 0.0, "idle_from": time.monotonic()}

    async def call() -> None:
        if st["running"] == 0:
            st["idle_s"] += time.monotonic() - st["idle_from"]
        st["running"] += 1
        try:
            await asyncio.sleep(latency)
        finally:
            st["running"] -= 1
            st["calls"] += 1
            if st["running"] == 0:
                st["idle_from"] = time.monotonic()

    async def loop() -> None:
        while time.time() < end:
            await lane.call(call, 0)

    mark: dict = {}

    async def warm() -> None:  # measured from WARM_S on: lazy imports and the first grants left out
        await asyncio.sleep(WARM_S)
        if st["running"] == 0:
            st["idle_s"] += time.monotonic() - st["idle_from"]
            st["idle_from"] = time.monotonic()
        mark.update(t=time.monotonic(), cpu=time.process_time(), calls=st["calls"], idle=st["idle_s"],
                    script=getattr(b, "calls", 0))

    if spec["busy"]:
        await asyncio.gather(warm(), *(loop() for _ in range(2 * cap)))
        if st["running"] == 0:
            st["idle_s"] += time.monotonic() - st["idle_from"]
    else:
        await asyncio.gather(warm(), asyncio.sleep(max(0.0, end - time.time())))
    wall, cpu = time.monotonic() - mark["t"], time.process_time() - mark["cpu"]
    calls_all = st["calls"]  # (Redis's command counts cover the whole run)
    st["calls"] -= mark["calls"]
    st["idle_s"] -= mark["idle"]
    script_calls = getattr(b, "calls", 0) - mark["script"]
    if spec["url"]:
        await b.aclose()  # type: ignore[attr-defined]
        await b.client.aclose()  # type: ignore[attr-defined]
    return {"busy": spec["busy"], "calls": st["calls"], "calls_all": calls_all, "wall": wall, "idle_share": st["idle_s"] / wall,
            "cpu_s": cpu, "script_calls": script_calls}


_SENT_BY_CLIENTS = {"evalsha", "eval", "evalsha_ro", "eval_ro", "script", "blpop", "brpop", "subscribe",
                    "unsubscribe", "ping", "client", "hello", "select"}


def _commands(client: object) -> tuple[int, int, float]:
    """Commands Redis ran: those clients sent (round trips: a script call is one), all of them (the
    commands scripts ran included; INFO left out), and its CPU seconds so far."""
    stats = client.info("commandstats")  # type: ignore[attr-defined]
    trips = sum(v["calls"] for k, v in stats.items() if k.removeprefix("cmdstat_") in _SENT_BY_CLIENTS)
    n = sum(v["calls"] for k, v in stats.items() if k != "cmdstat_info")
    cpu = client.info("cpu")  # type: ignore[attr-defined]
    return trips, n, cpu["used_cpu_user"] + cpu["used_cpu_sys"]


def _spawn_workers(specs: list[dict], kind: str = "--worker") -> list[dict]:
    procs = [subprocess.Popen([sys.executable, __file__, kind, orjson.dumps(s).decode()], cwd=REPO,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
             for s in specs]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    start = f"{time.time() + 0.5}\n"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(start)
        p.stdin.flush()
    out = []
    for p in procs:
        so, _ = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"worker failed ({p.returncode})")
        out.append(orjson.loads(so.splitlines()[-1]))
    return out


def processes(url: str, busy: int, idle: int, cap: int, latency: float, seconds: float, rpm: float) -> None:
    """`busy` busy processes and `idle` idle ones on one Redis-shared key capped at `cap`, beside the
    busy workload alone on a LocalBudget and alone on Redis, in this run."""
    import redis

    client = redis.Redis.from_url(url)
    key = f"k{time.time_ns()}"

    def spec(busy_: bool, url_: str | None, k: str) -> dict:
        return {"busy": busy_, "url": url_, "key": k, "cap": cap, "latency": latency, "seconds": seconds,
                "rpm": rpm}

    (local,) = _spawn_workers([spec(True, None, key)])
    t0, n0, s0 = _commands(client)
    (alone,) = _spawn_workers([spec(True, url, key + "-alone")])
    t1, n1, s1 = _commands(client)
    alone_cmd = f"{(t1 - t0) / max(1, alone['calls_all']):.2f} ({(n1 - n0) / max(1, alone['calls_all']):.2f} with scripts')"
    rs = _spawn_workers([spec(True, url, key)] * busy + [spec(False, url, key)] * idle)
    t2, n2, s2 = _commands(client)
    client.close()
    rate = {"local": local["calls"] / local["wall"], "alone": alone["calls"] / alone["wall"]}
    cpu_local = local["cpu_s"] / max(1, local["calls"]) * 1e3
    print(f"--- {busy} busy + {idle} idle on a key capped at {cap}, calls of {latency * 1e3:.0f} ms, {seconds:g} s")
    print(f"alone, local budget: {rate['local']:.1f} calls/s, idle share {local['idle_share']:.3f}, "
          f"CPU/call {cpu_local:.3f} ms")
    print(f"alone, on Redis:     {rate['alone']:.1f} calls/s, idle share {alone['idle_share']:.3f}, "
          f"CPU/call {alone['cpu_s'] / max(1, alone['calls']) * 1e3:.3f} ms "
          f"(Redis path +{alone['cpu_s'] / max(1, alone['calls']) * 1e3 - cpu_local:.3f} ms), "
          f"Redis commands/call {alone_cmd}")
    total = sum(r["calls_all"] for r in rs)
    for i, r in enumerate(rs):
        if not r["busy"]:
            continue
        cps = r["calls"] / r["wall"]
        print(f"  process {i}: {cps:.1f} calls/s ({cps / rate['alone']:.2f} of alone on Redis), idle while "
              f"holding work {r['idle_share']:.3f}, script calls/call {r['script_calls'] / max(1, r['calls']):.2f}, "
              f"Redis path CPU/call +{r['cpu_s'] / max(1, r['calls']) * 1e3 - cpu_local:.3f} ms")
    idle_cmds = sum(r["script_calls"] for r in rs if not r["busy"])
    together = sum(r["calls"] / r["wall"] for r in rs)
    print(f"  together: {together:.1f} calls/s ({together / (cap / latency):.2f} of the cap's "
          f"{cap / latency:.0f}/s); Redis commands/call {(t2 - t1) / max(1, total):.2f} "
          f"({(n2 - n1) / max(1, total):.2f} with scripts'; idle processes' script calls "
          f"{idle_cmds}); redis-server CPU/call {(s2 - s1) / max(1, total) * 1e3:.3f} ms", flush=True)


def _usage(i: int, charge: int) -> int:
    """Heavy-tailed usage: 1 call in 8 uses all it was charged, the others a tenth of it."""
    return charge if i % 8 == 0 else charge // 10


async def _tpm_worker(spec: dict) -> dict:
    """One process on a TPM-capped key: its share of the calls (indexes `first`, `first + step`, ...),
    all queued at the start, each through a Lane (charged `charge`, expected to use it) taking `latency`
    s and settled at its answer with its real usage. Returns each call's admission and answer (wall
    clock), charge and usage."""
    from runner.budgets.redis import RedisBudget, lane_id
    from runner.budgets.redis_call import connect
    from runner.config import Endpoint
    from runner.lanes import Lane, LocalBudget

    cap, charge, tpm = spec["cap"], spec["charge"], spec["tpm"]
    if spec["url"]:
        b: object = RedisBudget(connect(spec["url"]), lane_id("bench", spec["key"]), "bench", None, tpm, cap, 5.0,
                                local_factory=LocalBudget)
    else:
        b = LocalBudget(None, tpm, cap)
    lane = Lane(Endpoint(name="bench", kind="sim"), None, None, provider=None)
    lane.budget = b
    if spec["url"]:  # on the key from now
        async with b._call.lock:  # type: ignore[attr-defined]
            await b._eval(0)  # type: ignore[attr-defined]
    print("ready", flush=True)
    start = float(await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline))
    await asyncio.sleep(max(0.0, start - time.time()))
    events: list[list[float]] = []

    async def one(i: int) -> None:
        used = _usage(i, charge)
        ev: list[float] = []

        async def call() -> None:
            ev.append(time.time())
            await asyncio.sleep(spec["latency"])
            ev.append(time.time())

        await lane.call(call, charge, None, charge)
        lane.reconcile(charge, used, charge)
        events.append([*ev, charge, used])

    await asyncio.gather(*(one(i) for i in range(spec["first"], spec["calls"], spec["step"])))
    trips = b.calls + getattr(getattr(b, "_tpm", None), "calls", 0) if spec["url"] else 0  # type: ignore[attr-defined]
    if spec["url"]:
        await b.aclose()  # type: ignore[attr-defined]
        await b.client.aclose()  # type: ignore[attr-defined]
    return {"events": events, "start": start, "trips": trips}


def _key_refusals(events: list[list[float]], tpm: float) -> int:
    """Calls the key would refuse: its bucket (a second of its TPM deep, full at the start) charges a call
    at admission and settles it at the answer; a call finding less than its charge is refused."""
    per_s = tpm / 60
    moves = sorted([(a, 0, c, u) for a, _, c, u in events] + [(z, 1, c, u) for _, z, c, u in events])
    level, t, refused = per_s, moves[0][0], 0
    for at, kind, c, u in moves:
        level, t = min(per_s, level + (at - t) * per_s), at
        if kind == 0:
            if level < c * 0.999:
                refused += 1
            level -= c
        else:
            level += c - u
    return refused


def tpm_runs(url: str, tpm: float, calls: int, charge: int, cap: int, latency: float) -> None:
    """The same heavy-tailed workload on a LocalBudget alone, then on 1 and 2 processes sharing a key."""
    key = f"t{time.time_ns()}"
    ideal = sum(_usage(i, charge) for i in range(calls)) / (tpm / 60)
    print(f"--- TPM {tpm:g}, {calls} calls charged {charge} tokens (usage: 1 in 8 all, else a tenth), "
          f"{latency * 1e3:.0f} ms each, cap {cap} a process: total tokens / TPM = {ideal:.2f} s")
    for name, url_, k in (("local, 1 process", None, 1), ("redis, 1 process", url, 1), ("redis, 2 processes", url, 2)):
        specs = [{"url": url_, "key": f"{key}-{k}", "tpm": tpm, "cap": cap, "charge": charge, "calls": calls,
                  "first": i, "step": k, "latency": latency} for i in range(k)]
        outs = _spawn_workers(specs, "--tpm-worker")
        events = [e for o in outs for e in o["events"]]
        t0 = outs[0]["start"]
        wall = max(e[1] for e in events) - t0
        busy = max(e[0] for e in events) - t0  # calls waited until the last admission
        used = sum(e[3] for e in events if e[0] - t0 <= busy)
        trips = sum(o["trips"] for o in outs) / len(events)
        print(f"{name:>20}: wall {wall:.2f} s = {wall / ideal:.2f} x tokens/TPM, TPM used while calls wait "
              f"{used / max(busy, 1e-9) / (tpm / 60):.2f}, 429s {_key_refusals(events, tpm)}"
              + (f", script calls/call {trips:.2f}" if url_ else ""), flush=True)


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] in ("--worker", "--tpm-worker"):
        worker = _worker if sys.argv[1] == "--worker" else _tpm_worker
        print(orjson.dumps(asyncio.run(worker(orjson.loads(sys.argv[2])))).decode())
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rpm", type=float, default=12000)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--ks", default="1,2,4")
    ap.add_argument("--busy-idle", type=int, metavar="N", help="1 busy process beside N idle ones")
    ap.add_argument("--join", type=int, metavar="K", help="K busy processes on one key")
    ap.add_argument("--cap", type=int, default=8, help="the key's max_concurrency (--busy-idle, --join)")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per call (--busy-idle, --join, --tpm)")
    ap.add_argument("--tpm", type=float, help="the key's TPM: the heavy-tailed TPM workload")
    ap.add_argument("--calls", type=int, default=160, help="calls of the --tpm workload")
    ap.add_argument("--charge", type=int, default=1000, help="tokens each --tpm call is charged at admission")
    a = ap.parse_args()
    if a.tpm is not None:
        redis = RedisServer().start()
        try:
            tpm_runs(redis.url, a.tpm, a.calls, a.charge, 16, a.latency)
        finally:
            redis.close()
        return
    if a.busy_idle is not None or a.join is not None:
        redis = RedisServer().start()
        try:
            if a.busy_idle is not None:
                processes(redis.url, 1, a.busy_idle, a.cap, a.latency, a.seconds, 600_000)
            if a.join is not None:
                processes(redis.url, a.join, 0, a.cap, a.latency, a.seconds, 600_000)
        finally:
            redis.close()
        return
    redis = RedisServer().start()
    try:
        results = []
        for k in [int(x) for x in a.ks.split(",")]:
            for url in (None, redis.url):
                time.sleep(0.5)
                r = one(k, a.rpm, a.seconds, url)
                results.append(r)
                print(
                    f"K={r['k']} {'shared' if r['shared'] else 'local '}: {r['calls']} calls, achieved/limit "
                    f"{r['util']:.3f}, 429s {r['r429']}, sent {r['sent']}, CPU/call {r['cpu_per_call_ms']:.3f} ms",
                    flush=True,
                )
        # process start-up (imports, connecting) is most of a short run's CPU: measure it with 1-call
        # runs and take it out, so the difference is the per-call cost of the Redis round trips
        base = {url is not None: one(1, a.rpm, a.seconds, url, per=1)["cpu_s"] for url in (None, redis.url)}
        in_process(redis.url)
    finally:
        redis.close()
    by = {(r["k"], r["shared"]): r for r in results}
    if (1, False) in by and (1, True) in by:
        sh, lo = by[(1, True)], by[(1, False)]
        extra = ((sh["cpu_s"] - base[True]) - (lo["cpu_s"] - base[False])) / sh["calls"] * 1000
        print(
            f"start-up CPU: {base[False]:.2f} s local, {base[True]:.2f} s shared; extra CPU per call from the "
            f"Redis round trips (K=1, shared - local, start-up removed): {extra:.3f} ms"
        )


if __name__ == "__main__":
    main()
