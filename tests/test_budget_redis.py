"""RedisBudget against a real Redis: two budgets on separate connections are two processes' view of one
key (the multi-process behaviour is in test_shared_budget.py); here TPM, reconciliation and AIMD."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis.asyncio as aioredis

from runner.budgets.redis import RedisBudget, lane_id
from runner.calls.halt import Halted
from runner.config import Endpoint
from runner.lanes import Lane, LocalBudget
from tests.helpers import slot
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


async def _hold(b: RedisBudget, admitted: list[int], until: asyncio.Event) -> None:
    """One call that stays in flight until `until` is set."""
    await b.acquire()
    await slot(b)
    admitted.append(1)
    try:
        await until.wait()
    finally:
        b.release()


async def _hold_on(b: RedisBudget, admitted: list[int], untils: list[asyncio.Event]) -> None:
    """Calls one after another, each in flight until its event is set, the next acquired at once."""
    for until in untils:
        await _hold(b, admitted, until)


async def _held(client, b: RedisBudget) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in (await client.hgetall(b.keys[2])).items()}


async def test_leases_do_not_leak_after_a_fallback_in_which_redis_kept_its_state(
    redis_server: RedisServer, monkeypatch
):
    """A holds all 4 of the key's leases when Redis freezes (SIGSTOP: its state kept) long enough for A to
    fall back; its calls end while it paces locally; Redis thaws and A returns to it. A's 4 leases must
    not stay held in Redis under A's live heartbeat (they did: 24 and 14 of 64 in two runs, for 24 h):
    B, on the same key, then gets them at once (all 4: A, alive but idle, lends its share; a leak left
    B none)."""
    import os
    import signal

    from runner.budgets import redis_fallback
    from runner.budgets.redis_call import connect

    monkeypatch.setattr(redis_fallback, "RECOVER_S", 1.0)
    a = RedisBudget(connect(redis_server.url), lane_id("u", "k"), "a", 6000, None, 4, 30.0, local_factory=LocalBudget)
    b = RedisBudget(connect(redis_server.url), lane_id("u", "k"), "b", 6000, None, 4, 30.0, local_factory=LocalBudget)
    done, got = asyncio.Event(), []
    calls = [asyncio.create_task(_hold(a, got, done)) for _ in range(4)]
    while len(got) < 4:
        await asyncio.sleep(0.01)
    assert (await _held(b.client, b)) == {a.proc: 4}
    os.kill(redis_server.proc.pid, signal.SIGSTOP)
    try:
        while a._local is None:  # its heartbeat times out: local pacing
            await asyncio.sleep(0.05)
    finally:
        os.kill(redis_server.proc.pid, signal.SIGCONT)
    done.set()
    await asyncio.gather(*calls)
    while a._local is not None:  # back on Redis
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # a heartbeat or two of A's
    assert (await _held(b.client, b)).get(a.proc, 0) == 0
    done_b, got_b = asyncio.Event(), []
    calls_b = [asyncio.create_task(_hold(b, got_b, done_b)) for _ in range(4)]
    t0 = time.monotonic()
    while len(got_b) < 4 and time.monotonic() - t0 < 20:  # a leak holds them for 24 h
        await asyncio.sleep(0.02)
    assert len(got_b) == 4 == b._fair(), await _held(b.client, b)
    assert await _held(b.client, b) == {b.proc: 4}
    done_b.set()
    await asyncio.gather(*calls_b)
    for x in (a, b):
        await x.aclose()
    assert await _held(b.client, b) == {}  # leaving gives every lease back
    for x in (a, b):
        await x.client.aclose()


async def test_redis_restarted_costs_one_fallback_not_a_second_on_stale_connections(
    redis_server: RedisServer, monkeypatch
):
    """Six lanes of one process share a client whose pool holds their connections; Redis restarts. Each
    lane falls back once and returns; the pooled connections the restart killed must not make a second,
    spurious fallback seconds later (they did: "Connection closed by server", 12 x 429 in one run)."""
    from runner.budgets import redis_fallback
    from runner.budgets.redis_call import connect

    monkeypatch.setattr(redis_fallback, "RECOVER_S", 1.0)
    client = connect(redis_server.url)
    lanes = [RedisBudget(client, lane_id("u", k), k, 6000, None, 8, 5.0, local_factory=LocalBudget) for k in "abcdef"]

    async def busy(b: RedisBudget, seconds: float) -> None:
        async def one() -> None:
            done = asyncio.Event()
            asyncio.get_running_loop().call_later(0.02, done.set)
            await _hold(b, [], done)

        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            await asyncio.gather(*(one() for _ in range(8)))

    await asyncio.gather(*(busy(b, 0.5) for b in lanes), *(client.ping() for _ in range(12)))
    pool = client.connection_pool
    assert len(pool._available_connections) >= 6  # a pool, not one connection
    redis_server.stop()
    work = [asyncio.create_task(busy(b, 9.0)) for b in lanes]
    while any(b._local is None for b in lanes):
        await asyncio.sleep(0.02)
    redis_server.sock.unlink(missing_ok=True)
    redis_server.start()
    while any(b._local is not None for b in lanes):
        await asyncio.sleep(0.05)
    await asyncio.gather(*work)  # seconds of calls on the pool after the return
    assert [b.fallbacks for b in lanes] == [1] * 6
    assert all(b._local is None for b in lanes)
    for b in lanes:
        await b.aclose()
    await client.aclose()


async def test_a_shared_key_is_charged_what_it_counts_at_admission_and_settled_at_the_answer(
    redis_server: RedisServer,
):
    """A reasoning call expected to use 3,000 tokens of which the key counts 1,000 (prompt + max_tokens)
    when it admits it: the shared account takes 1,000 then and holds the other 2,000 (the next call waits
    for them as well as for its own, never into the key's debt) until the answer settles it: its usage
    replaces its charge and the hold is given back at once. (Charged 3,000 up front, an idle second reset
    the account past the prepayment and the key's debt at the settlement was forgotten: the next calls
    went into it.) Read from the account's own replies: tokens, not seconds (#40: the account is a
    bucket a second deep, as the key's and the local one, so the debt's wait is no longer a fixed 2 s)."""
    a = _budget(redis_server.url)  # 970 tokens a second for the key (TPM_SHARE), a bucket of as many
    depth = a._tpm.rate()[1]
    lane = Lane(Endpoint(name="e", kind="sim"), None, None, provider=None)
    lane.budget = a
    await lane.call(_noop, 3000, None, 1000)
    r = a._tpm.last
    assert r is not None and r.level <= depth - 1000 + 1  # charged 1,000 (from a full bucket), not 3,000
    assert r.held == 2000 and a._tpm.held == 2000  # ... and the rest held, in Redis
    await lane.call(_noop, 100, None, 100)  # it waits for the bucket to hold it and the hold (a full one)
    r = a._tpm.last
    assert r.level <= depth - 100 + 1 and r.held == 2000
    lane.reconcile(3000, 3000, 1000)  # the answer settles as expected: the other 2,000 now
    while a._tpm.held or a._tpm.last is r:  # (sent at once, one script call)
        await asyncio.sleep(0.01)
    r = a._tpm.last
    assert r.held == 0 and r.level <= depth - 2000  # the key's debt (on at most a full bucket): the next call waits for it
    await a.aclose()
    await a.client.aclose()


async def test_a_closed_budget_calls_redis_no_more_even_if_a_cancellation_of_its_tasks_is_lost(
    redis_server: RedisServer,
):
    """Closing (or a kill) cancels the budget's tasks, but a cancellation can be lost inside redis-py
    (CPython 3.11's wait_for swallows one that meets the end of the write it wraps): the task then ran on,
    heartbeating the leases of a closed budget for ever. Here every cancellation is lost."""
    b = _budget(redis_server.url, lease_s=0.3)
    admitted: list[int] = []
    until = asyncio.Event()
    call = asyncio.create_task(_hold(b, admitted, until))  # a call in flight: heartbeats every SYNC_S
    while not admitted:
        await asyncio.sleep(0.01)
    before = b.calls
    await asyncio.sleep(0.35)
    assert b.calls > before  # (the heartbeat this checks the end of)
    b.closed = True  # what aclose() and a kill set; their cancellations of its tasks are all lost here
    await asyncio.sleep(0.1)  # a call already in flight ends
    calls = b.calls
    await asyncio.sleep(0.6)  # several heartbeats' worth
    assert b.calls == calls
    until.set()
    await call
    await b.client.aclose()


async def test_an_idle_process_lends_its_share_and_takes_it_back_with_work(redis_server: RedisServer):
    """#40: one busy process beside 7 idle ones on a key capped at 8 held 1 lease (8 / 8 processes
    heartbeating): it made 4.7 calls/s where alone it makes 36.6. The share is now over the processes
    with calls running or waiting: the busy one holds all 8; when a second gets work, each holds 4."""
    from runner.budgets.redis_call import connect

    procs = [RedisBudget(connect(redis_server.url), lane_id("u", "lend"), f"p{i}", 60_000, None, 8, 5.0,
                         local_factory=LocalBudget) for i in range(8)]
    for p in procs[1:]:  # idle, but alive: each says it is there (a heartbeat with nothing to do)
        async with p._call.lock:
            await p._eval(0)
    done, got, later = asyncio.Event(), [], asyncio.Event()
    # (each of its calls is followed at once by the next, as a Lane's workers go on: it never has none)
    busy = [asyncio.create_task(_hold_on(procs[0], got, [done, later])) for _ in range(8)]
    t0 = time.monotonic()
    while len(got) < 8 and time.monotonic() - t0 < 10:
        await asyncio.sleep(0.02)
    assert len(got) == 8 and procs[0].n_procs == 8, await _held(procs[0].client, procs[0])  # (1 before)
    done2, got2 = asyncio.Event(), []
    second = [asyncio.create_task(_hold(procs[1], got2, done2)) for _ in range(8)]
    await asyncio.sleep(0.5)
    assert got2 == [] and procs[1]._fair() == 4  # it has work now: its share, once leases free
    got.clear()
    done.set()  # the first's calls end; it keeps going with new ones, at its new share
    t0 = time.monotonic()
    while (len(got2) < 4 or len(got) < 4) and time.monotonic() - t0 < 10:
        await asyncio.sleep(0.02)
    assert len(got2) == 4 and len(got) == 4, (await _held(procs[0].client, procs[0]))
    later.set()
    done2.set()
    await asyncio.gather(*busy, *second)
    for p in procs:
        await p.aclose()
    for p in procs:
        await p.client.aclose()


async def test_a_process_waiting_for_the_keys_concurrency_does_not_poll_redis(redis_server: RedisServer):
    """#40: a process whose calls wait for a lease another holds asks Redis on its back-off only (at most
    every RETRY_MAX_S, plus its heartbeat), not on the 0.1 s sync meant for calls in flight (with 6 --join
    workers on a key capped at 4 that polling was ~80 script calls per API call)."""
    a, b = _budget(redis_server.url, tpm=None, rpm=None, max_concurrency=1), _budget(
        redis_server.url, tpm=None, rpm=None, max_concurrency=1)
    release = asyncio.Event()

    async def hold(x: RedisBudget) -> None:
        await x.acquire()
        wait = x.reserve(0)
        while wait > 0:
            await asyncio.sleep(wait)
            wait = x.confirm()
        await release.wait()
        x.release()

    ta = asyncio.create_task(hold(a))
    while not a.admitted:
        await asyncio.sleep(0.01)
    tb = asyncio.create_task(hold(b))
    await asyncio.sleep(0.5)  # b's back-off reaches its longest step
    before = b.calls
    await asyncio.sleep(2.0)
    polled = b.calls - before
    assert b.admitted == 0
    release.set()
    await asyncio.wait_for(asyncio.gather(ta, tb), 10)
    assert b.admitted == 1  # ... and it gets the lease once a's call ends
    await a.aclose()
    await b.aclose()
    assert polled <= 10, polled  # 2 s at RETRY_MAX_S = 0.25 s: 8 (it was ~28 with the 0.1 s sync)


class _Counted(RedisBudget):
    """A RedisBudget that counts the Lane's confirm() calls (what a ticket waiting for its slot costs)."""

    confirms = 0

    def confirm(self) -> float:
        self.confirms += 1
        return super().confirm()


async def test_a_call_waiting_for_its_slot_is_woken_by_the_grant_not_by_polling_confirm(
    redis_server: RedisServer,
):
    """#40 item 2: a ticket whose slot is not granted yet waits on a future `_grant` sets when the slot is
    due, so each call confirms about once; it re-confirmed every max(rtt, 0.5 ms) before (~3.5 confirm()
    calls and ~3 more timers per call at 60,000 RPM alone on the key). The pacing is unchanged."""
    b = _Counted(aioredis.Redis.from_url(redis_server.url), lane_id("http://127.0.0.1:9/v1", "wake"), "e/KEY",
                 60_000, None, 64, 5.0, local_factory=LocalBudget)
    sem = asyncio.Semaphore(64)

    async def one() -> None:
        async with sem:
            await _admit(b, 0)

    n = 600
    await asyncio.gather(*(one() for _ in range(n)))
    await b.aclose()
    await b.client.aclose()
    assert b.admitted == n
    assert b.calls < n / 5  # slots still asked in batches
    assert b.confirms <= n + 2 * b.late + n // 10, (b.confirms, b.late)  # one each (a late one: 2 more)


async def test_a_call_waiting_for_its_slots_grant_is_not_sent_when_the_run_stops(redis_server: RedisServer):
    """Ctrl-C: a call whose slot is not granted yet (the key's next one is ~100 s away) ends at once as
    not sent (Halted): halt wakes the future it waits on, as it woke the timer it polled on before."""
    b = _budget(redis_server.url, rpm=0.6, tpm=None)
    lane = Lane(Endpoint(name="e", kind="sim"), None, None, provider=None)
    lane.budget = b
    await asyncio.wait_for(lane.call(_noop, 0), 30)
    waiting = asyncio.create_task(lane.call(_noop, 0))
    while not any(tk.fut is not None for tk in b._tickets.values()):  # (it waits on its grant)
        await asyncio.sleep(0.01)
    lane.halt()
    with pytest.raises(Halted):
        await asyncio.wait_for(waiting, 30)  # (a hang guard: it ends at once)
    assert b.admitted == 1
    await b.aclose()
    await b.client.aclose()
