"""A call's timeout that forgives a frozen process: a runner stopped (SIGSTOP, a suspended laptop, a
paused container) past its calls' deadline wakes with their answers already in its sockets. asyncio
runs the socket reads and the overdue timers in the same turn, timers last, but the task that would
read the answer only runs the turn after: a plain timeout cancels a call whose answer has arrived, and
the retry pays for it twice. Here a deadline that fires much later than it was due (the process was
not running, so it could not have read anything) first gives the call a short grace to read what
arrived; only a call still unanswered after it times out. Costs what asyncio.timeout costs: one timer
a call."""

from __future__ import annotations

import asyncio
from types import TracebackType

import aiohttp

from providers import http

LATE_S = 1.0
"""A deadline firing this much after it was due means the process (or its loop) was not running."""
GRACE_S = 1.0
"""What a late deadline gives the call to read what already arrived (an answer in the socket needs a
few turns of the loop)."""
FORGIVE = 3
"""At most this many graces a call: a loop always late (CPU starved) still times out, a bit later."""


class Patient:
    """`async with Patient(delay):` like `asyncio.timeout(delay)` (TimeoutError when it expires), but a
    deadline firing more than LATE_S late gives the call GRACE_S more, at most FORGIVE times."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.forgiven = 0
        self._task: asyncio.Task[object] | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._when = 0.0
        self._expired = False
        self._cancelling = 0

    async def __aenter__(self) -> Patient:
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        assert self._task is not None
        self._cancelling = self._task.cancelling()
        self._arm(loop, loop.time() + self.delay)
        return self

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        self._when = when
        self._handle = loop.call_at(when, self._fire, loop)

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._handle = None
        if loop.time() - self._when > LATE_S and self.forgiven < FORGIVE:
            self.forgiven += 1
            self._arm(loop, loop.time() + GRACE_S)
            return
        self._expired = True
        assert self._task is not None
        self._task.cancel()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        assert self._task is not None
        if self._expired and self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc


def session_timeout(timeout_s: float) -> aiohttp.ClientTimeout:
    """The session's own timeout: connecting only (the call's deadline is a `Patient`)."""
    return aiohttp.ClientTimeout(total=None, sock_connect=min(30.0, timeout_s))


async def exchange(
    session: aiohttp.ClientSession, url: str, data: bytes, headers: dict[str, str], timeout_s: float
) -> tuple[bytes, dict[str, float] | None]:
    """`providers.http.exchange` under a `Patient` deadline of `timeout_s`."""
    try:
        async with Patient(timeout_s):
            return await http.exchange(session, url, data, headers)
    except TimeoutError:  # http.TimedOut: an unstreamed call's total timeout (providers.stream streams it next)
        raise http.TimedOut(f"request timed out: {http.host_port(url)}", retryable=True) from None
