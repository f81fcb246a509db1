"""#40: the key's shared TPM account (runner/budgets/redis_tpm.py) through a real Redis (the fixture starts one)
as the key counts tokens: a call admitted for its tokens and sent long after (it waited for its slot or a
lease) is charged by the key only when it goes, so it takes its tokens again first; a 429 for tokens defers
token admission for every process, not requests; a fallback keeps the depth learnt. Counted in orders and
the account's state, not timed."""

from __future__ import annotations

import asyncio
import time

from runner.budgets.tokens import TPM_SHARE
from runner.lanes import Lane
from tests.helpers import close_lanes, redis_tpm_lane
from tests.servers import RedisServer

GUARD_S = 30.0  # a hang guard only
TPM = 60_000  # 1,000 tokens a second for the key: the account's bucket holds 970 (TPM_SHARE)


def _lane(url: str, key: str, name: str, tpm: float = TPM) -> Lane:
    return redis_tpm_lane(url, key, name, tpm)


async def test_a_429_for_tokens_on_a_shared_key_defers_tokens_for_every_process_not_requests(
    redis_server: RedisServer,
):
    """A 429 for tokens told to wait 20 s: the key's account admits no token before then, for every process
    (its level goes below zero by ~20 s of its rate: B's call of 100 waits for it), while requests that need
    no tokens are not paused (before, the whole key paused: every process's requests waited the 20 s)."""
    a, b = _lane(redis_server.url, "defer", "a"), _lane(redis_server.url, "defer", "b")
    sent: list[str] = []

    async def call() -> None:
        sent.append("b")

    await asyncio.wait_for(b.call(call, 0), GUARD_S)  # (on the key: a new key's leases come after its grace)
    n = a.budget._tpm.calls
    a._on_answer({"limit_tokens": TPM, "remaining_tokens": 0, "remaining_requests": 5, "reset_tokens": 20.0}, True)
    assert a.budget.paused_until <= time.monotonic()  # requests go on
    t0 = time.monotonic()
    while a.budget._tpm.calls == n and time.monotonic() - t0 < GUARD_S:
        await asyncio.sleep(0.01)
    level = float(await a.budget.client.hget(a.budget._tpm.keys[0], "level"))
    rate = TPM * TPM_SHARE / 60
    assert level <= -15 * rate  # (20 s told, less the refill since: no token before then)
    taken = asyncio.create_task(b.budget.take(100))
    await asyncio.wait_for(b.call(call, 0), GUARD_S)  # a request of no tokens goes at once
    await asyncio.sleep(0.2)
    assert sent == ["b", "b"] and not taken.done()  # B's tokens wait for the key's reset too
    taken.cancel()
    await asyncio.gather(taken, return_exceptions=True)
    await close_lanes(a, b)


async def _reply(lane: Lane) -> None:
    """A script call of this process (a call of 1 token, settled at once)."""
    await asyncio.wait_for(lane.budget.take(1, 1), GUARD_S)
    lane.budget.reconcile(1, 1, 1)


async def test_a_fallback_keeps_its_share_of_the_depth_learnt(redis_server: RedisServer):
    """The key's bucket was seen holding 30,000 (an answer's remaining-tokens); Redis goes away: the
    fallback's local budget (1/N of the key) keeps its share of that depth, not a second's (before: 0,
    unknown, a second of its TPM, and every credit beyond it forgotten until an answer showed it again)."""
    a = _lane(redis_server.url, "depth", "a")

    async def noop() -> None:
        pass

    await asyncio.wait_for(a.call(noop, 100), GUARD_S)
    a.reconcile(100, 100)
    a._on_answer({"limit_tokens": TPM, "remaining_tokens": 30_000}, False)
    t0 = time.monotonic()
    state = a.budget._tpm.keys[0]
    while await a.budget.client.hget(state, "depth") != b"30000" and time.monotonic() - t0 < GUARD_S:
        await asyncio.sleep(0.01)
    assert float(await a.budget.client.hget(state, "depth")) == 30_000  # (the key's, learnt in Redis)
    await _reply(a)  # (a reply that says it)
    redis_server.stop()
    call = asyncio.create_task(a.call(noop, 100))
    while a.budget._local is None and time.monotonic() - t0 < GUARD_S:
        await asyncio.sleep(0.02)
    local = a.budget._local
    assert local is not None
    assert local.tokens.depth == 30_000 * local.tpm / TPM  # (its share: 1/N of the key's TPM)
    call.cancel()
    await asyncio.gather(call, return_exceptions=True)
    await a.budget.aclose()
    await a.budget.client.aclose()


async def test_a_call_sent_long_after_its_tokens_were_admitted_takes_them_again(redis_server: RedisServer):
    """A key of 600 TPM, its bucket seen 600 deep (refilled at ~10 tokens a second). B's call of 250 is on the
    wire; A's call of 300 is admitted for its tokens (50 left) and waits 3 s for its slot (the key's requests
    paused). Meanwhile B's answer settles a debt of 500 (its reasoning): the key, which charges A's call only
    when it goes, holds ~100 of the 300 then. A's call does not go at the pause's end on the tokens it was
    admitted for: it queues for them again, at the head (before, it went, and the key refused it)."""
    tpm = 600
    a, b = _lane(redis_server.url, "stale", "a", tpm), _lane(redis_server.url, "stale", "b", tpm)
    sent: list[str] = []

    async def noop() -> None:
        pass

    for lane in (a, b):  # (on the key: a new key's leases come after its grace)
        await asyncio.wait_for(lane.call(noop, 0), GUARD_S)
    a._on_answer({"limit_tokens": tpm, "remaining_tokens": 600}, False)  # the key's bucket: 600 deep
    await _reply(a)
    end = asyncio.Event()

    async def long() -> None:
        sent.append("b")
        await end.wait()

    on_wire = asyncio.create_task(b.call(long, 250))
    t0 = time.monotonic()
    while sent != ["b"] and time.monotonic() - t0 < GUARD_S:
        await asyncio.sleep(0.01)
    a.budget.pause(3.0)

    async def late() -> None:
        sent.append("a")

    waiting = asyncio.create_task(a.call(late, 300))
    while a.budget._tpm.n_open < 1 and time.monotonic() - t0 < GUARD_S:
        await asyncio.sleep(0.01)
    assert a.budget._tpm.n_open == 1 and sent == ["b"]  # admitted for its tokens, not sent (paused)
    end.set()
    await asyncio.wait_for(on_wire, GUARD_S)
    b.reconcile(250, 750)  # B's answer: 500 beyond its charge
    queue = a.budget._tpm.keys[1]
    while sent == ["b"] and not await a.budget.client.zcard(queue) and time.monotonic() - t0 < GUARD_S:
        await asyncio.sleep(0.02)
    assert sent == ["b"]  # not sent on the tokens the debt took ...
    assert await a.budget.client.zcard(queue) == 1  # ... queued for them again
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    await close_lanes(a, b)
