"""#40: what the key's shared TPM account (runner/budgets/redis_tpm.py) holds for the calls in flight beyond
their admission charge, through a real Redis (the fixture starts one): the largest rest of one call in
flight across every process on the key (as the local account, `LocalBudget._owed`), not the sum of every
call's, and only as long as its process's heartbeat (a SIGKILLed holder's goes when it lapses). Counted in
the account's replies and script calls, not timed."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

from runner.lanes import Lane
from tests.helpers import redis_tpm_lane
from tests.servers import RedisServer

ROOT = Path(__file__).resolve().parent.parent
GUARD_S = 30.0  # a hang guard only
TPM = 60_000  # 1,000 tokens a second for the key: the account's bucket holds 970 (TPM_SHARE)


def _lane(url: str, key: str, name: str, lease_s: float = 5.0) -> Lane:
    return redis_tpm_lane(url, key, name, TPM, lease_s)


async def _on_wire(lane: Lane, tokens: int, charge: int, end: asyncio.Event) -> asyncio.Task[object]:
    """A call admitted through `lane` (charged `charge`, expected to use `tokens`) that stays on the wire
    until `end`; returns once it is on it, with the number of the account's script calls its admission took."""
    on = asyncio.Event()

    async def call() -> None:
        on.set()
        await end.wait()

    before = lane.budget._tpm.calls
    task = asyncio.create_task(lane.call(call, tokens, None, charge))
    await asyncio.wait_for(on.wait(), GUARD_S)
    task.trips = lane.budget._tpm.calls - before  # type: ignore[attr-defined]
    return task


async def _told(lane: Lane) -> None:
    """Wait until this process's account has told Redis what changed (its script call for a settlement is
    sent by a task of its own: another process's script call may otherwise reach Redis first)."""
    task = lane.budget._tpm._task
    if task is not None:
        await asyncio.wait_for(task, GUARD_S)


async def _reply_held(lane: Lane) -> float:
    """The account's `held` as a fresh script call of this process reads it (a call of no tokens' cost:
    one that waits for nothing and is settled at once)."""
    tpm = lane.budget._tpm
    n = tpm.calls
    await asyncio.wait_for(lane.budget.take(1, 1), GUARD_S)
    lane.budget.reconcile(1, 1, 1)
    assert tpm.calls > n and tpm.last is not None
    return tpm.last.held


async def test_two_processes_calls_in_flight_hold_the_largest_rest_not_the_sum(redis_server: RedisServer):
    """A has two calls in flight charged 150 and expected to settle 200 more each; B then sends two charged 150
    expecting 100 more. The bucket (970) holds each in turn with its own rest and the largest one in flight
    (B's second: 150 + 100 + 200 <= 970 - 4 x 150), so each is admitted by the one script call it made. Holding
    the sum (B's second: 150 + 100 + 500 > 520) it waited for a bucket the key never needed. The account says
    it holds 200; B's calls settled, still A's 200; all settled, nothing."""
    a, b = _lane(redis_server.url, "max", "a"), _lane(redis_server.url, "max", "b")
    end_a, end_b = asyncio.Event(), asyncio.Event()
    calls = [await _on_wire(a, 350, 150, end_a) for _ in range(2)]
    calls += [await _on_wire(b, 250, 150, end_b) for _ in range(2)]
    assert [t.trips for t in calls] == [1, 1, 1, 1]  # type: ignore[attr-defined]  # none waited for a refill
    assert (a.budget._tpm.held, b.budget._tpm.held) == (200, 100)
    assert b.budget._tpm.last is not None and b.budget._tpm.last.held == 200  # every process's largest
    end_b.set()
    for t in calls[2:]:
        await asyncio.wait_for(t, GUARD_S)
        b.reconcile(250, 250, 150)  # as expected: their rests settled, their holds given back
    assert b.budget._tpm.held == 0
    assert await _reply_held(b) == 200  # A's calls still hold theirs
    end_a.set()
    for t in calls[:2]:
        await asyncio.wait_for(t, GUARD_S)
        a.reconcile(350, 350, 150)
    await _told(a)  # (A's settlement reaches Redis on its own connection: B's read must come after it)
    assert await _reply_held(b) == 0
    for lane in (a, b):
        await lane.budget.aclose()
        await lane.budget.client.aclose()


async def test_a_killed_holders_rest_is_held_until_its_heartbeat_lapses(redis_server: RedisServer):
    """Another process has a call on the wire expected to settle 4,900 beyond its charge and is SIGKILLed:
    nothing of it is settled or given back. While its heartbeat runs the account holds its 4,900 (the largest
    rest in flight, not 4,900 + this process's 200); once its lease lapses, only this process's 200, and its
    entry is gone from Redis."""
    key = "killed"
    holder = subprocess.Popen([sys.executable, "-m", "tests.redis_tpm_holder", redis_server.url, key, str(TPM),
                               "5000", "100", "1.0"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline().split()
        assert line[:1] == ["held"], holder.poll()
        dead = line[1]
        me = _lane(redis_server.url, key, "me")
        end = asyncio.Event()
        call = await _on_wire(me, 300, 100, end)
        assert await _reply_held(me) == 4900  # the largest rest in flight, the other process's
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        admin = me.budget.client
        held_key = me.budget._tpm.keys[2]
        t0 = time.monotonic()
        while time.monotonic() - t0 < GUARD_S:  # its heartbeat lapses (1 s lease), the next script call drops it
            held = await _reply_held(me)
            if held != 4900:
                break
            await asyncio.sleep(0.1)
        assert held == 200
        assert await admin.hget(held_key, dead) is None
        end.set()
        await asyncio.wait_for(call, GUARD_S)
        me.reconcile(300, 300, 100)
        await me.budget.aclose()
        await me.budget.client.aclose()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


async def test_the_keys_deeper_bucket_is_credited_once_for_every_process(redis_server: RedisServer):
    """A key of 600 TPM (10 tokens a second: the account's second holds 9.7, refilled in minutes). A's call of
    9 nearly empties it; its answer's remaining-tokens says the key held 500 at that admission: the account,
    for every process, takes the ~490 it did not count, so B's call of 300 goes on the script call it made
    (before, it waited for the second's 9.7 to refill, a call over a full bucket going when it is full, and
    then found the account ~490 behind the key for the run).
    B's own first remaining-tokens (550) credits nothing more: the key's is learnt once, in Redis. A refusal
    for tokens halves the depth believed (550 -> 275) for every process: the account holds no more than that."""
    tpm = 600
    a, b = (_lane(redis_server.url, "deep", p) for p in "ab")
    for lane in (a, b):
        lane.budget.set_limits(None, tpm)
    end = asyncio.Event()
    first = await _on_wire(a, 9, 9, end)
    a._on_answer({"limit_tokens": tpm, "remaining_tokens": 500}, False)
    second = await _on_wire(b, 300, 300, end)
    assert second.trips == 1  # type: ignore[attr-defined]  # admitted at once: the credit was there
    r = b.budget._tpm.last
    assert r is not None and 500 - 9 - 300 - 1 < r.level < 400  # (~20 s of refill to 400: the test's slack)
    b._on_answer({"limit_tokens": tpm, "remaining_tokens": 550}, False)
    await _reply_held(b)
    r = b.budget._tpm.last
    assert r is not None and r.level < 400  # no second credit (it would fill the bucket: 550)
    state = b.budget._tpm.keys[0]
    assert float(await b.budget.client.hget(state, "depth")) == 550
    a._on_answer({"limit_tokens": tpm, "remaining_tokens": 0, "reset_tokens": 0.001}, True)  # a 429 for tokens
    await _reply_held(b)
    assert float(await b.budget.client.hget(state, "depth")) == 275
    end.set()
    await asyncio.wait_for(asyncio.gather(first, second), GUARD_S)
    for lane in (a, b):
        await lane.budget.aclose()
        await lane.budget.client.aclose()
