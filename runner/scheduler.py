"""The scheduler: lazily turns suite requests into calls on lanes, rows in results.jsonl, and follow-ups.

One stream per (run, model) pulls requests from its suite generator only as fast as its window of
in-flight items frees up, so a million-call sweep holds at most a few thousand tasks, and a slow or
failing model only ever holds up its own stream. The scheduler knows neither HTTP (providers do) nor
benchmarks (suites do).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from cache.key import cache_keys
from cache.store import AsyncCache
from core.types import Request, Row, replaced, row_identity
from runner import history
from runner.calls import learned
from runner.calls.call import Breaker, send
from runner.calls.fanout import WINDOW, Fanout
from runner.calls.gate import REFUSED, Gate, label
from runner.calls.halt import HALTED
from runner.lanes import WIRE
from runner.pool import ModelEntry
from runner.results import Loc, read_at
from runner.rowindex import walked_bit
from runner.rows import contiguous, error_row, hit_row
from runner.state import RunCtx, Stats

log = logging.getLogger("evalsweep")

STAGGER_S = 0.05
"""At most this long before the next stream starts while one still skips finished rows (see `run`)."""
PREFETCH = 128
"""Requests whose cache keys are looked up in one query (~2 us a key instead of ~11 us one by one)."""
Looked = dict[int, tuple[str, dict[str, Any] | None]]
"""A request's samples still to answer -> (cache key, the local cache's answer or None)."""


class Scheduler:
    def __init__(
        self,
        models: dict[str, ModelEntry],
        cache: AsyncCache | None,
        *,
        refresh: bool = False,
        window: int = 1024,
        batch_window: int = 20_000,
        batch_total: int = 200_000,
    ) -> None:
        self.models = models
        self.cache = cache
        self.refresh = refresh
        self.window = window
        self.batch_window = batch_window
        self.batch_total = batch_total
        """Items in flight per batch-mode stream, and over all of them (~10 KB each): a batch holds
        thousands of items, each waiting for hours; the total share keeps a 45-model sweep in RAM."""
        self._batch_streams = 1
        self.stopping = False
        self.dropped = 0
        """Work a stop left undone (requests not launched, follow-ups not made): 0 after a Ctrl-C means
        every planned row was already in or finished within the grace period."""
        self.fanout = Fanout()
        """A shared prompt prefix's first call before its siblings (runner.calls.fanout)."""
        self.breakers = {name: Breaker(m.cfg.max_consecutive_failures) for name, m in models.items()}
        self.gates = {name: Gate(label(m)) for name, m in models.items()}
        """Per called model: its calls wait for its first answer, and stop at a refusal (runner.calls.gate)."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self.on_error: Callable[[RunCtx, Row], None] | None = None
        self.fault: str | None = None
        """Why the run stopped by a fault of ours (disk full, a broken suite): the run is `aborted`."""

    # --- driving -------------------------------------------------------------------------------

    async def run(self, runs: list[RunCtx]) -> None:
        """One stream per (run, model), started one after another: the next starts once the last has
        launched a call, replayed an answer or ended (or after `STAGGER_S`), and a run's streams once its
        finished rows are read (`RunCtx.loaded`). Started all at once, every stream would skip its
        finished rows before any call (a round of 135 streams' chunks between each step of a call)."""
        self._batch_streams = max(1, sum(self._batched(r, m) for r in runs for m in r.models))
        streams = []
        # Runs with follow-ups first: a chain's critique cannot start before its answer ends, so its
        # answers must queue on a shared lane ahead of the same model's single calls (each kind's
        # calls go in arrival order), not behind them with the critiques left for the lane's tail.
        for r in sorted(runs, key=lambda r: not r.has_follow_up):
            if r.loaded is not None:
                await r.loaded.wait()
            for m in r.models:
                going = asyncio.Event()
                streams.append(asyncio.create_task(self._stream(r, m, going)))
                if not self.stopping:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(going.wait(), STAGGER_S)
        await asyncio.gather(*streams, return_exceptions=False)

    def stop(self) -> None:
        """Stop launching work: calls not yet sent (waiting for a pacing slot, a lease or a retry) end
        as skipped rows; calls on the wire finish (or are cancelled by `cancel`)."""
        self.stopping = True
        for m in self.models.values():
            for lane in m.lanes:
                lane.halt()

    def on_the_wire(self) -> int:
        """Calls sent and not yet answered (what a stop's grace period waits for)."""
        return sum(ln.in_flight for ln in {id(ln): ln for m in self.models.values() for ln in m.lanes}.values())

    def abort(self, why: str) -> None:
        """A fault of ours (a failed write...): stop launching calls; in-flight ones finish into memory."""
        if self.fault is None:
            self.fault = why
            log.error("stopping: %s", why)
        self.stop()

    def cancel(self) -> None:
        for t in list(self._tasks):
            t.cancel()

    async def _stream(self, run: RunCtx, model: str, going: asyncio.Event | None = None) -> None:
        going = going or asyncio.Event()
        try:
            await self._streamed(run, model, going)
        finally:
            going.set()

    async def _streamed(self, run: RunCtx, model: str, going: asyncio.Event) -> None:
        """`going` is set at the stream's first call or replayed answer (`run` starts the next)."""
        if run.loaded is not None:  # never a request before the run's finished rows are known
            await run.loaded.wait()
        if self.stopping:  # stopped (or its run failed to load) before it began: nothing launched
            self.dropped += 1
            return
        entry = self.models[model]
        # As many items in flight as the lanes take at once: more would only queue inside the lanes,
        # each a waiting task (cache hits need no slot at all)
        width = max(1, min(self.window, sum(lane.max_concurrency for lane in entry.lanes)))
        if self._batched(run, model):  # items wait hours for their batch
            width = min(self.batch_window, max(1000, self.batch_total // self._batch_streams))
        window = asyncio.Semaphore(width)
        WINDOW.set((window, width))  # a call waiting for its prefix group's leader lends its slot (runner.calls.fanout)
        tasks: set[asyncio.Task[Any]] = set()
        try:
            async for chunk in self._planned(run, model):
                for req, pre in chunk:
                    if self.stopping:
                        self.dropped += 1
                        break
                    if pre is not None and self._replay(run, req, pre):
                        if pre:
                            going.set()
                        continue  # answered from the cache: no task, no window slot
                    await window.acquire()
                    if self.stopping:
                        window.release()
                        self.dropped += 1
                        break
                    t = asyncio.create_task(self._item(run, req, pre))
                    going.set()
                    if run.leases is not None:
                        run.leases.started(model, t)
                    tasks.add(t)
                    self._tasks.add(t)
                    t.add_done_callback(
                        lambda t: (tasks.discard(t), self._tasks.discard(t), window.release())
                    )
                if self.stopping:
                    self.dropped += 1  # (more chunks may follow)
                    break
                await asyncio.sleep(0)  # a replay answers whole chunks at once: let the loop breathe
        except Exception as e:  # a suite that fails mid-build stops the run, never silently
            log.exception("building %s requests for %s failed", run.name, model)
            self.abort(f"{run.name}: building requests for {model} failed: {type(e).__name__}: {e}")
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _planned(self, run: RunCtx, model: str) -> AsyncIterator[list[tuple[Request, Looked | None]]]:
        """The stream's requests for `model` in chunks of `PREFETCH`, each with its cache look-up when
        the run reads the cache (one query per chunk). A --join worker claims its units one request at
        a time, so its chunks are single requests, looked up per call."""
        if run.leases is not None:
            build = lambda: run.suite.build(run.spec)  # noqa: E731
            async for req in run.leases.requests(model, build, lambda: self.stopping):
                yield [(replaced(req, model=model), None)]
            return
        prefetch = self.cache is not None and not self.refresh
        skip = bool(run.done) and not run.has_follow_up
        walked = getattr(run.done, "walked", {}).get(model) if skip else None
        stats = run.stats.setdefault(model, Stats())
        chunk: list[Request] = []
        for k, req in enumerate(run.suite.build(run.spec), 1):
            known = None if walked is None else walked_bit(walked, k - 1)
            if not (skip and self._resumed(run, model, req, stats, known)):
                chunk.append(replaced(req, model=model))
            if k % PREFETCH == 0:  # (a chunk of finished requests: empty, the loop still breathes)
                yield self._paired(run, chunk, prefetch) if chunk else []
                chunk = []
        if chunk:
            yield self._paired(run, chunk, prefetch)

    def _resumed(self, run: RunCtx, model: str, req: Request, stats: Stats, walked: bool | None = None) -> bool:
        """A request whose every sample has its row in the run directory (no follow-up to make): counted
        as `_process` would, without a copy, a cache look-up or a task (~4x less work a finished row).
        `walked`: what the resume's walk of the plan found for it (runner.resume), not looked up again;
        None: looked up here."""
        n = req.decoding.n
        if walked is None:
            done = run.done
            samples = range(req.sample, req.sample + n)
            walked = all(row_identity(model, req.item, s, req.pass_) in done for s in samples)
        if not walked:
            return False
        self._answered(req.via or model)
        if req.pass_ == "answer":
            stats.resumed += n
            run.answered[model] = run.answered.get(model, 0) + n
        return True

    def _paired(
        self, run: RunCtx, reqs: list[Request], prefetch: bool
    ) -> list[tuple[Request, Looked | None]]:
        if not prefetch:
            return [(req, None) for req in reqs]
        return list(zip(reqs, self._look_up(run, reqs), strict=True))

    def _look_up(self, run: RunCtx, reqs: list[Request]) -> list[Looked | None]:
        """Per request, its samples still to answer -> (cache key, cached answer or None)."""
        plan: list[tuple[list[int], list[str]] | None] = []
        done = run.done  # (empty in a new run: no identity to make)
        for req in reqs:
            m = self.models.get(req.target)
            if m is None or not m.provider_cacheable:
                plan.append(None)
                continue
            todo = [
                s
                for s in range(req.sample, req.sample + req.decoding.n)
                if not done or row_identity(req.model, req.item, s, req.pass_) not in done
            ]
            plan.append((todo, cache_keys(req, m.cache_id, m.key_params, todo) if todo else []))
        found = self.cache.lookup([k for p in plan if p for k in p[1]])  # type: ignore[union-attr]
        return [
            None if p is None else {s: (k, found.get(k)) for s, k in zip(p[0], p[1], strict=True)}
            for p in plan
        ]

    def _replay(self, run: RunCtx, req: Request, pre: Looked) -> bool:
        """Answer a request whose every remaining sample is in the local cache, at once (as `_process`
        would, without its task): False when one is not, or when answers lead to follow-up calls."""
        if run.has_follow_up or any(v is None for _, v in pre.values()):
            return False
        stats = run.stats.setdefault(req.model, Stats())
        resumed = req.decoding.n - len(pre)
        self._answered(req.target)
        if resumed and req.pass_ == "answer":
            stats.resumed += resumed
            run.answered[req.model] = run.answered.get(req.model, 0) + resumed
        for _, v in pre.values():  # type: ignore[union-attr]
            learned.inherit(self.models.get(req.target), v)
        self._emit(run, stats, [hit_row(req, s, k, v) for s, (k, v) in pre.items()])  # type: ignore[arg-type]
        return True

    def _batched(self, run: RunCtx, model: str) -> bool:
        judge = self.models.get(run.spec.opt("judge") or "")
        return self.models[model].batch or (judge is not None and judge.batch)

    async def _item(self, run: RunCtx, req: Request, pre: Looked | None = None) -> None:
        try:
            await self._process(run, req, pre)
        except asyncio.CancelledError:
            raise
        except Exception:  # a suite bug must not take down the sweep
            log.exception("internal error on %s %s %s", req.model, req.item, req.pass_)

    # --- one request: resume → cache → call → rows → follow-ups ---------------------------------

    async def _process(self, run: RunCtx, req: Request, pre: Looked | None = None) -> None:
        n = req.decoding.n
        samples = range(req.sample, req.sample + n)
        stats = run.stats.setdefault(req.model, Stats())
        rows: list[Row | None] = [None] * n
        todo: list[int] = []
        done = run.done  # (empty in a new run: no identity to make)
        # (a row its follow-ups need: read whole once, not looked up then read again)
        whole = getattr(done, "found", None) if done and run.has_follow_up else None
        for i, s in enumerate(samples):
            ident = row_identity(req.model, req.item, s, req.pass_) if done else ""
            off: Loc | None = None
            if whole is not None:
                rows[i] = whole(ident)
            elif ident:
                off = done.get(ident)
            if rows[i] is None and off is None:
                todo.append(s)
            else:
                self._answered(req.target)
                if req.pass_ == "answer":  # progress counts first-pass answers, as `total` does
                    stats.resumed += 1
                    run.answered[req.model] = run.answered.get(req.model, 0) + 1
                if run.has_follow_up and off is not None:
                    rows[i] = read_at(run.writer.path, off)
        if todo:
            try:
                got = await self._call(run, req, todo, stats, pre)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # never lose a planned row to a bug: an error row, retried on resume
                log.exception("internal error on %s %s %s", req.model, req.item, req.pass_)
                msg = f"internal error: {type(e).__name__}: {e}"
                got = self._emit(run, stats, [error_row(req, s, "", msg, "internal") for s in todo])
            for row in got:
                rows[row["sample"] - req.sample] = row
        if not run.has_follow_up:
            return
        nexts: list[Request] = []
        for i, s in enumerate(samples):
            row = rows[i]
            if row is None or self.stopping:
                self.dropped += row is not None
                continue
            sreq = (
                req
                if n == 1
                else req.model_copy(
                    update={"sample": s, "decoding": req.decoding.model_copy(update={"n": 1})}
                )
            )
            try:
                got_next = run.suite.follow_up(sreq, row, run.spec)
            except Exception:
                log.exception("follow-up of %s %s failed", req.model, req.item)
                continue
            nexts += [nxt if nxt.model else nxt.model_copy(update={"model": req.model}) for nxt in got_next]
        if len(nexts) == 1:
            await self._process(run, nexts[0])
        elif nexts:
            # The follow-ups of an n call's samples (and a row's several ones) are independent: they run
            # at once, each on its own lane's pacing, not one call's whole latency after another's
            # (#40: an n=5 critique chain took 6 latencies, now 2).
            # One failing does not cancel the others (their rows are planned too); a cancellation does.
            done = await asyncio.gather(*(self._process(run, nxt) for nxt in nexts), return_exceptions=True)
            for nxt, err in zip(nexts, done, strict=True):
                if isinstance(err, BaseException) and not isinstance(err, Exception):
                    raise err  # (a cancellation)
                if isinstance(err, Exception):
                    log.error("internal error on %s %s %s", nxt.model, nxt.item, nxt.pass_, exc_info=err)

    async def _call(
        self, run: RunCtx, req: Request, samples: list[int], stats: Stats, pre: Looked | None = None
    ) -> list[Row]:
        target = req.target
        m = self.models.get(target)
        if m is None:
            return self._emit(
                run,
                stats,
                [error_row(req, s, "", f"unknown model {target!r}", "fatal") for s in samples],
            )
        use_cache = self.cache is not None and m.provider_cacheable and not self.refresh
        if pre is not None and all(s in pre for s in samples):
            keys = {s: pre[s][0] for s in samples}
            found = {k: v for k, v in pre.values() if v is not None}
        else:
            keys = dict(zip(samples, cache_keys(req, m.cache_id, m.key_params, samples), strict=True))
            found = self.cache.lookup(list(keys.values())) if use_cache else {}  # type: ignore[union-attr]
        out: list[Row] = []
        miss: list[int] = []
        for s in samples:
            v = found.get(keys[s])
            if v is None and use_cache and self.cache.shared is not None:  # type: ignore[union-attr]
                v = await self.cache.from_shared(keys[s])  # type: ignore[union-attr]
            if v is None:
                miss.append(s)
            else:
                learned.inherit(m, v)
                out.append(hit_row(req, s, keys[s], v))
        if out:
            self._answered(target)
        if miss and m.batch and run.batcher is not None:
            out.extend(await run.batcher.send(req, m, miss, keys))
            miss = []
        if miss and use_cache:  # another process on this cache may be calling the same keys
            cache = self.cache
            now = cache.claim_now([keys[s] for s in miss])  # type: ignore[union-attr]
            if now is None or cache.shared_dir:  # (alone on the cache: no coroutine to wait in)
                miss = await self._wait_for_others(req, m, miss, keys, out, now)
        if miss:
            groups = contiguous(miss) if m.supports_n else [[s] for s in miss]
            try:
                out.extend(await self.fanout.send(req, m, groups, lambda g: self._send(req, m, g, keys, run)))
            except asyncio.CancelledError:  # given up (a --join hand-back, a second Ctrl-C): others may call
                if use_cache:
                    self.cache.release([keys[s] for s in miss])  # type: ignore[union-attr]
                raise
            if use_cache:  # calls that ended without an answer: a process waiting for them sends its own
                self.cache.release([r["key"] for r in out if r["error"] is not None])  # type: ignore[union-attr]
        return self._emit(run, stats, out)

    async def _wait_for_others(
        self,
        req: Request,
        m: ModelEntry,
        miss: list[int],
        keys: dict[int, str],
        out: list[Row],
        now: list[str] | None,
    ) -> list[int]:
        """Claim the keys about to be called (`now`: `claim_now`'s answer, None when `claim` is to be
        awaited); those another process is calling are waited for (their answers come from the cache,
        paid once); returns the samples still to call."""
        cache = self.cache
        assert cache is not None
        ks = [keys[s] for s in miss]
        theirs = set(now if now is not None else await cache.claim(ks))
        if not cache.shared_dir:
            return miss
        # Shared: the look-up was made before the claim, and another process may have answered since.
        got = cache.lookup([k for k in ks if k not in theirs])
        for k in [k for k in ks if k not in theirs and k not in got]:
            v = await cache.from_shared(k)  # answered on another host since our first look
            if v is not None:
                got[k] = v
        cache.release(list(got))
        if theirs:
            wait = 2 * max(ln.endpoint.timeout_s for ln in m.lanes)
            got.update((await cache.wait_for(list(theirs), wait))[0])
        left = []
        for s in miss:
            v = got.get(keys[s])
            if v is None:
                left.append(s)
            else:
                learned.inherit(m, v)
                out.append(hit_row(req, s, keys[s], v))
        return left

    async def _send(
        self, req: Request, m: ModelEntry, group: list[int], keys: dict[int, str], run: RunCtx | None = None
    ) -> list[Row]:
        WIRE.set((id(run), req.model, req.pass_, len(group)))  # (what the live ETA sees of the lanes' calls)
        gate = self.gates[m.cfg.name]
        call = lambda: send(req, m, group, keys, self.breakers[m.cfg.name], self.cache)  # noqa: E731
        if gate.open:  # the model has answered: no turn to wait for
            rows = await call()
            if rows[0].get("error_kind") == REFUSED:
                gate.settle(rows)
            return rows
        return await gate.through(call, lambda why: [error_row(req, s, keys[s], why, REFUSED) for s in group])

    def _answered(self, name: str) -> None:
        """A success row or cached answer from before: the model answered once, its gate opens."""
        gate = self.gates.get(name)
        if gate is not None and not gate.open:
            gate.opened()

    @property
    def refused(self) -> dict[str, str]:
        """Models the provider refused (no such id, no access...), each with the one error that says so."""
        return {name: g.refused for name, g in self.gates.items() if g.refused is not None}

    def _emit(self, run: RunCtx, stats: Stats, rows: list[Row]) -> list[Row]:
        for row in rows:
            run.writer.write(row)
            if row["pass"] == "answer":  # progress counts first-pass answers, as `total` does
                stats.done += 1
                stats.cached += row["cached"]
                run.answered[row["model"]] = run.answered.get(row["model"], 0) + 1
            if row["error"] is None:
                stats.ok += 1
                if not row["cached"]:  # what the model spent, for tomorrow's forecast (runner.history)
                    history.tally(run.spent.setdefault(row["model"], {}), row)
            else:
                kind = row.get("error_kind")
                if kind == "skipped":
                    stats.skipped += 1
                    stats.skip_reason = stats.skip_reason or row["error"]
                    if row["error"] == HALTED:  # stopped before it was sent: not done, not trouble
                        self.dropped += 1
                        stats.halted += 1
                else:
                    stats.errors += 1
                    stats.kinds[kind or "error"] = stats.kinds.get(kind or "error", 0) + 1
                    stats.exhausted += kind == "reasoning_exhausted"
                if self.on_error is not None:
                    self.on_error(run, row)
            if row["attempts"] > 1:
                stats.retries += row["attempts"] - 1
            u = row["usage"]
            stats.input_tokens += u.get("input_tokens") or 0
            stats.cached_input_tokens += u.get("cached_input_tokens") or 0
            stats.output_tokens += u.get("output_tokens") or 0
            if row["cost_usd"] is not None:
                stats.cost_usd += row["cost_usd"]
            elif row["error"] is None:
                stats.cost_known = False
        return rows
