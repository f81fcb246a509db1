"""Resuming a run directory: the settings it must match, what a rerun says about resuming, and when a
Ctrl-C still leaves a complete run.

A rerun of a directory with finished rows says, before that run's first call, how much is done, how
much the cache answers and how much will be called; at the end, new rows are counted apart from resumed
and cached ones. A Ctrl-C that lands when every planned row is in (or in its grace period) stops
nothing: the run is complete and scored as usual."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.config import ConfigError
from runner.identity import differences, spec_fingerprint
from runner.pool import ModelEntry
from runner.results import read_manifest
from runner.state import RunCtx
from suites.base import RunSpec, get_suite


def check_settings(out: Path, spec: RunSpec, manifest: dict[str, Any] | None = None) -> dict[str, Any]:
    """Refuse to resume `out` with other settings (the run and the dry run alike), one readable line
    per setting that differs; returns the fingerprint the run keeps. An option this version added
    that the directory lacks counts as its default, so an older run directory still resumes."""
    fp = spec_fingerprint(spec)
    if manifest is None:
        if not (out / "manifest.json").exists():
            return fp
        manifest = read_manifest(out)
    old = {k: manifest["spec"].get(k) for k in fp}
    opts = dict(old.get("options") or {})
    for k, v in fp["options"].items():
        if k not in opts and v in (None, False):
            opts[k] = v
    old["options"] = opts
    diff = differences(old, fp, manifest.get("data_identity"))
    suite = get_suite(spec.suite)
    made = manifest.get("suite_revision", 0)
    if made != suite.revision:
        diff.append(f"made by revision {made} of the {spec.suite} suite's requests; this version builds revision "
                    f"{suite.revision} ({suite.revision_note})")  # fmt: skip
    if diff:
        raise ConfigError(
            f"{out} holds a run made with other settings:\n  "
            + "\n  ".join(diff)
            + "\nRerun with the same settings to resume, or pick another --out."
        )
    return old


def load(plan: Any, run: RunCtx, models: dict[str, ModelEntry], cache: Path | None, count: bool) -> list[str]:
    """A run's resume state, read in a thread while earlier runs call (runner.run): its finished rows
    (`run.done`, the one read of its results files), with `count` each model's planned total, and the
    lines to say. A run with finished rows says `[run] resuming: N of M rows already done, K cached, L
    to call` (first-pass rows, the unit of the progress counts) before its first call; `cache` None:
    the cache is not read."""
    from runner.rowindex import RowIndex, index, walked_bits

    if not run.join:  # (a --join worker's rows were read by prepare: its leases need them first)
        if run.partial is not None:
            run.partial.clear()
        run.done = index(run.writer.path, run.partial)[0]
    if count:
        total = count_of(run)
        for m in run.models:
            run.stats[m].total = total
    if not run.done or run.join:
        return []
    from cache.disk import probe
    from runner.remaining import remaining

    walk: dict[str, bytearray] | None = {} if isinstance(run.done, RowIndex) else None
    with probe(cache) as in_cache:
        left = remaining([plan], models, in_cache, known=run.done, walk=walk)
    if walk and isinstance(run.done, RowIndex):  # (the scheduler's skip reads this walk: no row confirmed twice)
        run.done.walked = {m: walked_bits(flags) for m, flags in walk.items()}
        del walk
    done = sum(x.finished for x in left)
    total = sum(run.stats[m].total for m in run.models)
    how = f"{sum(x.cached for x in left):,} cached" if cache is not None else "cache not read"
    lines = [f"[{run.name}] resuming: {done:,} of {total:,} rows already done, {how}, "
             f"{sum(x.calls for x in left):,} to call"]
    if run.partial:
        lines.append(
            f"[{run.name}] {len(run.partial):,} streams cut mid-answer were billed and have no answer: kept as "
            "error rows, not paid again (--resend-partial sends them again)"
        )
    return lines


def count_of(run: RunCtx) -> int:
    """First-pass calls per model (samples included): the suite's count, else its requests counted."""
    if run.suite.count is not None:
        return run.suite.count(run.spec)
    return sum(r.decoding.n for r in run.suite.build(run.spec))


def all_in(runs: list[RunCtx], dropped: int) -> bool:
    """After a Ctrl-C: did every planned row get its final row anyway (nothing left unlaunched)?"""
    return not dropped and all(
        not r.join and all(r.answered.get(m, 0) >= r.stats[m].total for m in r.models) for r in runs
    )


def summary(r: RunCtx) -> str:
    """`name: N new rows (R resumed, K cached) in DIR/results.jsonl`."""
    resumed = sum(st.resumed for st in r.stats.values())
    cached = sum(st.cached for st in r.stats.values())
    extra = ", ".join(
        x
        for x in (f"{resumed:,} resumed" if resumed else "", f"{cached:,} from the cache" if cached else "")
        if x
    )
    return (
        f"{r.name}: {r.writer.rows:,} new rows"
        + (f" ({extra})" if extra else "")
        + f" in {r.run_dir}/results.jsonl"
    )
