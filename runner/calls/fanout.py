"""Cache-aware fan-out: the first call of a group sharing a prompt prefix goes alone, its siblings once
it has answered (or, streamed, once its first bytes arrived).

Why: a provider's prompt cache is readable only after the call that wrote it has begun answering
(Anthropic: "a cache entry only becomes available after the first response begins"; OpenAI, Gemini and
DeepSeek likewise cache for requests that reach them afterwards). Eight samples of one prompt sent at
once are eight full-price writes; sent one, then seven, they are one write and seven reads at a tenth
of the price. Groups are a request's samples sent as separate calls (a provider without `n`) and the
requests sharing a suite's declared prefix (`Request.prefix`, keyed by its content per model). A group
stays warm 5 minutes from its last use, as the provider's cache does; a leader without an answer hands
the lead to the next sibling. Prompts under the provider's caching minimum are never held back. Off per
endpoint with `prompt_caching = false`. The inputs the model sees are unchanged.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

from core.types import Request, Row
from providers.cache_marks import min_cacheable, prefix_key, tokens_to
from providers.stream import BEGUN
from runner.pool import ModelEntry

TTL_S = 300.0
"""Anthropic's default cache lifetime, refreshed by every read."""
PRUNE_AT = 4096
"""Groups kept before expired ones are dropped (one per shared prefix in flight or warm)."""
WINDOW: ContextVar[tuple[asyncio.Semaphore, int] | None] = ContextVar("evalsweep_window", default=None)
"""The scheduler's window of items in flight for this stream, and its width (runner.scheduler sets it).
A call waiting for its group's leader gives its slot back meanwhile, so the leaders of the next groups
can go (five questions on one image would otherwise hold four slots idle of every five): at most
PARKED x `width` calls wait so (MARVEL's four followers a leader), which bounds the items a stream holds.
"""
PARKED = 4

Send = Callable[[list[int]], Awaitable[list[Row]]]


@dataclass
class _Group:
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    used: float = 0.0
    """When it was last read (monotonic): warm until TTL_S after."""


class Fanout:
    def __init__(self) -> None:
        self._groups: dict[tuple[str, str], _Group] = {}
        self._on: dict[str, bool] = {}
        self._parked: dict[int, int] = {}

    async def send(self, req: Request, m: ModelEntry, groups: list[list[int]], send: Send) -> list[Row]:
        """The rows of `groups` (sample groups of `req`, one call each), sent in cache-aware order."""
        if not self._caches(m) or (len(groups) == 1 and req.prefix is None):
            return await _all(groups, send)
        floor = min_cacheable(m.model_id)
        key = None
        if req.prefix is not None and tokens_to(req, req.prefix) >= floor:
            key = (m.cfg.name, prefix_key(req) or "")
        whole = len(groups) > 1 and tokens_to(req) >= floor
        lead = await self._enter(key) if key is not None else None
        if lead is None and not whole:
            return await _all(groups, send)
        begun = asyncio.Event()
        mark = BEGUN.set(begun.set)
        try:
            first = asyncio.ensure_future(send(groups[0]))  # the task's context carries BEGUN
        finally:
            BEGUN.reset(mark)
        started = asyncio.ensure_future(begun.wait())
        try:
            await asyncio.wait((first, started), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            first.cancel()
            raise
        finally:
            started.cancel()
            if key is not None and lead is not None:  # never leaves its siblings waiting
                self._opened(key, lead, begun.is_set() or _answered(first))
        try:
            rest = await _all(groups[1:], send) if len(groups) > 1 else []
            return await first + rest
        except asyncio.CancelledError:
            first.cancel()
            raise

    def _caches(self, m: ModelEntry) -> bool:
        on = self._on.get(m.cfg.name)
        if on is None:
            on = self._on[m.cfg.name] = bool(m.lanes) and all(
                getattr(ln.provider, "caches_prompts", False) for ln in m.lanes
            )
        return on

    async def _enter(self, key: tuple[str, str]) -> _Group | None:
        """The group's new leader (its first call goes now), or None once the group is warm."""
        while True:
            g = self._groups.get(key)
            now = time.monotonic()
            if g is None or g.opened.is_set() and now - g.used > TTL_S:
                if len(self._groups) >= PRUNE_AT:
                    self._prune(now)
                g = self._groups[key] = _Group()
                return g
            if g.opened.is_set():
                g.used = now
                return None
            await self._wait(g)  # a leader that failed left no group: the loop makes a new leader

    async def _wait(self, g: _Group) -> None:
        """Wait for the group's leader, the window slot given back meanwhile (WINDOW)."""
        w = WINDOW.get()
        if w is None or self._parked.get(id(w[0]), 0) >= PARKED * w[1]:
            await g.opened.wait()
            return
        slot = w[0]
        self._parked[id(slot)] = self._parked.get(id(slot), 0) + 1
        slot.release()
        try:
            await g.opened.wait()
        finally:
            self._parked[id(slot)] -= 1
        await slot.acquire()  # (cancelled, at shutdown: the item's done callback gives back one too many)

    def _opened(self, key: tuple[str, str], g: _Group, ok: bool) -> None:
        if ok:
            g.used = time.monotonic()
        elif self._groups.get(key) is g:
            del self._groups[key]
        g.opened.set()

    def _prune(self, now: float) -> None:
        for k in [k for k, g in self._groups.items() if g.opened.is_set() and now - g.used > TTL_S]:
            del self._groups[k]


def _answered(t: asyncio.Future[list[Row]]) -> bool:
    """The leader's call ended with an answer (its prompt is in the provider's cache)."""
    return t.done() and not t.cancelled() and t.exception() is None and any(r["error"] is None for r in t.result())


async def _all(groups: list[list[int]], send: Send) -> list[Row]:
    if len(groups) == 1:
        return await send(groups[0])
    return [r for rows in await asyncio.gather(*(send(g) for g in groups)) for r in rows]
