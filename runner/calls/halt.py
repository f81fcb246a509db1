"""Stopping without sending: what a lane's waits (pacing slots, retries) are cut short by on Ctrl-C.

A call still waiting when the run stops was never on the wire: it ends as a skipped row with
`HALTED` as its reason (resumed by rerunning the command), and only calls already sent get the grace
period."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextvars import ContextVar

from providers.base import ProviderError

HALTED = "skipped: interrupted before it was sent (rerun the same command to resume)"
"""The reason on the row of a call a stop (Ctrl-C, SIGTERM, a fault of ours) caught before it was sent."""


ON_WIRE: ContextVar[Callable[[], None] | None] = ContextVar("evalsweep_on_wire", default=None)
"""Called by the lane as a call leaves (admitted, past every wait): where `runner.calls.gate` starts timing
its probe (a call still waiting for a slot has not been seen by the provider)."""


class Halted(ProviderError):
    """The run is stopping and this call was not on the wire yet: it is not sent (a skipped row)."""


def _wake_one(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Sleeps:
    """asyncio.sleep that `wake_all` cuts short (the same cost: one future, one timer)."""

    def __init__(self) -> None:
        self._futs: set[asyncio.Future[None]] = set()

    async def sleep(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        timer = loop.call_later(seconds, _wake_one, fut)
        self._futs.add(fut)
        try:
            await fut
        finally:
            self._futs.discard(fut)
            timer.cancel()

    def wake_all(self) -> None:
        for fut in list(self._futs):
            _wake_one(fut)
