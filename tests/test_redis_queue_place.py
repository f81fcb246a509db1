"""#40: a process queued for a lease of the key keeps its place while its calls wait, through its own
heartbeats. Before, each heartbeat (every BEAT_S while it held leases) said `want = held`, which redis.lua
took for "waits no more": it left the queue and rejoined at the back, behind processes that came later.
Real Redis; checked in the order the leases went, not timed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis

from runner.budgets.redis import RedisBudget, lane_id
from runner.budgets.redis_call import connect
from runner.lanes import LocalBudget
from tests.helpers import slot
from tests.servers import RedisServer

CAP, LEASE_S = 4, 5.0  # B, holding none, beats every lease_s / 3: its own wake-up calls (WAKE_S) come first


async def _call(b: RedisBudget, name: str, order: list[str], end: asyncio.Event) -> None:
    """One call as a Lane makes it (lease, slot), its name in `order` as it goes on the wire, there until `end`."""
    await b.acquire()
    try:
        await slot(b)
        order.append(name)
        await end.wait()
    finally:
        b.release()


async def _until(check: Callable[[], bool | Awaitable[bool]], what: str) -> None:
    """Wait until `check` holds (a guard against a hang: 30 s, where each condition takes under 2 s)."""
    for _ in range(3000):
        ok = check()
        if ok if isinstance(ok, bool) else await ok:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(what)


async def test_a_holder_waiting_for_more_keeps_its_place_through_its_heartbeats(redis_server: RedisServer):
    """X holds 3 of the key's 4 leases on calls that last; A takes the 4th and queues for a second (under
    its share of 2); B queues after it. A's heartbeats come and go; then X's calls end one by one: the first
    lease freed goes to A, queued first, the second to B. (Before: A's heartbeat took it out of the queue,
    its next wake-up call put it back behind B: B had the first lease.)"""
    admin = aioredis.Redis.from_url(redis_server.url)
    x, a, b = (RedisBudget(connect(redis_server.url), lane_id("u", "place"), name, 600_000, None, CAP, LEASE_S,
                           local_factory=LocalBudget) for name in ("x", "a", "b"))
    queue = x.keys[4]
    order: list[str] = []
    ends = [asyncio.Event() for _ in range(3)]
    a_end, b_end = asyncio.Event(), asyncio.Event()
    tasks = [asyncio.create_task(_call(x, "x", order, e)) for e in ends]

    async def queued(p: RedisBudget) -> bool:
        return await admin.zscore(queue, p.proc) is not None

    try:
        await _until(lambda: order.count("x") == 3, "X's 3 calls on the wire")
        tasks += [asyncio.create_task(_call(a, "a", order, a_end)) for _ in range(2)]
        await _until(lambda: order.count("a") == 1, "A's first call on the wire")
        await _until(lambda: queued(a), "A queued for its second")
        tasks.append(asyncio.create_task(_call(b, "b", order, b_end)))
        await _until(lambda: queued(b), "B queued")
        start = a.calls
        # three script calls of A's since B queued: at least one a heartbeat (A alternates them with its
        # wake-up calls, each one BEAT_S after its last call), which took A out of the queue before
        await _until(lambda: a.calls >= start + 3, "A's heartbeat")
        assert order == ["x"] * 3 + ["a"], order
        ends[0].set()
        await _until(lambda: len(order) == 5, "a lease freed by X taken")
        ends[1].set()
        await _until(lambda: len(order) == 6, "the next lease freed by X taken")
        assert order[4:] == ["a", "b"], order
    finally:
        for e in (*ends, a_end, b_end):
            e.set()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 30)
        for p in (x, a, b):
            await p.aclose()
            await p.client.aclose()
        await admin.aclose()
