"""The shared response cache: one Postgres table under the local diskcache (`[shared] cache_url`).

A local miss asks Postgres before calling the provider; look-ups arriving within ~2 ms go out as one
`SELECT ... WHERE key = ANY(%s)`, new answers as one `INSERT ... ON CONFLICT DO NOTHING` every 0.2 s
(or 512 rows), on their own connections, so neither waits on the other. Losing the server degrades to
the local cache with one warning: every answer is already in the local cache and in results*.jsonl,
so nothing paid for is lost. Every statement has a deadline (`TIMEOUT_S`): a server that hangs
(frozen, a dead network) degrades within seconds instead of stalling the run, and the cache reconnects
every `RETRY_S` until the server answers again; the answers made meanwhile (up to `BACKLOG_BYTES`,
serialised) are written then, so they are shared too.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from typing import Any

import orjson

from core.secrets import redact_url

log = logging.getLogger("evalsweep")

TABLE = "evalsweep_cache"
SCHEMA = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    key text PRIMARY KEY,
    model text NOT NULL,
    t double precision,
    value bytea NOT NULL
)"""
CLAIMS = """CREATE TABLE IF NOT EXISTS evalsweep_claims (
    key text PRIMARY KEY,
    owner text NOT NULL,
    expires timestamptz NOT NULL
)"""
OWNERS = """CREATE TABLE IF NOT EXISTS evalsweep_claim_owners (owner text PRIMARY KEY, seen timestamptz NOT NULL)"""
CLAIM_S = 3600.0  # a claim's longest life (a call's timeout times its attempts stays well under)
ALIVE_S = 20.0
"""A claimant says it is alive every ALIVE_S/4; its claims lapse ALIVE_S after it stops (killed, or its
host gone), so a waiter elsewhere takes the key over."""
_ALIVE = "INSERT INTO evalsweep_claim_owners VALUES (%s, now()) ON CONFLICT (owner) DO UPDATE SET seen = now()"
_LOCK_ID = 0x65766C73  # pg_advisory_xact_lock: concurrent first runs create the table once
TIMEOUT_S = 3.0  # a statement (or connect) not answered by then: the server is treated as lost
RETRY_S = 5.0  # while lost, a reconnect is tried this often
BACKLOG_BYTES = 64 << 20  # answers made while lost are kept for the server up to this much


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
        self._backlog: list[tuple[str, dict[str, Any]]] = []
        """Answers made (or not yet written) while the server was lost: written when it is back."""
        self._backlog_bytes = 0
        self._flusher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.down = False
        self._retry: asyncio.Task[None] | None = None
        self.owner = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self._alive: asyncio.Task[None] | None = None
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
            await self._write.execute(CLAIMS)
            await self._write.execute(OWNERS)

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
        pending, self._pending = self._pending, []
        self._keep(pending)
        self._drop(frozen=isinstance(e, TimeoutError))

    def _keep(self, batch: list[tuple[str, dict[str, Any]]]) -> None:
        """Hold answers for the server's return, up to BACKLOG_BYTES (beyond: local only, said once)."""
        for k, v in batch:
            size = len(k) + len(orjson.dumps(v))
            if self._backlog_bytes + size > BACKLOG_BYTES:
                if self._backlog_bytes <= BACKLOG_BYTES:
                    log.warning("shared cache %s: more than %d MB of answers made while it is unreachable; "
                                "later ones stay local", redact_url(self.url), BACKLOG_BYTES >> 20)
                self._backlog_bytes = BACKLOG_BYTES + 1
                return
            self._backlog.append((k, v))
            self._backlog_bytes += size

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
            backlog, self._backlog, self._backlog_bytes = self._backlog, [], 0
            log.warning("shared cache %s reachable again: sharing answers again (%d made meanwhile)",
                        redact_url(self.url), len(backlog))
            self._pending = backlog + self._pending
            if self._pending:
                self._spawn(self._write_pending())

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

    # --- in-flight claims: hosts sharing only Postgres pay once per key too -------------------------

    async def claim(self, keys: list[str]) -> list[str]:
        """Claim keys about to be called; returns those another process (on any host) is calling."""
        if self.down or not keys:
            return []
        try:
            mine = await deadline(self._claim(keys), TIMEOUT_S)
        except Exception as e:  # noqa: BLE001
            await self._lost(e)
            return []
        return [k for k in keys if k not in mine]

    async def _claim(self, keys: list[str]) -> set[str]:
        if self._alive is None:  # the owner row first: a claim whose owner is not seen alive is free
            await self._write.execute(_ALIVE, (self.owner,))
        cur = await self._write.execute(
            "INSERT INTO evalsweep_claims (key, owner, expires) "
            "SELECT unnest(%s::text[]), %s, now() + make_interval(secs => %s) "
            "ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires = excluded.expires "
            "WHERE evalsweep_claims.expires < now() OR evalsweep_claims.owner = excluded.owner OR NOT EXISTS "
            "(SELECT 1 FROM evalsweep_claim_owners o WHERE o.owner = evalsweep_claims.owner "
            "AND o.seen > now() - make_interval(secs => %s)) RETURNING key",
            (keys, self.owner, CLAIM_S, ALIVE_S),
        )
        if self._alive is None or self._alive.done():
            self._alive = asyncio.get_running_loop().create_task(self._say_alive())
        return {r[0] for r in await cur.fetchall()}

    async def _say_alive(self) -> None:
        """While this process holds claims: the owners' table says it lives."""
        while not self.down:
            await asyncio.sleep(ALIVE_S / 4)
            try:
                await deadline(self._write.execute(_ALIVE, (self.owner,)), TIMEOUT_S)
            except Exception as e:  # noqa: BLE001
                await self._lost(e)
                return

    async def release(self, keys: list[str]) -> None:
        if self.down or not keys:
            return
        try:
            await deadline(self._write.execute(
                "DELETE FROM evalsweep_claims WHERE owner = %s AND key = ANY(%s)", (self.owner, keys)), TIMEOUT_S)
        except Exception as e:  # noqa: BLE001
            await self._lost(e)

    # --- writes ----------------------------------------------------------------------------------

    def put(self, key: str, value: dict[str, Any]) -> None:
        if self.down:
            self._keep([(key, value)])
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
        if not batch:
            return
        if self.down:
            self._keep(batch)
            return
        i = 0
        try:
            while i < len(batch):  # (a backlog goes in parts of max_batch)
                part = batch[i : i + self._max_batch]
                await deadline(self._insert(part), TIMEOUT_S)
                i += len(part)
                self.written += len(part)
                await self.release([k for k, _ in part])  # readable now: a waiter on another host takes it
        except Exception as e:  # noqa: BLE001
            self._keep(batch[i:])  # kept for the server's return (ON CONFLICT DO NOTHING: a part twice is harmless)
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
        for t in (self._retry, self._alive):
            if t is not None:
                t.cancel()
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
