"""The response cache: diskcache on disk, used from the event loop without blocking it.

Reads run in a small thread pool; writes are queued and committed in one SQLite transaction per
batch (per-call commits are what makes peers slow). A value is one sample's answer:
`{"text", "usage", "cost_usd", "finish_reason", "model", "t"}` — never a key or a header.

A damaged cache never costs rows: one that cannot be opened is moved aside (`cache.db.corrupt-<ts>`)
and a fresh one started; a read or write error later turns the cache off for the rest of the run
(one warning; calls go to the provider). A write error that means the disk is full is different: it
is a fault of the run, reported through `on_fault` so the run stops launching calls.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import diskcache
import orjson

log = logging.getLogger("evalsweep")
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


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
        self._cache = _open(self.directory)
        self.broken: str | None = None if self._cache is not None else "could not be opened"
        """Why the cache was turned off mid-run (reads then miss, writes are dropped)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self.on_fault: Any = None
        """Called with a message when a write fails because the disk is full (the run must stop)."""
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
        if self.broken:
            return [None] * len(keys)
        try:
            return [_decode(self._cache.get(k)) for k in keys]
        except (sqlite3.Error, OSError) as e:
            self._off(e)
            return [None] * len(keys)

    def _off(self, e: BaseException) -> None:
        if self.broken is None:
            self.broken = f"{type(e).__name__}: {e}"
            log.warning(
                "the response cache in %s is damaged or unreadable (%s): running without it "
                "(no result is lost; move it aside or delete it to start a fresh one)",
                self.directory,
                self.broken,
            )

    def put(self, key: str, value: dict[str, Any], share: bool = True) -> None:
        self._loop = asyncio.get_running_loop()
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
        if not batch or self.broken:
            return
        try:
            with self._cache.transact():
                for k, v in batch:
                    self._cache.set(k, orjson.dumps(v))  # raw bytes: no pickle either way
        except (sqlite3.Error, OSError) as e:
            if _disk_full(e):
                if self.on_fault is not None and self._loop is not None:
                    msg = f"cannot write the response cache in {self.directory}: {e}"
                    self._loop.call_soon_threadsafe(self.on_fault, msg)
                return
            self._off(e)

    async def aclose(self) -> None:
        if self._flusher is not None:
            await self._flusher
        await asyncio.get_running_loop().run_in_executor(self._pool, self._write_pending)
        if self.shared is not None:
            await self.shared.aclose()
        self._pool.shutdown(wait=True)
        try:
            if self._cache is not None:
                self._cache.close()
        except (sqlite3.Error, OSError):
            pass


_CORRUPT = ("not a database", "malformed", "corrupt")


def _open(directory: Path) -> diskcache.Cache | None:
    """Open the cache; a damaged one is moved aside (`cache.db.corrupt-<ts>`) and a fresh one started;
    one that cannot be opened for another reason (I/O error, no space) is left alone and the run goes
    without a cache. Each case with one warning; None means no cache."""
    try:
        return _open_checked(directory)
    except (sqlite3.Error, OSError) as e:
        why = f"{type(e).__name__}: {e}"
        if not any(w in str(e) for w in _CORRUPT):
            log.warning("cannot open the response cache in %s (%s): running without it", directory, why)
            return None
    ts = time.strftime("%Y%m%d-%H%M%S")
    for name in ("cache.db", "cache.db-wal", "cache.db-shm"):
        p = directory / name
        if p.exists():
            p.rename(directory / f"{name}.corrupt-{ts}")
    log.warning(
        "the response cache %s is damaged (%s): moved it aside as cache.db.corrupt-%s and started a "
        "fresh one",
        directory / "cache.db",
        why,
        ts,
    )
    try:
        return _open_checked(directory)
    except (sqlite3.Error, OSError) as e:
        log.warning("cannot start a fresh cache in %s (%s): running without it", directory, e)
        return None


def _open_checked(directory: Path) -> diskcache.Cache:
    c = diskcache.Cache(str(directory), size_limit=2**40, eviction_policy="none", cull_limit=0)
    try:
        c._sql("SELECT rowid FROM Cache LIMIT 1").fetchall()  # reads the header and the root page
    except BaseException:
        c.close()
        raise
    return c


def _disk_full(e: BaseException) -> bool:
    if isinstance(e, OSError) and e.errno in _FULL:
        return True
    return "disk is full" in str(e) or "No space left" in str(e)


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
    try:
        c = diskcache.Cache(str(directory))
    except (sqlite3.Error, OSError) as e:
        log.warning("the response cache in %s cannot be read (%s): planning as if empty", directory, e)
        yield lambda key: False
        return

    def has(key: str) -> bool:
        try:
            return key in c
        except (sqlite3.Error, OSError):  # damaged pages: a miss, as the run itself would see it
            return False

    with c:
        yield has
