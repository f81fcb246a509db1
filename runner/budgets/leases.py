"""Leased work for `evalsweep run ... --out DIR --join`: any number of workers, on any hosts sharing DIR,
split one run's (model, item-shard) units through leases in Postgres (`[shared] cache_url`).

A unit is claimed with `FOR UPDATE SKIP LOCKED` (two workers never get the same free unit), held by a
lease its worker renews every lease_s/3, and marked done when all its items have their rows. A worker
that may not send (`may_send`: its key budgets are in a Redis outage and it held none of their leases)
claims nothing, and after HANDBACK_S hands its unit back: the unit's calls, none on the wire, are
cancelled without rows and its lease freed, so the workers that may send finish it. A worker
whose calls of a model's key wait for a lease (`starved`: beyond the key's cap, none of its calls on
the wire) longer than STARVED_S hands its units of that model back the same way, and claims one again
only when a lease is likely (`likely`: it holds one, or nobody queues and the key's busy processes are
fewer than its cap): with more workers than the cap, the units go to the workers that can send instead
of every worker waiting its turn with units in hand (#40). A worker
killed with SIGKILL stops renewing: its units become claimable when the lease expires, and the worker
that takes one over first re-reads every worker's results file, so nothing finished is sent again
(and the shared cache answers what finished but had no row yet). Shards are SHA-256 of the item id,
never Python's `hash()` (salted per process). A worker leaves when every unit of its models is done.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from cache.pg import RETRY_S, TIMEOUT_S, connect_kwargs, deadline
from runner.budgets import redis_turns as turns
from runner.config import ConfigError, redact_url

log = logging.getLogger("evalsweep")

SHARDS = 32
HANDBACK_S = 2.0
"""How long a worker that may not send keeps its unit before handing it back."""
LOOK_S = 0.1  # how often the worker looks at its budgets (in memory: no round trip)
STARVED_S = 2 * LOOK_S
"""How long a worker keeps its units while all their calls wait for a lease of the key: well under a
turn (turns.ROTATE_S). A worker beyond the cap must give its units back before a turn reaches it: one
that takes a turn idles another worker, whose calls then wait in its place, and with calls about as
long as a turn the workers took turns for ever, each holding units and idle part of the time."""
JOIN_FILE = "join.json"
SCHEMA = """CREATE TABLE IF NOT EXISTS evalsweep_units (
    run text NOT NULL,
    model text NOT NULL,
    shard int NOT NULL,
    owner text,
    expires timestamptz,
    claims int NOT NULL DEFAULT 0,
    done boolean NOT NULL DEFAULT false,
    PRIMARY KEY (run, model, shard)
)"""
_LOCK_ID = 0x65766C74


def shard_of(item: str, shards: int = SHARDS) -> int:
    return int.from_bytes(hashlib.sha256(item.encode()).digest()[:8], "big") % shards


def worker_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def results_name() -> str:
    """Each worker appends to its own file: appends from several NFS clients are not atomic."""
    return f"results.{worker_name()}.jsonl"


def join_id(run_dir: Path) -> str:
    """The run's id in the leases table: created once, by whichever worker comes first (O_EXCL)."""
    path = run_dir / JOIN_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        for _ in range(50):  # the creator may not have written it yet
            data = path.read_bytes()
            if data.endswith(b"\n"):
                return str(orjson.loads(data)["run"])
            import time

            time.sleep(0.02)
        raise ConfigError(f"{path}: unreadable; remove it only if no worker is running") from None
    os.write(fd, orjson.dumps({"run": uuid.uuid4().hex, "shards": SHARDS}) + b"\n")
    os.close(fd)
    return join_id(run_dir)


class Leases:
    """One worker's view of a run's units: claim, heartbeat, finish."""

    def __init__(self, url: str, run: str, lease_s: float) -> None:
        self.url = url
        self.run = run
        self.lease_s = lease_s
        self.owner = f"{worker_name()}-{uuid.uuid4().hex[:6]}"
        self._conn: Any = None
        self._lock = asyncio.Lock()
        self._beat: asyncio.Task[None] | None = None
        self.on_takeover: Callable[[], None] | None = None
        """Called before working on a unit another worker had claimed: refresh what is done."""
        self.claimed = 0
        self.taken_over = 0
        self._open: dict[tuple[str, int], int] = {}
        self._current: dict[str, tuple[str, int]] = {}
        self._finishing: set[asyncio.Task[None]] = set()
        self.may_send: Callable[[str], bool] = lambda _model: True
        """Whether a model's calls can go out now (False: every lane of it is silent in a Redis outage)."""
        self._tasks: dict[tuple[str, int], set[asyncio.Task[Any]]] = {}
        self._handed: set[tuple[str, int]] = set()
        self._cancelled: dict[tuple[str, int], set[asyncio.Task[Any]]] = {}
        self.handed_back = 0
        self._watch: asyncio.Task[None] | None = None
        self.budgets: Callable[[str], list[Any]] = lambda _model: []
        """The budgets of a model's lanes (runner.budgets.redis_turns reads their queue state)."""

    async def open(self, models: Iterable[str]) -> Leases:
        import psycopg

        try:
            self._conn = await psycopg.AsyncConnection.connect(self.url, **connect_kwargs())
            async with self._conn.transaction():
                await self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
                await self._conn.execute(SCHEMA)
            async with self._conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO evalsweep_units (run, model, shard) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                    [(self.run, m, s) for m in models for s in range(SHARDS)],
                )
        except Exception as e:  # noqa: BLE001
            raise ConfigError(f"--join: cannot use the leases table at {redact_url(self.url)}: {e}") from None
        self._beat = asyncio.get_running_loop().create_task(self._heartbeat())
        self._watch = asyncio.get_running_loop().create_task(self._hand_back_when_silent())
        return self

    async def _q(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """One statement, with a deadline; a server lost or frozen is waited out, never a crash: the
        worker keeps its place and resumes when Postgres answers again (its leases may lapse meanwhile,
        and another worker may take a unit over: the results it re-reads make that free)."""
        warned = False
        while True:
            try:
                async with self._lock:
                    return await deadline(self._run(sql, args), TIMEOUT_S)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001
                if not warned:
                    log.warning("--join: the leases at %s are unreachable (%s); waiting for Postgres",
                                redact_url(self.url), str(e).strip().splitlines()[0] if str(e).strip() else
                                type(e).__name__)
                    warned = True
                await asyncio.sleep(RETRY_S)
                await self._reopen()
                if warned and self._conn is not None:
                    log.warning("--join: the leases at %s answer again", redact_url(self.url))

    async def _run(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        cur = await self._conn.execute(sql, args)
        return await cur.fetchall() if cur.description else []

    async def _reopen(self) -> None:
        import psycopg

        self._conn = None  # abandoned to its pending statement (closing it could wait on the server)
        try:
            self._conn = await deadline(psycopg.AsyncConnection.connect(self.url, **connect_kwargs()), TIMEOUT_S)
        except Exception:  # noqa: BLE001 - still down: the next statement waits again
            self._conn = None

    async def claim(self, model: str) -> tuple[int, bool] | None | bool:
        """(shard, taken_over) for a free or expired unit; True if units remain with live leases
        elsewhere (wait and ask again); None when every unit of the model is done."""
        rows = await self._q(
            "UPDATE evalsweep_units u SET owner = %s, expires = now() + make_interval(secs => %s), "
            "claims = u.claims + 1 FROM (SELECT run, model, shard FROM evalsweep_units "
            "WHERE run = %s AND model = %s AND NOT done AND (owner IS NULL OR expires < now()) "
            "ORDER BY shard LIMIT 1 FOR UPDATE SKIP LOCKED) f "
            "WHERE u.run = f.run AND u.model = f.model AND u.shard = f.shard RETURNING u.shard, u.claims",
            (self.owner, self.lease_s, self.run, model),
        )
        if rows:
            self.claimed += 1
            shard, claims = rows[0]
            if claims > 1:
                self.taken_over += 1
            return shard, claims > 1
        left = await self._q(
            "SELECT count(*) FROM evalsweep_units WHERE run = %s AND model = %s AND NOT done", (self.run, model)
        )
        return True if left[0][0] else None

    async def finish(self, model: str, shard: int) -> None:
        await self._q(
            "UPDATE evalsweep_units SET done = true, owner = NULL WHERE run = %s AND model = %s AND shard = %s",
            (self.run, model, shard),
        )

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                await self._q(
                    "UPDATE evalsweep_units SET expires = now() + make_interval(secs => %s) "
                    "WHERE owner = %s AND NOT done",
                    (self.lease_s, self.owner),
                )
            except Exception as e:  # noqa: BLE001 - our units will expire; others finish them
                log.warning("--join: lease heartbeat failed (%s); other workers may take over our units",
                            redact_url(str(e), [self.url]))

    def _starved(self, model: str) -> bool:
        bs = self.budgets(model)
        return bool(bs) and all(turns.starved(b) for b in bs)

    def _likely(self, model: str) -> bool:
        """A call of the model would get a lease soon on one of its lanes (any lane may send it)."""
        bs = self.budgets(model)
        return not bs or any(turns.likely(b) for b in bs)

    async def _hand_back_when_silent(self) -> None:
        """Every unit this worker is working on while its model may not send for HANDBACK_S, or while
        all its calls of the model wait for a lease of the key for STARVED_S: its calls (none on the wire:
        a silent lane has no call running, a starved one none holding a lease) are cancelled, no row
        written, and its lease freed at once for a worker that may send (the taker re-reads every
        worker's rows)."""
        silent_since: dict[str, float] = {}
        starved_since: dict[str, float] = {}
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(LOOK_S)
            now = loop.time()
            models = {u[0] for u in self._open if u not in self._handed}
            for since in (silent_since, starved_since):  # (a model with no unit open starts afresh)
                for model in [m for m in since if m not in models]:
                    del since[model]
            for model in models:
                if self.may_send(model):
                    silent_since.pop(model, None)
                elif now - silent_since.setdefault(model, now) >= HANDBACK_S:
                    await self._give_up(model, "this worker may not send (Redis unreachable, no lease of the "
                                        "key held); workers that may send finish it")
                    continue
                if not self._starved(model):
                    starved_since.pop(model, None)
                elif now - starved_since.setdefault(model, now) >= STARVED_S:
                    starved_since.pop(model, None)
                    await self._give_up(model, "its calls waited for a lease of the key, none on the wire; "
                                        "workers holding leases finish it")
                    await asyncio.gather(*(turns.withdraw(b) for b in self.budgets(model)))

    async def _give_up(self, model: str, why: str) -> None:
        """Every open unit of the model handed back: all their calls cancelled first, with no await in
        between (none can get a lease and go on the wire meanwhile), then the leases freed."""
        units = [u for u in self._open if u[0] == model and u not in self._handed]
        counts = [self._cancel(u) for u in units]
        for unit, n in zip(units, counts, strict=True):
            await self._free(unit)
            log.warning("--join: %s unit %d handed back (%d calls not sent): %s", *unit, n, why)
        pending = [t for u in units for t in self._cancelled.get(u, ()) if not t.done()]
        if pending:  # (their waits for a lease end first: the budget then knows they wait no more)
            await asyncio.wait(pending, timeout=1.0)

    def _cancel(self, unit: tuple[str, int]) -> int:
        self._handed.add(unit)
        self.handed_back += 1
        tasks = self._tasks.pop(unit, set())
        for t in tasks:
            t.cancel()
        self._cancelled[unit] = tasks
        return len(tasks)

    async def _free(self, unit: tuple[str, int]) -> None:
        # (_q waits out a Postgres outage; the heartbeat renews only units still owned by us)
        await self._q(
            "UPDATE evalsweep_units SET owner = NULL, expires = NULL "
            "WHERE run = %s AND model = %s AND shard = %s AND owner = %s AND NOT done",
            (self.run, *unit, self.owner),
        )

    async def _others_work(self, model: str) -> bool:
        """Some other live worker holds a unit of the model (so this one may stay out of the key's way)."""
        rows = await self._q("SELECT count(*) FROM evalsweep_units WHERE run = %s AND model = %s AND NOT done "
                             "AND owner IS NOT NULL AND owner <> %s AND expires > now()",
                             (self.run, model, self.owner))
        return bool(rows[0][0])

    async def requests(
        self, model: str, build: Callable[[], Iterable[Any]], stopping: Callable[[], bool]
    ) -> AsyncIterator[Any]:
        """The model's requests, unit by unit as this worker wins them. The scheduler reports each
        launched task with `started`; a unit is marked done once it was iterated to its end and all
        its tasks (follow-ups included) have ended. Stopping early leaves the unit to lapse."""
        while not stopping():
            if not self.may_send(model):  # silent in a Redis outage: take no work others could do
                left = await self._q("SELECT count(*) FROM evalsweep_units WHERE run = %s AND model = %s "
                                     "AND NOT done", (self.run, model))
                if not left[0][0]:
                    return
                await asyncio.sleep(0.5)
                continue
            if not self._likely(model) and await self._others_work(model):  # beyond the key's cap: the
                await asyncio.sleep(0.5)  # workers that hold its leases take the units (one always works)
                continue
            got = await self.claim(model)
            if got is None:
                return
            if got is True:  # the rest is leased by live workers: wait for them to finish or die
                await asyncio.sleep(min(1.0, self.lease_s / 4))
                continue
            shard, taken_over = got
            if taken_over and self.on_takeover is not None:
                self.on_takeover()
            unit = (model, shard)
            if unit in self._handed:  # ours again (Redis is back): its cancelled calls end first
                await asyncio.gather(*self._cancelled.pop(unit, set()), return_exceptions=True)
                self._handed.discard(unit)
            self._open[unit] = 1  # held open until every request of the unit is launched
            self._current[model] = unit
            for req in build():
                if unit in self._handed:
                    break
                if shard_of(req.item) == shard:
                    yield req
            self._ended(unit)

    def started(self, model: str, task: asyncio.Task[Any]) -> None:
        unit = self._current[model]
        if unit in self._handed:  # launched after the hand-back: never runs
            task.cancel()
            return
        self._open[unit] += 1
        self._tasks.setdefault(unit, set()).add(task)
        task.add_done_callback(lambda t: (self._tasks.get(unit, set()).discard(t), self._ended(unit)))

    def _ended(self, unit: tuple[str, int]) -> None:
        self._open[unit] -= 1
        if self._open[unit] == 0:
            del self._open[unit]
            if unit in self._handed:  # another worker finishes it
                return
            t = asyncio.get_running_loop().create_task(self.finish(*unit))
            self._finishing.add(t)
            t.add_done_callback(self._finishing.discard)

    async def aclose(self) -> None:
        if self._finishing:  # marking units done waits out a short outage, not a permanent one
            await asyncio.wait(self._finishing, timeout=3 * RETRY_S)
        if self._beat is not None:
            self._beat.cancel()
        if self._watch is not None:
            self._watch.cancel()
        if self._conn is not None:
            try:  # a lost server is not waited for here: our leases lapse by themselves
                await deadline(self._run(
                    "UPDATE evalsweep_units SET owner = NULL, expires = NULL WHERE owner = %s AND NOT done",
                    (self.owner,),
                ), TIMEOUT_S)
                # A finished run's units are of no more use (a late worker re-creates and re-reads
                # them, finding every row done): the table holds only runs in progress.
                await deadline(self._run(
                    "DELETE FROM evalsweep_units WHERE run = %s AND NOT EXISTS "
                    "(SELECT 1 FROM evalsweep_units WHERE run = %s AND NOT done)",
                    (self.run, self.run),
                ), TIMEOUT_S)
            except Exception:  # noqa: BLE001
                pass
            try:
                await deadline(self._conn.close(), 1.0)
            except Exception:  # noqa: BLE001
                pass


async def open_leases(run: Any, shared: Any) -> Leases:
    """A --join worker's leases on its run's units; taking over a dead worker's unit re-reads what
    every worker has finished, so none of it is sent again."""
    from runner.rowindex import index

    limit = run.spec.limit
    leases = await Leases(shared.cache_url, f"{join_id(run.run_dir)}:limit={limit}", shared.lease_s).open(
        run.models
    )

    def refresh() -> None:
        run.done.update(index(run.writer.path, run.partial)[0])

    leases.on_takeover = refresh
    log.info("[%s] --join: worker %s, results in %s", run.name, leases.owner, run.writer.path.name)
    return leases
