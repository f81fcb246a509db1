"""The shared response cache: one Postgres table under the local diskcache (`[shared] cache_url`).

A local miss asks Postgres before calling the provider; look-ups arriving within ~2 ms go out as one
`SELECT ... WHERE key = ANY(%s)`, new answers as one `INSERT ... ON CONFLICT DO NOTHING` every 0.2 s
(or 512 rows), on their own connections, so neither waits on the other. Losing the server degrades to
the local cache with one warning: every answer is already in the local cache and in results*.jsonl,
so nothing paid for is lost, only not shared. Every statement has a deadline (`TIMEOUT_S`): a server
that hangs (frozen, a dead network) degrades within seconds instead of stalling the run, and the
cache reconnects every `RETRY_S` until the server answers again.
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
TIMEOUT_S = 3.0  # a statement (or connect) not answered by then: the server is treated as lost
RETRY_S = 5.0  # while lost, a reconnect is tried this often


async def deadline(coro: Any, timeout: float) -> Any:
    """`coro`'s result, or TimeoutError past `timeout`, leaving the statement running: cancelling a
    psycopg statement sends a cancel request that blocks until the server answers, and a frozen
    server never does. The abandoned connection is never used again."""
    task = asyncio.ensure_future(coro)
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # its outcome is nobody's
        raise TimeoutError(f"no answer in {timeout:g}s")
    return task.result()


def connect_kwargs() -> dict[str, Any]:
    """libpq timeouts for every connection: connect, and TCP keepalives / user timeout so a dead
    network is noticed by the socket too (the asyncio deadline covers a frozen server)."""
    return {
        "autocommit": True,
        "connect_timeout": max(1, int(TIMEOUT_S)),
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 2,
        "tcp_user_timeout": int(TIMEOUT_S * 1000),
    }


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
        self._retry: asyncio.Task[None] | None = None
        self._abandoned: list[Any] = []
        self.hits = 0
        self.written = 0

    async def open(self) -> PgCache:
        try:
            await deadline(self._connect(), TIMEOUT_S * 2)
        except Exception as e:  # noqa: BLE001 - any failure: run on the local cache alone
            await self._lost(e)
        return self

    async def _connect(self) -> None:
        import psycopg

        self._read = await psycopg.AsyncConnection.connect(self.url, **connect_kwargs())
        self._write = await psycopg.AsyncConnection.connect(self.url, **connect_kwargs())
        async with self._write.transaction():
            await self._write.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
            await self._write.execute(SCHEMA)

    async def _lost(self, e: BaseException) -> None:
        if not self.down:
            self.down = True
            why = (
                f"no answer in {TIMEOUT_S:g}s"
                if isinstance(e, TimeoutError)
                else (str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
            )
            log.warning(
                "shared cache %s unreachable (%s): continuing with the local cache only; this run's "
                "answers stay in the local cache and results, but are not shared until it is back",
                redact_url(self.url),
                redact_url(why, [self.url]),
            )
            if self._retry is None or self._retry.done():
                self._retry = asyncio.get_running_loop().create_task(self._reconnect())
        for _, fut in self._gets:
            if not fut.done():
                fut.set_result(None)
        self._gets = []
        self._pending = []
        self._drop(frozen=isinstance(e, TimeoutError))

    def _drop(self, frozen: bool = False) -> None:
        """Forget both connections: closed at once, or (a server that stopped answering) abandoned to
        their pending statements and closed at the end."""
        for c in (self._read, self._write):
            if c is not None:
                self._abandoned.append(c)
        self._read = self._write = None
        if not frozen:
            self._spawn(self._close_abandoned())

    async def _close_abandoned(self) -> None:
        old, self._abandoned = self._abandoned, []
        for c in old:
            try:
                await deadline(c.close(), 1.0)
            except Exception:  # noqa: BLE001
                pass

    async def _reconnect(self) -> None:
        while self.down:
            await asyncio.sleep(RETRY_S)
            try:
                await deadline(self._connect(), TIMEOUT_S * 2)
            except Exception as e:  # noqa: BLE001 - still down
                self._drop(frozen=isinstance(e, TimeoutError))
                continue
            self.down = False
            log.warning("shared cache %s reachable again: sharing answers again", redact_url(self.url))

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
            found = await deadline(self._select([k for k, _ in batch]), TIMEOUT_S)
        except Exception as e:  # noqa: BLE001
            self._gets = batch + self._gets
            await self._lost(e)
            return
        for k, fut in batch:
            if not fut.done():
                raw = found.get(k)
                fut.set_result(orjson.loads(raw) if raw is not None else None)

    async def _select(self, keys: list[str]) -> dict[str, bytes]:
        cur = await self._read.execute(f"SELECT key, value FROM {TABLE} WHERE key = ANY(%s)", (keys,))
        return {k: v for k, v in await cur.fetchall()}

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
            await deadline(self._insert(batch), TIMEOUT_S)
            self.written += len(batch)
        except Exception as e:  # noqa: BLE001
            await self._lost(e)

    async def _insert(self, batch: list[tuple[str, dict[str, Any]]]) -> None:
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

    async def aclose(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
        if self._flusher is not None:
            await self._flusher
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._write_pending()
        self._drop(frozen=self.down)
        if not self.down:
            await self._close_abandoned()


# --- `evalsweep cache stats|prune` on the shared table ---------------------------------------------


def stats(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url, **connect_kwargs()) as c:
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

    with psycopg.connect(url, **connect_kwargs()) as c:
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
