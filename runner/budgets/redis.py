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

Three modules hold the rest, one idea each: redis_slots (request slots: a task's ticket, its grant, the
batching of grants into one script call), redis_turns (the concurrency leases: a task's from acquire to
release, and processes' turns at the key's), redis_tpm (the TPM account). This module keeps the seam the
Lane calls, the one script call they all go through (`_eval`), and the wiring around it: housekeeping
(heartbeat, pause and factor pick-up, idle leases given back) and the fallback (redis_fallback).

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
from runner.budgets import redis_slots as slots
from runner.budgets import redis_tpm as tpm_account
from runner.budgets import redis_turns as turns
from runner.budgets.redis_call import ScriptCall, lane_id
from runner.budgets.redis_slots import SAFETY, Ticket

log = logging.getLogger("evalsweep")

SYNC_S = 0.1  # while calls are in flight, pick up pauses and factor changes at least this often
# (housekeeping looks this often only while it may have to act: slots granted ahead, leases to give back,
# news; otherwise at the heartbeat's time, woken early by `_house_soon` when one of those begins)
KEEP_S = 0.25  # concurrency leases unused this long go back to the shared pool
BEAT_S = 0.5  # a process calls at least this often while leases of the key are held, its own or another's, unless
# the key's heartbeat round-robin counts on it (else every lease_s / 3): redis.lua takes a busy key silent for
# TIMEOUT_S (1.5 s) for a Redis that stood still (a new state: an outage every process waits out), so neither calls
# on the wire for longer nor a holder SIGKILLed (its leases held until they expire, its heartbeat gone) may leave
# it silent while any process lives: a frozen Redis silences them all, a dead holder only itself
SLOT_S = 0.3  # the round-robin: the N processes that knew the key busy at their last call (N >= 2) call in turns,
# slot i (SLOT_S long on the server's clock) the turn of the one of rank i mod N (redis.lua), so the key hears
# ~1 / SLOT_S heartbeats a second whatever N (each process's every N slots, not N processes' every BEAT_S). A dead
# one keeps its turn until its heartbeat expires: 2 slots silent, two adjacent dead 3 (0.9 s; with ABSORB_S and
# housekeeping's SYNC_S late at most 1.1 s). One whose calls wait for a lease has no turn: it calls after each
# wake-up wait anyway (WAKE_S, 1 s, apart: redis_turns.serve); one not counted on yet calls every BEAT_S
ABSORB_S = 0.1  # a process that called this little before its turn skips it (its call was the heartbeat)

__all__ = ["RedisBudget", "lane_id"]


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
        self._rank, self._n_turns = -1, 0  # its turn in the key's heartbeat round-robin, among how many (SLOT_S)
        self.n_active = 1
        self._work = asyncio.Event()  # a ticket waits for a slot, or news to send: `_sync` looks
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
        self._tickets: weakref.WeakKeyDictionary[Any, Ticket] = weakref.WeakKeyDictionary()
        self._again: deque[Ticket] = deque()  # leased, waiting for a new slot: served first
        self._new: deque[Ticket] = deque()  # waiting for a lease and a slot
        self._last_slot = 0.0
        self._pause_s = 0.0
        self._new_factor: float | None = None
        self._held = 0  # leases this process holds in Redis (as the last reply said)
        self._others = 0  # ... and the other processes (a live heartbeat behind them)
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
        self._house_fut: asyncio.Future[None] | None = None  # what housekeeping sleeps on, while it sleeps
        self._house_long = False  # ... until the heartbeat's time (nothing to watch every SYNC_S)
        self._house_until = 0.0  # ... which is then
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
        self._house_soon()

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
        self._house_soon()
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

    def learn_depth(self, remaining: float) -> None:
        """An answer's remaining-tokens: how deep the key's token bucket is (redis_tpm, for every process)."""
        self._tpm.learn_depth(remaining)

    def stale(self) -> Any:
        """A wait for this task's tokens again if they were admitted long before its send (redis_tpm), else None."""
        return self._tpm.stale()

    def defer_tokens(self, seconds: float) -> None:
        """Refused for tokens: no token admitted for `seconds`, in any process; requests still go (redis_tpm). A key
        paced by no TPM has no token admission: every request spends the tokens the key has not, so its processes
        all wait, as the provider asks (tests/test_shared_budget.py's "everyone wait")."""
        if not self.tpm:
            self.pause(seconds)
        elif self._local is not None:
            self._local.defer_tokens(seconds)
        else:
            self._tpm.defer(seconds)

    def shallow(self) -> None:
        """Refused for tokens: the key's bucket believed half as deep (redis_tpm, for every process)."""
        self._tpm.shallow()

    def reserve(self, tokens: int) -> float:
        return slots.reserve(self, tokens)

    def confirm(self) -> float:
        wait = slots.confirm(self)
        if wait <= 0:
            self._tpm.sent()  # (the key charges its tokens from now: redis_tpm)
        return wait

    def on_sent(self) -> Any:
        """While pacing locally (Redis away), the local window counts the request just admitted from when
        its bytes leave (LocalBudget.on_sent), not from its admission: a send held up by a loaded loop or a
        new connection's handshake crowded the next second by the delay (its fallback's 1/N shares add up to
        the key's whole limit, with no margin beside the window's). On Redis, None: slots are instants."""
        return self._local.on_sent() if self._local is not None else None

    def granted(self) -> asyncio.Future[None] | None:
        """What the current task waits on while its ticket has no slot (redis_slots.granted)."""
        return slots.granted(self)

    def _wake_tickets(self) -> None:
        slots.wake_tickets(self)

    async def acquire(self) -> None:
        """The local cap, then a lease of the key's, waited for on a future (redis_turns.acquire)."""
        await turns.acquire(self)

    def release(self) -> None:
        self._tpm.dropped()  # (an attempt that ended unsent: its tokens back)
        turns.release(self)

    # --- talking to Redis ------------------------------------------------------------------------

    async def _eval(self, want: int, ttl_us: int | None = None, giving: bool = False, **asks: Any) -> Any:
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
            demand=bool(self._bound or self._used or self._again or self._new or asks.get("n_new")),
            waits=(2 if giving else 1) if self._waits() else 0,
            **asks,
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
        self._held, self._others = r.held, r.others
        self.n_waiting = r.n_waiting
        self.paused_until = max(self.paused_until, r.paused_until)
        self.factor = r.factor
        # Back from an outage, the others register again one by one: N (the next fallback's 1/N)
        # does not drop while they may still be coming.
        soon = time.monotonic() < self._grace_until + self.lease_ms / 1000
        self.n_procs = max(r.n_procs, self.n_procs) if soon else r.n_procs
        self._rank, self._n_turns = r.rank, r.n_turns
        self.n_active = max(1, r.n_active)
        self._answered = self._answered or time.monotonic()
        turns.hand_out(self)
        self._house_soon()  # (above its share now, or a lease spare: housekeeping watches every SYNC_S)
        return r

    def _waits(self) -> bool:
        return turns.waits(self)

    def _news(self) -> bool:
        return bool(self._pause_s or self._new_factor is not None)

    def _kick(self) -> None:
        if self.closed:  # (a task cancelled by aclose() may end in an error, not a cancellation)
            return
        loop = asyncio.get_running_loop()
        if self._local is None:
            if self._syncing is None or self._syncing.done():
                self._syncing = loop.create_task(self._sync())
            self._work.set()  # (it waits for work while none: redis_slots.sync)
        if self._local is None and (self._giving or self._lease_q) and (self._leasing is None or self._leasing.done()):
            self._leasing = loop.create_task(self._leases())
        if self._house is None or self._house.done():
            self._house = loop.create_task(self._housekeeping())

    async def _sync(self) -> None:
        await slots.sync(self)

    async def _leases(self) -> None:
        await turns.serve(self)

    async def _grant(self) -> bool:
        return await slots.grant(self)

    def _fair(self) -> int:
        return turns.fair(self)

    def _wake(self) -> None:
        turns.wake(self)

    def _watch(self) -> bool:
        """Housekeeping may have to act within SYNC_S: news to send, leases above this process's share or
        spare with nothing waiting for them (given back after KEEP_S), or slots granted beyond SYNC_S
        ahead (a pause may come before them). Else only the heartbeat is due: a busy process's calls
        (their grants) keep it fresh, and housekeeping does not wake every SYNC_S for nothing."""
        if self._news():
            return True
        spare = self._held - self._bound - len(self._gated)
        if self._held - max(self._fair(), self._bound) > 0:
            return True
        if spare > 0 and not (self._again or self._new or self._lease_q or self._waiters):
            return True
        far = time.monotonic() + SYNC_S
        return any(tk.slot is not None and not tk.sent and tk.slot > far for tk in self._tickets.values())

    def _beat_at(self) -> float:
        """When (our monotonic clock) this process's next heartbeat is due: lease_s / 3 after its last call, and
        while leases of the key are held, its own or another's, at its next turn in the key's round-robin
        (SLOT_S), or BEAT_S after its last call if that does not count on it (yet), so that a holder SIGKILLed
        does not leave the key silent while any process lives. A process whose calls wait for a lease calls after
        each wake-up wait already (redis_turns.serve, WAKE_S apart): a heartbeat between them would only cost a
        call (it keeps its place in the key's queue: redis.lua)."""
        last = self._call.last
        renew = last + self.lease_ms / 3000
        if not (self._held or self._others and not self._waits()):
            return renew
        n = self._n_turns
        if self._rank < 0 or n <= 1:
            return min(renew, last + BEAT_S)
        # the first start of a slot of its turn after its last call (a call ABSORB_S before it was its beat)
        i = math.floor((last + self._call.offset + ABSORB_S) / SLOT_S) + 1
        i += (self._rank - i) % n
        return min(renew, i * SLOT_S - self._call.offset)

    def _house_soon(self) -> None:
        """Wake housekeeping sleeping until the heartbeat's time if it now has something to watch."""
        fut = self._house_fut
        if self._house_long and fut is not None and not fut.done() and (
                self._watch() or self._house_until > self._beat_at() + SYNC_S):
            fut.set_result(None)  # (or its heartbeat is due sooner now: it holds leases since)

    async def _house_sleep(self) -> None:
        loop = asyncio.get_running_loop()
        self._house_long = not self._watch()
        now = time.monotonic()
        # (just past the heartbeat's time, so that it finds it due)
        wait = max(SYNC_S, self._beat_at() + 0.001 - now) if self._house_long else SYNC_S
        self._house_until = now + wait
        fut = self._house_fut = loop.create_future()
        timer = loop.call_later(wait, slots._set, fut)
        try:
            await fut
        finally:
            timer.cancel()
            self._house_fut, self._house_long = None, False

    async def _housekeeping(self) -> None:
        """Heartbeat (lease expiry), pause/factor pick-up while busy, and giving back idle leases."""
        try:
            while self._local is None and not self.closed:  # (a cancellation can be lost in redis-py)
                await self._house_sleep()
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
                    elif self._news() or now >= self._beat_at() or any(
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

