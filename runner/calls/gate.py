"""The first call gates the fan-out. Until a model has answered once (in this run, or a success row or
cached answer from before), its calls go one at a time: a model the provider refuses whatever we send
(no such id, no access for this key; `ProviderError.refuses_model`, which is also the mark for a 400
repeated after the request was adapted; rows `error_kind = "model_refused"`) then costs one request,
not one per call in flight. A probe that ends without the provider's verdict on the model (a timeout,
a 5xx or 429s after every retry) opens the gate too: holding the others would only serialise a hung or
sick server, which the circuit breaker stops. A probe refused for its own reason (a 400 on its input, a
prompt over the context window) hands its turn to the next call.

A streamed probe opens the gate when its answer begins (its first bytes: the provider took the model),
not at the end of a long answer, and any probe does when it has been out `PROBE_OPEN_S` without a
verdict: providers refuse a model at once, before any thinking; a reasoning model's first answer may
take a minute, and its other calls waiting for it would start the sweep a minute late. Once the model answers, the gate is open: one attribute read per call. A refusal, even after the gate
opened, stops the model: its waiting and later calls become `model_refused` error rows without being
sent, it is said once (the log, the manifest's `refused_models`), and the sweep goes on with the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable

from core.types import Row
from providers.stream import BEGUN
from runner.calls.halt import ON_WIRE
from runner.pool import ModelEntry

log = logging.getLogger("evalsweep")

PROBE_OPEN_S = 3.0
"""A probe on the wire this long without a refusal opens the gate (a refusal comes in well under it)."""

REFUSED = "model_refused"
NO_VERDICT = ("transient", "rate_limit", "key_refused")
"""Error kinds of a call that says nothing of the model: never judged (timeouts, dropped connections,
5xx, 429s), or refused for one of its several keys (401/403: the others may be let in)."""


def answered(rows: list[Row]) -> bool:
    """The provider answered the call (a text, or a completion cut short or filtered): the model exists."""
    return any(r["error"] is None or r.get("finish_reason") is not None for r in rows)


def label(m: ModelEntry) -> str:
    """The model as its one error names it: name, provider id, endpoint(s)."""
    eps = ", ".join(dict.fromkeys(repr(ln.endpoint.name) for ln in m.lanes))
    return f"model {m.cfg.name!r} (id {m.model_id!r} at endpoint {eps})"


class Gate:
    """One called model's gate (shared by every run and stream of the scheduler)."""

    __slots__ = ("label", "open", "refused", "not_sent", "_probing", "_queue")

    def __init__(self, label: str) -> None:
        self.label = label
        """The model as the one error names it: its name, its provider id and its endpoint."""
        self.open = False
        self.refused: str | None = None
        """Why the model is stopped: the model, its provider id, where, and the provider's words."""
        self.not_sent = 0
        self._probing = False
        self._queue: deque[asyncio.Future[None]] = deque()

    def opened(self) -> None:
        """The model answered: every waiting call goes, and later ones need no turn."""
        if not self.open and self.refused is None:
            self.open = True
            self._wake_all()

    def refuse(self, why: str) -> None:
        """Stop the model; said once, by the first refusal."""
        self.open = False
        if self.refused is None:
            self.refused = why
            log.error("%s (its other calls are not sent: error rows of kind %s)", why, REFUSED)
        self._wake_all()

    async def through(
        self, send: Callable[[], Awaitable[list[Row]]], not_sent: Callable[[str], list[Row]]
    ) -> list[Row]:
        """One call through the gate: sent at once when open, as the probe in turn when closed, or
        `not_sent(why)` when the model was refused. The rows it returns settle the gate."""
        probe = False
        if not self.open:
            if self.refused is None and not self._probing:
                self._probing = probe = True
            elif self.refused is None:
                probe = await self._wait()
            if self.refused is not None:
                if probe:
                    self._pass_on()
                return self._not_sent(not_sent)
        token = BEGUN.set(self._on_begun(BEGUN.get())) if probe else None
        timer: list[asyncio.TimerHandle] = []
        wired = ON_WIRE.set(self._timed(timer)) if probe else None
        try:
            rows = await send()
        except BaseException:
            if probe:
                self._pass_on()
            raise
        finally:
            if token is not None:
                BEGUN.reset(token)
            if wired is not None:
                ON_WIRE.reset(wired)
                for t in timer:
                    t.cancel()
        self.settle(rows, probe)
        return rows

    def _timed(self, timer: list[asyncio.TimerHandle]) -> Callable[[], None]:
        """The probe's clock: (re)started as each of its attempts leaves; at PROBE_OPEN_S the gate opens."""
        def on_wire() -> None:
            for t in timer:
                t.cancel()
            timer.append(asyncio.get_running_loop().call_later(PROBE_OPEN_S, self.opened))

        return on_wire

    def _on_begun(self, outer: Callable[[], None] | None) -> Callable[[], None]:
        """A streamed probe whose answer began (HTTP 200, first bytes) has its verdict: the provider
        takes the model. The gate opens then, not at the end of a long answer; a callback already set
        (runner.calls.fanout's) is still called."""
        def begun() -> None:
            if outer is not None:
                outer()
            self.opened()

        return begun

    def settle(self, rows: list[Row], probe: bool = False) -> None:
        kind = rows[0].get("error_kind") if rows else None
        if kind == REFUSED:
            self.refuse(f"{self.label} refused by the provider: {rows[0]['error']}")
        elif not self.open and (kind in NO_VERDICT or answered(rows)):
            self.opened()
        if probe and self._probing:
            self._pass_on()

    # --- turns -------------------------------------------------------------------------------------

    async def _wait(self) -> bool:
        """Wait for the gate to open, the model to be refused, or the probe's turn (True)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                if not self.open and self.refused is None:  # handed the turn just as it was cancelled
                    self._pass_on()
            elif fut in self._queue:  # (a turn handed on may already have popped it)
                self._queue.remove(fut)
            raise
        return not self.open and self.refused is None

    def _pass_on(self) -> None:
        """The probe ended without settling the gate: the next waiting call is the probe."""
        while self._queue:
            fut = self._queue.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self._probing = False

    def _wake_all(self) -> None:
        self._probing = False
        while self._queue:
            fut = self._queue.popleft()
            if not fut.done():
                fut.set_result(None)

    def _not_sent(self, not_sent: Callable[[str], list[Row]]) -> list[Row]:
        rows = not_sent(f"not sent: {self.refused}")
        self.not_sent += len(rows)
        return rows
