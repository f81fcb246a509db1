"""RedisBudget against a real Redis: two budgets on separate connections are two processes' view of one
key (the multi-process behaviour is in test_shared_budget.py); here TPM, reconciliation and AIMD."""

from __future__ import annotations

import asyncio
import time

import redis.asyncio as aioredis

from runner.budgets.redis import RedisBudget, lane_id
from runner.config import Endpoint
from runner.lanes import Lane, LocalBudget
from tests.servers import RedisServer


def _budget(url: str, **kw) -> RedisBudget:
    args = dict(rpm=None, tpm=60_000, max_concurrency=8, lease_s=5.0)
    args.update(kw)
    return RedisBudget(
        aioredis.Redis.from_url(url),
        lane_id("http://127.0.0.1:9/v1", "the-key"),
        "e/KEY",
        args["rpm"],
        args["tpm"],
        args["max_concurrency"],
        args["lease_s"],
        local_factory=LocalBudget,
    )


async def _noop() -> str:
    return "ok"


_LANES: dict[int, Lane] = {}


async def _admit(b: RedisBudget, tokens: int) -> None:
    """One call through a real Lane (its policy included) whose budget is `b`."""
    lane = _LANES.get(id(b))
    if lane is None or lane.budget is not b:
        lane = _LANES[id(b)] = Lane(Endpoint(name="e", kind="sim"), None, None, provider=None)
        lane.budget = b
    await lane.call(_noop, tokens)


async def test_tpm_is_one_budget_for_both_and_reconciled(redis_server: RedisServer):
    a, b = _budget(redis_server.url), _budget(redis_server.url)
    t0 = time.monotonic()
    # 60,000 TPM = 1,000 tokens/s for the key (paced at 96.5%): 2 x 10 calls of 100 tokens take ~2 s,
    # not the ~1 s each process alone would allow itself
    await asyncio.gather(*(_admit(x, 100) for x in (a, b) for _ in range(10)))
    assert time.monotonic() - t0 >= 1.8
    t1 = time.monotonic()
    a.reconcile(100, 1100)  # a call of a's really used 1,000 tokens more than estimated
    await asyncio.sleep(0.15)  # (sent with a's next script call: within SYNC_S)
    await _admit(b, 0)
    await _admit(b, 1)  # ... so b, on the same key, pays for them: ~1 s
    assert time.monotonic() - t1 >= 0.9
    for x in (a, b):
        await x.aclose()
        await x.client.aclose()


async def test_aimd_factor_is_shared(redis_server: RedisServer):
    a, b = _budget(redis_server.url, rpm=600), _budget(redis_server.url, rpm=600)
    await _admit(b, 0)
    assert b.factor == 1.0
    a.set_factor(0.5)  # a's lane met persistent 429s
    await asyncio.sleep(0.1)
    await _admit(b, 0)
    assert b.factor <= 0.6  # b slows down with it (its lane may recover by 0.1 after a quiet second)
    t0 = time.monotonic()
    for _ in range(3):
        await _admit(b, 0)
    assert time.monotonic() - t0 >= 3 * 60 / (600 * 0.6) * 0.9  # >= 0.167 s apart, not 0.1
    for x in (a, b):
        await x.aclose()
        await x.client.aclose()


async def test_identity_never_holds_the_key(redis_server: RedisServer):
    b = _budget(redis_server.url, rpm=600)
    await _admit(b, 0)
    assert b._local is None and b.calls >= 1, (b._local, b.calls)
    keys = [k.decode() for k in await b.client.keys("*")]
    assert keys and all("the-key" not in k for k in keys)
    assert lane_id("u", "k1") != lane_id("u", "k2") and lane_id("u", "k1") == lane_id("u", "k1")
    await b.aclose()
    await b.client.aclose()
