"""bench/shared_limits.py's TPM mode (#40 item 4): a heavy-tailed workload on one TPM-capped key, no server
(the budget is what is measured): one process on a LocalBudget, then 1 and 2 processes sharing the key
through Redis; wall time against tokens/TPM, TPM used while calls wait, and the 429s the key would send.
Then a reasoning workload (`REASONING`: each call expected to use 1.5 x its admission charge, the rest held in
flight until its answer settles it) on a LocalBudget and on 1, 2, 4 processes; and each run's CPU per call.

Why a run's 429s came (the reasoning workload on K processes, each process's TPM script calls traced):

    python -m bench.shared_limits_tpm --diagnose 4 [--runs 3]     (from the repo's root)

prints each call the key would refuse (uncascaded): its process, the key's level then, the account's as its
admission's reply said, how long after that admission it was sent, and the settlements the key counted
before it that Redis heard only after its admission."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.shared_limits_common import budget_lane, close_budget, ready_then_start, spawn_workers
from tests.helpers import key_refusals

REASONING = (1.5, (0.3, 0.5, 2.0, 3.2))
"""The reasoning workload: calls expected to use 1.5 x their admission charge (prompt + max_tokens: the
reasoning is settled at the answer), using in turn 0.3, 0.5, 2 and 3.2 x it (quick answers' credits beside
long reasoning's debts), each taking 10 x --latency (2 s: answers of seconds, ~13 calls in flight on the key,
each holding its rest while the TPM binds)."""


def _usage(i: int, charge: int, mix: tuple[float, tuple[float, ...]] | None = None) -> int:
    """Heavy-tailed usage: 1 call in 8 uses all it was charged, the others a tenth of it; with `mix`
    (expected / charge, usages / charge in turn), the i-th of its usages."""
    if mix:
        return int(mix[1][i % len(mix[1])] * charge)
    return charge if i % 8 == 0 else charge // 10


def _expected(charge: int, mix: tuple[float, tuple[float, ...]] | None) -> int:
    """What a call is expected to use: its rest beyond the charge is held in flight (`LocalBudget._owed`)."""
    return int(mix[0] * charge) if mix else charge


def _refused_alone(calls: list, tpm: float, slack: float = 0.999) -> int:
    """`key_refusals`' replay, but a call the key refuses is charged nothing and its answer settles nothing
    (as a real key does: the call is retried later): one refusal does not cascade into the next calls'
    as the replay's debt (which charges it anyway) does, so this counts the moments the account let a
    call through that the key's bucket did not hold."""
    per_s = tpm / 60
    moves = sorted([(t0, 0, i) for i, (t0, _, _, _) in enumerate(calls)]
                   + [(t1, 1, i) for i, (_, t1, _, _) in enumerate(calls)])
    level, at, refused, out = per_s, moves[0][0], 0, set()
    for t, kind, i in moves:
        level, at = min(per_s, level + (t - at) * per_s), t
        c, u = calls[i][2], calls[i][3]
        if kind == 0:
            if level < c * slack:
                refused += 1
                out.add(i)
            else:
                level -= c
        elif i not in out:
            level += c - u
    return refused


async def worker(spec: dict) -> dict:
    """One process on a TPM-capped key: its share of the calls (indexes `first`, `first + step`, ...),
    all queued at the start, each through a Lane (charged `charge`, expected to use `_expected`) taking `latency`
    s and settled at its answer with its real usage. Returns each call's admission and answer (wall
    clock), charge and usage, and the process's CPU seconds over its calls."""
    charge, mix = spec["charge"], spec.get("mix")
    expect = _expected(charge, mix)
    b, lane = await budget_lane(spec, spec.get("rpm"), spec["tpm"])  # on the key from now
    start = await ready_then_start()
    events: list[list[float]] = []
    trace = _trace(b) if spec.get("trace") else None
    cpu = time.process_time()

    async def one(i: int) -> None:
        used = _usage(i, charge, mix)
        ev: list[float] = []

        async def call() -> None:
            ev.append(time.time())
            await asyncio.sleep(spec["latency"])
            ev.append(time.time())

        await lane.call(call, expect, None, charge)
        lane.reconcile(expect, used, charge)
        events.append([*ev, charge, used] + ([trace[1].get(asyncio.current_task(), -1)] if trace else []))

    await asyncio.gather(*(one(i) for i in range(spec["first"], spec["calls"], spec["step"])))
    cpu = time.process_time() - cpu
    tpm_trips = getattr(getattr(b, "_tpm", None), "calls", 0) if spec["url"] else 0
    trips = b.calls + tpm_trips if spec["url"] else 0
    await close_budget(b, spec)
    return {"events": events, "start": start, "trips": trips, "tpm_trips": tpm_trips, "cpu": cpu, **({"trace": trace[0]} if trace else {})}


def _trace(b: Any) -> tuple[list[list[Any]], dict[Any, int]]:
    """--trace (the 429s' diagnosis): each TPM script call of this process as [sent, answered (wall clock),
    credit sent, level after, hold, numbers of the calls it admitted], and each task's call number."""
    acc = b._tpm
    calls: list[list[Any]] = []
    mine: dict[Any, int] = {}
    script, take = acc._script, acc.take

    async def traced(keys: list[str], args: list[Any]) -> Any:
        s = time.time()
        res = await script(keys=keys, args=args)
        calls.append([s, time.time(), args[4], float(res[1]), float(res[2]),
                      [int((m.decode() if isinstance(m, bytes) else m).split("|")[1]) for m in res[3]]])
        return res

    async def taking(*a: Any) -> None:
        mine[asyncio.current_task()] = acc._n + 1  # (its queue entry's number: take makes it before it waits)
        await take(*a)

    acc._script, acc.take = traced, taking
    return calls, mine


RPM_QUEUE = (1.0, (1.0,))
"""--tpm-rpm's workload: each call uses what it was charged (nothing settled back), the key's RPM binding first."""


def rpm_queue_runs(url: str, tpm: float, rpm: float, calls: int, charge: int, cap: int, latency: float) -> None:
    """A key whose calls queue for their RPM slots (all queued at the start, --cap a process taking their tokens
    first) while their tokens use rpm x charge / TPM of the TPM (over half): the RPM binds, so the wall is
    calls / RPM unless the TPM account charges calls twice (a call sent STALE_S after its admission, on main,
    was: its tokens then bound at ~2x their use). Printed: wall / (calls / RPM), the 429s for tokens the key
    would send, script calls per API call."""
    key = f"q{time.time_ns()}"
    ideal = calls / (rpm / 60)
    print(f"--- TPM {tpm:g}, RPM {rpm:g}, {calls} calls charged and using {charge} tokens ({rpm * charge / tpm:.2f} of "
          f"the TPM at the RPM), {latency * 1e3:.0f} ms each, cap {cap} a process: calls / RPM = {ideal:.2f} s")
    for name, url_, k in (("local, 1 process", None, 1), *((f"redis, {k} process" + "es" * (k > 1), url, k)
                                                            for k in (1, 2, 4))):
        specs = [{"url": url_, "key": f"{key}-{k}", "tpm": tpm, "rpm": rpm, "cap": cap, "charge": charge,
                  "calls": calls, "first": i, "step": k, "latency": latency, "mix": RPM_QUEUE} for i in range(k)]
        outs = spawn_workers(specs, "--tpm-worker")
        events = [e for o in outs for e in o["events"]]
        wall = max(e[1] for e in events) - outs[0]["start"]
        trips = sum(o["trips"] for o in outs) / len(events)
        tpm_trips = sum(o.get("tpm_trips", 0) for o in outs) / len(events)
        cpu = sum(o["cpu"] for o in outs) / len(events) * 1e3
        print(f"{name:>20}: wall {wall:.2f} s = {wall / ideal:.2f} x calls/RPM, 429s for tokens "
              f"{key_refusals(events, tpm, slack=0.999)} ({_refused_alone(events, tpm)} uncascaded), CPU/call "
              f"{cpu:.3f} ms" + (f", script calls/call {trips:.2f} ({tpm_trips:.2f} TPM)" if url_ else ""), flush=True)


def tpm_runs(url: str, tpm: float, calls: int, charge: int, cap: int, latency: float) -> None:
    """The same heavy-tailed workload on a LocalBudget alone, then on 1 and 2 processes sharing a key; then
    a reasoning one (each call's rest held in flight: what the account holds for it) on 1, 2 and 4."""
    _runs(url, tpm, calls, charge, cap, latency, None, (1, 2))
    _runs(url, tpm, calls, charge, cap, 10 * latency, REASONING, (1, 2, 4))


def _runs(url: str, tpm: float, calls: int, charge: int, cap: int, latency: float,
          mix: tuple[float, tuple[float, ...]] | None, ks: tuple[int, ...]) -> None:
    key = f"t{time.time_ns()}"
    ideal = sum(_usage(i, charge, mix) for i in range(calls)) / (tpm / 60)
    said = (f"expected {_expected(charge, mix)}, usage {'/'.join(f'{u:g}' for u in mix[1])} x the charge in turn"
            if mix else "usage: 1 in 8 all, else a tenth")
    print(f"--- TPM {tpm:g}, {calls} calls charged {charge} tokens ({said}), "
          f"{latency * 1e3:.0f} ms each, cap {cap} a process: total tokens / TPM = {ideal:.2f} s")
    for name, url_, k in (("local, 1 process", None, 1), *((f"redis, {k} process" + "es" * (k > 1), url, k)
                                                            for k in ks)):
        specs = [{"url": url_, "key": f"{key}-{k}", "tpm": tpm, "cap": cap, "charge": charge, "calls": calls,
                  "first": i, "step": k, "latency": latency, "mix": mix} for i in range(k)]
        outs = spawn_workers(specs, "--tpm-worker")
        events = [e for o in outs for e in o["events"]]
        t0 = outs[0]["start"]
        wall = max(e[1] for e in events) - t0
        busy = max(e[0] for e in events) - t0  # calls waited until the last admission
        used = sum(e[3] for e in events if e[0] - t0 <= busy)
        trips = sum(o["trips"] for o in outs) / len(events)
        tpm_trips = sum(o.get("tpm_trips", 0) for o in outs) / len(events)
        cpu = sum(o["cpu"] for o in outs) / len(events) * 1e3
        print(f"{name:>20}: wall {wall:.2f} s = {wall / ideal:.2f} x tokens/TPM, TPM used while calls wait "
              f"{used / max(busy, 1e-9) / (tpm / 60):.2f}, 429s {key_refusals(events, tpm, slack=0.999)} "
              f"({_refused_alone(events, tpm)} uncascaded), "
              f"CPU/call {cpu:.3f} ms" + (f", script calls/call {trips:.2f} ({tpm_trips:.2f} TPM)" if url_ else ""), flush=True)


def _traced(outs: list[dict]) -> list[tuple[Any, ...]]:
    """Each call as (process, sent, answered, charge, usage, its admission's script call sent / answered,
    the script call that carried its settlement sent, the account's level after its admission)."""
    calls = []
    for p, o in enumerate(outs):
        tr = o["trace"]
        for t0, t1, c, u, n in o["events"]:
            adm = next(x for x in tr if n in x[5])
            st = next((x for x in tr if x[0] >= t1), None)
            calls.append((p, t0, t1, c, u, adm[0], adm[1], st[0] if st else t1, adm[3]))
    return calls


def diagnose(url: str, k: int, tpm: float = 600_000, calls: int = 160, charge: int = 1000,
             latency: float = 2.0) -> None:
    """The reasoning workload on `k` processes, traced; each refusal of the key's (uncascaded) explained."""
    key = f"d{time.time_ns()}"
    specs = [{"url": url, "key": key, "tpm": tpm, "cap": 16, "charge": charge, "calls": calls, "first": i,
              "step": k, "latency": latency, "mix": REASONING, "trace": True} for i in range(k)]
    cs = _traced(spawn_workers(specs, "--tpm-worker"))
    events = [(x[1], x[2], x[3], x[4]) for x in cs]
    late = sorted(x[1] - x[6] for x in cs)
    print(f"{k} processes: 429s {key_refusals(events, tpm, slack=0.999)} ({_refused_alone(events, tpm)} uncascaded); "
          f"sent after its admission's reply: median {late[len(late) // 2] * 1e3:.1f} ms, max {late[-1] * 1e3:.0f} ms, "
          f"{sum(x > STALE for x in late)} calls > {STALE * 1e3:.0f} ms")
    per_s = tpm / 60
    moves = sorted([(x[1], 0, i) for i, x in enumerate(cs)] + [(x[2], 1, i) for i, x in enumerate(cs)])
    level, at, out, t00 = per_s, moves[0][0], set(), moves[0][0]
    for t, kind, i in moves:
        level, at = min(per_s, level + (t - at) * per_s), t
        x = cs[i]
        if kind == 1:
            level += 0 if i in out else x[3] - x[4]
        elif level >= x[3] * 0.999:
            level -= x[3]
        else:
            out.add(i)
            unheard = [cs[j][4] - cs[j][3] for j in range(len(cs)) if cs[j][2] < t and cs[j][7] > x[5]]
            print(f"  refused at {t - t00:6.3f} s: process {x[0]}, the key's level {level:.0f}, the account's after "
                  f"its admission {x[8]:.0f}, sent {(t - x[6]) * 1e3:.0f} ms after it; {len(unheard)} settlements "
                  f"the key counted before it, Redis after its admission: {sum(unheard):+d} tokens")


STALE = 0.25  # (a send this long after its admission's reply: it waited for a lease, redis_tpm.STALE_S)


if __name__ == "__main__":
    import argparse

    from tests.servers import RedisServer

    ap = argparse.ArgumentParser()
    ap.add_argument("--diagnose", type=int, default=4, metavar="K")
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args()
    redis = RedisServer().start()
    try:
        for _ in range(a.runs):
            diagnose(redis.url, a.diagnose)
    finally:
        redis.close()
