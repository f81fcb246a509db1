"""Everything the report shows, as plain rows made from the suite views (report.tables): the HTML
tables, the plots and the CSVs read these, so every number on the page is in a CSV with full precision.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from report.tables import AXES, SuiteView, coverage_of, prompt_cache_of

FRONTIER_COLUMNS = ["model", "suite", "accuracy", "price_in", "run_cost_usd", "on_frontier"]

def frontier_rows(views: list[SuiteView]) -> list[dict[str, Any]]:
    """frontier.csv: on_frontier is the list-price frontier (the run-cost one is in leaderboard.csv)."""
    return [
        {
            "model": e.model,
            "suite": v.label,
            "accuracy": e.accuracy,
            "price_in": e.info.price_in,
            "run_cost_usd": e.run_cost_usd,
            "on_frontier": v.on(e, "price_in"),
        }
        for v in views
        for e in v.entries
    ]


def leaderboard_rows(v: SuiteView) -> list[dict[str, Any]]:
    rows = []
    rank = 0
    for k, e in enumerate(v.entries):
        if e.accuracy is not None and (k == 0 or e.accuracy != v.entries[k - 1].accuracy):
            rank = k + 1
        i = e.info
        rows.append(
            {
                "suite": v.label,
                "rank": rank if e.accuracy is not None else None,
                "model": e.model,
                "display_name": i.display_name,
                "metric": e.metric,
                "chance": v.chance,
                "accuracy": e.accuracy,
                "ci_lo": e.ci95[0] if e.ci95 else None,
                "ci_hi": e.ci95[1] if e.ci95 else None,
                "n": e.n,
                "open_weights": i.open_weights,
                "reasoning": i.reasoning,
                "release_date": i.release_date.isoformat() if i.release_date else None,
                "provider": i.provider,
                "price_in": i.price_in,
                "price_out": i.price_out,
                "run_cost_usd": e.run_cost_usd,
                "priced_cost_usd": e.cost.priced,
                "calls": e.cost.calls,
                "priced_calls": e.cost.priced_calls,
                "cached_calls": e.cost.cached_calls,
                "error_calls": e.cost.errors,
                **prompt_cache_of(e),
                **coverage_of(e),
                "on_frontier_price": v.on(e, "price_in"),
                "on_frontier_run_cost": v.on(e, "run_cost_usd"),
                "metadata_from": i.source,
                "run_dir": str(e.run_dir),
            }
        )
    return rows


GROUPINGS = {
    "weights": ("open_weights", {True: "open weights", False: "proprietary", None: "unknown"}),
    "reasoning": ("reasoning", {True: "reasoning", False: "non-reasoning", None: "unknown"}),
}


def group_rows(v: SuiteView) -> list[dict[str, Any]]:
    """Open vs proprietary, reasoning vs not: how many, the best (with CI), the median, and how many
    of the group are on the list-price frontier."""
    rows = []
    for grouping, (attr, names) in GROUPINGS.items():
        for flag, gname in names.items():
            mine = [e for e in v.entries if getattr(e.info, attr) is flag and e.accuracy is not None]
            es = [e for e in mine if e.model not in v.left_out]  # as the paper's Fig. 5 (VRB: EXCLUDE_MODELS)
            if not es:
                continue
            best = es[0]  # entries are ranked
            rows.append(
                {
                    "suite": v.label,
                    "grouping": grouping,
                    "group": gname,
                    "models": len(es),
                    "best_model": best.model,
                    "best_accuracy": best.accuracy,
                    "best_ci_lo": best.ci95[0] if best.ci95 else None,
                    "best_ci_hi": best.ci95[1] if best.ci95 else None,
                    "median_accuracy": float(np.median([e.accuracy for e in es])),
                    "on_price_frontier": sum(v.on(e, "price_in") for e in es),
                    "left_out": len(mine) - len(es),
                }
            )
    return rows


def frontier_list_rows(v: SuiteView) -> list[dict[str, Any]]:
    return [
        {"suite": v.label, "cost_axis": axis, "model": p.name, "cost": p.cost, "accuracy": p.accuracy}
        for axis in AXES
        for p in v.front[axis]
    ]


def snapshot_rows(v: SuiteView) -> list[dict[str, Any]]:
    return [
        {
            "suite": v.label,
            "cost_axis": axis,
            "snapshot": s.when.isoformat(),
            "model": p.name,
            "released": p.released.isoformat() if p.released else None,
            "cost": p.cost,
            "accuracy": p.accuracy,
            "new": p.name in s.new,
        }
        for axis in AXES
        for s in v.snaps[axis]
        for p in s.frontier
    ]


LEVEL_ORDER = {"by_severity": ("no_error", "minor", "medium")}
"""Levels in the paper's order (VRB's error_by_model_analysis.py `severity_order`); scores.json sorts its
keys, which would put "medium" first."""


def levels(per: dict[str, dict[str, Any]], kind: str) -> list[str]:
    """A breakdown's levels as the paper orders them, then any others as found."""
    found = list(dict.fromkeys(k for d in per.values() for k in d))
    known = LEVEL_ORDER.get(kind, ())
    return [k for k in known if k in found] + [k for k in found if k not in known]


def level_means(v: SuiteView, kind: str) -> dict[str, float]:
    """Mean over the models that have each level (the black line of the severity plot), without the models
    the paper's figures leave out."""
    per = {m: d for m, d in v.breakdowns.get(kind, {}).items() if m not in v.left_out}
    levels_ = levels(per, kind)
    return {
        lv: sum(d[lv].value for d in per.values() if lv in d) / sum(lv in d for d in per.values())
        for lv in levels_
    }


def breakdown_rows(v: SuiteView) -> list[dict[str, Any]]:
    def one(
        kind: str, m: str, k: str, value: float | None, lo: float | None, hi: float | None, n: Any
    ) -> dict:
        return {
            "suite": v.label,
            "kind": kind,
            "model": m,
            "key": k,
            "value": value,
            "ci_lo": lo,
            "ci_hi": hi,
            "n": n,
        }

    rows = [
        one(kind, m, k, s.value, s.lo, s.hi, s.n)
        for kind, per in v.breakdowns.items()
        for m, d in per.items()
        for k, s in d.items()
    ]
    rows += [
        one("skill_effect_pp", m, k, s.value, s.lo, s.hi, s.n)
        for m, d in v.skill_effects.items()
        for k, s in d.items()
    ]
    rows += [
        one("by_severity", "mean over models", k, x, None, None, None)
        for k, x in level_means(v, "by_severity").items()
    ]
    return rows


def best_worst_rows(v: SuiteView, kind: str = "by_category") -> list[dict[str, Any]]:
    rows = []
    for m, d in v.breakdowns.get(kind, {}).items():
        best = max(d.items(), key=lambda kv: kv[1].value)
        worst = min(d.items(), key=lambda kv: kv[1].value)
        rows.append(
            {
                "suite": v.label,
                "model": m,
                "best": best[0],
                "best_value": best[1].value,
                "worst": worst[0],
                "worst_value": worst[1].value,
                "range": best[1].value - worst[1].value,
            }
        )
    return rows
