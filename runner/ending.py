"""How a run ends: the invariant checked (`account`: every planned first-pass row exists), the warning a
morning reader needs (reasoning that exhausted its budget), and the manifest's last word (status,
counts, lanes; a joined run's merged counts), written even on a full disk."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from core.term import plural
from core.types import row_identity
from runner import join_view
from runner.atomic import write_json
from runner.batch.plan import fmt_duration
from runner.budgets.leases import worker_name
from runner.deviations import write as write_devs
from runner.pool import ModelEntry
from runner.protocol import record_learned
from runner.rowindex import index
from runner.rows import error_row
from runner.scheduler import Scheduler
from runner.state import RunCtx

log = logging.getLogger("evalsweep")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_manifest(path: Path, data: Any) -> None:
    """Atomically; on a full disk (no room for the temp copy) overwrite in place, so the manifest still
    says the truth: a manifest left `running` by a run that stopped would be a lie."""
    try:
        write_json(path, data)
    except OSError:
        raw = orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
        try:
            with path.open("r+b") as f:
                f.write(raw)
                f.truncate()
        except OSError as e:
            log.error("cannot update %s: %s", path, e.strerror)


def not_running(man_path: Path, e: BaseException) -> None:
    """A run that stopped while being prepared (a full disk...) must not be left saying `running`."""
    try:
        man = orjson.loads(man_path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return
    if man.get("status") == "running":
        man.update(status="aborted", abort_reason=f"while preparing the run: {type(e).__name__}: {e}")
        write_manifest(man_path, man)


def finish_manifest(
    r: RunCtx, man_path: Path, status: str, elapsed: float, fault: str | None, lanes: Any, batch_why: Any,
    models: dict[str, ModelEntry] | None = None,
    spend: dict[str, Any] | None = None,
    refused: dict[str, str] | None = None,
) -> None:
    """`refused`: the run's models (judges too) the provider refused outright (runner.calls.gate), each with
    its one error."""
    try:
        man = orjson.loads(man_path.read_bytes())
    except OSError as e:  # the run directory deleted and not made again: said, never a traceback
        print(f"evalsweep: cannot record the run's end in {man_path}: {e.strerror}", file=sys.stderr)
        return
    if models is not None and record_learned(man, r.suite, r.spec, models, r.models):
        model_devs = man.get("model_deviations") or []  # changed by a refusal during the run: deviations too
        own = [d for d in man["protocol"]["deviations"] if d not in model_devs]
        write_devs(r.run_dir, r.name, own, model_devs, man.get("request_shaping") or {}, r.spec.suite)
    mine = {
        "status": status,
        "updated": now(),
        "elapsed_s": round(elapsed, 3),
        "counts": {m: vars(st) | {"started": None} for m, st in r.stats.items()},
    }
    man.update(mine)
    if r.join:  # the run's counts from every worker's rows; this worker's own beside them
        join_view.update(man, worker_name(), mine, r.run_dir, {m: st.total for m, st in r.stats.items()})
    if fault:
        man["abort_reason"] = fault
        man["unsaved_rows"] = r.writer.unsaved_rows
    else:
        man.pop("abort_reason", None)
        man.pop("unsaved_rows", None)
    man["lanes"] = lanes
    if refused:
        man["refused_models"] = refused
    else:
        man.pop("refused_models", None)
    if batch_why:
        man["batch"] = batch_why
    if spend:  # the spend ceilings (runner.calls.spend.summary): spent, ceiling, whether one stopped the run
        man["spend"] = spend
    write_manifest(man_path, man)


def warn_exhausted(run: RunCtx, models: dict[str, ModelEntry]) -> None:
    """A model whose reasoning used its whole limit on more than 5% of its calls: its scores stand on
    the rest. Name it, and the setting that gives it more room."""
    for name, st in run.stats.items():
        calls = st.done
        if not st.exhausted or st.exhausted <= 0.05 * calls:
            continue
        p = models[name].profile if name in models else None
        knob = "thinking_budget" if p is not None and p.reasoning_form in ("thinking", "gemini") else (
            "reasoning_effort (or thinking_budget)")
        log.warning(
            "[%s] %s: reasoning exhausted its token limit on %d of %d calls (%.0f%%), scored as errors, not "
            "wrong answers; raise the model's %s in the config", run.name, name, st.exhausted, calls,
            100 * st.exhausted / max(calls, 1), knob,
        )


def account(run: RunCtx, sched: Scheduler) -> None:
    """The invariant, checked after a run that was neither stopped nor interrupted: every planned
    first-pass (model, item, sample) has a final row. One that has none (a bug of ours) gets an error
    row now, so the run says so (exit 3) and a rerun retries it, instead of it vanishing."""
    short = [m for m in run.models if run.answered.get(m, 0) < run.stats[m].total]
    if not short:
        return
    _, final = index(run.writer.path)
    for model in short:
        stats = run.stats[model]
        for req in run.suite.build(run.spec):
            for s in range(req.sample, req.sample + req.decoding.n):
                if row_identity(model, req.item, s, req.pass_) in final:
                    continue
                r = req.model_copy(update={"model": model})
                row = error_row(r, s, "", "internal error: the call ended without a row", "internal")
                sched._emit(run, stats, [row])
                log.error("no row for %s %s sample %d: wrote an error row", model, req.item, s)


def unpaid_for(runs: list[RunCtx], cache: Any) -> int:
    """Answers received and paid that reached neither results.jsonl nor the cache: paid again on resume."""
    lost = set(cache.unwritten) | set(cache.pending) if cache is not None and cache.broken is None else None
    return sum(
        1 for r in runs for row in r.writer.unsaved()
        if row["error"] is None and not row.get("cached") and (lost is None or row["key"] in lost)
    )


async def hold_unwritten(runs: list[RunCtx], cache: Any, wait_s: float, given_up: Callable[[], bool]) -> None:
    """A full disk: the answers received but not written are held while space is freed (retried every
    second, up to `wait_s`), so none of them is paid again; said once, with the count and the way out."""
    held = unpaid_for(runs, cache)
    if not held:
        return
    where = ", ".join(str(r.run_dir) for r in runs[:3]) + (f" (and {len(runs) - 3} more)" if len(runs) > 3 else "")
    print(f"\nevalsweep: the disk is full: {plural(held, 'answer')} received (and paid) could not be written. "
          f"Free space where {where} and the cache live: they are written as soon as it fits (waiting up to "
          f"{fmt_duration(wait_s)}; Ctrl-C gives up, and they are paid again on resume).", file=sys.stderr, flush=True)
    end = time.monotonic() + wait_s
    while time.monotonic() < end and not given_up():
        await asyncio.sleep(1.0)
        for r in runs:
            r.writer.flush()
        if cache is not None:
            cache.retry()
        if not unpaid_for(runs, cache):
            print(f"evalsweep: space came back: the {plural(held, 'answer')} held are written; none is paid "
                  "again.", file=sys.stderr, flush=True)
            return
