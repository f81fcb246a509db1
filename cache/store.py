"""The response cache: diskcache on disk, used from the event loop with no per-call thread hand-off.

A read is one SQLite look-up on the event loop (~10 us from the page cache): cheaper than handing it to
a thread and back, and with no timer or future per call a replay of a finished run reads at the speed
of the loop. Writes are queued and committed in one SQLite transaction per batch (`max_batch` values or
every `flush_every_s`) by a single writer thread, so a call never waits for the disk. A value is one
sample's answer: `{"text", "usage", "cost_usd", "finish_reason", "model", "t"}` — never a key or a
header.

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
from concurrent.futures import Future, ThreadPoolExecutor
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
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalsweep-cache")
        self._lock = threading.Lock()
        self._pending: dict[str, dict[str, Any]] = {}
        """Values not yet handed to the writer; `_writing`: the batch it is committing."""
        self._writing: dict[str, dict[str, Any]] = {}
        self._queued = False
        self._timer: asyncio.TimerHandle | None = None
        self._flush_every_s = flush_every_s
        self._max_batch = max_batch
        self.hits = 0
        self.misses = 0

    async def get(self, key: str) -> dict[str, Any] | None:
        # A value still on its way to disk counts too (same run, same key); pending before writing
        # before disk, the order in which the writer moves it, so none is missed in between.
        v = self._pending.get(key) or self._writing.get(key)
        if v is None and self.broken is None:
            try:
                v = _decode(self._cache.get(key))  # type: ignore[union-attr]
            except (sqlite3.Error, OSError) as e:
                self._off(e)
        if v is None and self.shared is not None:
            v = await self.shared.get(key)
            if v is not None:
                self.put(key, v, share=False)
        if v is None:
            self.misses += 1
        else:
            self.hits += 1
        return v

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
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        if share and self.shared is not None:
            self.shared.put(key, value)
        with self._lock:
            self._pending[key] = value
            full = len(self._pending) >= self._max_batch
        if full:
            self._flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._flush_every_s, self._flush)

    def _flush(self) -> None:
        """Hand the pending values to the writer thread (one job, whatever their number)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._queued:
            self._queued = True
            self._writer.submit(self._write_pending).add_done_callback(_log_failure)

    def _write_pending(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, {}
            self._writing = batch
            self._queued = False
        if not batch or self.broken:
            self._writing = {}
            return
        try:
            with self._cache.transact():  # type: ignore[union-attr]
                for k, v in batch.items():
                    self._cache.set(k, orjson.dumps(v))  # type: ignore[union-attr]  # raw bytes, no pickle
        except (sqlite3.Error, OSError) as e:
            if not _disk_full(e):
                self._off(e)
            elif self.on_fault is not None and self._loop is not None:
                msg = f"cannot write the response cache in {self.directory}: {e}"
                self._loop.call_soon_threadsafe(self.on_fault, msg)
        finally:
            self._writing = {}

    async def aclose(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        await asyncio.get_running_loop().run_in_executor(self._writer, self._write_pending)
        if self.shared is not None:
            await self.shared.aclose()
        self._writer.shutdown(wait=True)
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
    _move_aside(directory, why, "started a fresh one")
    try:
        return _open_checked(directory)
    except (sqlite3.Error, OSError) as e:
        log.warning("cannot start a fresh cache in %s (%s): running without it", directory, e)
        return None


def _move_aside(directory: Path, why: str, then: str) -> None:
    ts = time.strftime("%Y%m%d-%H%M%S")
    for name in ("cache.db", "cache.db-wal", "cache.db-shm"):
        p = directory / name
        if p.exists():
            p.rename(directory / f"{name}.corrupt-{ts}")
    log.warning(
        "the response cache %s is damaged (%s): moved it aside as cache.db.corrupt-%s and %s",
        directory / "cache.db",
        why,
        ts,
        then,
    )


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


def _log_failure(f: Future[None]) -> None:
    exc = f.exception()
    if exc is not None:
        log.error("cache write failed (%s: %s); the rows are in results.jsonl", type(exc).__name__, exc)


def _scan(directory: Path, visit: Callable[[diskcache.Cache], Any], empty: Any) -> Any:
    """Run a maintenance command over the cache; pages found damaged on the way move the file aside
    (as a run would) and the command reports on the empty cache instead of a traceback."""
    c = _open(directory)
    if c is None:
        return empty
    try:
        with c:
            return visit(c)
    except sqlite3.DatabaseError as e:
        _move_aside(directory, f"{type(e).__name__}: {e}", "left no cache in its place")
        return empty


def stats(directory: Path) -> dict[str, Any]:
    def visit(c: diskcache.Cache) -> dict[str, Any]:
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
            "entries": len(c),
            "bytes": c.volume(),
            "per_model": per_model,
            "oldest": oldest,
            "newest": newest,
        }

    empty = {"entries": 0, "bytes": 0, "per_model": {}, "oldest": None, "newest": None}
    return {"directory": str(directory), **_scan(directory, visit, empty)}


def prune(
    directory: Path,
    *,
    older_than_days: float | None = None,
    model: str | None = None,
    everything: bool = False,
) -> int:
    """Delete entries by age and/or model id; returns how many were removed."""
    cutoff = time.time() - older_than_days * 86400 if older_than_days is not None else None

    def visit(c: diskcache.Cache) -> int:
        if everything:
            removed = len(c)
            c.clear()
            return removed
        removed = 0
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

    return _scan(directory, visit, 0)


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
