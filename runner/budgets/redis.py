"""Lane budgets shared through Redis (`[shared] redis_url`): every process using one API key paces
against one budget, so K processes together stay under the key's limit instead of sending K times it.

It implements the lane's budget seam (runner.lanes): the policy (AIMD, limits learnt from headers,
probing) stays in `Lane`; only the state moves to Redis, behind one short Lua script (redis.lua,
called through redis_call) that runs atomically on the server's clock and, per call:
  - reserves the next GCRA request slots: pacing, never rejection; slots are spaced 1/rate apart
    across all processes (tokens are the TPM account's, redis_tpm: held, queued across processes,
    settled at the answer);
  - sets how many concurrency leases the process holds, under an expiring heartbeat, so a SIGKILLed
    process's leases free themselves after `lease_s`;
  - records and returns the key's Retry-After pause and the AIMD factor, so all back off together;
  - counts the processes alive on the lane (N, for fair shares and the fallback below).
A lane's identity in Redis is SHA-256(base URL, API key): never the key itself.

Leases and slots, correct by construction: a task's ticket gets a lease and a slot in one script call,
and keeps the lease until the task releases it; a leased ticket that needs a new slot (its timer woke
too late) is served before any new ticket, and the script gives it a slot whatever the cap (its lease
is already counted), so the key's concurrency can never be held by tickets that wait for each other.
A new ticket gets a slot only if it got a lease. Leases are absolute counts (never deltas): a reply
lost, a restart of Redis or a fallback cannot leak them, since the next call says again how many this
process holds and how many its running calls need. A task past the local cap waits for a lease of its process
without polling, and processes whose calls wait take the key's leases in turns (redis_turns).

Calls are batched: the slot requests of all tasks waiting at once go out as one script call, and
leases are kept while used, so steady state costs about one round trip per call at low rates and far
fewer at high ones. If Redis becomes unreachable mid-run the lane paces locally at 1/N of its limits,
within the leases it held, with a warning: never fail open at the full limit, never two regimes at once
(redis_fallback says how, and how processes that did not meet the outage wait for the others' return).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import time
import weakref
from collections import deque
from typing import Any

from runner.budgets import redis_fallback as fallback
from runner.budgets import redis_tpm as tpm_account
from runner.budgets import redis_turns as turns
from runner.budgets.local import wait_turn
from runner.budgets.redis_call import ScriptCall, lane_id

log = logging.getLogger("evalsweep")

SAFETY = 0.965  # slots 3.5% below the limit: sends up to ~35 ms off their slot stay inside any 1 s window
LATE_S = 0.015  # a slot missed by more than this (a late timer) is dropped and a new one reserved
SYNC_S = 0.1  # while calls are in flight, pick up pauses and factor changes at least this often
AHEAD_S = 0.25  # slots are reserved at most this far ahead, so processes on one key interleave
LEAD_S = 0.02  # ... and asked for this long before the last granted one
KEEP_S = 0.25  # concurrency leases unused this long go back to the shared pool
RETRY_S = 0.02  # the key's concurrency is taken: ask again this often, doubling while it stays taken
RETRY_MAX_S = 0.25  # ... up to this

__all__ = ["RedisBudget", "lane_id"]


class _Ticket:
    """One task's claim: its slot once granted, whether it holds a lease, whether it
    was admitted (sent), whether its task has released it, and the future its task waits on until
    the slot is granted and due (set by `_grant`: no timer polls confirm() meanwhile)."""

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


class RedisBudget:
    """The lane budget seam (reserve/confirm/reconcile/pause/set_limits/set_factor/acquire/release)
    on shared Redis state; falls back to a local budget at 1/N of the limits if Redis goes away."""

    def __init__(
        self,
        client: Any,
        ident: str,
        name: str,
        rpm: float | None,
        tpm: float | None,
        max_concurrency: int,
        lease_s: float,
        *,
        probing: bool = False,
        local_factory: Any = None,
    ) -> None:
        self.client = client
        self.name = name
        self.proc = f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"
        self._call = ScriptCall(client, ident, self.proc)
        self.keys = self._call.keys
        self._tpm = tpm_account.Account(self)  # the key's TPM account (redis_tpm: held, queued, settled)
        self.max_concurrency = max_concurrency
        self.lease_ms = int(lease_s * 1000)
        self.factor = 1.0
        self.paused_until = 0.0
        self.probing = probing
        self.rpm: float | None = None
        self.tpm: float | None = None
        self.n_procs = 1
        self.n_active = 1
        self._freed = asyncio.Event()  # one of this process's leases came free: a waiting ticket may take it
        self._lease_q: deque[tuple[Any, asyncio.Future[bool]]] = deque()  # tasks past the local cap waiting
        # for a lease (and the future that lets each through)
        self._gated: weakref.WeakSet[Any] = weakref.WeakSet()  # ... let through, their ticket not yet made
        self._giving = 0  # leases to give back to processes waiting for one (their turn: `release`)
        self._turn_at = 0.0  # when this process last got a lease from the key
        self.n_waiting = 0  # other processes queued for a lease, as the last reply said
        self._leasing: asyncio.Task[None] | None = None
        self.margin = 0.0  # the Lane widens a local budget's window on persistent 429s; slots here use SAFETY
        self.late = 0
        self.admitted = 0
        self.fallbacks = 0
        self.closed = False
        self._local_factory = local_factory
        self._local: Any = None
        self._tickets: weakref.WeakKeyDictionary[Any, _Ticket] = weakref.WeakKeyDictionary()
        self._again: deque[_Ticket] = deque()  # leased, waiting for a new slot: served first
        self._new: deque[_Ticket] = deque()  # waiting for a lease and a slot
        self._last_slot = 0.0
        self._pause_s = 0.0
        self._new_factor: float | None = None
        self._held = 0  # leases this process holds in Redis (as the last reply said)
        self._bound = 0  # ... of which tasks hold this many: leased tickets and carried calls
        self._flying: weakref.WeakSet[Any] = weakref.WeakSet()  # tasks whose call runs without a ticket
        # (admitted by a fallback, or sent before one): on Redis, each holds a lease of this process
        self._holders: weakref.WeakSet[Any] = weakref.WeakSet()  # tasks holding the fallback's leases
        self._grace_until = 0.0
        self._born: bytes | None = None  # when the key's state began, as this process last saw it
        self._answered = 0.0  # when Redis first told n_procs
        self._outage_at: float | None = None  # the key's last outage mark seen (server seconds)
        self._returning = False  # (back from a fallback: the others wait for it, not it for itself)
        self._used = 0  # tasks past acquire() (the local cap)
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._idle_since = 0.0
        self._syncing: asyncio.Task[None] | None = None
        self._house: asyncio.Task[None] | None = None
        self._recovering: asyncio.Task[None] | None = None
        self._telling: asyncio.Task[None] | None = None
        self.set_limits(rpm, tpm)

    @property
    def calls(self) -> int:
        """Script calls made (Redis round trips)."""
        return self._call.calls

    @property
    def silent(self) -> bool:
        """Pacing locally on no lease (Redis away, and this process held none of the key's): it may send
        nothing until Redis is back, and has nothing on the wire."""
        return self._local is not None and self._local.max_concurrency == 0

    # --- the seam ---------------------------------------------------------------------------------

    def set_limits(self, rpm: float | None, tpm: float | None) -> None:
        self.rpm, self.tpm = rpm, tpm
        self._T1 = 60e6 / (rpm * SAFETY) if rpm else 0.0  # microseconds per request at factor 1
        if self._local is not None:
            n = max(1, self.n_procs)
            self._local.set_limits(rpm / n if rpm else None, tpm / n if tpm else None)

    def set_factor(self, f: float) -> None:
        self.factor = f
        if self._local is not None:
            self._local.set_factor(f)
            return
        self._new_factor = f
        self._kick()

    def set_probing(self, on: bool) -> None:
        self.probing = on
        if self._local is not None:
            self._local.set_probing(on)
        self._wake()

    def pause(self, seconds: float) -> None:
        self.paused_until = max(self.paused_until, time.monotonic() + seconds)
        if self._local is not None:
            self._local.pause(seconds)
            return
        self._pause_s = max(self._pause_s, seconds)
        self._kick()
        if not self.closed and (self._telling is None or self._telling.done()):  # now, not with the next
            self._telling = asyncio.get_running_loop().create_task(self._tell())  # slots: others send meanwhile

    async def _tell(self) -> None:
        try:
            async with self._call.lock:
                if self._local is None and self._news():
                    await self._eval(self._held)
        except Exception as e:  # noqa: BLE001
            self._fall_back(e)

    async def take(self, tokens: int, charge: int | None = None, first: bool = False) -> None:
        """Wait, first come first served across the key's processes, until its TPM account holds this
        call's tokens, then charge them (`LocalBudget.take`'s contract; redis_tpm)."""
        await self._tpm.take(tokens, charge, first)

    def open(self) -> None:
        """The run is stopping: calls waiting for tokens leave uncharged, those waiting for a slot's
        grant wake (the Lane halts them); lease waiters follow as the calls in flight end."""
        self._tpm.open()
        self._wake_tickets()

    def reconcile(self, est: int, actual: int, charge: int | None = None) -> None:
        """Settle a call `take` charged: its real usage for its charge, its hold given back at once."""
        self._tpm.settle(est, actual, charge)

    def reserve(self, tokens: int) -> float:
        if self._local is not None:
            return self._local.reserve(tokens)
        task = asyncio.current_task()
        tk = self._tickets.get(task)
        if tk is None:
            tk = self._tickets[task] = _Ticket()
            self._gated.discard(task)  # (now counted in `_new`)
        tk.slot = None
        (self._again if tk.leased else self._new).append(tk)
        self._kick()
        return self._call.rtt

    def confirm(self) -> float:
        task = asyncio.current_task()
        if self._local is not None:
            local = self._local
            if task not in self._holders:  # waiting for a slot when this fallback began: a local lease first
                if local._used >= getattr(local, "_cap", local.max_concurrency):
                    return 0.01
                local._used += 1
                self._holders.add(task)
                tk = self._tickets.pop(task, None)
                return max(local.reserve(0), 1e-6)
            wait = local.confirm()
            if wait <= 0:
                self._flying.add(task)
            return wait
        now = time.monotonic()
        if now < self.paused_until:
            return self.paused_until - now
        tk = self._tickets.get(task)
        if tk is None:  # reserved locally before Redis came back: a slot (and a lease) from Redis now
            return max(self.reserve(0), 1e-6)
        if tk.slot is None:  # not granted yet: the Lane awaits `granted()` (this wait bounds a poller's)
            return max(self._call.rtt, 0.0005, self._last_slot - LEAD_S - now + self._call.rtt)
        if now < tk.slot:
            return tk.slot - now
        if now - tk.slot > LATE_S:  # woke too late: sending now could crowd the next second
            self.late += 1
            tk.slot = None
            self._again.append(tk)  # it keeps its lease, and is served before any new ticket
            self._kick()
            return max(self._call.rtt, 0.0005)
        self.admitted += 1
        tk.sent = True
        return 0.0  # admitted; the ticket keeps its lease until release()

    def granted(self) -> asyncio.Future[None] | None:
        """What the current task waits on while its ticket has no slot: a future `_grant` sets when the
        slot is due (at once if it already is), so a call waiting for its slot wakes once instead of
        re-confirming every round trip; None when confirm()'s wait is a plain timer's (slot granted,
        paused, fallen back). Set early when the ticket's fate changes otherwise (fallback, halt, close)."""
        if self._local is not None or self.closed:
            return None
        tk = self._tickets.get(asyncio.current_task())
        if tk is None or tk.slot is not None or tk.dead:
            return None
        if tk.fut is None or tk.fut.done():
            tk.fut = asyncio.get_running_loop().create_future()
        return tk.fut

    def _wake_tickets(self) -> None:
        """Every task waiting for its grant re-confirms (its ticket was dropped, or the run stops)."""
        for tk in list(self._tickets.values()):
            if tk.fut is not None:
                _set(tk.fut)

    async def acquire(self) -> None:
        """The local cap (a process never runs more than max_concurrency, 1 while probing), then a lease
        of the key's for it: one this process holds spare, else one Redis gives it (`_lease`). The wait
        is on a future, woken when a lease frees, never a poll: a process beyond the key's cap costs
        nothing. (The lease is bound to the task's ticket with its slot, in one script call, as before.)"""
        while True:
            if self._local is not None:
                local = self._local
                await local.acquire()
                self._used += 1
                if self._local is local:
                    self._holders.add(asyncio.current_task())
                return
            if self._used < (1 if self.probing else self.max_concurrency):
                self._used += 1
                try:
                    if await self._lease():
                        return
                except BaseException:
                    self._used -= 1
                    self._wake()
                    raise
                self._used -= 1  # Redis went away meanwhile: the fallback's lease
                continue
            await wait_turn(self._waiters, self._wake)

    async def _lease(self) -> bool:  # (runner.budgets.redis_turns: the key's leases in turns)
        return await turns.lease(self)

    def _pending(self) -> int:
        return turns.pending(self)

    def _hand_out(self) -> None:
        turns.hand_out(self)

    def release(self) -> None:
        self._used -= 1
        task = asyncio.current_task()
        self._gated.discard(task)
        if self._local is not None:
            self._tickets.pop(task, None)
            self._flying.discard(task)
            if task in self._holders:
                self._holders.discard(task)
                self._local.release()
            return
        tk = self._tickets.pop(task, None)
        if tk is not None:
            tk.dead = True
            if tk.leased:
                self._bound -= 1
                now = self._idle_since = time.monotonic()
                if self.n_waiting and (not self._lease_q or now - self._turn_at >= turns.ROTATE_S):
                    self._giving += 1  # unused, or its turn is over: it goes to the first process queued
                    self._kick()
                else:
                    self._hand_out()
            else:  # (one let through for a lease, not yet bound: the lease is spare again)
                self._hand_out()
                if self._again or self._new:
                    self._freed.set()
                    self._kick()
        elif task in self._flying:  # a call the fallback admitted, registered as a lease on return
            self._flying.discard(task)
            self._bound -= 1
            self._idle_since = time.monotonic()
        self._wake()

    # --- talking to Redis ------------------------------------------------------------------------

    async def _eval(self, want: int, ttl_us: int | None = None, giving: bool = False, **slots: Any) -> Any:
        """One script call (the caller holds the lock): leases to hold, news to send, slots to ask. After
        an outage it did not pace through (met late, or joined since) it sends nothing until the processes
        that paced locally are back: no share was reserved for it (redis_fallback)."""
        if self.closed and ttl_us != 0:  # only aclose()'s own leaving call: no heartbeat after it
            raise asyncio.CancelledError("budget closed")  # (ends the task: none catches it)
        factor = "" if self._new_factor is None else repr(self._new_factor)
        pause_us = int(self._pause_s * 1e6)
        self._pause_s, self._new_factor = 0.0, None
        r = await self._call(
            ttl_us=self.lease_ms * 1000 if ttl_us is None else ttl_us,
            cap=self.max_concurrency,
            want=want,
            bound=self._bound,
            T_us=self._T1,
            pause_us=pause_us,
            factor=factor,
            born=self._born,
            recent_us=int((fallback.RECOVER_S + fallback.GRACE_S + 2.0) * 1e6),
            demand=bool(self._bound or self._used or self._again or self._new or slots.get("n_new")),
            waits=(2 if giving else 1) if self._waits() else 0,
            **slots,
        )
        news = self._outage_at is None or r.outage_at > self._outage_at + 1e-3 or r.born != self._born
        self._born, self._outage_at = r.born, r.outage_at
        if news and not self._returning:
            back = fallback.resume_at(self, r.outage_at)
            if back > time.monotonic():  # no new lease nor slot of its own before then either
                self.paused_until = max(self.paused_until, back)
                self._grace_until = max(self._grace_until, back)
        if r.held > self._held:
            self._turn_at = time.monotonic()
        self._held = r.held
        self.n_waiting = r.n_waiting
        self.paused_until = max(self.paused_until, r.paused_until)
        self.factor = r.factor
        # Back from an outage, the others register again one by one: N (the next fallback's 1/N)
        # does not drop while they may still be coming.
        soon = time.monotonic() < self._grace_until + self.lease_ms / 1000
        self.n_procs = max(r.n_procs, self.n_procs) if soon else r.n_procs
        self.n_active = max(1, r.n_active)
        self._answered = self._answered or time.monotonic()
        self._hand_out()
        return r

    def _waits(self) -> bool:
        return turns.waits(self)

    def _news(self) -> bool:
        return bool(self._pause_s or self._new_factor is not None)

    def _kick(self) -> None:
        if self.closed:  # (a task cancelled by aclose() may end in an error, not a cancellation)
            return
        loop = asyncio.get_running_loop()
        if self._local is None and (self._syncing is None or self._syncing.done()):
            self._syncing = loop.create_task(self._sync())
        if self._local is None and (self._giving or self._lease_q) and (self._leasing is None or self._leasing.done()):
            self._leasing = loop.create_task(self._leases())
        if self._house is None or self._house.done():
            self._house = loop.create_task(self._housekeeping())

    def _prune(self) -> None:
        for q in (self._again, self._new):
            while q and q[0].dead:
                q.popleft()

    async def _sync(self) -> None:
        """Hand out slots (and leases) to the waiting tickets, one script call per batch."""
        misses = 0
        try:
            while self._local is None and not self.closed:  # (a cancellation can be lost in redis-py)
                self._prune()
                if not self._again and not self._new:
                    if self._news():
                        async with self._call.lock:
                            await self._eval(self._held)
                    return
                # Ask for the next slots only shortly before the granted ones run out: waiting tickets
                # gather into one call, and other processes on the key get the slots in between.
                lead = max(LEAD_S, 4 * self._call.rtt)
                paused = self.paused_until - time.monotonic() - lead
                if paused > 0:  # (slots granted now would be missed: others may use them)
                    await asyncio.sleep(paused)
                    continue
                ahead = self._last_slot - time.monotonic()
                if ahead > lead:
                    await asyncio.sleep(ahead - lead)
                    continue
                if await self._grant():
                    misses = 0
                else:  # the key's leases are taken: ask again, less often the longer that lasts (a
                    # process beyond the cap no longer polls Redis every RETRY_S), at once when one of
                    # ours frees
                    misses += 1
                    self._freed.clear()
                    try:
                        await asyncio.wait_for(self._freed.wait(), min(RETRY_MAX_S, RETRY_S * 2 ** (misses - 1)))
                    except TimeoutError:
                        pass
        except Exception as e:  # noqa: BLE001 - Redis gone: pace locally, never at the full limit
            self._fall_back(e)

    async def _leases(self) -> None:
        await turns.serve(self)

    async def _grant(self) -> bool:
        """Slots for every leased ticket waiting, then leases and slots for new tickets up to this
        process's fair share; False if no new ticket could have one (the key's concurrency is taken)."""
        async with self._call.lock:
            if self._local is not None:
                return True
            self._prune()
            T = self._T1 / 1e6 / max(self.factor, 1e-3)
            n = max(1, int(AHEAD_S / T)) if T else len(self._again) + len(self._new)
            again = [tk for tk in self._again if not tk.dead][:n]
            room = 0 if time.monotonic() < self._grace_until else max(0, self._fair() - self._bound)
            new = [tk for tk in self._new if not tk.dead][: min(n - len(again), room)]
            if not again and not new:
                over = self._held - max(self._fair(), self._bound)
                if over > 0:  # above our share: others may be waiting for these
                    await self._eval(self._held - over)
                return False
            r = await self._eval(
                max(self._held, self._bound + len(new)),
                n_leased=len(again),
                n_new=len(new),
            )
            if self._local is not None:
                return True
            got = new[: max(0, r.n - len(again))]
            loop = asyncio.get_running_loop()
            now = time.monotonic()
            for i, tk in enumerate(again + got):
                (self._again if i < len(again) else self._new).remove(tk)
                if not tk.leased and not tk.dead:
                    tk.leased = True  # the lease granted for it (a dead one's stays spare)
                    self._bound += 1
                tk.slot = r.start + i * r.T
                self._last_slot = max(self._last_slot, tk.slot)
                if tk.fut is not None and not tk.fut.done():  # its task wakes at its slot: one timer
                    if tk.slot > now:
                        loop.call_later(tk.slot - now, _set, tk.fut)
                    else:
                        tk.fut.set_result(None)
            return len(got) == len(new)

    def _fair(self) -> int:
        """This process's share of the key's leases: among the processes with calls running or waiting
        (an idle one's share is lent, and comes back when it has work: the others hand leases back
        above their new share as their calls end)."""
        return max(1, math.ceil(self.max_concurrency / max(1, self.n_active)))

    def _wake(self) -> None:
        free = (1 if self.probing else self.max_concurrency) - self._used
        if self._local is not None:
            free = len(self._waiters)
            while self._lease_q:  # (fallen back: they take the fallback's leases)
                _, fut = self._lease_q.popleft()
                if not fut.done():
                    fut.set_result(False)
        while free > 0 and self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                free -= 1

    async def _housekeeping(self) -> None:
        """Heartbeat (lease expiry), pause/factor pick-up while busy, and giving back idle leases."""
        try:
            while self._local is None and not self.closed:  # (a cancellation can be lost in redis-py)
                await asyncio.sleep(SYNC_S)
                async with self._call.lock:
                    if self._local is not None:
                        return
                    now = time.monotonic()
                    spare = self._held - self._bound - len(self._gated)  # (one let through waits for
                    # its tokens, its ticket not made yet: its lease is not spare)
                    over = self._held - max(self._fair(), self._bound)  # others may be waiting for these
                    waiting = self._again or self._new or self._lease_q
                    if spare > 0 and (over > 0 or not waiting and now - self._idle_since > KEEP_S):
                        await self._eval(self._held - (over if over > 0 else spare))
                    # (pauses and factor picked up every SYNC_S only for slots granted and not yet used:
                    # a call on the wire or waiting for a lease needs none; its lease a heartbeat)
                    elif self._news() or now - self._call.last > self.lease_ms / 3000 or any(
                            tk.slot is not None and not tk.sent for tk in self._tickets.values()):
                        await self._eval(self._held)
        except Exception as e:  # noqa: BLE001 - (a CancelledError is not one: it ends the task)
            self._fall_back(e)

    def _fall_back(self, e: BaseException) -> None:
        fallback.fall_back(self, e)

    async def aclose(self) -> None:
        """Give this process's leases back and leave the lane (so N and the pool are right at once)."""
        self.closed = True  # no task of it starts again: no heartbeat keeps its leases after this
        self._wake_tickets()
        for t in (self._house, self._syncing, self._recovering, self._telling, self._leasing):
            if t is not None and not t.done():
                t.cancel()
        await self._tpm.aclose()
        if self._local is None:
            try:
                async with self._call.lock:
                    self._bound = 0
                    await self._eval(0, ttl_us=0)
            except Exception:  # noqa: BLE001
                pass

