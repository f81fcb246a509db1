"""A lane's pacing state in this process (`LocalBudget`, the default behind `runner.lanes`' budget seam): its request
slots and window, its concurrency lease queue; its token account is `runner.budgets.tokens`, the lease queue's rank
`runner.budgets.rank`.

Pacing is GCRA on absolute slots: admission k of a lane gets the slot `t0 + k/rate` (the "theoretical
arrival time" advances by 1/rate per admission, never from the moment a late timer woke us), so timer
lateness does not accumulate. A lane that fell behind (a slow callback, a GC pause) catches up on the
slots it missed, up to `BURST_S` of them, spending the burst the provider's one-second window allows
instead of throwing it away; a sliding log of the last second's requests guarantees that no window of
1 s + `MARGIN_S` ever holds more than a second's share of the limit (providers enforce per-minute
limits over short windows: 60,000 RPM may mean 1,000 per second; the margin covers the jitter of
their arrival clock); a key whose rate is not whole requests a second is held over longer windows
too, so it is used at its rate (`_guards`). The log counts each request from when its bytes leave (the aiohttp providers
report it through `providers.http.SENT`; until then it counts in every window), not from its
admission: a loop stall or a new connection's handshake between the two cannot crowd a window.
Slots are spaced for a window `SLACK_S` wider than the guard's, so the guard rarely binds: a request
held by the guard wakes late, and that lateness would carry into every following second. A fresh
lane spends the provider's one-second burst allowance: its window is empty, so a second's share may
go at once (as fast as its concurrency cap lets it); its slots begin one window later.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

from runner.budgets.rank import _NO_WORK, Rank, Work, longest
from runner.budgets.tokens import BURST_S, WINDOW_S, TokenAccount

MARGIN_S = 0.005  # ... measured at the server, after its jitter: keep the window this much wider
SLACK_S = 0.003  # slots are spaced for a window this much wider still: a send's lateness (timer, loop)
# then rarely makes the guard bind, so it does not carry into the next second (the guard's own wait
# would be late too, and lateness accumulating is what absolute slots are for)
MARGIN_MAX = 0.05  # widened while our timers run late or 429s still come (a loaded machine jitters)
LATE_HOLD_S = 1.2  # a stall widens the window guard this long (its delayed sends meet the next second)


_SENT, _PENDING, _GONE = 0, 1, 2  # a window log entry's state: counts from its stamp / counts / expired


def _guards(rate: float, exact: bool) -> tuple[tuple[int, float], ...]:
    """The window guard for `rate` requests a second, as (requests, seconds) pairs: no window of sends
    of that many seconds may hold more than that many requests. By default a second's whole share.

    `exact`: `rate` is the key's own limit, paced by this process alone. A key whose rate is not whole
    (100 RPM = 1.67/s) would be held by a second's whole share to floor(rate): 0.60 of the key (150 RPM:
    0.80, 400 RPM: 0.90). It gets instead the fewest whole seconds whose share is the rate to 1% (100
    RPM: 5 in any 3 s), ceil(rate) in any second (a provider counting a sliding second), and what a
    token bucket holding a second of the rate admits (the providers' model): k requests need k - rate
    of refill beyond the full bucket, so at most k - 1 in any (k - rate) / rate seconds (100 RPM: never
    2 within 0.2 s, nor 3 within 0.8 s).

    Not exact, the whole share (floor), for two reasons:
      - a key's 1/N share (a shared budget's fallback: N processes pacing it independently, no phase
        between them): their seconds add up within the key's, where ceil would not (3 x ceil(6.67) = 21
        > 20: the reason 17b99e9 reverted the longer window);
      - a rate the AIMD factor reduced after 429s: the key's real limit is below it and unknown, so
        its share must not round up (the key refuses that extra request), and a window longer than
        a second would count the sends of the faster rate just refused and hold the lane a whole
        second, a quiet second that raises the factor again: with 7345ff3 a lane configured at
        3000 RPM against a key of 600 settled at 44% of its requests refused (at a factor under
        FLOOR, where a minority of 429s no longer slows it)."""
    whole = max(1, math.floor(rate * WINDOW_S + 1e-9))
    if not exact or rate < 1:
        return ((whole, WINDOW_S),)
    for k in range(1, 61):
        share = math.floor(rate * k * WINDOW_S + 1e-9)
        if share >= 0.99 * rate * k * WINDOW_S:
            if k == 1:
                return ((whole, WINDOW_S),)
            full = rate * WINDOW_S  # the bucket's capacity
            bucket = tuple((c - 1, (c - full) / rate) for c in range(whole + 1, share + 1))
            return (*bucket, (math.ceil(full), WINDOW_S), (share, k * WINDOW_S))
    return ((whole, WINDOW_S),)


def _stamp(entry: list[Any]) -> float:
    return entry[0]


async def wait_turn(waiters: deque[asyncio.Future[None]], wake: Callable[[], None]) -> None:
    """Queue for a concurrency lease's wake-up; one that comes with a cancellation is passed on."""
    fut = asyncio.get_running_loop().create_future()
    waiters.append(fut)
    try:
        await fut
    except BaseException:
        if fut.done() and not fut.cancelled():
            wake()  # pass on a wake-up we will not use
        raise


class LocalBudget:
    """One lane's pacing state in this process: GCRA slots, a 1 s window log, a concurrency lease."""

    def __init__(
        self, rpm: float | None, tpm: float | None, max_concurrency: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_concurrency = max_concurrency
        self.clock = clock
        self.factor = 1.0
        self.paused_until = 0.0
        self._tat = 0.0  # next free request slot (monotonic seconds)
        self.tokens = TokenAccount(clock)  # the key's TPM, its holds and its queue
        # (its calls, bound here: the token account is on every call's path)
        self.take, self.reconcile = self.tokens.take, self.tokens.reconcile
        self.learn_depth, self.shallow, self.defer_tokens = self.tokens.learn_depth, self.tokens.shallow, self.tokens.defer
        self._burst, self._burst_until = 0, 0.0  # a fresh lane's one-second allowance (admissions, until)
        self._log: deque[list[Any]] = deque()  # [stamp, state] per admission of the last window
        self._last: list[Any] | None = None  # the entry of the latest admission (for `on_sent`)
        self.margin = MARGIN_S
        self.late = 0.0  # worst timer lateness (loop stall) of the last LATE_HOLD_S
        self._late_t = 0.0
        self._used = 0
        self._waiters: dict[Hashable, tuple[Callable[[], Rank], deque[tuple[int, asyncio.Future[None]]], bool]] = {}
        self._seq = 0
        self._due = False  # a hand-over of free leases is scheduled (`_wake_soon`)
        self._top = 0.0  # the longest expected kind this lane has ranked (an unseen kind ranks right after it)
        self._figures: dict[Hashable, tuple[float, int, Hashable]] = {}  # each kind's latest, waiting or not
        self.probing = False
        self._near = False  # the request slots' half of `near`
        self.parts = 1  # processes pacing the key independently, this one at 1/parts (`split`)
        self.set_limits(rpm, tpm)

    def set_limits(self, rpm: float | None, tpm: float | None) -> None:
        self.rpm, self.tpm = rpm, tpm
        self._rescale()

    def split(self, parts: int) -> None:
        """This budget paces 1/`parts` of a key beside `parts - 1` processes doing the same, each on
        its own clock (a shared budget's fallback): its window guard is one whose shares add up."""
        self.parts = max(1, parts)
        self._rescale()

    def set_factor(self, f: float) -> None:
        self.factor = f
        self._rescale()

    def _rescale(self) -> None:
        f = self.factor
        self._T = 60.0 / (self.rpm * f) if self.rpm else 0.0  # seconds per request
        self.tokens.rescale(self.tpm, f)
        self._per_window = max(1, math.floor(self.rpm * f / 60.0 * WINDOW_S + 1e-9)) if self.rpm else 0
        self._guard = _guards(self.rpm * f / 60.0, self.parts == 1 and f >= 1.0) if self.rpm else ()
        self._keep = max((s for _, s in self._guard), default=WINDOW_S)  # the log's span
        cap = self.max_concurrency if self.rpm or self.tpm else max(1, math.ceil(self.max_concurrency * f))
        if not self.max_concurrency:  # (a shared budget's fallback holding no lease: none)
            cap = 0
        self._cap = min(1, cap) if self.probing else cap
        self._wake()

    def reserve(self, tokens: int = 0) -> float:
        """The next request slot, and `tokens` of TPM on a slot fixed now (a shared budget's fallback
        paces so; a lane asks for its tokens in `take`); seconds to wait for it."""
        now = self.clock()
        tok = self.tokens
        if not self._tat:  # a fresh lane: its window is empty, a second's share may go at once
            tok.fill(now)  # (the key's bucket is full: its tokens may go at once)
            self._burst, self._burst_until = self._per_window, now + WINDOW_S
            self._tat = now + self._burst * self._T * (1.0 + self.margin + SLACK_S)  # then slots resume
        # The lane's own account at this admission (`near`).
        self._near, tok.near = self._tat > now - BURST_S, tok.behind(now)
        slot = max(now - BURST_S, self.paused_until)
        if self._T:
            if self._burst and now < self._burst_until:
                self._burst -= 1  # no slot of its own: the window guard alone holds it
            else:
                slot = max(slot, self._tat)
                self._tat = slot + self._T * (1.0 + self.margin + SLACK_S)
        if tok.per_token and tokens:
            slot = max(slot, tok.reserve(now, tokens))
        return slot - now

    @property
    def near(self) -> tuple[bool, bool]:
        """Is the lane using its request / token rate (its next slot not behind now)? Then a provider's
        `remaining: 0` stamped at its latest admission is its own pacing."""
        return self._near, self.tokens.near

    @property
    def draining(self) -> bool:
        return self.tokens.draining

    def confirm(self) -> float:
        now = self.clock()
        if now < self.paused_until:
            return self.paused_until - now
        if self._per_window:
            log_ = self._log
            extra = min(MARGIN_MAX, self.margin + self.late)
            if len(self._guard) > 1:
                wait = self._guards_wait(now, extra)
                if wait > 0:
                    return wait
            else:
                span = WINDOW_S + extra
                for _ in range(2):
                    while log_ and log_[0][1] == _SENT and log_[0][0] + span <= now:
                        log_.popleft()[1] = _GONE
                    if len(log_) < self._per_window:
                        break
                    wait = log_[-self._per_window][0] + span - now
                    if wait > 0:
                        return wait
                    # Out of order: a request stamped when it left (after later admissions) sits before
                    # older stamps; order the log and look again (an unsent one still counts: see on_sent).
                    self._log = log_ = deque(sorted(log_, key=_stamp))
                else:  # full of requests admitted a window ago and still not sent: look again soon
                    return 0.01
            self._last = entry = [now, _SENT]
            log_.append(entry)
        return 0.0

    def _guards_wait(self, now: float, extra: float) -> float:
        """Seconds until every window of the guard has room for one more request (0: now). A request
        not yet sent counts in every window; one sent counts in those holding its stamp."""
        log_ = self._log
        while log_ and log_[0][1] == _SENT and log_[0][0] + self._keep + extra <= now:
            log_.popleft()[1] = _GONE
        pending = sum(1 for e in log_ if e[1] == _PENDING)
        sent = sorted((e[0] for e in log_ if e[1] == _SENT), reverse=True)  # the latest first
        wait = 0.0
        for count, secs in self._guard:
            i = count - 1 - pending  # the window has room once this send (and older ones) left it
            if i < 0:  # full of requests admitted and still not sent: look again soon
                return 0.01
            if i < len(sent):
                wait = max(wait, sent[i] + secs + extra - now)
        return wait

    def sent_within(self, seconds: float) -> int:
        """Requests admitted in the last `seconds` (an unsent one counts: it can only leave later)."""
        since = self.clock() - seconds
        return sum(1 for e in self._log if e[1] == _PENDING or e[1] == _SENT and e[0] > since)

    def on_sent(self) -> Callable[..., None] | None:
        """The request just admitted will report when its bytes leave: returns the callback for
        that. Until then it counts in every window (its send can only be later), after it from its
        send: the window covers what the provider can see, however long the loop took between
        admission and the write (a stall, a new connection's handshake). Call it with `final=True`
        once the attempt is over: a request that never reported counts from then. None without a
        window."""
        entry, self._last = self._last, None
        if entry is None:
            return None
        entry[1] = _PENDING

        def sent(final: bool = False) -> None:
            if final and entry[1] != _PENDING:
                return
            now = self.clock()
            if entry[1] == _GONE:  # a big body's last chunk, its first one a window ago
                self._log.append(entry)
            entry[0], entry[1] = max(entry[0], now), _SENT

        return sent

    def late_by(self, seconds: float) -> None:
        """A timer fired this late: the loop stalled, so requests admitted just before the stall
        reached the server up to that much after their log stamp (only for providers that do not
        report their sends). Only windows holding them are at risk, i.e. the next ~second: the
        guard widens by the worst stall of the last `LATE_HOLD_S` (not longer: every widened second
        costs `margin` of the limit)."""
        now = self.clock()
        if seconds >= self.late or now - self._late_t > LATE_HOLD_S:
            self.late, self._late_t = seconds, now

    def pause(self, seconds: float) -> None:
        self.paused_until = max(self.paused_until, self.clock() + seconds)

    def paced_from(self, seconds: float) -> None:
        """Start after `seconds` on spaced slots, without a fresh lane's one-second burst: the key's
        window was not empty (a fallback from shared pacing, whose other processes burst at the same
        instant: their bursts would meet at the next window's edge)."""
        self.pause(seconds)
        self._tat = self.tokens.tat = self.paused_until

    async def acquire(self, work: Work | None = None, alone: bool = False) -> None:
        """A concurrency lease. Calls waiting for one queue by kind of work (`work`: a key and its
        expected duration, read when a lease frees, so what the lane learnt meanwhile counts): the
        longest expected kind goes first (a kind of few answers ranked up toward its group's figure, `SHRINK_N`; a kind
        not yet seen, `inf`, right after the longest seen),
        equal ones and each kind's calls in arrival order; a lane bound by concurrency does not end on
        long calls sent last. On a lane paced by tokens a follow-up (a chain's next step: a critique
        released by its answer) goes before every first call: ranked among them, it waited for every
        longer kind, then for the tokens of the calls holding leases ahead of it (`take`), and a chain's
        end became the lane's tail (bench/reasoning_sweep.py, seed 0 night 2: tpm-a's critiques waited a
        median 30 s after their answer, the last sent at 56 s of a 58 s limit, one of 18 s: 1.29x). On a
        lane bound by concurrency alone it keeps its rank by length: there the order is what packs the
        slots, and first it moved long answers later (bench no-n, seed 3 night 1: 1.17 -> 1.45x, one
        model's backlog behind the critiques). A freed lease is handed to the waiter it is given to
        (counted as used from then): a call arriving meanwhile queues behind the others, it does not take it.

        `alone`: its model's only call on the wire (runner.calls.gate's probe: the model sends nothing
        else until it answers). A probing lane's one call at a time does not hold it back: one call per
        model is no fan-out, and held, each model's probe waited for the lane's (in the bench, 1 s of a
        concurrency-bound lane's start on one slot of 24, then each model's probe out alone)."""
        if alone and self.probing and self._used < self.max_concurrency:
            self._used += 1
            return
        if self._used < self._cap and not self._waiters:
            self._used += 1
            return
        key, expect, *follow = work or _NO_WORK
        queue = self._waiters.get(key)
        if queue is None:
            queue = self._waiters[key] = (expect, deque(), bool(follow and follow[0]))
        fut = asyncio.get_running_loop().create_future()
        self._seq += 1
        queue[1].append((self._seq, fut))
        if self._used < self._cap:  # (only waiters gone meanwhile were ahead of it)
            self._wake_soon()
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release()  # pass on a lease handed to us that we will not use
            raise

    def idle(self) -> int:
        """Leases free that no call waits for (runner.budgets.hedge: a copy takes one no call wanted); none until
        a call has waited for one: a lane never short of leases is not bound by them, a copy would only cost."""
        return 0 if self._waiters or not self._seq else max(0, self._cap - self._used)

    def release(self) -> None:
        """A lease frees and is handed over at once, ranked on the answers counted so far: not yet the
        one of the call that freed it (`runner.calls.call` counts it just after, in the same step).
        Deciding at the end of the step instead (fff8d8b) measured no better: bench/lane_replay's
        `ours` over 20 draws within 0.007 either way per lane, and in the sweep (seed 0) it sent one
        heavy draw of `shared` 6 s later (1.14 -> 1.30x its limit)."""
        self._used -= 1
        self._wake()

    def _wake_soon(self) -> None:
        if self._due or not self._waiters:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # (no loop: nobody can be waiting)
            self._wake()
            return
        self._due = True
        loop.call_soon(self._wake)

    def open(self) -> None:
        """Let every call waiting for a lease or tokens through: this budget is being replaced (by
        Redis again), or the run is stopping (the lane then sends none of them)."""
        self._cap = 1 << 30
        self._wake()
        self.tokens.open()

    def _wake(self) -> None:
        """Hand the free leases to the longest expected kinds waiting (each lease counted as used now)."""
        self._due = False
        waiters = self._waiters
        while self._used < self._cap and waiters:
            if len(waiters) == 1:
                key = next(iter(waiters))
            else:  # (a follow-up first only on a lane paced by tokens: `acquire`)
                key, self._top = longest(waiters, self._top, self._figures, bool(self.tokens.per_token))
            queue = waiters[key][1]
            fut = queue.popleft()[1]
            if not queue:
                del waiters[key]
            if not fut.done():
                fut.set_result(None)
                self._used += 1

    def set_probing(self, on: bool) -> None:
        if self.probing and not on and len(self._log) == 1:
            # The probe (a lane's first call, alone) also opened the connection: all we know of its
            # arrival is that it came before its answer, so the window counts it from now.
            self._log[0][0] = self.clock()
        self.probing = on
        self._rescale()
