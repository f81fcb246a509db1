"""The response cache: diskcache on disk, used from the event loop with no per-call thread hand-off.

Reads and writes run on the event loop, many keys per SQLite statement: `lookup` reads ~2 us a key
(`diskcache.Cache.get`: ~11), and new answers are committed every `flush_every_s` (or `max_batch`
values) as one transaction of multi-row upserts into diskcache's own table, in its own format (raw
bytes; its triggers keep count and size), so `diskcache.Cache` reads every entry back. A commit costs
up to ~4 KB of WAL a value (each value's key lands on its own page of the key index) plus a fixed
part: measured in bench/throughput.py's runs, 13-17 us a value in commits of ~50 (every 50 ms at its
pace), 7-10 in commits of ~500, hence 0.25 s. The answer's row is in results.jsonl first (at the end of its turn of the loop), so a
kill before the commit costs nothing on resume; another run directory on this cache would pay for
the answers of the last `flush_every_s` again.
A writer thread cost more than the writes (measured: ~80 us of CPU per call in GIL hand-offs between
it and the loop); what may block on the disk, the WAL checkpoint and its fsync, runs on a thread
(the loop's connection never checkpoints itself). In WAL mode a commit does not wait for the disk.
A value is one sample's answer: `{"text", "usage", "cost_usd", "finish_reason", "model", "t"}`, never
a key or a header.

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
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cache.claims import LOOK_S, Claims
from cache.disk import CHECKPOINT_EVERY, disk_full, open_cache, select_values, upsert_values
from core.types import answer_problem

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
        self, directory: str | Path, flush_every_s: float = 0.25, max_batch: int = 512, shared: Any = None
    ) -> None:
        self.shared = shared
        """A second layer under this one (cache.pg.PgCache): asked on a local miss, given every answer."""
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._cache = open_cache(self.directory)
        self.broken: str | None = None if self._cache is not None else "could not be opened"
        """Why the cache was turned off mid-run (reads then miss, writes are dropped)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self.on_fault: Any = None
        """Called with a message when a write fails because the disk is full (the run must stop)."""
        self._pending: dict[str, dict[str, Any]] = {}
        """Values not yet committed (a look-up finds them too)."""
        self.unwritten: dict[str, dict[str, Any]] = {}
        """Answers a full disk refused: held, and retried with every later commit and at close."""
        self._timer: asyncio.TimerHandle | None = None
        self._flush_every_s = flush_every_s
        self._max_batch = max_batch
        self._unchecked = 0
        """Values committed since the last checkpoint."""
        self._checkpointer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalsweep-cache")
        self._checkpoint: Future[None] | None = None
        if self._cache is not None:
            try:
                self._cache._con.execute("PRAGMA wal_autocheckpoint = 0")
            except (sqlite3.Error, OSError) as e:
                self._off(e)
        self._shared = False
        """Other processes use this directory (claims are taken only then)."""
        self._look_at = 0.0
        self._looking: asyncio.Future[None] | None = None
        self._unclaimed: set[str] = set()
        self._releasing: set[asyncio.Task[None]] = set()
        """Keys being called while alone, claimed at once if another process turns up."""
        self.claims: Claims | None = None
        """In-flight claims shared with other processes on this directory (cache.claims)."""
        if self._cache is not None:
            try:
                self.claims = Claims(self.directory)
            except (sqlite3.Error, OSError) as e:
                log.warning("cache %s: in-flight claims unavailable (%s): another process on this cache "
                            "may pay for a call this one is making", self.directory, e)
        self.hits = 0
        self.misses = 0
        self.set_aside = 0
        """Entries read that were not well-typed answers (deleted, treated as misses)."""

    async def get(self, key: str) -> dict[str, Any] | None:
        v = self.lookup([key]).get(key)
        if v is None:
            v = await self.from_shared(key)
        return v

    def lookup(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The answers this machine holds for `keys` (absent keys are misses), in one SQLite query;
        a value not yet committed counts too (same run, same key)."""
        found: dict[str, dict[str, Any]] = {}
        ask: list[str] = []
        for k in keys:
            v = self._pending.get(k) or self.unwritten.get(k)
            if v is None:
                ask.append(k)
            else:
                found[k] = v
        if ask and self.broken is None:
            bad: dict[str, str] = {}
            try:
                found.update(select_values(self._cache, ask, bad))  # type: ignore[arg-type]
                if bad:
                    self._set_aside(bad)
            except (sqlite3.Error, OSError) as e:
                self._off(e)
        self.hits += len(found)
        self.misses += len(keys) - len(found)
        return found

    async def claim(self, keys: list[str]) -> list[str]:
        """Claim keys about to be called; returns those another process is calling (wait for them):
        on this directory (SQLite), or on another host through the shared layer (Postgres). The
        decision is `claim_now`'s; this only awaits what it leaves: a look at the directory, the
        shared layer."""
        now = self.claim_now(keys)
        if now is not None:
            return now
        theirs = await self._claim_local(keys)
        if self.shared is not None and not self.shared.down:
            mine = [k for k in keys if k not in set(theirs)]
            theirs += await self.shared.claim(mine)
        return theirs

    def claim_now(self, keys: list[str]) -> list[str] | None:
        """`claim` as a plain call, the usual case: no look at the directory due or under way and no
        shared layer up (nothing to await, so no coroutine a call). None: await `claim` instead."""
        if self.shared is not None and not self.shared.down:
            return None
        if self.claims is None or self.broken:
            return []
        if self._look_due():
            return None
        return self._take(keys)

    def _look_due(self) -> bool:
        """A look at the directory is due, or under way (a claim waits for it)."""
        return time.monotonic() >= self._look_at or (self._looking is not None and not self._looking.done())

    async def _claim_local(self, keys: list[str]) -> list[str]:
        if self.claims is None or self.broken:
            return []
        try:
            if self._look_due():
                if self._looking is None or self._looking.done():
                    self._looking = asyncio.ensure_future(self._look())
                await asyncio.shield(self._looking)  # every claimer waits for the look in progress
        except sqlite3.Error as e:
            return self._claims_failed(e)
        return self._take(keys)

    def _take(self, keys: list[str]) -> list[str]:
        """The claim itself, once no look is to be waited for: alone on the directory, none taken."""
        if self.claims is None:
            return []
        try:
            if not self._shared:
                self._unclaimed.update(keys)
                return []
            return self.claims.claim(keys)
        except sqlite3.Error as e:
            return self._claims_failed(e)

    def _claims_failed(self, e: sqlite3.Error) -> list[str]:
        log.warning("cache %s: in-flight claims failed (%s); calling without them", self.directory, e)
        self.claims = None
        return []

    @property
    def shared_dir(self) -> bool:
        """Another process may be calling the same keys (this directory has another user, or a shared
        layer is up): claims are being taken."""
        return (self._shared and self.claims is not None) or (self.shared is not None and not self.shared.down)

    async def _look(self) -> None:
        """Are other processes using this directory? A newcomer waits until each has looked since it
        arrived; finding one, claim what this process has in flight unclaimed."""
        assert self.claims is not None
        self._look_at = time.monotonic() + LOOK_S
        for i in range(int(3 * LOOK_S / 0.1) + 1):
            if i:
                await asyncio.sleep(0.1)
            seen = self.claims.others()
            if seen and not self._shared:  # claimed before the stamp that tells a newcomer we saw it
                if self._unclaimed:
                    self.claims.claim(list(self._unclaimed))
                self._shared = True
            self.claims.looked()
            if all(s >= self.claims.arrived for s in seen):
                break
        self._shared = bool(seen)

    def release(self, keys: list[str]) -> None:
        """Calls that ended without an answer: whoever waits for them (here or on another host) sends
        their own."""
        if not keys:  # (every call that answered: its key is released by the commit)
            return
        self._release_local(keys)
        if self.shared is not None and not self.shared.down:
            t = asyncio.get_running_loop().create_task(self.shared.release(keys))
            self._releasing.add(t)
            t.add_done_callback(self._releasing.discard)

    def _release_local(self, keys: list[str]) -> None:
        self._unclaimed.difference_update(keys)
        if self.claims is not None and keys and self._shared:
            try:
                self.claims.release(keys)
            except sqlite3.Error:
                pass

    async def wait_for(self, keys: list[str], timeout_s: float) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """Another process is calling `keys`: their answers as they reach the cache, and the keys whose
        call ended without one (or whose caller died, or took over `timeout_s`), now claimed by us."""
        found: dict[str, dict[str, Any]] = {}
        ours: list[str] = []
        left, until = list(keys), time.monotonic() + timeout_s
        while left:
            await asyncio.sleep(0.1)
            try:
                got = select_values(self._cache, left) if self.broken is None else {}  # type: ignore[arg-type]
            except (sqlite3.Error, OSError):
                got = {}
            if self.shared is not None and not self.shared.down:  # answered on another host
                for k in [k for k in left if k not in got]:
                    v = await self.shared.get(k)
                    if v is not None and answer_problem(v) is None:
                        got[k] = v
                        self.put(k, v, share=False)
            found.update(got)
            left = [k for k in left if k not in got]
            if not left:
                break
            theirs = set(await self.claim(left)) if time.monotonic() < until else set()
            for k in [k for k in left if k not in theirs]:  # freed: answered just now, or the call failed
                v = await self.from_shared(k) if self.shared is not None else None
                if v is None:
                    ours.append(k)
                else:
                    found[k] = v
                    self.release([k])
            left = [k for k in left if k in theirs]
        if self.claims is not None:
            self.claims.waited += len(found)
        return found, ours

    def _set_aside(self, bad: dict[str, str]) -> None:
        """Ill-typed entries: deleted (a miss, so the call is made again and its answer replaces them),
        counted, and said once."""
        for k in bad:
            self._cache.delete(k)  # type: ignore[union-attr]
        if not self.set_aside:
            k, why = next(iter(bad.items()))
            log.warning(
                "the response cache in %s holds entries that are not well-typed answers (e.g. %s…: %s): "
                "set aside and treated as misses", self.directory, k[:12], why,
            )
        self.set_aside += len(bad)

    async def from_shared(self, key: str) -> dict[str, Any] | None:
        """A local miss: the shared layer's answer, kept locally too (None without one)."""
        if self.shared is None:
            return None
        v = await self.shared.get(key)
        if v is not None and answer_problem(v) is not None:
            self.set_aside += 1
            return None
        if v is not None:
            self.hits += 1
            self.misses -= 1
            self.put(key, v, share=False)
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
        self._pending[key] = value
        if len(self._pending) >= self._max_batch:
            self._flush()
        elif self._timer is None:
            self._timer = self._loop.call_later(self._flush_every_s, self._flush)

    @property
    def pending(self) -> dict[str, dict[str, Any]]:
        """Values not yet committed (a disk-full stop counts them as not written)."""
        return self._pending

    def retry(self) -> None:
        """Commit what a full disk refused, now (space may have come back)."""
        self._flush()

    def _flush(self) -> None:
        """Commit the pending values (one transaction); checkpoint on the thread now and then."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = {**self.unwritten, **self._pending}, {}
        if not batch or self.broken:
            return
        try:
            upsert_values(self._cache, batch)  # type: ignore[arg-type]
        except (sqlite3.Error, OSError) as e:
            if not disk_full(e):
                self._off(e)
            else:
                first = not self.unwritten
                self.unwritten = batch  # kept for the next commit: space may come back
                if first and self.on_fault is not None:
                    self.on_fault(f"cannot write the response cache in {self.directory}: {e}")
            return
        self.unwritten = {}
        if self.claims is not None:  # their answers are readable now: waiters take them from here
            self._release_local(list(batch))
        self._unchecked += len(batch)
        if self._unchecked >= CHECKPOINT_EVERY and (self._checkpoint is None or self._checkpoint.done()):
            self._unchecked = 0
            self._checkpoint = self._checkpointer.submit(self._checkpoint_wal)

    def _checkpoint_wal(self) -> None:
        """Copy the WAL into the database (and fsync) off the loop; PASSIVE: never blocks the loop's
        commits. A failure is left to the next commit to report (a full disk fails it too)."""
        try:
            self._cache._con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()  # type: ignore[union-attr]
        except (sqlite3.Error, OSError) as e:
            log.debug("cache checkpoint failed: %s", e)

    async def aclose(self) -> None:
        self._flush()
        if self._checkpoint is not None:
            await asyncio.wrap_future(self._checkpoint)
        if self.shared is not None:
            await self.shared.aclose()
        self._checkpointer.shutdown(wait=True)
        if self.claims is not None:
            self.claims.close()
        try:
            if self._cache is not None:
                self._cache.close()  # the last connection to close checkpoints what is left
        except (sqlite3.Error, OSError):
            pass
