"""#40: a process SIGKILLed while it holds leases of a Redis-shared key leaves them held, under a heartbeat
that no longer comes, until they expire (lease_s). The key then falls silent if nobody else calls; redis.lua
takes a busy key silent for TIMEOUT_S for a Redis that stood still (a new state: an outage every process
waits out). The live processes keep it from falling silent, so the dead one costs them only its leases
until they expire. Real Redis, the holder a real process; counted in states and leases, not timed."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis.asyncio as aioredis

from runner.budgets.redis import RedisBudget, lane_id
from runner.budgets.redis_call import TIMEOUT_S, connect
from runner.lanes import LocalBudget
from tests.helpers import slot
from tests.servers import RedisServer

ROOT = Path(__file__).resolve().parent.parent
CAP, HELD, LEASE_S = 4, 2, 9.0  # the holder takes 2 of the key's 4; the idle heartbeat was lease_s / 3 = 3 s


def _holder(url: str, key: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, "-m", "tests.redis_holder", url, key, str(HELD), str(CAP), str(LEASE_S)],
                         cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().split()[:1] == ["held"], p.poll()
    return p


async def _state(admin: aioredis.Redis, b: RedisBudget) -> tuple[bytes | None, dict[str, int]]:
    """The key's state's birth (a new one: Redis was taken to have stood still) and the leases held."""
    born = await admin.hget(b.keys[0], "born")
    return born, {k.decode(): int(v) for k, v in (await admin.hgetall(b.keys[2])).items()}


async def _call(b: RedisBudget, on: list[int], end: asyncio.Event | None = None, latency: float = 0.0) -> int:
    """One call as a Lane makes it (lease, slot), on the wire until `end` is set (then `latency`); `on`
    has one entry per call, 1 while it is on the wire. Returns how many were on the wire as it began."""
    await b.acquire()
    try:
        await slot(b)
        i = len(on)
        on.append(1)
        now_on = sum(on)
        if end is not None:
            await end.wait()
        await asyncio.sleep(latency)
        on[i] = 0
        return now_on
    finally:
        b.release()


async def _worker(b: RedisBudget, on: list[int], stop: asyncio.Event, peak: list[int]) -> None:
    """A Lane's worker: each call followed at once by the next, until `stop`; `peak`: the most calls of
    B's on the wire at once."""
    while not stop.is_set():
        peak[0] = max(peak[0], await _call(b, on, None, 0.02))


async def test_a_killed_holder_is_not_taken_for_a_frozen_redis(redis_server: RedisServer):
    """A holds 2 of the key's 4 leases and is SIGKILLed; B, alive on the key, is idle for twice TIMEOUT_S,
    then has calls for all 4. B gets the 2 leases A left free with the key's state unchanged, then A's 2 once
    they expire: 4 calls of B's on the wire at once, no fallback, the state never renewed. (Before: B's idle
    heartbeat, every lease_s / 3, found the key silent: a new state, an outage B waited out to the next
    RECOVER_S boundary, silent again meanwhile, so another, until A's leases expired: its first call 11 s on.)"""
    admin = aioredis.Redis.from_url(redis_server.url)
    b = RedisBudget(connect(redis_server.url), lane_id("u", "dead"), "b", 600_000, None, CAP, LEASE_S,
                    local_factory=LocalBudget)
    a = _holder(redis_server.url, "dead")
    stop = asyncio.Event()
    try:
        await _call(b, [])  # B on the key, its state seen
        born, held = await _state(admin, b)
        while b.proc in held:  # its spare lease given back (KEEP_S): B holds none, nothing of it on the wire
            await asyncio.sleep(0.05)
            born, held = await _state(admin, b)
        assert born == b._born and list(held.values()) == [HELD], held
        a.send_signal(signal.SIGKILL)
        a.wait(10)
        await asyncio.sleep(2 * TIMEOUT_S)  # B idle
        on: list[int] = []
        end = asyncio.Event()
        calls = [asyncio.create_task(_call(b, on, end)) for _ in range(CAP)]
        t0 = time.monotonic()
        while sum(on) < CAP - HELD:
            assert time.monotonic() - t0 < 30, (on, b._born, born)  # (a guard: before, 5 s to the boundary)
            await asyncio.sleep(0.01)
        now_born, held = await _state(admin, b)
        assert now_born == born and b._born == born, (born, now_born, b._born)  # no outage taken
        assert sorted(held.values()) == [HELD, CAP - HELD] and len(on) == CAP - HELD, held  # A's still held
        end.set()
        await asyncio.gather(*calls)
        on = []
        peak = [0]
        workers = [asyncio.create_task(_worker(b, on, stop, peak)) for _ in range(CAP)]
        while peak[0] < CAP:  # A's leases expire: B's calls take them
            assert time.monotonic() - t0 < 3 * LEASE_S, (peak, await _state(admin, b))  # (a guard)
            await asyncio.sleep(0.05)
        stop.set()
        await asyncio.gather(*workers)
        assert (await _state(admin, b))[0] == born and b._born == born and b.fallbacks == 0
    finally:
        stop.set()
        a.kill()
        a.wait(10)
        await b.aclose()
        await b.client.aclose()
        await admin.aclose()
