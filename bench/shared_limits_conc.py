"""bench/shared_limits.py's concurrency modes (#40): `--busy-idle N` (1 busy process beside N idle ones on
a key's cap) and `--join K` (K busy processes on it), each process a Lane on the shared budget whose calls
take a fixed latency (no server), beside the busy workload alone on a LocalBudget and alone on Redis."""

from __future__ import annotations

import asyncio
import time

from bench.shared_limits_common import budget_lane, close_budget, ready_then_start, spawn_workers

WARM_S = 1.0  # the processes' figures are from this long after their start


async def worker(spec: dict) -> dict:
    """One process on the key: `busy` keeps 2 x cap calls waiting or running for `seconds` (from the
    wall-clock `start`), each taking `latency` s; an idle one holds the key open (heartbeats) and sends
    nothing. Measures calls, time with calls waiting and none running, CPU and script calls."""
    cap, latency = spec["cap"], spec["latency"]
    b, lane = await budget_lane(spec, spec["rpm"], None)
    if spec["url"]:  # on the key from now: its heartbeat keeps it there
        b._kick()
    start = await ready_then_start()  # the parent sends the start once every process is ready
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
    await close_budget(b, spec)
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


def processes(url: str, busy: int, idle: int, cap: int, latency: float, seconds: float, rpm: float) -> None:
    """`busy` busy processes and `idle` idle ones on one Redis-shared key capped at `cap`, beside the
    busy workload alone on a LocalBudget and alone on Redis, in this run."""
    import redis

    client = redis.Redis.from_url(url)
    key = f"k{time.time_ns()}"

    def spec(busy_: bool, url_: str | None, k: str) -> dict:
        return {"busy": busy_, "url": url_, "key": k, "cap": cap, "latency": latency, "seconds": seconds,
                "rpm": rpm}

    (local,) = spawn_workers([spec(True, None, key)])
    t0, n0, s0 = _commands(client)
    (alone,) = spawn_workers([spec(True, url, key + "-alone")])
    t1, n1, s1 = _commands(client)
    alone_cmd = f"{(t1 - t0) / max(1, alone['calls_all']):.2f} ({(n1 - n0) / max(1, alone['calls_all']):.2f} with scripts')"
    rs = spawn_workers([spec(True, url, key)] * busy + [spec(False, url, key)] * idle)
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
