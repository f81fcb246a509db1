"""#40: the key's shared TPM account (runner/budgets/redis_tpm.py) admits the calls of a process with room to spare
in blocks: one script call takes a block of tokens while nobody waits and the bucket stays half full after it, the
next calls spend it without a script call each, and what is left goes back. Through a real Redis (the fixture starts
one); counted on the server (INFO commandstats) and in the account's state, not timed."""

from __future__ import annotations

import asyncio
import time

import redis.asyncio as aioredis

from runner.budgets.redis import lane_id
from runner.lanes import Lane
from tests.helpers import close_lanes, key_refusals, redis_tpm_lane
from tests.servers import RedisServer

GUARD_S = 30.0  # a hang guard only


async def _scripts_run(url: str) -> int:
    """EVALSHA commands the server has run (every script: the slot script's and the TPM account's)."""
    r = aioredis.Redis.from_url(url)
    try:
        stats = await r.info("commandstats")
    finally:
        await r.aclose()
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


async def _run(url: str, key: str, tpm: float | None) -> tuple[int, int]:
    """200 calls of 100 tokens, 4 at a time (lasting 5-9 ms: they come one by one, not in bunches one script call
    would admit together), each settled at 60, through a lane on `key`: the scripts the server ran meanwhile and
    the TPM account's script calls."""
    lane = redis_tpm_lane(url, key, "a", tpm)
    sem = asyncio.Semaphore(4)

    async def one(i: int) -> None:
        async def call() -> None:
            await asyncio.sleep(0.005 + 0.001 * (i % 5))

        async with sem:
            await lane.call(call, 100)
            lane.reconcile(100, 60)

    async with lane.budget._call.lock:
        await lane.budget._eval(0)  # (on the key: its first slot script call made)
    before = await _scripts_run(url)
    await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(200))), GUARD_S)
    run = await _scripts_run(url) - before
    calls = lane.budget._tpm.calls
    await close_lanes(lane)
    return run, calls


async def test_calls_with_room_to_spare_take_their_tokens_in_blocks(redis_server: RedisServer):
    """The same 200 calls on a key without a TPM, then on one whose bucket (~97,000) holds many: the server runs
    fewer than 50 scripts more (the TPM account's; on main about one per call, ~300), as the account counts them."""
    alone, _ = await _run(redis_server.url, "slots", None)
    run, calls = await _run(redis_server.url, "blocks", 6_000_000)
    assert run - alone < 50, (run, alone)
    assert calls < 25, calls


async def test_a_blocks_rest_and_its_hold_go_back(redis_server: RedisServer):
    """A process takes 3 calls of 100 (expected 150) one after another, sends and settles them; once it has told
    Redis, the key's account keeps nothing unsent (the block's rest was given back, its calls charged as sent)
    and no hold of its process."""
    lane = redis_tpm_lane(redis_server.url, "rest", "a", 6_000_000)
    acc = lane.budget._tpm

    async def call() -> None:
        await asyncio.sleep(0)

    for _ in range(3):
        await asyncio.wait_for(lane.call(call, 150, None, 100), GUARD_S)
        lane.reconcile(150, 120, 100)
    assert acc.blocks >= 1 and acc.calls < 3
    while acc._block_end is not None or acc._flush is not None or (acc._task is not None and not acc._task.done()):
        await asyncio.sleep(0.01)  # (until its block ended and what it had to say was told)
    r = aioredis.Redis.from_url(redis_server.url)
    pre = f"evalsweep:{{{lane_id('u', 'rest')}}}:"
    try:
        assert float(await r.hget(pre + "tpm", "unsent")) == 0.0
        assert await r.hget(pre + "tpmheld", lane.budget.proc) is None
    finally:
        await r.aclose()
    await close_lanes(lane)


async def test_two_processes_spending_blocks_never_pass_the_keys_tpm(redis_server: RedisServer):
    """Two processes, 120 small calls each (charged 20, expected 30, using 10 or 50 in turn), 8 at a time, on a key
    of 120,000 TPM (~1,940 a second: the calls need ~3 s of it). Blocks are taken while the bucket has room; the
    key's bucket, replayed from every admission and answer, never refuses a call."""
    tpm = 120_000
    a, b = redis_tpm_lane(redis_server.url, "two", "a", tpm), redis_tpm_lane(redis_server.url, "two", "b", tpm)
    calls: list[tuple[float, float, int, int]] = []

    async def work(lane: Lane) -> None:
        sem = asyncio.Semaphore(8)

        async def one(i: int) -> None:
            used = 10 if i % 2 else 50

            async def call() -> None:
                t0 = time.monotonic()
                await asyncio.sleep(0.05)
                calls.append((t0, time.monotonic(), 20, used))

            async with sem:
                await lane.call(call, 30, None, 20)
                lane.reconcile(30, used, 20)

        await asyncio.gather(*(one(i) for i in range(120)))

    await asyncio.wait_for(asyncio.gather(work(a), work(b)), GUARD_S * 2)
    assert len(calls) == 240
    assert a.budget._tpm.blocks + b.budget._tpm.blocks > 0  # (blocks were spent)
    assert key_refusals(calls, tpm) == 0
    await close_lanes(a, b)
