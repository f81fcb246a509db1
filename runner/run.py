"""A run (one suite × models, one directory) and a sweep (many runs, one scheduler): the run
directories made ready (runner.rundir), the calls made, and each run's end recorded and said.

Rerunning the same command skips every finished row; with the content-addressed cache on top, no
completed call is paid twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import shutil
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from cache.store import AsyncCache, default_cache_dir
from core.term import plural
from core.types import Row
from runner import history, join_view, resume
from runner.batch.batcher import Batcher
from runner.batch.journal import pending_models
from runner.batch.plan import choose
from runner.budgets.leases import open_leases
from runner.calls import learned, spend
from runner.calls.gate import REFUSED
from runner.calls.halt import HALTED
from runner.config import Config, ConfigError, shared_urls
from runner.deviations import block, of_manifest
from runner.ending import account, finish_manifest, hold_unwritten, not_running, unpaid_for, warn_exhausted
from runner.eta import Live
from runner.lanes import worst_state
from runner.lock import LOCK, unlock
from runner.pool import ModelEntry, build_models, close_models, lane_report
from runner.preflight import preflight
from runner.protocol import judges_of
from runner.results import read_manifest, write_error
from runner.resume import check_settings
from runner.rundir import RunPlan, lock_plan, out_of, prepare
from runner.scheduler import Scheduler
from runner.settings import check_dir
from runner.state import RunCtx, Stats
from suites.base import get_suite

log = logging.getLogger("evalsweep")
Watch = Callable[..., Awaitable[None]]
"""What shows a run's progress (cli.progress.watch): `watch(runs, live=, every_s=, lanes=, state=, eta=)`,
cancelled when the calls are done. The engine knows no terminal: the command line passes it in."""
GC_GEN0 = 20_000
"""The collector's gen-0 threshold while calls run (see `execute`)."""


EXIT_ABORTED = 4
"""The run stopped by a fault of ours (disk full, a write error): status `aborted` in the manifest."""
EXIT_MAX_COST = 5
"""A spend ceiling stopped the run (runner.calls.spend): status `stopped` in the manifest."""


def execute(
    plans: list[RunPlan],
    cfg: Config,
    *,
    command: str,
    no_cache: bool = False,
    refresh: bool = False,
    cache_dir: Path | None = None,
    grace_s: float = 30.0,
    live: bool | None = None,
    progress_s: float = 10.0,
    batch: str = "off",
    deadline_s: float = 8 * 3600.0,
    prefer: str = "latency",
    keep_going: bool = False,
    watch: Watch | None = None,
    max_cost: float | None = None,
    relearn: bool = False,
) -> int:
    """Run every plan in one scheduler. Returns the exit code (0 ok, 1 errors in rows, 130 interrupted).

    `batch` (off | on | auto), `deadline_s` and `prefer` pick the models whose calls go out as provider
    batches (runner.batch.plan); models with batches still in flight in a run directory always do.
    `max_cost`: the ceiling in USD on what the run directories are billed (runner.calls.spend)."""
    for p in plans:
        s = get_suite(p.spec.suite)
        if s.check is not None:
            s.check(p.spec)
    if not shared_urls(cfg).cache_url and any(p.join for p in plans):  # (a bad EVALSWEEP_*_URL: refused)
        raise ConfigError("--join needs [shared] cache_url (or EVALSWEEP_CACHE_URL): the work leases live there")
    names = [m for p in plans for m in [*p.models, *judges_of(p.spec)]]
    models = build_models(cfg, names)
    learned.attach(models, None if no_cache else cache_dir or Path(cfg.cache_dir or default_cache_dir()), relearn)
    outs = [p.out or Path("runs") / get_suite(p.spec.suite).run_name(p.spec) for p in plans]
    ceilings = spend.attach(models, max_cost, outs)  # an unpriced model under a ceiling: refused here
    for p in plans:  # a directory the run would refuse is refused before the network is touched
        if p.out is not None:
            check_settings(p.out, p.spec)
            check_dir(p.out, cfg, list(p.models))
    locks: list[int] = []  # taken before the pre-flight: a second launch on a running directory sends nothing
    made = [d for d in dict.fromkeys(out_of(p) for p in plans) if not d.exists()]
    try:
        for p in plans:
            locks.append(lock_plan(p))
        preflight(models, keep_going)
    except BaseException:
        for fd in locks:
            unlock(fd)
        for d in made:  # a directory made only to hold the lock: gone again, as if never touched
            (d / LOCK).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                d.rmdir()
        raise
    runs: list[RunCtx] = []
    handlers: list[logging.Handler] = []
    gc_threshold: tuple[int, ...] = ()
    try:
        for i, p in enumerate(plans):
            try:
                runs.append(prepare(p, cfg, models, command, read=p.join, lock=locks[i]))
            except OSError as e:  # a full or read-only disk before anything was sent
                where = Path(e.filename) if e.filename else (p.out or Path("runs")) / "manifest.json"
                print(f"evalsweep: stopped before any call: {write_error(where, e)}. Free space, then "
                      f"rerun:\n  {command}", file=sys.stderr)
                return EXIT_ABORTED
        for line in block([of_manifest(read_manifest(r.run_dir), r.run_dir) for r in runs], _width()):
            print(line, file=sys.stderr)
        handlers = [_attach_log(r.run_dir / "log.txt") for r in runs]
        counted = batch == "auto"  # choosing batches weighs the work; else totals are counted while calls run
        for r in runs:
            total = resume.count_of(r) if counted else 0
            r.stats = {m: Stats(total=total) for m in r.models}
        local = None if no_cache or refresh else cache_dir or Path(cfg.cache_dir or default_cache_dir())
        pinned = set().union(*(pending_models(r.run_dir) for r in runs))
        batch_why = choose(models, runs, batch, deadline_s, prefer, pinned)
        gc.freeze()  # plan, suites, config live all run: spare them gen-2 scans (~50 ms stalls at 1k rps)
        # Each call in flight holds ~50 young objects (task, futures, aiohttp's request): at the default
        # gen-0 threshold (700) the collector rescans them every few calls, 40-90 us of CPU a call
        # (bench/throughput.py); above the working set it runs every few thousand calls, each pass short
        # (a far higher threshold makes rare passes over ~100k objects: loop stalls a paced lane feels).
        gc_threshold = gc.get_threshold()
        gc.set_threshold(GC_GEN0, *gc_threshold[1:])
        return asyncio.run(
            _main(
                runs,
                models,
                cfg,
                no_cache=no_cache,
                refresh=refresh,
                cache_dir=cache_dir,
                grace_s=grace_s,
                live=live,
                progress_s=progress_s,
                command=command,
                batch_why=batch_why,
                watch=watch,
                ceilings=ceilings,
                plans=plans,
                read=(local, not counted),
            )
        )
    finally:
        if gc_threshold:
            gc.set_threshold(*gc_threshold)
        for r in runs:
            r.writer.close()
            unlock(r.lock)
        for fd in locks[len(runs) + 1 :]:  # plans never prepared (the one that failed unlocked its own)
            unlock(fd)
        for h in handlers:
            logging.getLogger("evalsweep").removeHandler(h)
            h.close()


async def _main(
    runs: list[RunCtx],
    models: dict[str, ModelEntry],
    cfg: Config,
    *,
    no_cache: bool,
    refresh: bool,
    cache_dir: Path | None,
    grace_s: float,
    live: bool | None,
    progress_s: float = 10.0,
    command: str,
    batch_why: dict[str, str] | None = None,
    watch: Watch | None = None,
    ceilings: list[spend.Ceiling] | None = None,
    plans: list[RunPlan],
    read: tuple[Path | None, bool] = (None, True),
) -> int:
    """`plans`: the runs' plans, whose run directories are read here (`_load`) while calls go out;
    `read`: (the cache the resume lines probe, whether to count each run's rows)."""
    ceilings = ceilings or []
    shared = shared_urls(cfg)
    pg = None
    if shared.cache_url and not no_cache:
        from cache.pg import PgCache

        pg = await PgCache(shared.cache_url).open()
    budgets: list[Any] = []
    if shared.redis_url:
        from runner.budgets.attach import attach

        budgets = await attach(models, shared.redis_url, shared.lease_s, shared.redis_wait_s)
    for r in runs:
        if r.join:
            r.leases = await open_leases(r, shared)
            r.leases.may_send = lambda m: any(not getattr(ln.budget, "silent", False) for ln in models[m].lanes)
            r.leases.budgets = lambda m: [ln.budget for ln in models[m].lanes]
    cache = (
        None
        if no_cache
        else AsyncCache(cache_dir or (Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir()), shared=pg)
    )
    sched = Scheduler(models, cache, refresh=refresh)
    errors_logged: dict[str, int] = {}

    def on_error(run: RunCtx, row: Row) -> None:
        if row.get("error_kind") == REFUSED or row["error"] == HALTED:  # said once: by the gate, at the stop
            return
        k = row["model"]
        errors_logged[k] = errors_logged.get(k, 0) + 1
        if errors_logged[k] <= 5:
            log.warning("[%s] %s %s/%s: %s", run.name, row["model"], row["item"], row["pass"], row["error"])

    sched.on_error = on_error
    for r in runs:
        r.writer.on_fault = sched.abort
    if cache is not None:
        cache.on_fault = sched.abort
    if batch_why:
        for r in runs:
            r.batcher = Batcher(sched, r.run_dir)
    loop = asyncio.get_running_loop()
    interrupted = False
    signalled = signal.SIGINT

    def on_sigint(sig: int = signal.SIGINT) -> None:
        nonlocal interrupted, signalled
        if interrupted:  # second Ctrl-C: stop waiting
            sched.cancel()
            return
        interrupted, signalled = True, sig
        sched.stop()
        log.warning(
            "interrupted: no new calls; waiting up to %.0fs for %d calls already sent (calls not sent "
            "end as skipped rows; Ctrl-C again to stop now)",
            grace_s,
            sched.on_the_wire(),
        )
        loop.call_later(grace_s, sched.cancel)

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_sigint, sig)
        except (NotImplementedError, RuntimeError):
            pass
    lanes = [ln for m in models.values() for ln in m.lanes if ln.endpoint.kind not in ("sim", "replay")]
    watcher = asyncio.create_task(
        (watch or _unwatched)(
            runs,
            live=live,
            every_s=progress_s,
            lanes=lambda: [ln.describe() for ln in dict.fromkeys(lanes)],
            state=lambda m: worst_state([ln.state for ln in models[m].lanes if ln in lanes]) if lanes else "",
            **({"spend": lambda: spend.live_text(ceilings)} if ceilings else {}),
            eta=Live(runs, models, None if no_cache else cache_dir or Path(cfg.cache_dir or default_cache_dir())),
        )
    )
    t0 = time.monotonic()
    for r in runs:
        r.loaded = asyncio.Event()  # before any stream can look
    loader = asyncio.create_task(_load(plans, runs, models, read, sched))
    try:
        await sched.run(runs)
    finally:
        failed = await _loaded(loader)
        for r in runs:
            if r.leases is not None:
                await r.leases.aclose()
        watcher.cancel()
        try:
            await watcher
        except asyncio.CancelledError:
            pass
        except Exception as e:  # the view failing never costs the run its rows or its manifest
            log.warning("progress view stopped: %s: %s", type(e).__name__, e)
        in_flight = 0
        for r in runs:
            if r.batcher is not None:
                in_flight += sum(not b.ended for b in r.batcher.batches.values())
                await r.batcher.close()
        if sched.fault is not None and cfg.disk_full_wait_s > 0:
            await hold_unwritten(runs, cache, cfg.disk_full_wait_s, lambda: interrupted)
        if cache is not None:
            await cache.aclose()
        if budgets:
            from runner.budgets.attach import detach

            await detach(budgets)
        await close_models(models)
    unsaved = sum(r.writer.flush() for r in runs)
    repaid = unpaid_for(runs, cache)
    if failed is not None:  # a run directory that cannot be read (a bad row): said as before, exit 2
        for r in runs:
            not_running(r.run_dir / "manifest.json", failed)
        raise failed
    if interrupted and sched.fault is None and resume.all_in(runs, sched.dropped):
        interrupted = False  # the Ctrl-C came when every row was in: nothing was cut short
        print("\ninterrupted after every planned row was in: the run is complete", file=sys.stderr)
    if sched.fault is None and not interrupted:
        for r in runs:
            if not r.join:  # a --join worker runs only the units it won (runner.budgets.leases checks those)
                account(r, sched)
    n_err = 0
    stopped = spend.reached(ceilings) and not sched.fault and not interrupted
    for r in runs:
        warn_exhausted(r, models)
        # (a stream cut mid-answer in an earlier session, kept as its final row: still an error of the run)
        r_err = sum(st.errors + st.skipped for st in r.stats.values()) + len(r.partial or ())
        n_err += r_err
        status = ("aborted" if sched.fault else "interrupted" if interrupted else "stopped" if stopped
                  else "complete_with_errors" if r_err else "complete")
        man_path = r.run_dir / "manifest.json"
        with join_view.locked(man_path) if r.join else nullcontext():
            lanes = lane_report(models, r.models)
            refused = {m: why for m, why in sched.refused.items() if m in r.models or m in judges_of(r.spec)}
            finish_manifest(r, man_path, status, time.monotonic() - t0, sched.fault, lanes, batch_why, models,
                            spend.summary(ceilings) if ceilings else None, refused)
        if cache is not None and r.spent:  # tomorrow's dry run prices and forecasts from it
            history.record(cache.directory, r.run_dir, r.spent, {m: models[m].cache_id for m in r.spent if m in models},
                           history.depths(models, r.spent))
    if sched.fault:
        kept = (
            ""
            if not unsaved
            else (
                f" {unsaved} rows could not be saved to results.jsonl"
                + (f"; {repaid} of them are answers that reached no cache either and will be paid again on "
                   "resume" if repaid else "; every answer among them is in the cache: none is paid again")
                + "."
            )
        )
        print(
            f"\nevalsweep: stopped: {sched.fault}.{kept}\nNo new calls were launched after the first "
            f"failed write. Free space (or fix the fault) and resume with:\n  {command}",
            file=sys.stderr,
        )
        return EXIT_ABORTED
    if interrupted:
        if in_flight:
            print(
                f"\n{plural(in_flight, 'batch', 'batches')} still in flight (batches.jsonl); "
                "resuming collects them.",
                file=sys.stderr,
            )
        halted = sum(st.halted for r in runs for st in r.stats.values())
        unsent = f" {plural(halted, 'call')} not sent (skipped rows, not errors)." if halted else ""
        print(f"\ninterrupted; finished rows are saved.{unsent} Resume with:\n  {command}", file=sys.stderr)
        return 128 + signalled  # 130 for Ctrl-C, 143 for SIGTERM (the shell's convention)
    for r in runs:
        print(resume.summary(r), file=sys.stderr)
    if stopped:
        print(spend.stop_message(ceilings, command), file=sys.stderr)
        return EXIT_MAX_COST
    if n_err:
        print(
            f"{plural(n_err, 'call')} ended in an error row (see log.txt; what to do comes last)."
            + (f" Refused by the provider (fix the id or key first): {', '.join(sched.refused)}." if sched.refused else ""),
            file=sys.stderr,
        )
        return 3
    return 0


async def _load(
    plans: list[RunPlan], runs: list[RunCtx], models: dict[str, ModelEntry], read: tuple[Path | None, bool],
    sched: Scheduler,
) -> BaseException | None:
    """Each run's finished rows, planned totals and resume line (runner.resume.load), one run after
    another in a thread: the first run's streams call while later runs are read. A run that cannot be
    read stops the sweep (no new call; its own streams never start) and is returned, to be raised."""
    failed: BaseException | None = None
    try:
        for p, r in zip(plans, runs, strict=True):
            if failed is None and not sched.stopping:
                try:
                    lines = await asyncio.to_thread(resume.load, p, r, models, *read)
                except Exception as e:
                    failed = e
                    sched.stop()
                else:
                    for line in lines:
                        print(line, file=sys.stderr)
            r.loaded.set()  # type: ignore[union-attr]
    finally:
        for r in runs:
            r.loaded.set()  # type: ignore[union-attr]
    return failed


async def _loaded(loader: asyncio.Task[BaseException | None]) -> BaseException | None:
    """The loader's failure, once it ended (cancelled if the streams ended first: a cancelled sweep)."""
    if not loader.done():
        loader.cancel()
    try:
        return await loader
    except asyncio.CancelledError:
        return None


def _width() -> int:
    """The terminal's columns on a TTY, else 80: the block said before the first call fits either."""
    return shutil.get_terminal_size((80, 24)).columns if sys.stderr.isatty() else 80


async def _unwatched(*_: Any, **__: Any) -> None:
    """No progress view (a library caller that passed none)."""


class _LogFile(logging.FileHandler):
    """log.txt; a failed write (disk full) is not worth a traceback per log line: the run's own fault
    handling reports the disk, so the log just stops."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        self.failed = True

    def close(self) -> None:
        try:
            super().close()
        except OSError:
            pass


def _attach_log(path: Path) -> logging.Handler:
    h = _LogFile(path)
    h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logging.getLogger("evalsweep").addHandler(h)
    return h
