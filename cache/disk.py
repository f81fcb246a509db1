"""diskcache's own table read and written in bulk (many keys per statement, in diskcache's format so
`diskcache.Cache` reads every entry back), a damaged cache moved aside on open, and what reads a cache
directory outside a run: `stats`, `prune` (`evalsweep cache`) and `probe` (the dry run, resume counts).
"""

from __future__ import annotations

import errno
import functools
import logging
import pickle
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import diskcache
import orjson

from core.types import answer_problem

log = logging.getLogger("evalsweep")
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


CHECKPOINT_EVERY = 2000  # values (1.5-8 MB of WAL: 1-4 KB a value, by commit size) between checkpoints
_CHUNK = 512  # keys per SELECT ... IN (...) at most: under SQLite's 999 host parameters on old builds
_SELECT = "SELECT key, mode, value FROM Cache WHERE raw = 1 AND key IN ({})"
_ROWS = 128  # rows per INSERT at most: 4 parameters each, under SQLite's 999 on old builds
_UPSERT = (
    "INSERT INTO Cache (key, raw, store_time, expire_time, access_time, access_count, tag, size, mode, "
    "filename, value) VALUES {} ON CONFLICT (key, raw) DO UPDATE "
    "SET store_time = excluded.store_time, access_time = excluded.access_time, value = excluded.value"
)
_ROW = "(?, 1, ?, NULL, ?, 0, NULL, 0, 1, NULL, ?)"


def select_values(c: diskcache.Cache, keys: list[str], bad: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """The entries for `keys`, one query per `_CHUNK` keys. Raw bytes kept in the row (mode 1: what we
    write) are decoded here; any other entry (a pickle, or a value in a file, from older versions or
    diskcache itself) is read through `Cache.get`. Entries that are not well-typed answers go to `bad`
    (key: why), not to the result."""
    out: dict[str, dict[str, Any]] = {}
    con = c._con
    for i in range(0, len(keys), _CHUNK):
        part = keys[i : i + _CHUNK]
        size = 1 << (len(part) - 1).bit_length()  # padded with its last key: a few shapes, each parsed once
        for k, mode, raw in con.execute(_select(size), part + part[-1:] * (size - len(part))):
            v = _decode(raw if mode == 1 else c.get(k))  # mode 1 (raw): the value is in the row
            why = answer_problem(v)
            if why is None:
                out[k] = v
            elif bad is not None:
                bad[k] = why
    return out


def upsert_values(c: diskcache.Cache, batch: dict[str, dict[str, Any]]) -> None:
    """One transaction: rows in diskcache's own format (what `Cache.set(key, bytes)` writes for a small
    value), `_ROWS` to a statement (one SQLite step each: ~6 us a row, against ~11 by executemany and
    ~26 by `set`). A large value (a file of its own in diskcache) goes through `set`."""
    now = time.time()
    small: list[Any] = []
    large: list[tuple[str, bytes]] = []
    for k, v in batch.items():
        b = orjson.dumps(v)
        if len(b) < c.disk_min_file_size:
            small += (k, now, now, b)
        else:
            large.append((k, b))
    con = c._con
    with c.transact():
        i = 0
        for rows in _chunks(len(small) // 4):
            con.execute(_upsert(rows), small[i : i + 4 * rows])
            i += 4 * rows
        for k, b in large:
            c.set(k, b)


def _chunks(n: int) -> list[int]:
    """`n` rows as statements of `_ROWS`, then of powers of two (its binary digits): a few distinct
    statements, each parsed once a connection. A statement of a new length is parsed afresh (~3 us a
    row, as much as its insert), and a batch's length changes with every commit."""
    out = [_ROWS] * (n // _ROWS)
    n %= _ROWS
    out += [1 << b for b in range(n.bit_length() - 1, -1, -1) if n >> b & 1]
    return out


@functools.cache
def _select(keys: int) -> str:
    return _SELECT.format(",".join("?" * keys))


@functools.cache
def _upsert(rows: int) -> str:
    return _UPSERT.format(",".join([_ROW] * rows))


_CORRUPT = ("not a database", "malformed", "corrupt")


def open_cache(directory: Path) -> diskcache.Cache | None:
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


def disk_full(e: BaseException) -> bool:
    if isinstance(e, OSError) and e.errno in _FULL:
        return True
    return "disk is full" in str(e) or "No space left" in str(e)


def _scan(directory: Path, visit: Callable[[diskcache.Cache], Any], empty: Any) -> Any:
    """Run a maintenance command over the cache; pages found damaged on the way move the file aside
    (as a run would) and the command reports on the empty cache instead of a traceback."""
    c = open_cache(directory)
    if c is None:
        return empty
    try:
        with c:
            return visit(c)
    except (sqlite3.DatabaseError, EOFError, pickle.UnpicklingError, ValueError, TypeError) as e:
        # a scribbled page can also hold a key diskcache tries to unpickle (EOFError: a damaged cache too)
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
