"""bench/shared_limits.py's TPM mode (#40 item 4): a heavy-tailed workload on one TPM-capped key, no server
(the budget is what is measured): one process on a LocalBudget, then 1 and 2 processes sharing the key
through Redis; wall time against tokens/TPM, TPM used while calls wait, and the 429s the key would send."""

from __future__ import annotations

import asyncio
import time

from bench.shared_limits_common import budget_lane, close_budget, ready_then_start, spawn_workers
from tests.helpers import key_refusals


def _usage(i: int, charge: int) -> int:
    """Heavy-tailed usage: 1 call in 8 uses all it was charged, the others a tenth of it."""
    return charge if i % 8 == 0 else charge // 10


async def worker(spec: dict) -> dict:
    """One process on a TPM-capped key: its share of the calls (indexes `first`, `first + step`, ...),
    all queued at the start, each through a Lane (charged `charge`, expected to use it) taking `latency`
    s and settled at its answer with its real usage. Returns each call's admission and answer (wall
    clock), charge and usage."""
    charge = spec["charge"]
    b, lane = await budget_lane(spec, None, spec["tpm"])  # on the key from now
    start = await ready_then_start()
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
    trips = b.calls + getattr(getattr(b, "_tpm", None), "calls", 0) if spec["url"] else 0
    await close_budget(b, spec)
    return {"events": events, "start": start, "trips": trips}


def tpm_runs(url: str, tpm: float, calls: int, charge: int, cap: int, latency: float) -> None:
    """The same heavy-tailed workload on a LocalBudget alone, then on 1 and 2 processes sharing a key."""
    key = f"t{time.time_ns()}"
    ideal = sum(_usage(i, charge) for i in range(calls)) / (tpm / 60)
    print(f"--- TPM {tpm:g}, {calls} calls charged {charge} tokens (usage: 1 in 8 all, else a tenth), "
          f"{latency * 1e3:.0f} ms each, cap {cap} a process: total tokens / TPM = {ideal:.2f} s")
    for name, url_, k in (("local, 1 process", None, 1), ("redis, 1 process", url, 1), ("redis, 2 processes", url, 2)):
        specs = [{"url": url_, "key": f"{key}-{k}", "tpm": tpm, "cap": cap, "charge": charge, "calls": calls,
                  "first": i, "step": k, "latency": latency} for i in range(k)]
        outs = spawn_workers(specs, "--tpm-worker")
        events = [e for o in outs for e in o["events"]]
        t0 = outs[0]["start"]
        wall = max(e[1] for e in events) - t0
        busy = max(e[0] for e in events) - t0  # calls waited until the last admission
        used = sum(e[3] for e in events if e[0] - t0 <= busy)
        trips = sum(o["trips"] for o in outs) / len(events)
        print(f"{name:>20}: wall {wall:.2f} s = {wall / ideal:.2f} x tokens/TPM, TPM used while calls wait "
              f"{used / max(busy, 1e-9) / (tpm / 60):.2f}, 429s {key_refusals(events, tpm, slack=0.999)}"
              + (f", script calls/call {trips:.2f}" if url_ else ""), flush=True)
