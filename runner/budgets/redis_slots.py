"""Request slots on the key's shared GCRA clock, and how the tasks of one process get them (#40): split from
runner.budgets.redis so the budget seam there reads as the seam, and the batching and grant rules as one idea.

A task's ticket asks for a slot (`reserve`) and waits on a future (`granted`) that `grant` sets when its
slot is due: no timer polls `confirm` meanwhile. The slot requests of all tasks waiting at once go out as
one script call (`sync`), shortly before the slots granted last run out, so steady state costs about one
round trip per call at low rates and far fewer at high ones, and other processes on the key get the slots
in between. A leased ticket that needs a new slot (its timer woke too late) is served before any new ticket,
and the script gives it a slot whatever the cap (its lease is already counted); a new ticket gets a slot
only with a lease of its own, bound to it in the same call.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

SAFETY = 0.965  # slots 3.5% below the limit: sends up to ~35 ms off their slot stay inside any 1 s window
LATE_S = 0.015  # a slot missed by more than this (a late timer) is dropped and a new one reserved
AHEAD_S = 0.25  # slots are reserved at most this far ahead, so processes on one key interleave
LEAD_S = 0.02  # ... and asked for this long before the last granted one
RETRY_S = 0.02  # the key's concurrency is taken: ask again this often, doubling while it stays taken
RETRY_MAX_S = 0.25  # ... up to this
GROUP_S = 0.001  # tickets of one grant whose slots lie this close wake together, at the last one's slot:
# one timer and one turn of the event loop for them all, the first sent this much late at most (LATE_S
# allows a timer up to 15 ms late), not a turn each (their calls then end together, and their next
# tickets go out in one script call: a busy process's calls batch as they do on a local budget)


class Ticket:
    """One task's claim: its slot once granted, whether it holds a lease, whether it
    was admitted (sent), whether its task has released it, and the future its task waits on until
    the slot is granted and due (set by `grant`: no timer polls confirm() meanwhile)."""

    __slots__ = ("slot", "leased", "sent", "dead", "fut")

    def __init__(self, leased: bool = False) -> None:
        self.slot: float | None = None
        self.leased = leased
        self.sent = False
        self.dead = False
        self.fut: asyncio.Future[None] | None = None


def _set(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _set_all(futs: list[asyncio.Future[None]]) -> None:
    for fut in futs:
        _set(fut)


def _wake_at(loop: asyncio.AbstractEventLoop, now: float, group: list[Ticket]) -> None:
    """Wake the tasks of a group of tickets at the last one's slot (at once if it is due)."""
    futs = [tk.fut for tk in group if tk.fut is not None]
    last = group[-1].slot or 0.0
    if last > now:
        loop.call_later(last - now, _set_all, futs)
    else:
        _set_all(futs)


def reserve(b: Any, tokens: int) -> float:
    """The current task's ticket queued for a slot (leased ones first); the wait until it may ask again."""
    if b._local is not None:
        return b._local.reserve(tokens)
    task = asyncio.current_task()
    tk = b._tickets.get(task)
    if tk is None:
        tk = b._tickets[task] = Ticket()
        b._gated.discard(task)  # (now counted in `_new`)
    tk.slot = None
    (b._again if tk.leased else b._new).append(tk)
    b._kick()
    return b._call.rtt


def confirm(b: Any) -> float:
    """0 if the current task may send now (admitted: its ticket keeps its lease until release), else how
    long until it should confirm again."""
    task = asyncio.current_task()
    if b._local is not None:
        local = b._local
        if task not in b._holders:  # waiting for a slot when this fallback began: a local lease first
            if local._used >= getattr(local, "_cap", local.max_concurrency):
                return 0.01
            local._used += 1
            b._holders.add(task)
            b._tickets.pop(task, None)
            return max(local.reserve(0), 1e-6)
        wait = local.confirm()
        if wait <= 0:
            b._flying.add(task)
        return wait
    now = time.monotonic()
    if now < b.paused_until:
        return b.paused_until - now
    tk = b._tickets.get(task)
    if tk is None:  # reserved locally before Redis came back: a slot (and a lease) from Redis now
        return max(reserve(b, 0), 1e-6)
    if tk.slot is None:  # not granted yet: the Lane awaits `granted()` (this wait bounds a poller's)
        return max(b._call.rtt, 0.0005, b._last_slot - LEAD_S - now + b._call.rtt)
    if now < tk.slot:
        return tk.slot - now
    if now - tk.slot > LATE_S:  # woke too late: sending now could crowd the next second
        b.late += 1
        tk.slot = None
        b._again.append(tk)  # it keeps its lease, and is served before any new ticket
        b._kick()
        return max(b._call.rtt, 0.0005)
    b.admitted += 1
    tk.sent = True
    return 0.0  # admitted; the ticket keeps its lease until release()


def granted(b: Any) -> asyncio.Future[None] | None:
    """What the current task waits on while its ticket has no slot: a future `grant` sets when the
    slot is due (at once if it already is), so a call waiting for its slot wakes once instead of
    re-confirming every round trip; None when confirm()'s wait is a plain timer's (slot granted,
    paused, fallen back). Set early when the ticket's fate changes otherwise (fallback, halt, close)."""
    if b._local is not None or b.closed:
        return None
    tk = b._tickets.get(asyncio.current_task())
    if tk is None or tk.slot is not None or tk.dead:
        return None
    if tk.fut is None or tk.fut.done():
        tk.fut = asyncio.get_running_loop().create_future()
    return tk.fut


def wake_tickets(b: Any) -> None:
    """Every task waiting for its grant re-confirms (its ticket was dropped, or the run stops)."""
    for tk in list(b._tickets.values()):
        if tk.fut is not None:
            _set(tk.fut)


def prune(b: Any) -> None:
    for q in (b._again, b._new):
        while q and q[0].dead:
            q.popleft()


async def sync(b: Any) -> None:
    """Hand out slots (and leases) to the waiting tickets, one script call per batch. One task for the
    budget's life on Redis: with no ticket waiting it sleeps until `_kick` sets `_work`, instead of
    ending and a new task starting for the next ticket (a task each time: most calls of a busy process)."""
    misses = 0
    try:
        while b._local is None and not b.closed:  # (a cancellation can be lost in redis-py)
            prune(b)
            if not b._again and not b._new:
                if b._news():
                    async with b._call.lock:
                        await b._eval(b._held)
                    continue
                b._work.clear()  # (checked and cleared in one step: a ticket queued after sets it again)
                await b._work.wait()
                continue
            # Ask for the next slots only shortly before the granted ones run out: waiting tickets
            # gather into one call, and other processes on the key get the slots in between.
            lead = max(LEAD_S, 4 * b._call.rtt)
            paused = b.paused_until - time.monotonic() - lead
            if paused > 0:  # (slots granted now would be missed: others may use them)
                await asyncio.sleep(paused)
                continue
            ahead = b._last_slot - time.monotonic()
            if ahead > lead:
                await asyncio.sleep(ahead - lead)
                continue
            if await grant(b):
                misses = 0
            else:  # the key's leases are taken: ask again, less often the longer that lasts (a
                # process beyond the cap no longer polls Redis every RETRY_S), at once when one of
                # ours frees
                misses += 1
                b._freed.clear()
                try:
                    await asyncio.wait_for(b._freed.wait(), min(RETRY_MAX_S, RETRY_S * 2 ** (misses - 1)))
                except TimeoutError:
                    pass
    except Exception as e:  # noqa: BLE001 - Redis gone: pace locally, never at the full limit
        b._fall_back(e)


async def grant(b: Any) -> bool:
    """Slots for every leased ticket waiting, then leases and slots for new tickets up to this
    process's fair share; False if no new ticket could have one (the key's concurrency is taken)."""
    async with b._call.lock:
        if b._local is not None:
            return True
        prune(b)
        T = b._T1 / 1e6 / max(b.factor, 1e-3)
        n = max(1, int(AHEAD_S / T)) if T else len(b._again) + len(b._new)
        again = [tk for tk in b._again if not tk.dead][:n]
        room = 0 if time.monotonic() < b._grace_until else max(0, b._fair() - b._bound)
        new = [tk for tk in b._new if not tk.dead][: min(n - len(again), room)]
        if not again and not new:
            over = b._held - max(b._fair(), b._bound)
            if over > 0:  # above our share: others may be waiting for these
                await b._eval(b._held - over)
            return False
        r = await b._eval(
            max(b._held, b._bound + len(new)),
            n_leased=len(again),
            n_new=len(new),
        )
        if b._local is not None:
            return True
        got = new[: max(0, r.n - len(again))]
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        group: list[Ticket] = []  # tickets whose tasks wake together (GROUP_S)
        for i, tk in enumerate(again + got):
            (b._again if i < len(again) else b._new).remove(tk)
            if not tk.leased and not tk.dead:
                tk.leased = True  # the lease granted for it (a dead one's stays spare)
                b._bound += 1
            tk.slot = r.start + i * r.T
            b._last_slot = max(b._last_slot, tk.slot)
            if tk.fut is not None and not tk.fut.done():  # its task wakes at its slot (its group's last)
                if group and tk.slot - (group[0].slot or 0.0) > GROUP_S:
                    _wake_at(loop, now, group)
                    group = []
                group.append(tk)
        if group:
            _wake_at(loop, now, group)
        b._house_soon()  # (slots far ahead: a pause may come before them)
        return len(got) == len(new)
