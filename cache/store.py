"""The response cache: diskcache on disk, used from the event loop without blocking it.

Reads run in a small thread pool; writes are queued and committed in one SQLite transaction per
batch (per-call commits are what makes peers slow). A value is one sample's answer:
`{"text", "usage", "cost_usd", "finish_reason", "model", "t"}` — never a key or a header.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import diskcache
import orjson


def default_cache_dir() -> Path:
    env = os.environ.get("EVALSWEEP_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "evalsweep"


class AsyncCache:
    def __init__(
        self, directory: str | Path, flush_every_s: float = 0.05, max_batch: int = 512, shared: Any = None
    ) -> None:
        self.shared = shared
        """A second layer under this one (cache.pg.PgCache): asked on a local miss, given every answer."""
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._cache = diskcache.Cache(
            str(self.directory), size_limit=2**40, eviction_policy="none", cull_limit=0
        )
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="evalsweep-cache")
        self._pending: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._flush_every_s = flush_every_s
        self._max_batch = max_batch
        self._flusher: asyncio.Task[None] | None = None
        self._gets: list[tuple[str, asyncio.Future[Any]]] = []
        self.hits = 0
        self.misses = 0

    async def get(self, key: str) -> dict[str, Any] | None:
        """Look-ups are batched into one thread-pool job (SQLite off the event loop)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._gets.append((key, fut))
        if len(self._gets) == 1:
            # Gather the look-ups of the next ~2 ms into one thread hand-off: at thousands of calls/s
            # the hand-off, not SQLite (~8 us a read), is the cost; 2 ms is nothing next to an API call.
            loop.call_later(0.002, self._dispatch_gets, loop)
        v = await fut
        if v is None:
            # A value still waiting in the write queue counts too (same run, same key).
            with self._lock:
                for k, pending in reversed(self._pending):
                    if k == key:
                        v = pending
                        break
        if v is None and self.shared is not None:
            v = await self.shared.get(key)
            if v is not None:
                self.put(key, v, share=False)
        if v is None:
            self.misses += 1
        else:
            self.hits += 1
        return v

    def _dispatch_gets(self, loop: asyncio.AbstractEventLoop) -> None:
        batch, self._gets = self._gets, []

        def deliver(f: asyncio.Future[list[Any]]) -> None:
            exc = f.exception()
            for i, (_, fut) in enumerate(batch):
                if fut.done():
                    continue
                if exc is not None:
                    fut.set_exception(exc)
                else:
                    fut.set_result(f.result()[i])

        loop.run_in_executor(self._pool, self._get_many, [k for k, _ in batch]).add_done_callback(deliver)

    def _get_many(self, keys: list[str]) -> list[Any]:
        return [_decode(self._cache.get(k)) for k in keys]

    def put(self, key: str, value: dict[str, Any], share: bool = True) -> None:
        if share and self.shared is not None:
            self.shared.put(key, value)
        with self._lock:
            self._pending.append((key, value))
            big = len(self._pending) >= self._max_batch
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_soon())
        elif big:
            self._pool.submit(self._write_pending)

    async def _flush_soon(self) -> None:
        await asyncio.sleep(self._flush_every_s)
        await asyncio.get_running_loop().run_in_executor(self._pool, self._write_pending)

    def _write_pending(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
        if not batch:
            return
        with self._cache.transact():
            for k, v in batch:
                self._cache.set(k, orjson.dumps(v))  # raw bytes: no pickle either way

    async def aclose(self) -> None:
        if self._flusher is not None:
            await self._flusher
        await asyncio.get_running_loop().run_in_executor(self._pool, self._write_pending)
        if self.shared is not None:
            await self.shared.aclose()
        self._pool.shutdown(wait=True)
        self._cache.close()


def stats(directory: Path) -> dict[str, Any]:
    with diskcache.Cache(str(directory)) as c:
        per_model: dict[str, int] = {}
        oldest = newest = None
        for k in c.iterkeys():
            v = _decode(c.get(k))
            if not isinstance(v, dict):
                continue
            m = v.get("model", "?")
            per_model[m] = per_model.get(m, 0) + 1
            t = v.get("t")
            if t is not None:
                oldest = t if oldest is None else min(oldest, t)
                newest = t if newest is None else max(newest, t)
        return {
            "directory": str(directory),
            "entries": len(c),
            "bytes": c.volume(),
            "per_model": per_model,
            "oldest": oldest,
            "newest": newest,
        }


def prune(
    directory: Path,
    *,
    older_than_days: float | None = None,
    model: str | None = None,
    everything: bool = False,
) -> int:
    """Delete entries by age and/or model id; returns how many were removed."""
    cutoff = time.time() - older_than_days * 86400 if older_than_days is not None else None
    removed = 0
    with diskcache.Cache(str(directory)) as c:
        if everything:
            removed = len(c)
            c.clear()
            return removed
        for k in list(c.iterkeys()):
            v = _decode(c.get(k))
            if not isinstance(v, dict):
                continue
            if model is not None and v.get("model") != model:
                continue
            if cutoff is not None and (v.get("t") or 0) >= cutoff:
                continue
            if model is None and cutoff is None:
                continue
            if c.delete(k):
                removed += 1
    return removed


def _decode(v: Any) -> Any:
    """Values are stored as orjson bytes (older entries may be pickled dicts)."""
    if isinstance(v, bytes):
        try:
            return orjson.loads(v)
        except orjson.JSONDecodeError:
            return None
    return v


@contextmanager
def probe(directory: Path | None) -> Iterator[Callable[[str], bool]]:
    """`key in cache` for planning (`--dry-run`): no directory is made when there is none."""
    if directory is None or not (Path(directory) / "cache.db").exists():
        yield lambda key: False
        return
    with diskcache.Cache(str(directory)) as c:
        yield c.__contains__
