"""A lane's pacing state in this process (`LocalBudget`, the default behind `runner.lanes`' budget seam).

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

BURST_S = 0.05  # a lane catches up this much lateness at once; more would arrive as a bunch the server
# timestamps spread out (under load), and the window's next requests would meet them
WINDOW_S = 1.0  # no sliding window of this length holds more than rate * WINDOW_S admissions
MARGIN_S = 0.005  # ... measured at the server, after its jitter: keep the window this much wider
SLACK_S = 0.003  # slots are spaced for a window this much wider still: a send's lateness (timer, loop)
# then rarely makes the guard bind, so it does not carry into the next second (the guard's own wait
# would be late too, and lateness accumulating is what absolute slots are for)
TPM_SHARE = 0.97  # tokens are paced this far under the limit: a call's real usage differs from its
# estimate (reasoning varies), and the slack keeps the key's bucket holding a cushion for the calls
# that spend more than expected (reconciled only when their answer comes)
MARGIN_MAX = 0.05  # widened while our timers run late or 429s still come (a loaded machine jitters)
LATE_HOLD_S = 1.2  # a stall widens the window guard this long (its delayed sends meet the next second)


Rank = float | tuple[float, int, Hashable]
"""A kind of call's expected duration as a lane ranks it: seconds (known), or (seconds, the answers they rest
on, the group whose figure a kind of few answers is shrunk toward: runner.calls.estimates.Spend.rank)."""
Work = tuple[Hashable, Callable[[], Rank]] | tuple[Hashable, Callable[[], Rank], bool]
"""A kind of call (e.g. a model's pass and n), its expected duration as known now, and
optionally whether it is a follow-up (a chain's next step, released by an answer: it goes first)."""
_NO_WORK: Work = (None, lambda: 0.0)
_TINY_S = 1e-3  # (a latency's floor for its log: an instant answer)

SHRINK_N = 10
"""A kind's expected duration resting on k answers is ranked at least at its group's figure on the lane (the
answer-weighted geometric mean over the lane's kinds of that pass and n) weighted SHRINK_N against its own
weighted k, in log space (latencies are multiplicative: a chat model's 0.3 s and a thinker's 3 s are as far
from 1 s). Ranked on its own few answers, a slow model whose first draws were quick went last with its whole
backlog: ranked last, it got no answer more to correct it (bench no-n, seed 0: nn02, the 3rd quickest law,
sent its backlog at 51-54 s of 68, its long thinkers the lane's tail). Only upward: a kind ranked too high
goes, and its answers correct it; pulled down from one long answer, a slow model waited behind quicker ones
(bench tpm-b, seed 4: rb01's one-sample calls, after one answer of 4.7 s, sent at 55-58 s instead of 35-43,
a draw of 33 s the lane's end: 1.09 -> 1.31x). Replays of our ranking on seed 0 / 1's draws (main's sweeps;
lane_replay.learned's rule, 20 orders), no shrink -> this: no-n 1.163/1.121 -> 1.130/1.126, conc
1.085/1.073 -> 1.077/1.072, shared 1.111/1.055 -> 1.116/1.055, tpm-a 0.868/0.907 -> 0.873/0.905, tpm-b
1.041/1.018 -> 1.046/1.013; 60 synthetic draws: no-n 1.150 -> 1.143, conc 1.105 -> 1.102, tpm-b 1.108 ->
1.104, shared 1.120 -> 1.122, tpm-a 0.934 -> 0.935."""

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


def _wake_one(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


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
        self._tok_tat = 0.0  # next free token slot
        self._burst, self._burst_until = 0, 0.0  # a fresh lane's one-second allowance (admissions, until)
        self._log: deque[list[Any]] = deque()  # [stamp, state] per admission of the last window
        self._last: list[Any] | None = None  # the entry of the latest admission (for `on_sent`)
        self.margin = MARGIN_S
        self.late = 0.0  # worst timer lateness (loop stall) of the last LATE_HOLD_S
        self._late_t = 0.0
        self._used = 0
        self._waiters: dict[Hashable, tuple[Callable[[], float], deque[tuple[int, asyncio.Future[None]]], bool]] = {}
        self._seq = 0
        self._due = False  # a hand-over of free leases is scheduled (`_wake_soon`)
        self._top = 0.0  # the longest expected kind this lane has ranked (an unseen kind ranks right after it)
        self._figures: dict[Hashable, tuple[float, int, Hashable]] = {}  # each kind's latest, waiting or not
        self.probing = False
        self.near = (False, False)
        self.parts = 1  # processes pacing the key independently, this one at 1/parts (`split`)
        self._held: dict[int, int] = {}
        """Tokens each call in flight is expected to settle beyond what the key charged at its admission
        (`charge`: its reasoning), as {tokens: calls}. The account holds the largest of them (`_owed`)."""
        self._tok_q: deque[list[Any]] = deque()  # calls waiting in `take`, in order: [future, follow-up]
        self.depth = 0.0
        """Tokens the key's bucket was seen holding (its answers' remaining-tokens; 0: unknown, a second
        of them is assumed): the account forgets credit only beyond that, not beyond a second."""
        self._ceiling = math.inf  # at most this deep: halved by each 429 for tokens (`shallow`)
        self.draining = False  # `open()`: waiters leave without being charged (the run is stopping)
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
        self._Tt = 60.0 / (self.tpm * f * TPM_SHARE) if self.tpm else 0.0  # seconds per token
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
        if not self._tat:  # a fresh lane: its window is empty, a second's share may go at once
            self._tok_tat = now - self._span()  # (the key's bucket is full: its tokens may go at once)
            self._burst, self._burst_until = self._per_window, now + WINDOW_S
            self._tat = now + self._burst * self._T * (1.0 + self.margin + SLACK_S)  # then slots resume
        # The lane's own account at this admission: is it using its request / token rate (its next
        # slot not behind now)? Then a provider's `remaining: 0` stamped now is its own pacing.
        self.near = (self._tat > now - BURST_S, self._tok_tat + self._owed > now - BURST_S)
        slot = max(now - BURST_S, self.paused_until)
        if self._T:
            if self._burst and now < self._burst_until:
                self._burst -= 1  # no slot of its own: the window guard alone holds it
            else:
                slot = max(slot, self._tat)
                self._tat = slot + self._T * (1.0 + self.margin + SLACK_S)
        if self._Tt and tokens:  # the call's tokens refill *before* it goes: a big call finds the key's bucket holding them
            self._tok_tat = max(self._tok_tat, now - self._span()) + tokens * self._Tt
            slot = max(slot, self._tok_tat + self._owed)
        return slot - now

    @property
    def _owed(self) -> float:
        """Seconds of token slots held beyond the account for the calls in flight: the largest rest one of
        them is expected to settle (outside the clamp: never forgotten as idle). The account is charged and
        settled as the key's bucket is, so a settlement moves both at once; held against is only the
        answer whose settlement the key counted and whose reconcile has not come yet (its bytes in
        transit, the loop busy), one at a time. Holding the sum of them kept the key's bucket ~a call's
        rest per call in flight fuller than need be (bench `shared`, 12 in flight: ~10,000 tokens of its
        20,000), where quick answers' credits overflowed it: 6% of its TPM lost, 1.27 -> 1.23x on seed 2."""
        return max(self._held, default=0) * self._Tt

    def _span(self) -> float:
        """Seconds of token slots the key's bucket holds: a second's until its answers showed more."""
        return max(WINDOW_S, min(self.depth, self.tpm or 0.0) * self._Tt)

    def learn_depth(self, remaining: float) -> None:
        """An answer's remaining-tokens, stamped at its admission: the key's bucket held at least that
        (providers hold a minute; a bucket of one second forgot the credit of every call charged more
        than it spent, max_tokens for ~half of it, whenever the credit came to a fuller bucket).

        The first one also says what the account, a second deep until then, did not count: at that
        admission the key held `remaining` where the account held at most a second, and both were charged
        and settled alike since (the key refilling faster, at the whole TPM), so the account takes the
        difference at once. Left out, the account stayed that far behind the key for the run (bench
        tpm-a, 10 s of its TPM deep: the key's bucket sat ~190,000 of 200,000 full, seed 5 1.27x)."""
        first = not self.depth
        self.depth = min(max(self.depth, remaining), self._ceiling)
        if first and self._Tt:
            self._tok_tat -= max(0.0, self._span() - WINDOW_S)

    def shallow(self) -> None:
        """Refused for tokens: the key's bucket may hold less than its answers showed (its TPM enforced
        over shorter windows, another client on it) or an answer's debt came first: the account is
        believed half as deep from now on, down to a second's tokens (one stray refusal does not cost
        a deep key a second's bucket, repeated ones do)."""
        if self.depth:
            self.depth = self._ceiling = self.depth / 2
            self._tok_tat = max(self._tok_tat, self.clock() - self._span())

    def _tok_wait(self, need: float) -> float:
        """Until the bucket (at most `_span()` of tokens) holds `need` and what the account holds for an
        answer in flight (`_owed`): a call over a full bucket goes when it is full."""
        now, span = self.clock(), self._span()
        return max(self._tok_tat, now - span) + min(need + self._owed, span) - now

    async def take(self, tokens: int, charge: int | None = None, first: bool = False, follow: bool = False) -> None:
        """Wait, in arrival order, until the key's bucket holds this call's tokens, then charge them.
        `tokens`: what the call is expected to use; `charge`: what the key counts when it admits it
        (prompt + max_tokens; default `tokens`). The account runs as the key's does, charged `charge`
        now and settled at the answer (`reconcile`); until then the largest expected rest of the calls
        in flight is held (`_owed`), so an answer the key settled before we did finds its bucket
        holding it. Waiting here rather than on a slot fixed when the call queued, a call goes as soon
        as the account allows: answers' credits and debts move the whole queue.

        `first`: a call the key refused for tokens and whose reset has passed: the key holds its
        tokens now, so it goes at once and the calls queued move back by its tokens (at the end of the
        queue it would be refused again, by then spent).

        `follow`: a follow-up (a chain's next step, `acquire`'s rank): it queues ahead of the first calls
        waiting, behind the follow-ups already there. At the tail it waited the seconds of tokens the
        calls holding a lease ahead of it charge (bench tpm-a: 64 leases, ~50 of them waiting here)."""
        if not self._Tt or not tokens:
            return
        c = tokens if charge is None else charge
        held = max(0, tokens - c)
        q = self._tok_q
        if not first and (q or self._tok_wait((c + held) * self._Tt) > 0):
            loop = asyncio.get_running_loop()
            me: list[Any] = [None, follow]  # [the future it waits on, a follow-up]
            if follow:
                i = 0
                while i < len(q) and q[i][1]:
                    i += 1
                q.insert(i, me)  # (a head moved back wakes to no timer: the next departure wakes the head)
            else:
                q.append(me)
            try:
                while not self.draining:
                    wait = self._tok_wait((c + held) * self._Tt) if q[0] is me else None
                    if wait is not None and wait <= 0:
                        break
                    fut = me[0] = loop.create_future()
                    timer = None if wait is None else loop.call_later(wait, _wake_one, fut)
                    try:
                        await fut
                    finally:
                        if timer is not None:
                            timer.cancel()
            finally:
                q.remove(me)
                self._wake_tokens()
            if self.draining:
                return
        now = self.clock()
        self._tok_tat = max(self._tok_tat, now - self._span()) + c * self._Tt
        if held:
            self._held[held] = self._held.get(held, 0) + 1
        # The key's remaining-tokens counts this call's charge: one that empties the bucket (a call
        # over a full bucket, n samples of max_tokens) is the lane's own pacing, not another client's.
        self.near = (self.near[0], self._tok_tat + self._owed > now - BURST_S)

    def _wake_tokens(self) -> None:
        """The head of `take`'s queue looks at the account again (it changed, or the head left)."""
        if self._tok_q:
            fut = self._tok_q[0][0]
            if fut is not None and not fut.done():
                fut.set_result(None)

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

    def reconcile(self, est: int, actual: int, charge: int | None = None) -> float:
        """Settle a call charged `charge` (default `est`) that used `actual`; returns how far the token
        slots moved (seconds: > 0 a debt, < 0 a credit the calls waiting for them may use now)."""
        if not self._Tt:
            return 0.0
        c = est if charge is None else charge
        floor = self.clock() - self._span()
        before = max(self._tok_tat, floor) + self._owed
        k = max(0, est - c)
        if self._held.get(k):
            self._held[k] -= 1
            if not self._held[k]:
                del self._held[k]
        # Credit beyond the bucket's depth is gone (the key's bucket holds no more): a debt is not absorbed
        # by it, as it would be were the account left running behind.
        self._tok_tat = max(self._tok_tat, floor) + (actual - c) * self._Tt
        moved = max(self._tok_tat, floor) + self._owed - before
        if moved < 0:
            self._wake_tokens()
        return moved

    def defer_tokens(self, seconds: float) -> None:
        """The key refused for tokens until `seconds` from now: no token slot before then (requests
        that need none still go)."""
        if self._Tt:
            self._tok_tat = max(self._tok_tat, self.clock() + seconds)

    def pause(self, seconds: float) -> None:
        self.paused_until = max(self.paused_until, self.clock() + seconds)

    def paced_from(self, seconds: float) -> None:
        """Start after `seconds` on spaced slots, without a fresh lane's one-second burst: the key's
        window was not empty (a fallback from shared pacing, whose other processes burst at the same
        instant: their bursts would meet at the next window's edge)."""
        self.pause(seconds)
        self._tat = self._tok_tat = self.paused_until

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
        self.draining = True
        for me in self._tok_q:
            if me[0] is not None and not me[0].done():
                me[0].set_result(None)

    def _wake(self) -> None:
        """Hand the free leases to the longest expected kinds waiting (each lease counted as used now)."""
        self._due = False
        waiters = self._waiters
        while self._used < self._cap and waiters:
            key = next(iter(waiters)) if len(waiters) == 1 else self._longest()
            queue = waiters[key][1]
            fut = queue.popleft()[1]
            if not queue:
                del waiters[key]
            if not fut.done():
                fut.set_result(None)
                self._used += 1

    def _expected(self) -> dict[Hashable, float]:
        """The waiting kinds' expected durations, a figure of few answers raised toward its group's
        (`SHRINK_N`): the answer-weighted geometric mean of the latest figures of the lane's kinds in that
        group, waiting or not (a model ranked last is compared with those that went)."""
        figures, got = self._figures, {}
        for k, q in self._waiters.items():
            r = q[0]()
            if isinstance(r, tuple):
                figures[k] = r
            else:
                got[k] = r
        groups: dict[Hashable, tuple[float, int]] = {}
        for v, c, g in figures.values():
            if c and v != math.inf:
                s, n = groups.get(g, (0.0, 0))
                groups[g] = (s + math.log(max(v, _TINY_S)) * c, n + c)
        for k in self._waiters:
            if k not in got:
                v, c, g = figures[k]
                pool = groups.get(g)
                got[k] = v if v == math.inf or pool is None else max(v, math.exp(
                    (c * math.log(max(v, _TINY_S)) + SHRINK_N * pool[0] / pool[1]) / (c + SHRINK_N)))
        return got

    def _longest(self) -> Hashable:
        waiters = self._waiters
        expect = self._expected()
        # The longest seen so far, not only among those waiting: else an unseen kind (a critique pass
        # before its first answer) would wait for every seen kind to drain, one top after another.
        top = self._top = max(self._top, max((v for v in expect.values() if v != math.inf), default=0.0))
        tokens = bool(self._Tt)  # (a follow-up first only on a lane paced by tokens: `acquire`)
        return max(waiters, key=lambda k: (tokens and waiters[k][2], min(expect[k], top), expect[k] <= top,
                                           -waiters[k][1][0][0]))

    def set_probing(self, on: bool) -> None:
        if self.probing and not on and len(self._log) == 1:
            # The probe (a lane's first call, alone) also opened the connection: all we know of its
            # arrival is that it came before its answer, so the window counts it from now.
            self._log[0][0] = self.clock()
        self.probing = on
        self._rescale()
