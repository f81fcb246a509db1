"""#40: the key's TPM account shared through a real Redis (the fixture starts one) by several processes
(each a RedisBudget on its own connection pool, in one event loop), through real Lanes: it holds a call's
expected tokens until its answer settles them, gives the rest back at once to a call waiting in any
process, and admits waiting calls first come first served across the processes. Counted (tokens in
windows, the order of admissions), not timed."""

from __future__ import annotations

import asyncio
import time

import pytest

from runner.budgets.redis import lane_id
from runner.budgets.tokens import TPM_SHARE
from runner.calls.halt import Halted
from runner.lanes import Lane
from tests.helpers import close_lanes, key_refusals, redis_tpm_lane
from tests.servers import RedisServer

GUARD_S = 30.0  # a hang guard only: what is waited for comes at once, or after ~10,000 s of refill
LAG_S = 0.05  # a loaded loop records an admission or an answer up to this much after Redis counted it
TINY_TPM = 0.6  # ~0.01 tokens a second: a call of 100 tokens comes back only as an answer's credit


def _lane(url: str, key: str, tpm: float, name: str) -> Lane:
    return redis_tpm_lane(url, key, name, tpm)


async def test_two_processes_never_pass_the_keys_tpm(redis_server: RedisServer):
    """Two processes, each with more work than the key's TPM allows, heavy-tailed: 7 calls in 8 are
    reasoning ones, charged 25 tokens at admission (prompt + max_tokens) and using the 100 expected; the
    8th is charged 100 and uses 10. Counted as the key counts them (a call's charge at its admission, the
    rest of its usage, a debt or a credit, at its answer), the tokens of any window of w seconds ending at
    an admission stay within the account's bucket (a second of TPM_SHARE) and its refill for w, so under
    0.99 of the TPM in any 60 s; and the key's own bucket, replayed from the admissions and answers, never
    refuses one. (The account before this held nothing and gave no credit back: slow, it passed this too;
    the holds and credits of the new one must not cost the key's limit. Counted at admission, a call's
    whole usage, the check held only while every call in flight held its whole rest: the account holds
    the largest one, as the key's bucket takes the rests at the answers, into debt the next calls wait for.)"""
    tpm, latency, n = 60_000, 0.5, 24
    per_s = tpm / 60
    a, b = _lane(redis_server.url, "w", tpm, "a"), _lane(redis_server.url, "w", tpm, "b")
    calls: list[tuple[float, float, int, int]] = []

    async def one(lane: Lane, i: int) -> None:
        charge, actual = (100, 10) if i % 8 == 7 else (25, 100)

        async def call() -> None:
            t0 = time.monotonic()
            await asyncio.sleep(latency)
            calls.append((t0, time.monotonic(), charge, actual))

        await lane.call(call, 100, None, charge)
        lane.reconcile(100, actual, charge)

    await asyncio.wait_for(asyncio.gather(*(one(x, i) for x in (a, b) for i in range(n))), GUARD_S * 2)
    assert len(calls) == 2 * n
    # (at, tokens, an admission): the key counts a call's charge when it admits it, the rest (a debt, or a
    # credit < 0) at its answer
    counted = sorted([(t0, c, True) for t0, _, c, _ in calls] + [(t1, u - c, False) for _, t1, c, u in calls])
    worst = 0.0
    for i, (t0, _, _) in enumerate(counted):
        total = 0
        for t1, tokens, admitted in counted[i:]:
            total += tokens
            if admitted:
                bound = TPM_SHARE * per_s * (t1 - t0 + 1.0 + LAG_S) + 20  # (+ 20: the clocks' jitter)
                worst = max(worst, total / bound)
    assert worst <= 1.0, worst
    assert key_refusals(calls, tpm) == 0
    await close_lanes(a, b)


async def test_a_reservation_given_back_is_used_by_a_call_waiting_in_another_process(redis_server: RedisServer):
    """A's call holds the whole bucket (a key of ~0.01 tokens a second: refilled only in hours); B's call
    waits for it. A's answer used none of its 100 tokens: they come back at once, and B's call, in another
    process, goes on them. Before, B's slot was fixed when it queued, hours ahead, whatever came back."""
    a, b = _lane(redis_server.url, "give", TINY_TPM, "a"), _lane(redis_server.url, "give", TINY_TPM, "b")
    order: list[str] = []

    async def call(name: str) -> None:
        order.append(name)

    await asyncio.wait_for(a.call(lambda: call("a"), 100), GUARD_S)
    waiting = asyncio.create_task(b.call(lambda: call("b"), 100))
    await asyncio.sleep(0.5)
    assert order == ["a"]  # the bucket is empty: B waits
    a.reconcile(100, 0)  # A's answer: it used nothing
    await asyncio.wait_for(waiting, GUARD_S)
    assert order == ["a", "b"]
    await close_lanes(a, b)


async def test_calls_waiting_for_tokens_are_admitted_first_come_first_served_across_processes(
    redis_server: RedisServer,
):
    """Three processes; A's call empties the bucket (refilled only in hours). Calls then queue in the
    order B1, C1, B2, C2, A2; each one admitted uses none of its tokens, so its answer lets the next one
    through. They go in their order of arrival, whichever process they queued in (before, each process's
    slots were its own: B's two went before C's)."""
    key = "order"
    lanes = {p: _lane(redis_server.url, key, TINY_TPM, p) for p in "ABC"}
    order: list[str] = []

    async def one(name: str) -> None:
        lane = lanes[name[0]]

        async def call() -> None:
            order.append(name)

        await lane.call(call, 100)
        lane.reconcile(100, 0)

    first = asyncio.Event()

    async def head() -> None:
        lane = lanes["A"]

        async def call() -> None:
            order.append("A1")

        await lane.call(call, 100)
        await first.wait()
        lane.reconcile(100, 0)

    tasks = [asyncio.create_task(head())]
    while order != ["A1"]:
        await asyncio.sleep(0.01)
    queue = f"evalsweep:{{{lane_id('u', key)}}}:tpmq"  # (the key's queue of calls waiting for tokens)
    admin = lanes["A"].budget.client
    for i, name in enumerate(["B1", "C1", "B2", "C2", "A2"]):
        tasks.append(asyncio.create_task(one(name)))
        t0 = time.monotonic()
        while await admin.zcard(queue) < i + 1 and time.monotonic() - t0 < 5.0:  # (queued: the next one)
            await asyncio.sleep(0.01)
    assert order == ["A1"]
    first.set()  # A1's answer: its tokens come back, the first waiting call goes, and so on
    await asyncio.wait_for(asyncio.gather(*tasks), GUARD_S)
    assert order == ["A1", "B1", "C1", "B2", "C2", "A2"]
    await close_lanes(*lanes.values())


async def test_calls_waiting_for_tokens_when_redis_goes_take_them_locally_within_a_share(
    redis_server: RedisServer,
):
    """Two processes with calls queued in the key's TPM account; Redis goes away. Their waiting calls
    take their tokens from each process's fallback (a local budget at 1/N of the key's TPM), none waits
    for Redis; counted at admission, each process stays within its share's bucket and refill in every
    window from its fallback on."""
    tpm = 6_000  # 100 tokens a second for the key
    a, b = _lane(redis_server.url, "gone", tpm, "a"), _lane(redis_server.url, "gone", tpm, "b")
    admitted: dict[str, list[tuple[float, int]]] = {"a": [], "b": []}
    stop = asyncio.Event()

    async def work(lane: Lane, name: str) -> None:
        async def call() -> None:
            admitted[name].append((time.monotonic(), 20))
            await asyncio.sleep(0.05)

        while not stop.is_set():
            await lane.call(call, 20)
            lane.reconcile(20, 20)

    tasks = [asyncio.create_task(work(x, n)) for x, n in ((a, "a"), (b, "b")) for _ in range(4)]
    t0 = time.monotonic()
    while sum(map(len, admitted.values())) < 10 and time.monotonic() - t0 < GUARD_S:
        await asyncio.sleep(0.02)
    assert a.budget._tpm._waiting or b.budget._tpm._waiting  # calls queued for tokens in Redis
    redis_server.stop()
    while (a.budget._local is None or b.budget._local is None) and time.monotonic() - t0 < GUARD_S:
        await asyncio.sleep(0.02)
    fell = time.monotonic()
    assert a.budget._local is not None and b.budget._local is not None
    while min(sum(1 for t, _ in v if t > fell) for v in admitted.values()) < 8 and time.monotonic() - fell < GUARD_S:
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(asyncio.gather(*tasks), GUARD_S)
    for name, lane in (("a", a), ("b", b)):
        share = lane.budget._local.tpm / 60  # tokens a second: at most half the key's
        assert share <= tpm / 60 / 2
        used = sorted(x for x in admitted[name] if x[0] > fell)
        assert len(used) >= 8  # the calls queued in Redis went on locally
        for i, (s0, _) in enumerate(used):
            total = 0
            for s1, tokens in used[i:]:
                total += tokens
                assert total <= TPM_SHARE * share * (s1 - s0 + 1.0) + 20, (name, total, s1 - s0)
    for lane in (a, b):
        await lane.budget.aclose()
        await lane.budget.client.aclose()


async def test_a_call_waiting_for_tokens_is_not_sent_when_the_run_stops(redis_server: RedisServer):
    """Ctrl-C: a call queued in the key's TPM account (the bucket empty for hours) ends at once as not
    sent (Halted), uncharged, its queue entry gone; it does not wait for its tokens."""
    a = _lane(redis_server.url, "halt", TINY_TPM, "a")

    async def noop() -> None:
        pass

    await asyncio.wait_for(a.call(noop, 100), GUARD_S)
    waiting = asyncio.create_task(a.call(noop, 100))
    queue = f"evalsweep:{{{lane_id('u', 'halt')}}}:tpmq"
    t0 = time.monotonic()
    while not await a.budget.client.zcard(queue) and time.monotonic() - t0 < 5.0:
        await asyncio.sleep(0.01)
    a.halt()
    with pytest.raises(Halted):
        await asyncio.wait_for(waiting, GUARD_S)
    t0 = time.monotonic()
    while await a.budget.client.zcard(queue) and time.monotonic() - t0 < 5.0:
        await asyncio.sleep(0.01)
    assert await a.budget.client.zcard(queue) == 0
    await close_lanes(a)
