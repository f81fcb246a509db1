"""Resuming a run directory: the settings it must match, what a rerun says about resuming, and when a
Ctrl-C still leaves a complete run.

A rerun of a directory with finished rows says, before anything is sent, how much is done, how much
the cache answers and how much will be called; at the end, new rows are counted apart from resumed
and cached ones. A Ctrl-C that lands when every planned row is in (or in its grace period) stops
nothing: the run is complete and scored as usual."""

from __future__ import annotations

import sys
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


def say_resuming(
    plans: list[Any], runs: list[RunCtx], models: dict[str, ModelEntry], cache: Path | None
) -> None:
    """`[run] resuming: N of M rows already done, K cached, L to call` for each run that has finished
    rows (first-pass rows, the unit of the progress counts); `cache` None: the cache is not read."""
    from cache.disk import probe
    from runner.remaining import remaining

    todo = [(p, r) for p, r in zip(plans, runs, strict=True) if r.done and not r.join]
    if not todo:
        return
    with probe(cache) as in_cache:
        for p, r in todo:
            left = remaining([p], models, in_cache)
            done = sum(x.finished for x in left)
            total = sum(r.stats[m].total for m in r.models)
            cached = sum(x.cached for x in left)
            calls = sum(x.calls for x in left)
            how = f"{cached:,} cached" if cache is not None else "cache not read"
            print(
                f"[{r.name}] resuming: {done:,} of {total:,} rows already done, {how}, {calls:,} to call",
                file=sys.stderr,
            )


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
