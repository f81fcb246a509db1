"""A key's tokens per minute as one process paces them (`TokenAccount`, held by `runner.budgets.local.LocalBudget`).

The account runs as the key's token bucket does: a call is charged what the key counts at its admission
(prompt + max_tokens) and settled to what it used at its answer (`reconcile`), its slots GCRA-style on the
account's "theoretical arrival time" (`tat`, seconds: the bucket is full when it is `span()` behind now).
Calls wait for their tokens in one queue (`take`), so an answer's credit moves every waiting call at once.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Callable
from typing import Any

BURST_S = 0.05  # a lane catches up this much lateness at once; more would arrive as a bunch the server
# timestamps spread out (under load), and the window's next requests would meet them
WINDOW_S = 1.0  # no sliding window of this length holds more than rate * WINDOW_S admissions (runner.budgets.local);
# a key's token bucket is assumed to hold this many seconds of its TPM until its answers show more
TPM_SHARE = 0.97  # tokens are paced this far under the limit: a call's real usage differs from its
# estimate (reasoning varies), and the slack keeps the key's bucket holding a cushion for the calls
# that spend more than expected (reconciled only when their answer comes)


def hold(holds: dict[int, int], rest: int) -> None:
    """Count a call in flight holding `rest` in {rest: calls} (an account holds the largest: `max(holds)`)."""
    holds[rest] = holds.get(rest, 0) + 1


def unhold(holds: dict[int, int], rest: int) -> None:
    """A call holding `rest` settled (or none will): it leaves {rest: calls}."""
    if holds.get(rest):
        holds[rest] -= 1
        if not holds[rest]:
            del holds[rest]


def _wake_one(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class TokenAccount:
    """One lane's token account in this process: its slots, the rests held for calls in flight, its queue."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.tpm: float | None = None
        self.per_token = 0.0  # seconds of slots per token (0: the key has no TPM)
        self.tat = 0.0  # next free token slot (monotonic seconds)
        self.near = False  # the account is using its rate (`behind`): a `remaining: 0` now is its own pacing
        self._held: dict[int, int] = {}
        """Tokens each call in flight is expected to settle beyond what the key charged at its admission
        (`charge`: its reasoning), as {tokens: calls}. The account holds the largest of them (`owed`)."""
        self._q: deque[list[Any]] = deque()  # calls waiting in `take`, in order: [future, follow-up]
        self.depth = 0.0
        """Tokens the key's bucket was seen holding (its answers' remaining-tokens; 0: unknown, a second
        of them is assumed): the account forgets credit only beyond that, not beyond a second."""
        self._ceiling = math.inf  # at most this deep: halved by each 429 for tokens (`shallow`)
        self.draining = False  # `open()`: waiters leave without being charged (the run is stopping)

    def rescale(self, tpm: float | None, factor: float) -> None:
        self.tpm = tpm
        self.per_token = 60.0 / (tpm * factor * TPM_SHARE) if tpm else 0.0

    def fill(self, now: float) -> None:
        """A fresh lane: the key's bucket is full, its tokens may go at once."""
        self.tat = now - self.span()

    def behind(self, now: float) -> bool:
        return self.tat + self.owed > now - BURST_S

    def reserve(self, now: float, tokens: int) -> float:
        """Charge `tokens` on a slot fixed now (a shared budget's fallback paces so); the slot. The call's
        tokens refill *before* it goes: a big call finds the key's bucket holding them."""
        self.tat = max(self.tat, now - self.span()) + tokens * self.per_token
        return self.tat + self.owed

    @property
    def owed(self) -> float:
        """Seconds of token slots held beyond the account for the calls in flight: the largest rest one of
        them is expected to settle (outside the clamp: never forgotten as idle). The account is charged and
        settled as the key's bucket is, so a settlement moves both at once; held against is only the
        answer whose settlement the key counted and whose reconcile has not come yet (its bytes in
        transit, the loop busy), one at a time. Holding the sum of them kept the key's bucket ~a call's
        rest per call in flight fuller than need be (bench `shared`, 12 in flight: ~10,000 tokens of its
        20,000), where quick answers' credits overflowed it: 6% of its TPM lost, 1.27 -> 1.23x on seed 2."""
        return max(self._held, default=0) * self.per_token

    def span(self) -> float:
        """Seconds of token slots the key's bucket holds: a second's until its answers showed more."""
        return max(WINDOW_S, min(self.depth, self.tpm or 0.0) * self.per_token)

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
        if first and self.per_token:
            self.tat -= max(0.0, self.span() - WINDOW_S)

    def shallow(self) -> None:
        """Refused for tokens: the key's bucket may hold less than its answers showed (its TPM enforced
        over shorter windows, another client on it) or an answer's debt came first: the account is
        believed half as deep from now on, down to a second's tokens (one stray refusal does not cost
        a deep key a second's bucket, repeated ones do)."""
        if self.depth:
            self.depth = self._ceiling = self.depth / 2
            self.tat = max(self.tat, self.clock() - self.span())

    def wait(self, need: float) -> float:
        """Until the bucket (at most `span()` of tokens) holds `need` and what the account holds for an
        answer in flight (`owed`): a call over a full bucket goes when it is full."""
        now, span = self.clock(), self.span()
        return max(self.tat, now - span) + min(need + self.owed, span) - now

    async def take(self, tokens: int, charge: int | None = None, first: bool = False, follow: bool = False) -> None:
        """Wait, in arrival order, until the key's bucket holds this call's tokens, then charge them.
        `tokens`: what the call is expected to use; `charge`: what the key counts when it admits it
        (prompt + max_tokens; default `tokens`). The account runs as the key's does, charged `charge`
        now and settled at the answer (`reconcile`); until then the largest expected rest of the calls
        in flight is held (`owed`), so an answer the key settled before we did finds its bucket
        holding it. Waiting here rather than on a slot fixed when the call queued, a call goes as soon
        as the account allows: answers' credits and debts move the whole queue.

        `first`: a call the key refused for tokens and whose reset has passed: the key holds its
        tokens now, so it goes at once and the calls queued move back by its tokens (at the end of the
        queue it would be refused again, by then spent).

        `follow`: a follow-up (a chain's next step, the lease queue's rank): it queues ahead of the first
        calls waiting, behind the follow-ups already there. At the tail it waited the seconds of tokens the
        calls holding a lease ahead of it charge (bench tpm-a: 64 leases, ~50 of them waiting here)."""
        if not self.per_token or not tokens:
            return
        c = tokens if charge is None else charge
        held = max(0, tokens - c)
        q = self._q
        if not first and (q or self.wait((c + held) * self.per_token) > 0):
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
                    wait = self.wait((c + held) * self.per_token) if q[0] is me else None
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
                self.wake()
            if self.draining:
                return
        now = self.clock()
        self.tat = max(self.tat, now - self.span()) + c * self.per_token
        if held:
            hold(self._held, held)
        # The key's remaining-tokens counts this call's charge: one that empties the bucket (a call
        # over a full bucket, n samples of max_tokens) is the lane's own pacing, not another client's.
        self.near = self.behind(now)

    def wake(self) -> None:
        """The head of `take`'s queue looks at the account again (it changed, or the head left)."""
        if self._q:
            fut = self._q[0][0]
            if fut is not None and not fut.done():
                fut.set_result(None)

    def reconcile(self, est: int, actual: int, charge: int | None = None) -> float:
        """Settle a call charged `charge` (default `est`) that used `actual`; returns how far the token
        slots moved (seconds: > 0 a debt, < 0 a credit the calls waiting for them may use now)."""
        if not self.per_token:
            return 0.0
        c = est if charge is None else charge
        floor = self.clock() - self.span()
        before = max(self.tat, floor) + self.owed
        unhold(self._held, max(0, est - c))
        # Credit beyond the bucket's depth is gone (the key's bucket holds no more): a debt is not absorbed
        # by it, as it would be were the account left running behind.
        self.tat = max(self.tat, floor) + (actual - c) * self.per_token
        moved = max(self.tat, floor) + self.owed - before
        if moved < 0:
            self.wake()
        return moved

    def defer(self, seconds: float) -> None:
        """The key refused for tokens until `seconds` from now: no token slot before then (requests
        that need none still go)."""
        if self.per_token:
            self.tat = max(self.tat, self.clock() + seconds)

    def open(self) -> None:
        """Let every call waiting for tokens through, uncharged: the run is stopping, or the budget is replaced."""
        self.draining = True
        for me in self._q:
            if me[0] is not None and not me[0].done():
                me[0].set_result(None)
