"""Lane budgets shared through Redis (`[shared] redis_url`): every process using one API key paces
against one budget, so K processes together stay under the key's limit instead of sending K times it.

It implements the lane's budget seam (runner.lanes): the policy (AIMD, limits learnt from headers,
probing) stays in `Lane`; only the state moves to Redis, behind one short Lua script that runs
atomically on the server's clock (`TIME`, so host clocks never matter) and, per call:
  - reserves the next n GCRA request slots (and their estimated TPM tokens) and says how long until
    the first: pacing, never rejection; slots are spaced 1/rate apart across all processes;
  - applies TPM reconciliation (actual - estimated tokens) sent with it;
  - grants or takes back concurrency leases, held per process under an expiring heartbeat, so a
    SIGKILLed process's slots free themselves after `lease_s`;
  - records and returns the key's Retry-After pause and the AIMD factor, so all back off together;
  - counts the processes alive on the lane (N, for the fallback below).
A lane's identity in Redis is SHA-256(base URL, API key): never the key itself.

Calls are batched: the slot requests of all tasks waiting at once go out as one script call, and
concurrency leases are taken in blocks and kept while used, so steady state costs about one round
trip per call at low rates and far fewer at high ones. If Redis becomes unreachable mid-run the lane
falls back to local pacing at 1/N of its limits (N = processes last seen on it) with a warning:
never fail open at the full limit. It tries Redis again every RECOVER_S seconds of the wall clock (the
same instants in every process, so they leave 1/N together) and resumes shared pacing when it answers.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import os
import socket
import time
import weakref
from collections import deque
from pathlib import Path
from typing import Any

from runner.budgets.local import wait_turn

log = logging.getLogger("evalsweep")

SAFETY = 0.965  # slots 3.5% below the limit: sends up to ~35 ms off their slot stay inside any 1 s window
LATE_S = 0.015  # a slot missed by more than this (a late timer) is dropped and a new one reserved
SYNC_S = 0.1  # while calls are in flight, pick up pauses and factor changes at least this often
AHEAD_S = 0.25  # slots are reserved at most this far ahead, so processes on one key interleave
LEAD_S = 0.02  # ... and asked for this long before the last granted one
SLEW_S = 0.0005  # the clock offset estimate moves at most this much per round trip
KEEP_S = 0.25  # concurrency leases unused this long go back to the shared pool
RECOVER_S = 5.0  # after a fallback Redis is tried again at each multiple of this on the wall clock

_LUA = (Path(__file__).parent / "redis.lua").read_text()


def lane_id(base_url: str | None, api_key: str | None) -> str:
    """The lane's name in Redis: one budget per key whatever the endpoint is called; never the key."""
    return hashlib.sha256(f"{base_url or ''}\x1f{api_key or ''}".encode()).hexdigest()[:32]


class _Ticket:
    """One task's claim: its TPM estimate, its slot once granted, and whether it holds a lease."""

    __slots__ = ("tokens", "slot", "leased", "dead")

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens
        self.slot: float | None = None
        self.leased = False
        self.dead = False


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
        self.keys = [f"evalsweep:{{{ident}}}:state", f"evalsweep:{{{ident}}}:procs", f"evalsweep:{{{ident}}}:held"]
        self.proc = f"{socket.gethostname()}-{os.getpid()}-{id(self):x}"
        self.max_concurrency = max_concurrency
        self.lease_ms = int(lease_s * 1000)
        self.factor = 1.0
        self.paused_until = 0.0
        self.probing = probing
        self.rpm: float | None = None
        self.tpm: float | None = None
        self.n_procs = 1
        self.margin = 0.0  # the Lane widens a local budget's window on persistent 429s; slots here use SAFETY
        self.late = 0
        self.calls = 0
        self.admitted = 0
        self._script = client.register_script(_LUA)
        self._local_factory = local_factory
        self._local: Any = None
        self._tickets: weakref.WeakKeyDictionary[Any, _Ticket] = weakref.WeakKeyDictionary()
        self._queue: deque[_Ticket] = deque()
        self._rtt = 0.001
        self._last_slot = 0.0
        self._offset = 0.0  # server clock minus our monotonic clock, seconds
        self._best_rtt, self._best_at = float("inf"), 0.0
        self._tok_delta = 0.0
        self._pause_s = 0.0
        self._new_factor: float | None = None
        self._held = 0  # leases this process holds in Redis
        self._leased = 0  # ... of which tickets hold this many
        self._used = 0  # tasks past acquire() (the local cap)
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._idle_since = 0.0
        self._syncing: asyncio.Task[None] | None = None
        self._house: asyncio.Task[None] | None = None
        self._recovering: asyncio.Task[None] | None = None
        self._last_call = 0.0
        self.set_limits(rpm, tpm)

    # --- the seam ---------------------------------------------------------------------------------

    def set_limits(self, rpm: float | None, tpm: float | None) -> None:
        self.rpm, self.tpm = rpm, tpm
        self._T1 = 60e6 / (rpm * SAFETY) if rpm else 0.0  # microseconds per request at factor 1
        self._Tt1 = 60e6 / (tpm * SAFETY) if tpm else 0.0  # microseconds per token
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

    def reconcile(self, est: int, actual: int) -> None:
        if self._local is not None:
            self._local.reconcile(est, actual)
        elif self._Tt1:
            self._tok_delta += actual - est  # sent with the next script call

    def reserve(self, tokens: int) -> float:
        if self._local is not None:
            return self._local.reserve(tokens)
        task = asyncio.current_task()
        tk = self._tickets.get(task)
        if tk is None:
            tk = self._tickets[task] = _Ticket(0)
        tk.tokens = tokens if self._Tt1 else 0
        tk.slot = None
        self._queue.append(tk)
        self._kick()
        return self._rtt

    def confirm(self) -> float:
        task = asyncio.current_task()
        if self._local is not None:
            tk = self._tickets.pop(task, None)
            if tk is not None:  # reserved from Redis before it went away: reserve again locally
                return max(self._local.reserve(tk.tokens), 1e-6)
            return self._local.confirm()
        now = time.monotonic()
        if now < self.paused_until:
            return self.paused_until - now
        tk = self._tickets.get(task)
        if tk is None:  # reserved locally before Redis came back: reserve again from Redis
            return max(self.reserve(0), 1e-6)
        if tk.slot is None:  # not granted yet: come back when the next batch of slots is asked for
            return max(self._rtt, 0.0005, self._last_slot - LEAD_S - now + self._rtt)
        if now < tk.slot:
            return tk.slot - now
        if now - tk.slot > LATE_S:  # woke too late: sending now could crowd the next second
            self.late += 1
            tk.slot = None
            self._queue.append(tk)
            self._kick()
            return max(self._rtt, 0.0005)
        self.admitted += 1
        return 0.0  # admitted; the ticket keeps its lease until release()

    async def acquire(self) -> None:
        """The local cap (a process never runs more than max_concurrency, 1 while probing); the shared
        lease is taken with the slot, so waiting for a slot holds nobody else's concurrency."""
        while True:
            if self._local is not None:
                local = self._local
                await local.acquire()
                if self._local is not local:  # Redis came back while this call waited: counted here now
                    self._used += 1
                return
            if self._used < (1 if self.probing else self.max_concurrency):
                self._used += 1
                return
            await wait_turn(self._waiters, self._wake)

    def release(self) -> None:
        if self._local is not None:
            self._local.release()
            return
        self._used -= 1
        tk = self._tickets.pop(asyncio.current_task(), None)
        if tk is not None:
            tk.dead = True
            if tk.leased:
                self._leased -= 1
                self._idle_since = time.monotonic()
                if self._queue:
                    self._kick()
        self._wake()

    # --- talking to Redis ------------------------------------------------------------------------

    async def _eval(self, lease_delta: int = 0, n: int = 0, tokens: int = 0, ttl: int | None = None) -> list[Any]:
        factor = "" if self._new_factor is None else repr(self._new_factor)
        tok_delta, pause_us = self._tok_delta, int(self._pause_s * 1e6)
        self._tok_delta, self._pause_s, self._new_factor = 0.0, 0.0, None
        args = [
            self.proc,
            self.lease_ms * 1000 if ttl is None else ttl,
            self.max_concurrency,
            lease_delta,
            n,
            tokens,
            tok_delta,
            self._T1,
            self._Tt1,
            pause_us,
            factor,
        ]
        t0 = time.monotonic()
        res = await self._script(keys=self.keys, args=args)
        t1 = time.monotonic()
        self.calls += 1
        self._last_call = t1
        rtt = t1 - t0
        self._rtt = 0.8 * self._rtt + 0.2 * rtt
        # Server clock -> our monotonic clock, from the round trips least delayed (an event loop busy
        # elsewhere makes a reply look late): a slot must be sent within a few ms of the same instant
        # in every process.
        now_s = float(res[6]) / 1e6
        if rtt <= self._best_rtt * 1.5 or t1 - self._best_at > 5.0:
            est = now_s - (t0 + t1) / 2
            if self._best_rtt == float("inf"):
                self._offset = est
            else:  # slew, never jump: a jump would bunch the slots granted before and after it
                self._offset += max(-SLEW_S, min(SLEW_S, est - self._offset))
            self._best_rtt, self._best_at = rtt, t1
        pause = float(res[3]) / 1e6
        if pause > 0:
            self.paused_until = max(self.paused_until, now_s - self._offset + pause)
        self.factor = float(res[4])
        self.n_procs = int(res[5])
        return [int(res[0]), float(res[1]) / 1e6 - self._offset, float(res[2]) / 1e6, int(res[7]), float(res[8]) / 1e6]

    def _kick(self) -> None:
        if self._local is None and (self._syncing is None or self._syncing.done()):
            self._syncing = asyncio.get_running_loop().create_task(self._sync())
        if self._house is None or self._house.done():
            self._house = asyncio.get_running_loop().create_task(self._housekeeping())

    async def _sync(self) -> None:
        """Hand out slots (and leases) to the waiting tickets, one script call per batch."""
        try:
            while self._local is None:
                while self._queue and self._queue[0].dead:
                    self._queue.popleft()
                if not self._queue and not (self._pause_s or self._new_factor is not None or self._tok_delta):
                    return
                # Ask for the next slots only shortly before the granted ones run out: waiting tickets
                # gather into one call, and other processes on the key get the slots in between.
                ahead = self._last_slot - time.monotonic()
                lead = max(LEAD_S, 4 * self._rtt)
                if self._queue and ahead > lead:
                    await asyncio.sleep(ahead - lead)
                    continue
                T = self._T1 / 1e6 / max(self.factor, 1e-3)
                n = len(self._queue) if not T else min(len(self._queue), max(1, int(AHEAD_S / T)))
                # leases come with slots: never take more than a fair share of the key's concurrency,
                # and above it, hand spare leases back rather than reuse them (a process that joins
                # a busy key gets the leases as ours finish, not once ours go idle)
                room = self._fair() - self._leased + sum(tk.leased for tk in self._queue)
                if room <= 0:
                    if self._held > self._leased:
                        granted, *_ = await self._eval(lease_delta=self._leased - self._held)
                        self._held += granted
                    await asyncio.sleep(0.02)
                    continue
                n = min(n, room)
                batch = [self._queue[i] for i in range(n)]
                need = sum(not tk.leased for tk in batch) - (self._held - self._leased)
                granted, start, T, given, Tt = await self._eval(
                    lease_delta=max(0, need), n=n, tokens=sum(t.tokens for t in batch)
                )
                self._held += granted
                used = 0
                for i in range(given):
                    tk = self._queue.popleft()
                    if not tk.leased:
                        tk.leased = True
                        self._leased += 1
                    tk.slot = start + max(i * T, used * Tt)  # spaced by requests and by tokens
                    used += tk.tokens
                    self._last_slot = max(self._last_slot, tk.slot)
                if given < n:  # the key's concurrency is taken: ask again shortly
                    await asyncio.sleep(0.02)
        except Exception as e:  # noqa: BLE001 - Redis gone: pace locally, never at the full limit
            self._fall_back(e)

    def _fair(self) -> int:
        return max(1, math.ceil(self.max_concurrency / max(1, self.n_procs)))

    def _wake(self) -> None:
        free = (1 if self.probing else self.max_concurrency) - self._used
        if self._local is not None:
            free = len(self._waiters)
        while free > 0 and self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                free -= 1

    async def _housekeeping(self) -> None:
        """Heartbeat (lease expiry), pause/factor pick-up while busy, and giving back idle leases."""
        try:
            while self._local is None:
                await asyncio.sleep(SYNC_S)
                now = time.monotonic()
                spare = self._held - self._leased
                over = self._held - max(self._fair(), self._leased)  # others may be waiting for these
                if spare > 0 and (over > 0 or not self._queue and now - self._idle_since > KEEP_S):
                    granted, *_ = await self._eval(lease_delta=-(over if over > 0 else spare))
                    self._held += granted
                elif self._used or self._tok_delta or now - self._last_call > self.lease_ms / 3000:
                    await self._eval()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001
            self._fall_back(e)

    def _fall_back(self, e: BaseException) -> None:
        if self._local is not None:
            return
        n = max(1, self.n_procs)
        log.warning(
            "lane %s: shared budget on Redis unreachable (%s); pacing locally at 1/%d of its limits "
            "(%d processes were sharing it)",
            self.name,
            str(e).splitlines()[0] if str(e) else type(e).__name__,
            n,
            n,
        )
        local = self._local_factory(
            self.rpm / n if self.rpm else None,
            self.tpm / n if self.tpm else None,
            max(1, math.ceil(self.max_concurrency / n)),
        )
        local.set_factor(self.factor)
        if self.probing:
            local.set_probing(True)
        # Sends paced by Redis may fill the last second up to the key's limit: start after it, on spaced
        # slots (every process falls back at once: their fresh-lane bursts would meet a window later).
        local.paced_from(max(1.0, self.paused_until - time.monotonic()))
        local._used = self._used  # calls in flight release into the local budget
        self._local = local
        self._queue.clear()
        self._wake()
        self._recovering = asyncio.get_running_loop().create_task(self._recover())

    async def _recover(self) -> None:
        """Shared pacing again once Redis answers; calls in flight release into it, calls waiting in
        the local budget are let through to reserve their slots from Redis."""
        while self._local is not None:
            await asyncio.sleep(RECOVER_S - time.time() % RECOVER_S)
            try:
                await self._eval()
            except Exception:  # noqa: BLE001 - still down: stay at 1/N
                continue
            local, self._local = self._local, None
            self._used, self._held, self._leased = local._used, 0, 0
            self._tickets.clear()
            # Local sends may have filled the last second up to this process's 1/N: start after it.
            self.paused_until = max(self.paused_until, time.monotonic() + 1.0)
            log.warning("lane %s: Redis reachable again; shared pacing resumed", self.name)
            local.open()
            self._wake()
            self._kick()

    async def aclose(self) -> None:
        """Give this process's leases back and leave the lane (so N and the pool are right at once)."""
        for t in (self._house, self._syncing, self._recovering):
            if t is not None and not t.done():
                t.cancel()
        if self._local is None:
            try:
                await self._eval(lease_delta=-self._held, ttl=0)
            except Exception:  # noqa: BLE001
                pass
