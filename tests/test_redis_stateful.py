"""The shared budget's lease and slot protocol under a seeded random driver: K = 1..8 simulated processes
(each a RedisBudget with its own connection pool, in one event loop) on one key of a real redis-server,
through the real Lua script, while the driver makes their timers wake late, stalls the whole loop,
kills processes (no clean-up: their leases must lapse), adds processes, restarts Redis (its state lost),
freezes it (SIGSTOP for up to 2.5 s: its state kept) and kills every client connection (the pools'
connections go stale). Calls last long enough for max_concurrency to bind.

Checked at every admission and after every step: never more admissions than the key's limit in any 1 s
window, whichever processes pace on Redis and which locally (a process joining during an outage, or
meeting it late, included); never more calls in flight across the processes than max_concurrency, on
Redis, in a fallback or some of each; a process in a fallback admits a call only within the leases it
held; progress while work waits (no stretch of STALL_S without an admission after the last outage ended:
the deadlock this replaces was permanent); at the end every call made, and every lease released: none
held by a live holder once the survivors close, none at all once the killed ones' heartbeats lapse.
EVALSWEEP_STATEFUL_SEED picks other scenarios: one seed or several, comma-separated (each runs K = 1..8;
~4.5 min per seed).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from typing import Any

import pytest

from runner.budgets import redis_fallback
from runner.budgets.local import LocalBudget
from runner.budgets.redis import RedisBudget, lane_id
from runner.budgets.redis_call import LUA, RETRIES, ScriptCall, connect
from tests.servers import RedisServer

LEASE_S = 1.0
STALL_S = 10.0  # longest legitimate wait after an outage ends: RECOVER_S, GRACE_S, a lapsed holder's leases
STEPS = 45
IDENT = lane_id("http://stateful.test/v1", "the-key")
ACTIONS = ["none", "late", "stall", "crash", "join", "restart", "freeze", "drop"]
WEIGHTS = [8, 3, 2, 1, 1, 1, 1, 1]


class Proc:
    """One simulated process: a budget on its own client, and workers making calls like Lane._attempt."""

    def __init__(self, sim: Sim, jobs: int) -> None:
        self.sim, self.jobs = sim, jobs
        self.client = connect(sim.redis.url)
        self.b = RedisBudget(self.client, IDENT, f"p{len(sim.procs)}", sim.rate * 60, None, sim.cap, LEASE_S,
                             local_factory=LocalBudget)
        self.alive, self.in_flight, self.waiting, self.lag_until = True, 0, 0, 0.0
        self.in_flight_local = 0  # ... of which a fallback admitted
        self.tasks = [asyncio.get_running_loop().create_task(self.worker()) for _ in range(sim.cap + 2)]

    def lag(self) -> float:
        rng = self.sim.rng
        return rng.uniform(0.02, 0.2) if time.monotonic() < self.lag_until and rng.random() < 0.5 else 0.0

    async def worker(self) -> None:
        b = self.b
        while self.jobs > 0:
            self.jobs -= 1
            self.waiting += 1
            await b.acquire()
            wait = b.reserve(0)
            while True:
                if wait > 0:
                    await asyncio.sleep(wait + self.lag())  # a timer that wakes late
                wait = b.confirm()
                if wait <= 0:
                    break
            self.waiting -= 1
            local = b._local is not None
            self.in_flight += 1
            self.in_flight_local += local
            self.sim.admitted(self)
            await asyncio.sleep(self.sim.rng.uniform(0.05, 0.8))  # long enough for the cap to bind
            self.in_flight -= 1
            self.in_flight_local -= local
            b.release()

    @property
    def busy(self) -> bool:
        return self.alive and (self.jobs > 0 or self.waiting > 0 or self.in_flight > 0)

    async def crash(self) -> None:
        """SIGKILL: nothing is released, the connections close, no code of it runs again (a cancelled
        task can end in an error instead, e.g. a timeout it was in: it must not start others)."""
        self.alive = False
        self.b.closed = True
        for t in [*self.tasks, self.b._house, self.b._syncing, self.b._recovering, self.b._telling]:
            if t is not None:
                t.cancel()
        self.in_flight = self.in_flight_local = self.waiting = self.jobs = 0
        await self.client.connection_pool.disconnect()


class Sim:
    def __init__(self, rng: random.Random, redis: RedisServer, rate: int, cap: int) -> None:
        self.rng, self.redis, self.rate, self.cap = rng, redis, rate, cap
        self.procs: list[Proc] = []
        self.admits: list[float] = []
        self.last_progress = time.monotonic()
        self.violations: list[str] = []
        self.step = 0
        self.max_in_flight = 0
        self.worst_1s = 0  # most admissions seen in a 1 s window
        self.log: list[tuple[float, str]] = []  # admissions and faults, for a failure's message

    def admitted(self, p: Proc) -> None:
        now = time.monotonic()
        self.admits.append(now)
        self.log.append((now, f"p{self.procs.index(p)}{'L' if p.b._local is not None else 'R'}"))
        self.last_progress = now
        in_window = sum(1 for t in self.admits[-4 * self.rate:] if t > now - 1.0)
        if in_window > self.rate:
            modes = "".join("L" if q.b._local is not None else "R" for q in self.procs if q.alive)
            seen = [(round(t - now, 3), w) for t, w in self.log if t > now - 3.0]
            self.violations.append(f"step {self.step}: {in_window} admissions in 1 s (limit {self.rate}; "
                                   f"processes on Redis R / local L: {modes}) {seen}")
        self.worst_1s = max(self.worst_1s, in_window)
        live = [q for q in self.procs if q.alive]
        total = sum(q.in_flight for q in live)
        self.max_in_flight = max(self.max_in_flight, total)
        if total > self.cap:  # on Redis, in a fallback, or some of each
            state = [(q.in_flight, q.b._held, q.b._bound, len(q.b._flying), q.b.n_procs,
                      "R" if q.b._local is None else "L") for q in live]
            self.violations.append(f"step {self.step}: {total} in flight (max_concurrency {self.cap}; "
                                   f"in flight, held, bound, flying, N, mode: {state}) {self.log[-12:]}")
        if p.b._local is not None and p.in_flight > p.b._local.max_concurrency:
            lo = p.b._local
            self.violations.append(f"step {self.step}: {p.in_flight} in flight in a fallback, above its leases "
                                   f"(local {lo._used}/{lo._cap}/{lo.max_concurrency}, flying {len(p.b._flying)}, "
                                   f"tickets {len(p.b._tickets)}, local-admitted {p.in_flight_local})")

    def check_progress(self) -> None:
        now = time.monotonic()
        if not any(p.busy and (p.waiting or p.in_flight) for p in self.procs):
            self.last_progress = now
        elif now - self.last_progress > STALL_S:
            st = [(q.alive, "R" if q.b._local is None else "L", round(q.b.paused_until - now, 2),
                   round(q.b._grace_until - now, 2), q.b._held, q.b._bound, q.waiting, q.in_flight, q.jobs)
                  for q in self.procs]
            self.violations.append(f"step {self.step}: nothing admitted for {now - self.last_progress:.1f} s "
                                   f"while work waited (alive, mode, paused for, grace for, held, bound, waiting, "
                                   f"in flight, jobs: {st}) {self.log[-12:]}")
            self.last_progress = now

    async def act(self, action: str) -> None:
        rng, live = self.rng, [p for p in self.procs if p.alive]
        self.log.append((time.monotonic(), action))
        if action == "late" and live:
            rng.choice(live).lag_until = time.monotonic() + rng.uniform(0.5, 2.0)
        elif action == "stall":
            time.sleep(rng.uniform(0.05, 0.4))  # the whole loop blocked: a busy machine
        elif action == "crash" and len(live) > 1:
            await rng.choice(live).crash()
        elif action == "join" and len(self.procs) < 8:
            self.procs.append(Proc(self, rng.randint(10, 40)))
        elif action == "restart":
            self.redis.stop()
            await asyncio.sleep(rng.uniform(0.0, 2.0))
            self.redis.sock.unlink(missing_ok=True)
            self.redis.start()
        elif action == "freeze":
            assert self.redis.proc is not None
            os.kill(self.redis.proc.pid, signal.SIGSTOP)
            await asyncio.sleep(rng.uniform(0.3, 2.5))
            os.kill(self.redis.proc.pid, signal.SIGCONT)
        if action in ("restart", "freeze"):  # stalls count from an outage's end: processes that did not
            self.last_progress = max(self.last_progress, time.monotonic())  # pace through one send nothing
            # until the others are back (up to RECOVER_S + GRACE_S), and outages may follow each other
        if action == "drop":
            admin = connect(self.redis.url)
            try:
                await admin.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
            finally:
                await admin.aclose()


async def _scenario(seed: int, k: int, redis: RedisServer) -> tuple[int, list[str], dict[str, Any]]:
    rng = random.Random(seed)
    sim = Sim(rng, redis, rate=rng.choice([10, 20]), cap=rng.randint(max(1, k // 2), 8))
    for _ in range(k):
        sim.procs.append(Proc(sim, rng.randint(20, 60)))
    for sim.step in range(1, STEPS + 1):
        await sim.act(rng.choices(ACTIONS, WEIGHTS)[0])
        await asyncio.sleep(rng.uniform(0.05, 0.25))
        sim.check_progress()
    t0 = time.monotonic()
    while any(p.busy for p in sim.procs):  # every call made: a deadlock never ends
        await asyncio.sleep(0.05)
        sim.check_progress()
        if time.monotonic() - t0 > 120:
            sim.violations.append("calls still waiting 120 s after the faults ended")
            break
    admin = connect(redis.url)
    try:
        for p in sim.procs:
            if p.alive:
                await p.b.aclose()
                await p.client.aclose()
        held = {k.decode(): int(v) for k, v in (await admin.hgetall(f"evalsweep:{{{IDENT}}}:held")).items()}
        killed = {p.b.proc for p in sim.procs if not p.alive}
        for p in sim.procs:  # a call in flight holds the lock: none is once it is free, and a closed
            async with p.b._call.lock:  # budget starts none (its cancelled tasks may not have ended:
                pass  # redis-py can lose a cancellation, and finish the call it was in)
        calls = [p.b.calls for p in sim.procs]
        if set(held) - killed:
            sim.violations.append(f"leases of live processes left after they closed: {held}")
        for _ in range(50):  # a killed holder's lease lapses a lease after its last heartbeat (later if
            # the key was silent meanwhile: that time does not count); a leak would stay 24 h
            await asyncio.sleep(LEASE_S / 5)
            sweeper = RedisBudget(admin, IDENT, "sweep", 60, None, 1, LEASE_S)
            await sweeper.aclose()  # one script call: drops the lapsed holders
            left = await admin.hgetall(f"evalsweep:{{{IDENT}}}:held")
            if not left:
                break
        if left:
            who = {p.b.proc: (p.alive, p.b._local is None, [t.done() for t in (p.b._house, p.b._syncing,
                   p.b._recovering) if t is not None]) for p in sim.procs}
            procs = await admin.zrange(f"evalsweep:{{{IDENT}}}:procs", 0, -1, withscores=True)
            sim.violations.append(f"leases left after the killed processes' heartbeats lapsed: {left} "
                                  f"{who} {procs} {await admin.time()}")
        if [p.b.calls for p in sim.procs] != calls:
            sim.violations.append(f"script calls by closed budgets: {calls} -> {[p.b.calls for p in sim.procs]}")
    finally:
        await admin.aclose()
    info = {"seed": seed, "K": k, "rate": sim.rate, "cap": sim.cap, "admitted": len(sim.admits),
            "max_in_flight": sim.max_in_flight, "worst_1s": sim.worst_1s, "procs": len(sim.procs),
            "fallbacks": sum(p.b.fallbacks for p in sim.procs)}
    return sim.step, sim.violations, info


SEEDS = [int(x) for x in os.environ.get("EVALSWEEP_STATEFUL_SEED", "31").split(",") if x.strip()]


@pytest.mark.parametrize("k", range(1, 9))
@pytest.mark.parametrize("seed", SEEDS)
def test_lease_and_slot_protocol_under_faults(seed: int, k: int, redis_server: RedisServer,
                                              monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(redis_fallback, "RECOVER_S", 1.0)
    steps, violations, info = asyncio.run(_scenario(seed * 100 + k, k, redis_server))
    print(f"stateful: {steps} steps, {info}")
    assert not violations, (info, violations[:10])


class SlowReplies:
    """A TCP proxy on 127.0.0.1 to the redis-server's socket that holds back each reply to a script call
    (EVALSHA) by `delay_s` while `slow`: replies slowed on their way, as a busy event loop makes them
    (other commands pass at once)."""

    def __init__(self, sock: str, delay_s: float) -> None:
        self.sock, self.delay_s, self.held, self.slow = sock, delay_s, 0, True
        self.writes = 0  # what the clients sent, write by write (a command, or a pipeline of them)
        self.server: asyncio.Server | None = None

    async def start(self, unix: bool = False) -> str:
        """Listening on 127.0.0.1, or with `unix` on a socket beside the server's (as `[shared] redis_url`
        names a local Redis: redis-py connects to the two differently)."""
        if unix:
            path = f"{self.sock}.proxy"
            self.server = await asyncio.start_unix_server(self._serve, path)
            return f"unix://{path}"
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"redis://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        sr, sw = await asyncio.open_unix_connection(self.sock)
        hold = asyncio.Event()

        async def up() -> None:
            while data := await cr.read(65536):
                self.writes += 1
                if b"EVALSHA" in data and self.slow:
                    self.held += 1
                    hold.set()
                sw.write(data)
                await sw.drain()
            sw.close()

        async def down() -> None:
            while data := await sr.read(65536):
                if hold.is_set():
                    hold.clear()
                    await asyncio.sleep(self.delay_s)
                cw.write(data)
                await cw.drain()
            cw.close()

        try:
            await asyncio.gather(up(), down(), return_exceptions=True)
        except asyncio.CancelledError:  # (the test's loop ends with connections open: not an error)
            pass

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()


async def _one_slow_process(redis: RedisServer, rate: int, calls: int) -> tuple[list[float], int]:
    """Two processes on one key, one of whose script replies come late; every admission of either."""
    admin = connect(redis.url)
    await admin.script_load(LUA)  # (the first EVALSHA finds it: no NOSCRIPT round trip in between)
    proxy = SlowReplies(str(redis.sock), 0.1)
    clients = [connect(redis.url), connect(await proxy.start())]
    ident = lane_id("http://slow.test/v1", "k")
    budgets = [RedisBudget(c, ident, f"p{i}", rate * 60, None, 8, LEASE_S, local_factory=LocalBudget)
               for i, c in enumerate(clients)]
    admits: list[float] = []

    async def call(b: RedisBudget) -> None:
        await b.acquire()
        wait = b.reserve(0)
        while True:
            if wait > 0:
                await asyncio.sleep(wait)
            wait = b.confirm()
            if wait <= 0:
                break
        admits.append(time.monotonic())
        if len(admits) >= calls:  # (alone on an idle key, a process whose replies come this late finds
            proxy.slow = False  # each slot past when it hears of it: the end of the run is not the point)
        await asyncio.sleep(0.2)
        b.release()

    try:
        await asyncio.gather(*(call(b) for b in budgets for _ in range(calls)))
    finally:
        for b, c in zip(budgets, clients, strict=True):
            await b.aclose()
            await c.aclose()
        await admin.aclose()
        await proxy.close()
    return admits, proxy.held


def test_a_slow_reply_does_not_bunch_a_second_of_slots(redis_server: RedisServer):
    """Limit + 1 (#39): one process's script replies come 100 ms late for the first half of the calls, so
    its clock offset was 50 ms off (half the round trip, the server having read its clock at the start):
    its slots were sent 50 ms late, the other process's on time, and 21 slots spaced 1/(20 x SAFETY) s
    fell within one second.
    (A new redis-server: the first slots come at the next RECOVER_S boundary.)"""
    admits, held = asyncio.run(_one_slow_process(redis_server, 20, 30))
    assert held and len(admits) == 60
    admits.sort()
    worst = max(sum(1 for u in admits if t <= u < t + 1.0) for t in admits)
    assert worst <= 20, worst  # before: 21


async def _frozen_call(redis: RedisServer) -> tuple[int, str]:
    """One script call to a frozen Redis (SIGSTOP: it accepts connections, answers nothing), through the
    proxy: how many writes waited for an answer, and the error the call ended in."""
    proxy = SlowReplies(str(redis.sock), 0.0)
    proxy.slow = False
    client = connect(await proxy.start(unix=True))
    call = ScriptCall(client, lane_id("http://frozen.test/v1", "k"), "p")
    assert redis.proc is not None
    try:
        await call(ttl_us=1_000_000, cap=4, want=1, bound=0)
        os.kill(redis.proc.pid, signal.SIGSTOP)
        before = proxy.writes
        try:
            await call(ttl_us=1_000_000, cap=4, want=1, bound=0)
            return proxy.writes - before, "answered"
        except Exception as e:  # noqa: BLE001
            return proxy.writes - before, type(e).__name__
    finally:
        os.kill(redis.proc.pid, signal.SIGCONT)
        await client.aclose()
        await proxy.close()


def test_a_frozen_redis_is_met_after_three_timeouts(redis_server: RedisServer):
    """A frozen Redis is met (the lane falls back) after the call and its RETRIES, each on a new
    connection, time out: 3 x TIMEOUT_S (#39: a --join worker's first 11.6 s of a 120 s freeze sent
    nothing). Before: each new connection's handshake (HELLO) timed out too, retried within the retry
    of the command: 7 writes waited, 10.5 s."""
    waited, error = asyncio.run(_frozen_call(redis_server))
    assert error != "answered"
    assert waited == RETRIES + 1, waited  # before: 7
