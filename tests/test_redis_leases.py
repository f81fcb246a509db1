"""#40: the key's concurrency leases across processes on a real Redis (the fixture starts one), counted
in commands the server ran, not timed: a process beyond the cap waits without polling, and leases go
in turn to the processes whose calls wait."""

from __future__ import annotations

import asyncio

import redis.asyncio as aioredis

from runner.budgets.redis import RedisBudget, lane_id
from runner.budgets.redis_call import ScriptCall, connect
from runner.lanes import LocalBudget
from tests.helpers import slot
from tests.servers import RedisServer

_TRIPS = ("evalsha", "eval", "blpop")  # what a budget sends (a script call is one round trip)


async def _trips(client: aioredis.Redis) -> int:
    stats = await client.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k.removeprefix("cmdstat_") in _TRIPS)


def _budgets(url: str, n: int, cap: int) -> list[RedisBudget]:
    return [RedisBudget(connect(url), lane_id("u", "turns"), f"p{i}", 600_000, None, cap, 5.0,
                        local_factory=LocalBudget) for i in range(n)]


async def _call(b: RedisBudget, done: list[int], latency: float = 0.05) -> None:
    """One call through the budget's seam, as a Lane makes it: lease, slot, the call, release."""
    await b.acquire()
    try:
        await slot(b)
        await asyncio.sleep(latency)
        done.append(1)
    finally:
        b.release()


async def test_six_processes_on_a_cap_of_four_take_turns_at_3_commands_a_call(redis_server: RedisServer):
    """6 processes (--join workers), each with more calls than the key's cap of 4 allows: every one gets
    turns while the others run (two held none: the four first kept their leases as long as they had
    work), and the leases cost at most 3 Redis round trips per call (3.5 then, and ~80 script calls per
    call for a waiting process that re-confirmed every round trip)."""
    admin = aioredis.Redis.from_url(redis_server.url)
    procs = _budgets(redis_server.url, 6, 4)
    for p in procs:  # all on the key before any sends (a --join run's workers start together)
        async with p._call.lock:
            await p._eval(0)
    before = await _trips(admin)
    done: list[list[int]] = [[] for _ in procs]
    total = 180

    async def work(i: int) -> None:
        while sum(map(len, done)) < total:
            await _call(procs[i], done[i])

    await asyncio.wait_for(asyncio.gather(*(work(i) for i in range(6) for _ in range(4))), 120)
    trips = await _trips(admin) - before
    calls = sum(map(len, done))
    counts = sorted(len(d) for d in done)
    assert counts[0] >= total / 6 / 3, counts  # each had turns (30 each if even; 0-2 for two before)
    assert trips / calls <= 3, (trips, calls)
    for p in procs:
        await p.aclose()
        await p.client.aclose()
    await admin.aclose()


async def test_a_process_beyond_the_cap_waits_without_polling(redis_server: RedisServer):
    """A holds the key's one lease on a call that lasts; B's call waits for it: ~2 s of that wait cost
    the server a handful of commands (B's wake-up wait and its heartbeat, A's heartbeat), not a poll
    (28: B's 0.1 s sync and A's while its call ran), and B's call goes once A's ends."""
    admin = aioredis.Redis.from_url(redis_server.url)
    a, b = _budgets(redis_server.url, 2, 1)
    done_a: list[int] = []
    ta = asyncio.create_task(_call(a, done_a, latency=3.0))
    while not a.admitted:
        await asyncio.sleep(0.01)
    done_b: list[int] = []
    tb = asyncio.create_task(_call(b, done_b, latency=0.0))
    await asyncio.sleep(0.5)
    before = await _trips(admin)
    await asyncio.sleep(2.0)
    during = await _trips(admin) - before
    assert not done_b and b.admitted == 0
    await asyncio.wait_for(asyncio.gather(ta, tb), 10)
    assert done_b == [1]
    assert during <= 8, during
    for p in (a, b):
        await p.aclose()
        await p.client.aclose()
    await admin.aclose()


async def test_a_spare_lease_goes_to_the_next_call_without_a_round_trip_when_nobody_waits(
        redis_server: RedisServer, monkeypatch):
    """One process alone on the key: a call ending leaves its lease spare; the next call past the local
    cap takes it without asking Redis, as the last reply showed no other process waiting for one (it
    asked first whenever that reply was older than FRESH_S: a round trip per call of a busy process, the
    lease path's, beside its slot's). Its ticket binds the lease with its slot in the one script call
    it makes anyway. Counted, not timed: every reply is stale (FRESH_S 0), idle leases are kept."""
    from runner.budgets import redis as redis_budget
    from runner.budgets import redis_turns

    monkeypatch.setattr(redis_turns, "FRESH_S", 0.0)
    monkeypatch.setattr(redis_budget, "KEEP_S", 1e9)
    (b,) = [RedisBudget(connect(redis_server.url), lane_id("u", "spare"), "p", 600_000, None, 2, 30.0,
                        local_factory=LocalBudget)]
    done: list[int] = []
    await _call(b, done, latency=0.0)  # (its first lease: asked from Redis)
    asked = []
    for _ in range(20):
        before = b.calls
        await b.acquire()
        asked.append(b.calls - before)
        try:
            await slot(b)
            done.append(1)
        finally:
            b.release()
    assert asked == [0] * 20 and len(done) == 21, asked
    await b.aclose()
    await b.client.aclose()


async def test_a_busy_process_starts_no_task_per_call(redis_server: RedisServer, monkeypatch):
    """Four tasks making calls on a cap of 2, alone on the key: past the first calls, the budget starts
    no task at all (its slot-granting task waits for the next ticket instead of ending, and a spare lease
    is handed on in place; before: a new granting task for most tickets, a lease-asking one for many).
    Counted with the loop's task factory; idle leases kept, so none is given back and asked again."""
    from runner.budgets import redis as redis_budget

    monkeypatch.setattr(redis_budget, "KEEP_S", 1e9)
    b = RedisBudget(connect(redis_server.url), lane_id("u", "tasks"), "p", 600_000, None, 2, 30.0,
                    local_factory=LocalBudget)
    started: list[str] = []
    loop = asyncio.get_running_loop()

    def factory(loop_: asyncio.AbstractEventLoop, coro, **kw):  # noqa: ANN001, ANN003
        code = getattr(coro, "cr_code", None)
        if code is not None and "runner/budgets" in code.co_filename.replace("\\", "/"):
            started.append(code.co_qualname)
        return asyncio.Task(coro, loop=loop_, **kw)

    done: list[int] = []

    async def work(n: int) -> None:
        for _ in range(n):
            await _call(b, done, latency=0.0)

    await asyncio.gather(*(work(3) for _ in range(4)))  # (its leases and tasks first)
    loop.set_task_factory(factory)
    try:
        await asyncio.gather(*(work(25) for _ in range(4)))
    finally:
        loop.set_task_factory(None)
    assert len(done) == 112 and started == [], started
    await b.aclose()
    await b.client.aclose()


async def test_housekeeping_sleeps_while_calls_on_the_wire_hold_the_leases(redis_server: RedisServer,
                                                                            monkeypatch):
    """Two calls on the wire hold the process's two leases, nothing waits: housekeeping has nothing to
    watch but the heartbeat (every BEAT_S, 0.5 s, while it holds leases), so it sets a timer for that
    only (it woke every SYNC_S, 0.1 s, to find nothing to do: a turn of the event loop each time, the
    most of a busy process's). Counted: the timers the budget sets in 1 s of the calls, 3 at most (and
    the heartbeats' read timeouts)."""
    b = RedisBudget(connect(redis_server.url), lane_id("u", "house"), "p", 600_000, None, 2, 30.0,
                    local_factory=LocalBudget)
    loop = asyncio.get_running_loop()
    on_wire: list[int] = []
    end = loop.create_future()

    async def call() -> None:
        await b.acquire()
        try:
            await slot(b)
            on_wire.append(1)
            await end
        finally:
            b.release()

    calls = [asyncio.create_task(call()) for _ in range(2)]
    while len(on_wire) < 2:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # (past housekeeping's next look, SYNC_S after the grant)
    timers: list[str] = []
    call_at = loop.call_at

    def counting(when, callback, *args, **kw):  # noqa: ANN001, ANN003, ANN202
        timers.append(getattr(callback, "__qualname__", repr(callback)))
        return call_at(when, callback, *args, **kw)

    running = loop.create_future()
    loop.call_later(1.0, running.set_result, None)  # (the calls run 1 s more: this timer not counted)
    monkeypatch.setattr(loop, "call_at", counting)
    await running
    monkeypatch.undo()
    end.set_result(None)
    await asyncio.gather(*calls)
    own = [t for t in timers if t != "Timeout._on_timeout"]  # (a heartbeat's read timeout: redis-py's)
    assert len(own) <= 3, timers  # (before: 10, one every 0.1 s)
    await b.aclose()
    await b.client.aclose()


async def test_a_call_on_the_wire_longer_than_the_timeout_does_not_make_the_key_look_frozen(
        redis_server: RedisServer):
    """One process holds the key's lease on a call of 2.5 s, nothing else waits. redis.lua takes a key
    whose lease holders are all silent for TIMEOUT_S (1.5 s) for a Redis that stood still: a new state,
    an outage every process then waits out (to the next RECOVER_S boundary). Its heartbeat while it
    holds leases (BEAT_S) keeps the key's state: the next call finds the same one (it found a new one,
    the heartbeat being every lease_s / 3, 10 s here)."""
    b = RedisBudget(connect(redis_server.url), lane_id("u", "beat"), "p", 600_000, None, 1, 30.0,
                    local_factory=LocalBudget)
    done: list[int] = []
    await _call(b, done, latency=0.0)  # (on the key, its state seen)
    born, outage = b._born, b._outage_at
    await _call(b, done, latency=2.5)
    await _call(b, done, latency=0.0)
    assert (b._born, b.fallbacks, len(done)) == (born, 0, 3) and abs(b._outage_at - outage) < 1e-3, (born, outage)
    await b.aclose()
    await b.client.aclose()


async def test_a_stale_view_of_the_active_processes_takes_no_more_than_its_share(redis_server: RedisServer):
    """Two processes with work on a key capped at 8: one of them, whose own count of active processes
    is stale (1: it asks for all 8), finds nobody queued ahead. The script hands it its share of the
    key's current state, ceil(8 / 2) = 4, not min(want, room) = 8 (it took all 8, the other's share
    with them). Alone with work it still takes all 8 (an idle process's share is lent)."""
    ident = lane_id("u", "stale")
    clients = [connect(redis_server.url) for _ in range(2)]
    a, b = (ScriptCall(c, ident, f"p{i}") for i, c in enumerate(clients))
    ttl = 5_000_000
    born = (await a(ttl_us=ttl, cap=8, want=0, bound=0, demand=True)).born  # a: calls waiting, none held
    await b(ttl_us=ttl, cap=8, want=0, bound=0, born=born, demand=True)
    r = await b(ttl_us=ttl, cap=8, want=8, bound=0, born=born, demand=True)
    assert (r.n_active, r.n_waiting, r.held) == (2, 0, 4), r
    await a(ttl_us=ttl, cap=8, want=0, bound=0, born=born, demand=False)  # a idle now: its share lent
    r = await b(ttl_us=ttl, cap=8, want=8, bound=0, born=born, demand=True)
    assert (r.n_active, r.held) == (1, 8), r
    for c in clients:
        await c.aclose()
