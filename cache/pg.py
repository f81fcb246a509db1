"""The shared response cache: one Postgres table under the local diskcache (`[shared] cache_url`).

A local miss asks Postgres before calling the provider; look-ups arriving within ~2 ms go out as one
`SELECT ... WHERE key = ANY(%s)`, new answers as one `INSERT ... ON CONFLICT DO NOTHING` every 0.2 s
(or 512 rows), on their own connections, so neither waits on the other. Losing the server degrades to
the local cache with one warning: every answer is already in the local cache and in results*.jsonl,
so nothing paid for is lost, only not shared.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import orjson

from runner.config import redact_url

log = logging.getLogger("evalsweep")

TABLE = "evalsweep_cache"
SCHEMA = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    key text PRIMARY KEY,
    model text NOT NULL,
    t double precision,
    value bytea NOT NULL
)"""
_LOCK_ID = 0x65766C73  # pg_advisory_xact_lock: concurrent first runs create the table once


class PgCache:
    def __init__(self, url: str, flush_every_s: float = 0.2, max_batch: int = 512) -> None:
        self.url = url
        self._flush_every_s = flush_every_s
        self._max_batch = max_batch
        self._read: Any = None
        self._write: Any = None
        self._gets: list[tuple[str, asyncio.Future[Any]]] = []
        self._pending: list[tuple[str, dict[str, Any]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.down = False
        self.hits = 0
        self.written = 0

    async def open(self) -> PgCache:
        import psycopg

        try:
            self._read = await psycopg.AsyncConnection.connect(self.url, autocommit=True, connect_timeout=10)
            self._write = await psycopg.AsyncConnection.connect(self.url, autocommit=True, connect_timeout=10)
            async with self._write.transaction():
                await self._write.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
                await self._write.execute(SCHEMA)
        except Exception as e:  # noqa: BLE001 - any failure: run on the local cache alone
            await self._lost(e)
        return self

    async def _lost(self, e: BaseException) -> None:
        if not self.down:
            self.down = True
            log.warning(
                "shared cache %s unreachable (%s): continuing with the local cache only; this run's "
                "answers stay in the local cache and results, but are not shared",
                redact_url(self.url),
                str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__,
            )
        for _, fut in self._gets:
            if not fut.done():
                fut.set_result(None)
        self._gets = []
        self._pending = []
        for c in (self._read, self._write):
            if c is not None:
                try:
                    await c.close()
                except Exception:  # noqa: BLE001
                    pass

    # --- reads -----------------------------------------------------------------------------------

    async def get(self, key: str) -> dict[str, Any] | None:
        if self.down:
            return None
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._gets.append((key, fut))
        if len(self._gets) == 1:
            loop.call_later(0.002, self._spawn, self._get_batch())
        v = await fut
        if v is not None:
            self.hits += 1
        return v

    def _spawn(self, coro: Any) -> None:
        t = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _get_batch(self) -> None:
        batch, self._gets = self._gets, []
        if self.down:
            for _, fut in batch:
                fut.done() or fut.set_result(None)
            return
        try:
            cur = await self._read.execute(
                f"SELECT key, value FROM {TABLE} WHERE key = ANY(%s)", ([k for k, _ in batch],)
            )
            found = {k: v for k, v in await cur.fetchall()}
        except Exception as e:  # noqa: BLE001
            self._gets = batch + self._gets
            await self._lost(e)
            return
        for k, fut in batch:
            if not fut.done():
                raw = found.get(k)
                fut.set_result(orjson.loads(raw) if raw is not None else None)

    # --- writes ----------------------------------------------------------------------------------

    def put(self, key: str, value: dict[str, Any]) -> None:
        if self.down:
            return
        self._pending.append((key, value))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_soon())
        elif len(self._pending) >= self._max_batch:
            self._spawn(self._write_pending())

    async def _flush_soon(self) -> None:
        await asyncio.sleep(self._flush_every_s)
        await self._write_pending()

    async def _write_pending(self) -> None:
        batch, self._pending = self._pending, []
        if not batch or self.down:
            return
        try:
            await self._write.execute(
                f"INSERT INTO {TABLE} (key, model, t, value) "
                "SELECT * FROM unnest(%s::text[], %s::text[], %s::float8[], %s::bytea[]) "
                "ON CONFLICT (key) DO NOTHING",
                (
                    [k for k, _ in batch],
                    [str(v.get("model", "?")) for _, v in batch],
                    [v.get("t") for _, v in batch],
                    [orjson.dumps(v) for _, v in batch],
                ),
            )
            self.written += len(batch)
        except Exception as e:  # noqa: BLE001
            await self._lost(e)

    async def aclose(self) -> None:
        if self._flusher is not None:
            await self._flusher
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._write_pending()
        for c in (self._read, self._write):
            if c is not None and not c.closed:
                await c.close()


# --- `evalsweep cache stats|prune` on the shared table ---------------------------------------------


def stats(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as c:
        c.execute(SCHEMA)
        n, oldest, newest = c.execute(f"SELECT count(*), min(t), max(t) FROM {TABLE}").fetchone()  # type: ignore[misc]
        size = c.execute("SELECT pg_total_relation_size(%s)", (TABLE,)).fetchone()[0]  # type: ignore[index]
        per_model = dict(c.execute(f"SELECT model, count(*) FROM {TABLE} GROUP BY model ORDER BY model"))
    return {
        "url": redact_url(url),
        "entries": n,
        "bytes": size,
        "per_model": per_model,
        "oldest": oldest,
        "newest": newest,
    }


def prune(
    url: str, *, older_than_days: float | None = None, model: str | None = None, everything: bool = False
) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as c:
        c.execute(SCHEMA)
        if everything:
            return c.execute(f"DELETE FROM {TABLE}").rowcount
        where, args = [], []
        if model is not None:
            where.append("model = %s")
            args.append(model)
        if older_than_days is not None:
            where.append("coalesce(t, 0) < %s")
            args.append(time.time() - older_than_days * 86400)
        if not where:
            return 0
        return c.execute(f"DELETE FROM {TABLE} WHERE {' AND '.join(where)}", args).rowcount
