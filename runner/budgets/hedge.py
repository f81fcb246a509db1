"""A lane's long call sent again at its drain: once no call waits and leases are free, a call that has run HEDGE_X
times its kind's median is re-sent, and the first answer of the two is the call's (the other is cancelled).

Why: a lane bound by concurrency ends on the long thinkers sent last (a reasoning model's thought is a draw of
a heavy tail: bench no-n, 15% of answers think 6x the median). No order of a scheduler that does not know
latencies avoids them (bench/lane_replay on 60 synthetic draws, no-n: our rank 1.151x its limit, ranked by the
true laws 1.128, LPT knowing every latency 1.00), while the lane's slots idle from its last send to its end.
A copy is a new draw (a sampled model's next thought; the bench's server serves a repeated prompt its next
sample). Re-sent after 3x its median: replayed (--reachable 20, our order) no-n 1.157 -> 1.048x, conc 1.102
-> 1.057; in the sweep (--quick --forecast, seeds 1-5, main -> this, night 1 / night 2 means) no-n 1.184 /
1.158 -> 1.066 / 1.080 (worst 1.28 / 1.20 -> 1.12 / 1.12), conc 1.134 / 1.092 -> 1.066 / 1.072, for 1-2%
more calls and about the same tokens (the cancelled thoughts cut). Only on a lane paced by no tokens (a copy spends no
TPM a queue waits for) whose calls once waited for a lease (a lane bound by concurrency: one never short of
leases would only pay for copies), while none waits: the copy takes a lease no call wanted. The copy's
tokens are the price (an answer cancelled may be billed as far as it went): `Hedges.sent` counts copies.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from runner.budgets.rank import Rank

T = TypeVar("T")

HEDGE_X = 3.0
"""A call is re-sent once it has run this many times its kind's median (a chat model's lognormal of spread 0.5
passes it once in 70 calls; a long thinker of 6x its median always)."""
HEDGE_MIN = 5
"""Answers of its kind a call's median must rest on before it may be re-sent."""


@dataclass
class _Flight:
    due: float  # monotonic time it may be re-sent from
    task: asyncio.Task[Any]
    fn: Callable[[], Awaitable[Any]]
    ctx: contextvars.Context
    copy: asyncio.Task[Any] | None = None
    won: list[Any] = field(default_factory=list)  # the copy's answer, once it came first


class Hedges:
    """A lane's calls in flight that may be re-sent: `idle()` says how many leases no call waits for, `send(fn)`
    sends a copy under a lease of its own (the lane's attempt: admission, counts, release)."""

    def __init__(self, idle: Callable[[], int], send: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]) -> None:
        self.idle, self.send = idle, send
        self.flights: dict[int, _Flight] = {}
        self.sent = 0
        self._timer: asyncio.TimerHandle | None = None
        self._at = math.inf

    async def run(self, fn: Callable[[], Awaitable[T]], expect: Callable[[], Rank]) -> T:
        """`fn()`'s answer, or its copy's when the copy answers first (the kind's `expect`: runner.calls.estimates)."""
        r = expect()
        median, answers = (r[0], r[1]) if isinstance(r, tuple) else (r, HEDGE_MIN)
        task = asyncio.current_task()
        if task is None or answers < HEDGE_MIN or not 0.0 < median < math.inf:
            return await fn()
        f = _Flight(time.monotonic() + HEDGE_X * median, task, fn, contextvars.copy_context())
        self.flights[id(f)] = f
        self._arm(f.due)
        try:
            got = await fn()
        except BaseException:  # (its own call cancelled by the copy's answer, as fn may have reported it)
            if not f.won or task.uncancel() > 0:  # not only by the copy: the run is stopping
                raise
            return f.won[0]  # type: ignore[no-any-return]
        else:
            if f.won:  # (fn answered through the copy's cancel: its own answer stands)
                task.uncancel()
            return got
        finally:
            del self.flights[id(f)]
            if f.copy is not None and not f.copy.done():
                f.copy.cancel()

    def poke(self) -> None:
        """A lease freed: copies go if calls are due (the lane's release calls it)."""
        if self._at <= time.monotonic() and self.idle() > 0:
            self._check()

    def _arm(self, at: float) -> None:
        if at < self._at:
            if self._timer is not None:
                self._timer.cancel()
            loop = asyncio.get_running_loop()
            self._at = at
            self._timer = loop.call_at(loop.time() + max(0.0, at - time.monotonic()), self._check)

    def _check(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._at = None, math.inf
        now = time.monotonic()
        due = sorted((f.due, k) for k, f in self.flights.items() if f.copy is None)
        free = self.idle() if due and due[0][0] <= now else 0
        for at, k in due:
            if at > now:
                self._arm(at)
                break
            if free <= 0:  # the lane is busy: its next release looks again
                self._at = min(self._at, at)
                break
            f = self.flights[k]
            f.copy = asyncio.get_running_loop().create_task(self._copy(f), context=f.ctx)
            self.sent += 1
            free -= 1

    async def _copy(self, f: _Flight) -> None:
        try:
            got = await self.send(f.fn)
        except Exception:  # (an error of the copy: the call's own answer stands)
            return
        if self.flights.get(id(f)) is f and not f.won:  # (its call still waits for its own answer)
            f.won.append(got)
            f.task.cancel()
