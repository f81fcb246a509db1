"""A shared budget while Redis is away: pace locally at 1/N of the key's limits and concurrency (N =
processes last seen on it), never at the full limit, and come back together.

Every process tries Redis again at the same instants of the wall clock (multiples of RECOVER_S), so
they leave 1/N together. A process back on Redis registers the calls running (sent by its local budget, or sent on
Redis before the fallback) as its leases, whatever Redis remembers of it (kept, lapsed, or lost in a restart: lease counts are absolute,
so nothing leaks), and takes no new lease for GRACE_S, while the others register theirs.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Any

from runner.budgets.redis_call import drop_connections

log = logging.getLogger("evalsweep")

RECOVER_S = 5.0  # after a fallback Redis is tried again at each multiple of this on the wall clock
GRACE_S = 1.0  # ... and once back, no new leases for this long (others register their running calls)
UNSEEN_N = 8  # a process that falls back before it has seen N for a lease (every process alive has
# called since its first answer) assumes at least this many share the key


def fall_back(b: Any, e: BaseException) -> None:
    """Put the RedisBudget `b` on a local budget at 1/N; its calls in flight release into it."""
    if b._local is not None:
        return
    known = b._answered and time.monotonic() - b._answered > b.lease_ms / 1000  # all alive have called since
    n = max(1, b.n_procs) if known else max(b.n_procs, UNSEEN_N)
    b.fallbacks += 1
    log.warning(
        "lane %s: shared budget on Redis unreachable (%s); pacing locally at 1/%d of its limits "
        "(%d processes were sharing it)",
        b.name,
        str(e).splitlines()[0] if str(e) else type(e).__name__,
        n,
        n,
    )
    local = b._local_factory(
        b.rpm / n if b.rpm else None,
        b.tpm / n if b.tpm else None,
        max(1, b.max_concurrency // n),  # N processes together never above the key's cap
    )
    local.set_factor(b.factor)
    if b.probing:
        local.set_probing(True)
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
    b._again.clear()
    b._new.clear()
    b._wake()
    b._recovering = asyncio.get_running_loop().create_task(recover(b))


async def recover(b: Any) -> None:
    """Shared pacing again once Redis answers; calls waiting in the local budget are let through to
    reserve their slots and leases from Redis."""
    while b._local is not None:
        await asyncio.sleep(RECOVER_S - time.time() % RECOVER_S)
        local = b._local
        try:
            await drop_connections(b.client)
            async with b._call.lock:
                b._held, b._bound, b._born = 0, len(b._flying), None
                b._grace_until = time.monotonic() + GRACE_S  # (N may not drop while the others return)
                await b._eval(b._bound)
        except Exception:  # noqa: BLE001 - still down: stay at 1/N
            continue
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
