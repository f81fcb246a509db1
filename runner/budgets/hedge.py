"""A lane's long call sent again at its drain, opt-in (an endpoint's `hedge_after`): once no call waits and leases
are free, a call that has run `hedge_after` times its kind's median is re-sent, and the first answer of the two is the
call's (the other is cancelled, and billed on the call's row: `lost`).

Why: a lane bound by concurrency ends on the long thinkers sent last (a reasoning model's thought is a draw of
a heavy tail: bench no-n, 15% of answers think 6x the median). No order of a scheduler that does not know
latencies avoids them (bench/lane_replay on 60 synthetic draws, no-n: our rank 1.151x its limit, ranked by the
true laws 1.128, LPT knowing every latency 1.00), while the lane's slots idle from its last send to its end.
The gain rests on a copy being a new, independent draw of the call's latency: the bench's server serves a repeated
prompt its next sample (bench/reasoning_server). A provider whose slowness belongs to the prompt (a hard item thinks
long every time) or to the moment (a loaded replica) gives a copy no such chance, and the copy is only paid for.
Measured (bench/reasoning_sweep.py --quick --forecast, seeds 0-5, main vs --hedge 3 alternately, night 1 / night 2
means): no-n 1.163 / 1.172 -> 1.063 / 1.087x its limit (worst 1.32 / 1.22 -> 1.13 / 1.13), conc 1.122 / 1.088 ->
1.065 / 1.078, other lanes unchanged; for 1.8% more calls on no-n (11.5 copies of 640) and 1% on conc, and a bill
2.5 / 3.6% higher on no-n, 1.0 / 1.4% on conc, 0.7 / 1.0% for the sweep, losers included (runner.calls.spend.lost: the
rows plus the losers' estimates came to 1.02-1.05x the tokens the server logged generating on no-n, 1.00-1.02x on conc;
the rows alone to 0.96-0.99x). Replayed before (--reachable 20, our order): no-n 1.157 -> 1.048x, conc 1.102 -> 1.057.
Only on a lane paced by no tokens (a copy spends no TPM a queue waits for) whose calls once waited for a lease (a
lane bound by concurrency: one never short of leases would only pay for copies), while none waits: the copy takes
a lease no call wanted. `Hedges.sent` counts copies.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from core.types import Completion
from runner.budgets.rank import Rank

COPY_FITS: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar("evalsweep_hedge_fits",
                                                                                     default=None)
"""Set by the call path while a call under a spend ceiling runs (runner.calls.spend.copy_fits): whether a copy's
worst case fits its ceilings, reserving it if so. Unset: no ceiling, a copy always fits. (A hook, not an import:
runner.calls imports the lanes this module serves.)"""

T = TypeVar("T")

HEDGE_X = 3.0
"""A suggested `hedge_after` (bench/lane_replay's default): a chat model's lognormal of spread 0.5 passes 3x its
median once in 70 calls; a long thinker of 6x its median always."""
HEDGE_MIN = 5
"""Answers of its kind a call's median must rest on before it may be re-sent."""


@dataclass
class _Flight:
    due: float  # monotonic time it may be re-sent from
    task: asyncio.Task[Any]
    fn: Callable[[], Awaitable[Any]]
    ctx: contextvars.Context
    start: float
    copy: asyncio.Task[Any] | None = None
    copy_at: float = 0.0
    first_done: bool = False  # the call's own send has ended (answered or failed): a copy's answer cancels nothing
    won: list[Any] = field(default_factory=list)  # the copy's answer, once it came
    copy_failed: bool = False


def _mark(got: T, won: str, lost_s: float | None) -> T:
    """The answer says it was hedged, and how long its loser ran (None: the loser ended in an error of its own,
    unbilled as every error is: runner.calls.spend): its row bills the loser's estimate (`lost`)."""
    if isinstance(got, Completion):
        got.hedge = {"copies": 1, "won": won, "lost_s": None if lost_s is None else round(lost_s, 3)}
    return got


class Hedges:
    """A lane's calls in flight that may be re-sent: `idle()` says how many leases no call waits for, `send(fn)`
    sends a copy under a lease of its own (the lane's attempt: admission, counts, release)."""

    def __init__(
        self, idle: Callable[[], int], send: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]],
        after: float = HEDGE_X,
    ) -> None:
        self.idle, self.send, self.after = idle, send, after
        self.flights: dict[int, _Flight] = {}
        self.sent = 0
        self._timer: asyncio.TimerHandle | None = None
        self._at = math.inf

    async def run(self, fn: Callable[[], Awaitable[T]], expect: Callable[[], Rank]) -> T:
        """`fn()`'s answer, or its copy's when the copy answers first or `fn()` fails (the kind's `expect`:
        runner.calls.estimates)."""
        r = expect()
        median, answers = (r[0], r[1]) if isinstance(r, tuple) else (r, HEDGE_MIN)
        task = asyncio.current_task()
        if task is None or answers < HEDGE_MIN or not 0.0 < median < math.inf:
            return await fn()
        now = time.monotonic()
        f = _Flight(now + self.after * median, task, fn, contextvars.copy_context(), now)
        self.flights[id(f)] = f
        self._arm(f.due)
        try:
            try:
                got = await fn()
            except BaseException as e:  # (its own call cancelled by the copy's answer, as fn may have reported it)
                if f.won and not f.first_done and task.uncancel() == 0:  # the copy answered first: the call's
                    return _mark(f.won[0], "copy", time.monotonic() - f.start)
                f.first_done = True
                if not isinstance(e, Exception) or f.copy is None:  # cancelled from outside: the run is stopping
                    raise
                await asyncio.wait([f.copy])  # its own send failed: the copy in flight may still answer
                if f.won:
                    return _mark(f.won[0], "copy", None)
                raise
            if f.won and not f.first_done:  # (fn answered through the copy's cancel: its own answer stands)
                task.uncancel()
            f.first_done = True
            if f.copy is None:
                return got
            return _mark(got, "first", None if f.copy_failed else time.monotonic() - f.copy_at)
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
        due = sorted((f.due, k) for k, f in self.flights.items() if f.copy is None and not f.first_done)
        free = self.idle() if due and due[0][0] <= now else 0
        for at, k in due:
            if at > now:
                self._arm(at)
                break
            if free <= 0:  # the lane is busy: its next release looks again
                self._at = min(self._at, at)
                break
            f = self.flights[k]
            fits = f.ctx.get(COPY_FITS)
            if fits is not None and not f.ctx.run(fits):  # a ceiling would not hold the copy's worst case: never re-sent
                f.due = math.inf
                continue
            f.copy_at = now
            f.copy = asyncio.get_running_loop().create_task(self._copy(f), context=f.ctx)
            self.sent += 1
            free -= 1

    async def _copy(self, f: _Flight) -> None:
        try:
            got = await self.send(f.fn)
        except Exception:  # (an error of the copy: the call's own answer stands)
            f.copy_failed = True
            return
        if self.flights.get(id(f)) is f and not f.won:  # (its call still waits for an answer)
            f.won.append(got)
            if not f.first_done:
                f.task.cancel()
