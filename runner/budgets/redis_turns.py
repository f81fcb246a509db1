"""The key's concurrency leases (#40): how a RedisBudget (runner.budgets.redis) binds them to its tasks
(`acquire` .. `release`), and how processes take them in turns across the key, with what its script
(redis.lua) keeps for them.

Leases are absolute counts (never deltas): a reply lost, a restart of Redis or a fallback cannot leak
them, since the next call says again how many this process holds and how many its running calls need.
A task first passes the process's local cap (`acquire`: max_concurrency, 1 while probing), then gets a
lease of the key's; it keeps it until `release`, which gives it to a task of its process waiting, or,
its turn over, to the first process queued.

A task waits in `acquire` (`lease`) on a future, never a poll, until its process holds a lease for it:
one spare (kept from a call that ended), else one Redis gives it (`serve`). A process under its share
whose calls wait queues in Redis for the next lease that frees, in order of arrival, and blocks on its
own wake list (BLPOP) until the script pushes to it; nobody behind it, nor a process not waiting, takes
that lease first. A lease held ROTATE_S goes, as its call ends, to the first process queued (`release`),
so with more processes than the cap each has turns instead of two waiting for ever. A task let through
is not bound to the lease yet: its ticket takes it with its slot in one script call, so a lease Redis
dropped (a restart, a lapse) is never used.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from typing import Any

from runner.budgets.local import wait_turn
from runner.budgets.redis_call import woken

ROTATE_S = 0.5  # a lease held this long goes, as its call ends, to a process under its share waiting
FRESH_S = 0.1  # the last reply is this recent (or showed nobody waiting): its spare leases and share
# are used without asking (the ticket's grant, one script call anyway, binds the lease or refuses it)


async def acquire(b: Any) -> None:
    """The local cap (a process never runs more than max_concurrency, 1 while probing), then a lease
    of the key's for it: one this process holds spare, else one Redis gives it (`lease`). The wait
    is on a future, woken when a lease frees, never a poll: a process beyond the key's cap costs
    nothing. (The lease is bound to the task's ticket with its slot, in one script call, as before.)"""
    while True:
        if b._local is not None:
            local = b._local
            await local.acquire()
            b._used += 1
            if b._local is local:
                b._holders.add(asyncio.current_task())
            return
        if b._used < (1 if b.probing else b.max_concurrency):
            b._used += 1
            try:
                if await lease(b):
                    return
            except BaseException:
                b._used -= 1
                wake(b)
                raise
            b._used -= 1  # Redis went away meanwhile: the fallback's lease
            continue
        await wait_turn(b._waiters, lambda: wake(b))


def release(b: Any) -> None:
    """The current task's call ended: its lease to a task of this process waiting, or, if another
    process waits and the turn is over (or nobody here waits), back to the key for the first queued."""
    b._used -= 1
    task = asyncio.current_task()
    b._gated.discard(task)
    if b._local is not None:
        b._tickets.pop(task, None)
        b._flying.discard(task)
        if task in b._holders:
            b._holders.discard(task)
            b._local.release()
        return
    tk = b._tickets.pop(task, None)
    if tk is not None:
        tk.dead = True
        if tk.leased:
            b._bound -= 1
            now = b._idle_since = time.monotonic()
            if b.n_waiting and (not b._lease_q or now - b._turn_at >= ROTATE_S):
                b._giving += 1  # unused, or its turn is over: it goes to the first process queued
                b._kick()
            else:
                hand_out(b)
        else:  # (one let through for a lease, not yet bound: the lease is spare again)
            hand_out(b)
            if b._again or b._new:
                b._freed.set()
                b._kick()
    elif task in b._flying:  # a call the fallback admitted, registered as a lease on return
        b._flying.discard(task)
        b._bound -= 1
        b._idle_since = time.monotonic()
    wake(b)
    b._house_soon()  # (a lease spare with nothing waiting: given back after KEEP_S)


def wake(b: Any) -> None:
    """Let tasks waiting at the local cap through, as many as it has room for (all of them, fallen back:
    the fallback's own cap holds them; those waiting for a lease go the local way)."""
    free = (1 if b.probing else b.max_concurrency) - b._used
    if b._local is not None:
        free = len(b._waiters)
        while b._lease_q:  # (fallen back: they take the fallback's leases)
            _, fut = b._lease_q.popleft()
            if not fut.done():
                fut.set_result(False)
    while free > 0 and b._waiters:
        fut = b._waiters.popleft()
        if not fut.done():
            fut.set_result(None)
            free -= 1


def fair(b: Any) -> int:
    """This process's share of the key's leases: among the processes with calls running or waiting
    (an idle one's share is lent, and comes back when it has work: the others hand leases back
    above their new share as their calls end)."""
    return max(1, math.ceil(b.max_concurrency / max(1, b.n_active)))


async def lease(b: Any) -> bool:
    """Wait until this process holds a lease for this task: its new ticket then takes it with its
    slot, in one script call (a lease is bound only as Redis confirms it: one it lost in a lapse or
    a restart is never used); False if the budget fell back meanwhile."""
    task = asyncio.current_task()
    while b._local is None:
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        b._lease_q.append((task, fut))
        if not b.n_waiting or time.monotonic() - b._call.last < FRESH_S:  # (else the queue is asked
            hand_out(b)  # first: a process may have queued since; nobody did, a spare lease is ours)
        if not fut.done():
            b._kick()
        try:
            got = await fut
        except BaseException:
            if fut.done() and not fut.cancelled() and fut.result():
                b._gated.discard(task)  # let through as we were cancelled: its lease spare again
                hand_out(b)
            raise
        finally:
            if (task, fut) in b._lease_q:
                b._lease_q.remove((task, fut))
        if got:
            return True
    return False


def pending(b: Any) -> int:
    """Tasks let through for a lease this process holds, not yet bound to it (their ticket's grant)."""
    return len(b._gated) + sum(1 for tk in b._new if not tk.dead)


def hand_out(b: Any) -> None:
    """Let the tasks waiting for a lease through, in order, for this process's spare leases, within
    its share."""
    if time.monotonic() < b._grace_until or not b._lease_q:
        return
    n = b._bound + pending(b)
    while b._lease_q and b._held - b._giving - n > 0 and n < b._fair():
        task, fut = b._lease_q.popleft()
        if not fut.done():
            b._gated.add(task)
            n += 1
            fut.set_result(True)


def waits(b: Any) -> bool:
    """Calls wait for a lease and this process is under its share: it queues for the next free one."""
    live = any(not tk.dead for tk in b._new)
    return bool(b._lease_q or live) and b._bound + pending(b) < b._fair() and (
        time.monotonic() >= b._grace_until)


async def serve(b: Any) -> None:
    """Leases for the tasks waiting in `acquire`, and leases given back at the end of a turn: one
    script call each time; while none comes free, blocked on this process's wake list (BLPOP: the
    script pushes to it when a lease frees for it), never polling."""
    try:
        while b._local is None and not b.closed:
            b._lease_q = deque(w for w in b._lease_q if not w[1].done())
            if not b._giving and not b._lease_q:
                return
            grace = b._grace_until - time.monotonic()
            if grace > 0 and not b._giving:
                await asyncio.sleep(grace)
                continue
            held, born = b._held, b._born
            if b._giving or waits(b):
                async with b._call.lock:
                    if b._local is not None:
                        return
                    giving = b._giving  # (its spare leases to those queued first, itself queued
                    # behind them if its calls wait: one call; spare, not bound, until the reply)
                    n = b._bound + pending(b)
                    want = n + (min(len(b._lease_q), b._fair() - n) if waits(b) else 0)
                    await b._eval(want, giving=giving > 0)
                    b._giving = max(0, b._giving - giving)
                if b._held > held or b._born != born or not b._lease_q or not waits(b):
                    continue  # (handed out; the key's state first seen: ask again; or beyond its share:
                    # its own calls' ends free its leases)
            elif b._lease_q:  # beyond its share: a lease of its own frees as a call ends
                return
            await woken(b.client, b._call.wake_key, b.lease_ms)
    except Exception as e:  # noqa: BLE001 - Redis gone: pace locally, never at the full limit
        b._fall_back(e)


# --- for `--join` workers (runner.budgets.leases): work units go to the processes that can send --------


def starved(b: Any) -> bool:
    """Calls of this process wait for a lease of the key, none of its calls holds one (none on the wire),
    and more processes want the key's leases than it has: beyond the cap, waiting for a turn. (With as
    many as the cap or fewer, its share comes as the others' calls end: it waits, never gives up.) False
    for a budget that is not on Redis now, or back from an outage and waiting for the others to return
    (its calls wait for that, not for a turn)."""
    if getattr(b, "_lease_q", None) is None or b._local is not None or b.closed:
        return False
    return (bool(b._lease_q) and b._bound + pending(b) == 0 and not b._again
            and b.n_active > b.max_concurrency and time.monotonic() >= b._grace_until)


def likely(b: Any) -> bool:
    """A call of this process would get a lease of the key soon, as its last reply from Redis said (its
    heartbeat keeps that fresh, no polling): it holds one, or nobody is queued and the processes with
    calls running or waiting are fewer than the cap (a newcomer's share is handed back to it, never
    taken by a turn)."""
    if getattr(b, "_lease_q", None) is None or b._local is not None:
        return True
    return b._held > 0 or (b.n_waiting == 0 and b.n_active < b.max_concurrency)


async def withdraw(b: Any) -> None:
    """Tell Redis at once that this process waits no more (its waiting calls were given up): left in the
    key's queue until its next heartbeat, it would be handed a lease it cannot use."""
    if getattr(b, "_lease_q", None) is None or b._local is not None or b.closed:
        return
    try:
        async with b._call.lock:
            if b._local is None and not b.closed:
                await b._eval(b._held)
    except Exception as e:  # noqa: BLE001 - Redis gone: pace locally, never at the full limit
        b._fall_back(e)
