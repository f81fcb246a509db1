"""`manifest.json` of a run several `--join` workers share: each worker's own counts, and the run's
counts merged from every worker's results file, so the manifest speaks for the run, not for whichever
worker exited last (a late worker on a finished run made no calls: it must not reset them to 0 and $0).
Read-modify-write under a file lock: workers on several hosts finish at the same moment.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from core.types import row_identity
from runner.results import results_files


@contextmanager
def locked(man_path: Path) -> Iterator[None]:
    with open(man_path.with_name(man_path.name + ".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def merged_counts(run_dir: Path, totals: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Per model, from the best row of each identity over every results file: first-pass answers done,
    errors and skips, tokens and cost (as one worker's counts say them, for the whole run)."""
    best: dict[str, dict[str, Any]] = {}
    for p in results_files(run_dir):
        for line in p.read_bytes().splitlines():
            try:
                r = orjson.loads(line)
                ident = row_identity(r["model"], r["item"], r["sample"], r["pass"])
            except (orjson.JSONDecodeError, KeyError, TypeError):
                continue  # a torn last line of a killed worker; rowindex.index names real damage
            if ident not in best or best[ident].get("error") is not None:
                best[ident] = r
    out = {m: {"total": t, "done": 0, "errors": 0, "skipped": 0, "input_tokens": 0, "output_tokens": 0,
               "cost_usd": 0.0, "cost_known": True} for m, t in totals.items()}
    for r in best.values():
        c = out.get(r.get("model"))
        if c is None:
            continue
        if r.get("pass") == "answer":
            c["done"] += 1
        if r.get("error") is not None:
            c["skipped" if r.get("error_kind") == "skipped" else "errors"] += 1
        u = r.get("usage") if isinstance(r.get("usage"), dict) else {}
        c["input_tokens"] += u.get("input_tokens") or 0
        c["output_tokens"] += u.get("output_tokens") or 0
        if isinstance(r.get("cost_usd"), int | float):
            c["cost_usd"] += r["cost_usd"]
        elif r.get("error") is None:
            c["cost_known"] = False
    return out


def update(man: dict[str, Any], worker: str, mine: dict[str, Any], run_dir: Path, totals: dict[str, int]) -> None:
    """This worker's entry under `workers`, and `counts` and `status` for the whole run."""
    man.setdefault("workers", {})[worker] = mine
    merged = merged_counts(run_dir, totals)
    man["counts"] = merged
    if mine["status"] in ("complete", "complete_with_errors"):
        short = any(c["done"] < c["total"] for c in merged.values())
        failed = any(c["errors"] + c["skipped"] for c in merged.values())
        man["status"] = "running" if short else "complete_with_errors" if failed else "complete"
    else:
        man["status"] = mine["status"]
