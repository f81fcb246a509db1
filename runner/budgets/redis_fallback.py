"""A shared budget while Redis is away: pace locally at 1/N of the key's limits (N = processes last seen on
it) and within the concurrency leases this process held, never at the full limit, and come back together.

Correct by construction, whatever order the processes meet the outage in:
  - never two regimes at once: a process paces locally only while no process sends on Redis's slots.
    Every process tries Redis again at the same instants (multiples of RECOVER_S on the server's clock),
    so all those pacing locally return at the first such instant after Redis answers again; Redis marks
    when it answered again (`outage`: a state it stood still on, or lost — then its start, `redis.lua`),
    and a process that learns of the outage from Redis (it did not meet it, it joined meanwhile, or a
    restart's new state) takes no local share: it waits until that instant plus GRACE_S (`resume_at`);
  - concurrency: a process's local cap is the leases it held on Redis when it went away (its calls in
    flight among them): the key's cap bounds their sum, so the processes together never exceed it (a
    process that held none waits for Redis);
  - on return a process charges the requests it sent locally in the last second into the key's slots
    before anyone is granted more, registers its running calls as leases, whatever Redis remembers of it
    (kept, lapsed, or lost in a restart: lease counts are absolute, so nothing leaks), and takes no new
    lease nor slot for GRACE_S, while the others return and register theirs.
Not covered: a process cut off from a Redis the others still reach (its own network) paces at 1/N beside
them until it reaches Redis again.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import weakref
from typing import Any

from runner.budgets.redis_call import drop_connections

log = logging.getLogger("evalsweep")

RECOVER_S = 5.0  # after a fallback Redis is tried again at each multiple of this on the server's clock
GRACE_S = 1.0  # ... and once back, no new leases for this long (others register their running calls)
LATE_S = 0.05  # a local send is charged on return if it was this close to a second ago
UNSEEN_N = 8  # a process that falls back before it has seen N for a lease (every process alive has
# called since its first answer) assumes at least this many share the key


def server_now(b: Any) -> float:
    """The server's clock (seconds) as this process knows it; the wall clock before any answer."""
    return time.monotonic() + b._call.offset if b._call.calls else time.time()


def resume_at(b: Any, outage_at: float) -> float:
    """When (our monotonic clock) every process that paced locally for an outage Redis answered again
    after at `outage_at` (server seconds) is back and has registered its calls: the first RECOVER_S
    boundary from then, plus GRACE_S."""
    boundary = math.ceil(outage_at / RECOVER_S - 1e-9) * RECOVER_S
    return boundary + GRACE_S - b._call.offset if b._call.calls else time.monotonic()


def fall_back(b: Any, e: BaseException) -> None:
    """Put the RedisBudget `b` on a local budget at 1/N within its leases; its calls in flight release
    into it."""
    if b._local is not None or b.closed:
        return
    known = b._answered and time.monotonic() - b._answered > b.lease_ms / 1000  # all alive have called since
    n = max(1, b.n_procs) if known else max(b.n_procs, UNSEEN_N)
    running = len(b._flying) + sum(1 for tk in b._tickets.values() if tk.sent)  # (all among its leases)
    cap = min(b.max_concurrency, max(b._held, running))  # so N processes together stay within the key's cap
    b.fallbacks += 1
    log.warning(
        "lane %s: shared budget on Redis unreachable (%s); pacing locally at 1/%d of its limits "
        "(%d processes were sharing it) and at most %d calls at once (the leases it held of the key's %d)",
        b.name,
        str(e).splitlines()[0] if str(e) else type(e).__name__,
        n,
        n,
        cap,
        b.max_concurrency,
    )
    local = b._local_factory(b.rpm / n if b.rpm else None, b.tpm / n if b.tpm else None, cap)
    local.split(n)  # (its window guard's seconds add up with the others': floor of its share, not ceil)
    local.set_factor(b.factor)
    if b.probing:
        local.set_probing(True)
    if b._tpm.depth:  # the key's bucket as learnt so far, its share of it (credited nothing: paced_from)
        local.learn_depth(b._tpm.depth / n)
    # Sends paced by Redis may fill the last second up to the key's limit: start after it, on spaced
    # slots (every process falls back at once: their fresh-lane bursts would meet a window later).
    local.paced_from(max(1.0, b.paused_until - time.monotonic()))
    # Calls in flight release into the local budget and count against its cap; a call still waiting
    # for its slot takes a local lease before its local slot.
    for task in [task for task, tk in b._tickets.items() if tk.sent]:
        del b._tickets[task]
        b._flying.add(task)
    b._holders = weakref.WeakSet(b._flying)
    local._used = len(b._holders)
    b._local = local
    b._tpm.fell_back()  # (its calls waiting for tokens take them locally)
    b._again.clear()
    b._new.clear()
    b._wake_tickets()  # (those waiting for a grant go the local way now)
    b._wake()
    b._recovering = asyncio.get_running_loop().create_task(recover(b))


async def recover(b: Any) -> None:
    """Shared pacing again once Redis answers; calls waiting in the local budget are let through to
    reserve their slots and leases from Redis."""
    while b._local is not None and not b.closed:  # (a cancellation can be lost in redis-py)
        await asyncio.sleep(RECOVER_S - server_now(b) % RECOVER_S)
        local = b._local
        try:
            await drop_connections(b.client)
            async with b._call.lock:
                b._held, b._bound, b._born = 0, len(b._flying), None
                b._grace_until = time.monotonic() + GRACE_S  # (N may not drop while the others return)
                b._returning = True  # (one of those the others wait for: it does not wait for itself)
                try:
                    await b._eval(b._bound, charge=local.sent_within(1.0 + LATE_S))
                finally:
                    b._returning = False
        except Exception:  # noqa: BLE001 - still down: stay at 1/N
            continue
        if b.closed:
            return
        b._local = None
        b._bound = len(b._flying)  # (the fallback's calls that ended or began meanwhile)
        for tk in b._tickets.values():  # still waiting for a local lease: a new ticket on Redis
            tk.leased, tk.slot, tk.sent = False, None, False
            b._new.append(tk)
        now = time.monotonic()
        # Local sends may have filled the last second up to this process's 1/N: start after it.
        b.paused_until = max(b.paused_until, now + 1.0)
        b._grace_until = now + GRACE_S
        b._idle_since = now
        log.warning("lane %s: Redis reachable again; shared pacing resumed", b.name)
        local.open()
        b._wake()
        b._kick()
        b._tpm._kick()  # (the queue entries of its calls that took their tokens locally leave)
