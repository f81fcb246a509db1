"""Batch mode: a model's calls go out as provider batches (half price, answers within 24 h) instead of
live calls, and survive a crash of the runner while the batches are in flight.

The scheduler hands each request to `Batcher.send` and awaits rows, exactly as for a live call. The
Batcher queues requests per model, submits a batch when a file is full or no request came for a short
idle time, polls it, and resolves every request's future from the results. Follow-up passes
(critique, judge) thus become the next batch round by themselves.

Crash safety: `batches.jsonl` in the run directory is a write-ahead journal. A batch's request keys
are written before it is submitted and its id right after creation, before anything counts as sent.
On resume, a request whose key is in a journaled batch waits for that batch (polled, or its results
downloaded again) instead of being sent twice. Whatever fails inside a batch (expired, errored,
cancelled, missing) falls back to a live call on the model's lanes: never lost.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from core.types import Request, Row
from providers.base import Completion, ProviderError
from providers.batches import batch_api
from runner.batch.journal import Batch, Journal, age, batch_errors, counts_text, load_journal
from runner.batch.plan import batch_lanes
from runner.calls import learned
from runner.calls.spend import paid
from runner.lanes import Lane
from runner.pool import ModelEntry
from runner.rows import answer_row, billed, contiguous, error_row, exhausted, exhausted_row
from runner.scheduler import Scheduler

log = logging.getLogger("evalsweep")
T = TypeVar("T")


@dataclass(slots=True)
class Result:
    """One sample's outcome inside a batch; `error` set = it failed there and goes live."""

    batch_id: str | None
    text: str | None = None
    finish: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    discount: float = 0.0
    latency: float = 0.0
    lane: str | None = None
    error: str | None = None
    usage: dict[str, Any] | None = None
    reported: float | None = None
    tool_calls: list[dict[str, Any]] | None = None
    """The answer's calls (Completion.tool_calls): a chain's next round is the next batch (JEEBench §4.2)."""
    n: int = 1
    """The samples of its call (the batch line): an answered row says them, as a live one does
    (runner.calls.call.rows_from), for runner.history's latency by samples."""


@dataclass
class _Queue:
    """Requests of one model waiting for the next batch."""

    lanes: list[Lane]
    api: Any
    max_requests: int
    max_bytes: int
    idle_s: float
    lines: list[bytes] = field(default_factory=list)
    keys: list[list[str]] = field(default_factory=list)
    nbytes: int = 0
    last: float = 0.0
    timer: asyncio.TimerHandle | None = None
    rr: int = 0


class Batcher:
    def __init__(self, sched: Scheduler, run_dir: Path) -> None:
        self.sched = sched
        self.batches = load_journal(run_dir)
        self.journal = Journal(run_dir)
        self.attached: dict[str, Batch] = {}
        for b in self.batches.values():
            for keys in b.lines.values():
                self.attached.update((k, b) for k in keys if k not in b.failed)
        self.waiting: dict[str, asyncio.Future[Result]] = {}
        self.ready: dict[str, Result] = {}
        self.queues: dict[str, _Queue] = {}
        self.live_only: dict[str, str] = {}
        self._apis: dict[str, Any] = {}
        self._watched: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- the scheduler's entry point ----------------------------------------------------------

    async def send(self, req: Request, m: ModelEntry, group: list[int], keys: dict[int, str]) -> list[Row]:
        if m.spend is not None:  # a spend ceiling (runner.calls.spend): worst case reserved at the live price,
            sent = all(keys[s] in self.attached or keys[s] in self.ready for s in group)  # unless sent before
            return await paid(m, req, group, keys, lambda: self._send(req, m, group, keys), sent)
        return await self._send(req, m, group, keys)

    async def _send(self, req: Request, m: ModelEntry, group: list[int], keys: dict[int, str]) -> list[Row]:
        why = self.live_only.get(m.cfg.name)
        if why is not None:
            return await self._rows(req, m, keys, {s: Result(None, error=why) for s in group})
        waits: dict[int, Result | asyncio.Future[Result]] = {}
        new: list[int] = []
        for s in group:
            k = keys[s]
            if (r := self.ready.pop(k, None)) is not None:
                waits[s] = r
            elif (f := self.waiting.get(k)) is not None:  # the same request is already in a batch
                waits[s] = f
            elif (b := self.attached.get(k)) is not None:  # sent before a restart: re-attach
                waits[s] = self._future(k)
                self._watch(b, m)
            else:
                new.append(s)
        if new:
            self._enqueue(req, m, new, keys, waits)
        results = {s: w if isinstance(w, Result) else await asyncio.shield(w) for s, w in waits.items()}
        return await self._rows(req, m, keys, results)

    async def _rows(
        self, req: Request, m: ModelEntry, keys: dict[int, str], results: dict[int, Result]
    ) -> list[Row]:
        sched, rows, retry = self.sched, [], []
        for s, r in results.items():
            if r.error is not None:
                retry.append(s)
                continue
            text = "" if r.text is None and r.tool_calls is not None else r.text  # calls alone answer (as live)
            usage = r.usage or {"input_tokens": r.input_tokens, "output_tokens": r.output_tokens}
            cost = r.reported  # a provider-reported cost is what was billed, discount included
            if cost is None:
                cost = m.cost(r.input_tokens, r.output_tokens, usage.get("cached_input_tokens"),
                              usage.get("cache_write_tokens"))
                cost = None if cost is None else cost * (1.0 - r.discount)
            if m.profile is not None and exhausted(text, r.finish, m.profile.thinks):
                row = exhausted_row(req, s, keys[s], usage, cost, 1, r.lane, r.finish)
            elif text is None:  # as on the live path: a response without text is an error row
                msg = f"no text in the response (finish_reason={r.finish})"
                kind = "fatal" if r.finish in ("content_filter", "refusal") else "transient"
                row = error_row(req, s, keys[s], msg, kind, 1, r.lane)
                row["usage"], row["cost_usd"], row["finish_reason"] = usage, cost, r.finish
                row["batch_id"] = r.batch_id
            else:
                args = (req, s, keys[s], text, usage, cost, r.latency, 1)
                row = answer_row(*args, cached=False, finish=r.finish, lane=r.lane)
                calls = {} if r.tool_calls is None else {"tool_calls": r.tool_calls}
                row.update(calls)
                if sched.cache is not None and m.provider_cacheable:
                    value = {"text": text, "usage": usage, "cost_usd": cost, "finish_reason": r.finish, **calls}
                    sched.cache.put(
                        keys[s], value | {"model": m.model_id, "t": row["t"], "batch_id": r.batch_id}
                    )
                row["batch_id"] = r.batch_id
            row["n"] = r.n  # every answered row, as rows_from writes it
            rows.append(row)
        if retry:  # failed inside a batch: a live call on the model's lanes
            groups = contiguous(sorted(retry)) if m.supports_n else [[s] for s in sorted(retry)]
            for live in await asyncio.gather(*(sched._send(req, m, g, keys) for g in groups)):
                for row in live:
                    row["batch_fallback"] = results[row["sample"]].error
                rows.extend(live)
        return rows

    # --- queueing and submission -------------------------------------------------------------

    def _future(self, key: str) -> asyncio.Future[Result]:
        f = self.waiting[key] = asyncio.get_running_loop().create_future()
        return f

    def _queue(self, m: ModelEntry) -> _Queue:
        q = self.queues.get(m.cfg.name)
        if q is None:
            lanes = batch_lanes(m)
            ep = lanes[0].endpoint
            api = self._api(lanes[0])
            q = _Queue(
                lanes,
                api,
                min(api.max_requests, ep.batch_max_requests or api.max_requests),
                min(api.max_bytes, ep.batch_max_bytes or api.max_bytes) - 64,  # room for the JSON wrapper
                ep.batch_idle_s,
            )
            self.queues[m.cfg.name] = q
        return q

    def _api(self, lane: Lane) -> Any:
        api = self._apis.get(lane.endpoint.name)
        if api is None:
            api = self._apis[lane.endpoint.name] = batch_api(lane.endpoint)
        return api

    def _enqueue(
        self, req: Request, m: ModelEntry, samples: list[int], keys: dict[int, str], waits: dict
    ) -> None:
        q = self._queue(m)
        groups = contiguous(samples) if q.api.supports_n and m.supports_n else [[s] for s in samples]
        for g in groups:
            ks = [keys[s] for s in g]
            try:
                line = q.api.line(ks[0], req, m.model_id, len(g), learned.params(m), m.shape)
            except Exception as e:  # bad input (a missing image...): the live path writes the error row
                waits.update((s, Result(None, error=f"not batched: {type(e).__name__}: {e}")) for s in g)
                continue
            size = len(line) + 1
            if size > q.max_bytes:
                waits.update((s, Result(None, error=f"{size:,} bytes: over the batch size limit")) for s in g)
                continue
            if q.nbytes + size > q.max_bytes:
                self._flush(m.cfg.name, q)
            q.lines.append(line)
            q.keys.append(ks)
            q.nbytes += size
            waits.update((s, self._future(k)) for s, k in zip(g, ks, strict=True))
            if len(q.lines) >= q.max_requests:
                self._flush(m.cfg.name, q)
        loop = asyncio.get_running_loop()
        q.last = loop.time()
        if q.timer is None and q.lines:
            q.timer = loop.call_later(q.idle_s, self._idle, m.cfg.name, q)

    def _idle(self, model: str, q: _Queue) -> None:
        q.timer = None
        loop = asyncio.get_running_loop()
        wait = q.last + q.idle_s - loop.time()
        if wait > 0.001:
            q.timer = loop.call_later(wait, self._idle, model, q)
        elif q.lines:
            self._flush(model, q)

    def _flush(self, model: str, q: _Queue) -> None:
        lines, keys = q.lines, q.keys
        q.lines, q.keys, q.nbytes = [], [], 0
        if q.timer is not None:
            q.timer.cancel()
            q.timer = None
        self._submit(model, q, lines, keys)

    def _submit(self, model: str, q: _Queue, lines: list[bytes], keys: list[list[str]]) -> None:
        """A new batch on the next of the model's batch keys that still has quota; with none left,
        its requests go the live way, where the scheduler gives them their "out of quota" rows."""
        usable = [ln for ln in q.lanes if not ln.stopped]
        if not usable:
            why = self.live_only[model] = q.lanes[0].stopped or "out of quota"
            for k in (k for ks in keys for k in ks):
                f = self.waiting.pop(k, None)
                if f is not None and not f.done():
                    f.set_result(Result(None, error=why))
            return
        lane = usable[q.rr % len(usable)]
        q.rr += 1
        b = Batch(f"es-{uuid.uuid4().hex[:16]}", model, lane.name, {ks[0]: ks for ks in keys}, time.time())
        self.batches[b.local] = b
        self.journal.submit(b)  # write-ahead: the keys are on disk before a byte goes to the provider
        self._watched.add(b.local)
        self._spawn(self._run(b, lane, q.api, lines))

    def _watch(self, b: Batch, m: ModelEntry) -> None:
        """Poll (or download again) a batch from the journal that this run's requests wait for."""
        if b.local in self._watched:
            return
        self._watched.add(b.local)
        lanes = batch_lanes(m) or m.lanes
        lane = next((ln for ln in lanes if ln.name == b.lane), lanes[0])
        log.info(
            "re-attaching to batch %s of %s (%s, %d requests)", b.id or b.local, b.model, b.state, b.n_keys
        )
        self._spawn(self._run(b, lane, self._api(lane), None))

    def _spawn(self, coro: Awaitable[None]) -> None:
        t = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    # --- one batch's life: create → poll → download → resolve ----------------------------------

    async def _run(self, b: Batch, lane: Lane, api: Any, lines: list[bytes] | None) -> None:
        ep, key = lane.endpoint, lane.api_key
        seen: set[str] = set()
        try:
            if b.id is None:
                if lines is not None:
                    b.id = await self._create(b, lane, api, lines)
                    lines = None
                else:  # killed between the create and the journal's record of its id
                    b.id = await api.find(b.local, key)
                    if b.id is None:
                        raise ProviderError("its submission was never confirmed")
                self.journal.created(b)
                b.state = "created"
                n = f"{len(b.lines)} requests" + (f" ({b.n_keys} samples)" if b.n_keys > len(b.lines) else "")
                log.info("batch %s: %s of %s submitted via %s", b.id, n, b.model, lane.name)
                await asyncio.sleep(ep.batch_poll_s)
            while not (st := await self._poll(b, lane, api)).ended:
                await asyncio.sleep(ep.batch_poll_s)
            n_of = {cid: len(ks) for cid, ks in b.lines.items()}

            async def download() -> None:
                async for cid, comp, err in api.results(st, key, n_of):
                    if cid in b.lines and cid not in seen:
                        seen.add(cid)
                        self._deliver(b, lane, b.lines[cid], comp, err)

            await self._retry(ep, download)
            missing = f"missing from the results of batch {b.id} ({st.state}{batch_errors(st.raw)})"
            for cid in b.lines.keys() - seen:
                self._deliver(b, lane, b.lines[cid], None, missing)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the batch as a whole failed: what it still owes goes live
            msg = lane.scrub(str(e) if isinstance(e, ProviderError) else f"{type(e).__name__}: {e}")[:300]
            if isinstance(e, ProviderError) and e.quota:  # the key has no credit: never again on it
                lane.stop(msg)
                if self._resubmit(b, lines):
                    return
                msg = lane.stopped or msg
            if b.id is None and isinstance(e, ProviderError) and e.status in (404, 405, 501):
                self.live_only[b.model] = f"no batch API at {ep.name}: {msg}"
                log.warning("%s: endpoint %s has no batch API (%s); calls go live", b.model, ep.name, msg)
            log.warning("batch %s of %s failed: %s; its requests go live", b.id or b.local, b.model, msg)
            b.state = "failed" if b.id is None else b.state
            for cid in b.lines.keys() - seen:
                self._deliver(b, lane, b.lines[cid], None, f"batch {b.id or b.local} failed: {msg}")
        b.ended = True
        self.journal.ended(b)
        log.info("batch %s of %s %s: %s", b.id or b.local, b.model, b.state, counts_text(b))

    def _resubmit(self, b: Batch, lines: list[bytes] | None) -> bool:
        """A batch its key's quota refused before it existed goes to the model's next batch key (at
        the same discount); False when it was created already or no key with quota is left."""
        q = self.queues.get(b.model)
        if b.id is not None or lines is None or q is None or all(ln.stopped for ln in q.lanes):
            return False
        b.state, b.ended = "failed", True
        b.failed.update(k for ks in b.lines.values() for k in ks)
        self.journal.ended(b)
        log.warning("batch %s of %s: key out of quota; resubmitted on the model's next key", b.local, b.model)
        self._submit(b.model, q, lines, list(b.lines.values()))
        return True

    async def _create(self, b: Batch, lane: Lane, api: Any, lines: list[bytes]) -> str:
        """Submit, retrying refusals; after a failure without an answer, look for the batch first."""
        unsure = False

        async def once() -> str:
            nonlocal unsure
            if unsure and (found := await api.find(b.local, lane.api_key)):
                return str(found)
            try:
                return str(await api.submit(lines, lane.api_key, b.local))
            except ProviderError as e:
                unsure = unsure or e.status is None
                raise

        return await self._retry(lane.endpoint, once)

    async def _poll(self, b: Batch, lane: Lane, api: Any) -> Any:
        """A status; network trouble is waited out (a night's batch is not dropped for a blip)."""
        while True:
            try:
                st = await api.status(b.id, lane.api_key)
                break
            except ProviderError as e:
                if not e.retryable:
                    raise
                log.warning("batch %s: status check failed (%s); retrying", b.id, lane.scrub(str(e))[:200])
                await asyncio.sleep(lane.endpoint.batch_poll_s)
        if st.state != b.state or st.counts != b.counts:
            if st.state != b.state:
                log.info("batch %s of %s: %s %s", b.id, b.model, st.state, st.counts)
            b.state, b.counts = st.state, st.counts
            self.journal.state(b)
        return st

    async def _retry(self, ep: Any, fn: Callable[[], Awaitable[T]]) -> T:
        delay = max(ep.retry_initial_s, 0.01)
        for attempt in range(1, ep.max_attempts + 1):
            try:
                return await fn()
            except ProviderError as e:
                if not e.retryable or attempt == ep.max_attempts:
                    raise
                await asyncio.sleep(max(e.retry_after or 0.0, delay * random.random()))
                delay = min(delay * 2, ep.retry_max_s)
        raise AssertionError("unreachable")

    def _deliver(
        self, b: Batch, lane: Lane, keys: list[str], comp: Completion | None, err: str | None
    ) -> None:
        latency = time.time() - b.t
        if comp is None:
            results = [Result(b.id, error=lane.scrub(err or "failed"), lane=lane.name) for _ in keys]
            b.failed.update(keys)
        else:
            n = len(keys)
            texts = (comp.texts + [None] * n)[:n]
            finish = comp.finish_reasons + [None] * (n - len(comp.finish_reasons))
            us = billed(comp, texts)
            disc = lane.endpoint.batch_discount
            rep = None if comp.reported_cost is None else comp.reported_cost / n
            calls = (comp.tool_calls + [None] * n)[:n]
            results = [
                Result(b.id, texts[i], finish[i], us[i]["input_tokens"], us[i]["output_tokens"], disc, latency,
                       lane.name, usage=us[i], reported=rep, tool_calls=calls[i], n=n)
                for i in range(n)
            ]
        for k, r in zip(keys, results, strict=True):
            if self.attached.get(k) is b:
                del self.attached[k]
            f = self.waiting.pop(k, None)
            if f is not None and not f.done():
                f.set_result(r)
            elif f is None and r.error is None:  # re-downloaded for a request that has not come yet
                self.ready[k] = r

    # --- progress and shutdown ---------------------------------------------------------------

    def describe(self, model: str) -> str:
        """`40 queued · 2 in_progress (700/1,200 done, oldest 14m) · 1 ended`: live view and log."""
        mine = [b for b in self.batches.values() if b.model == model and b.local in self._watched]
        active, done = [b for b in mine if not b.ended], [b for b in mine if b.ended]
        queued = len(self.queues[model].lines) if model in self.queues else 0
        parts = [f"{queued} queued"] if queued else []
        if active:
            oldest = age(time.time() - min(b.t for b in active))
            states = ",".join(sorted({b.state for b in active}))
            total = sum(b.counts.get("total") or len(b.lines) for b in active)
            n_done = sum(b.counts.get("done", 0) for b in active)
            parts.append(f"{len(active)} {states} ({n_done:,}/{total:,} done, oldest {oldest})")
        if done:
            parts.append(f"{len(done)} ended")
        return " · ".join(parts)

    async def close(self) -> None:
        for q in self.queues.values():
            if q.timer is not None:
                q.timer.cancel()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for api in self._apis.values():
            await api.close()
        self.journal.close()
