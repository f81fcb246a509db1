"""What the report knows of each suite: one `SuiteView` per experiment (its entries ranked, its
frontiers, breakdowns, effects, deviations and paper tables), read from the scored runs. The rows the
page, the plots and the CSVs show are made from it in `report.rows`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from report.extras import deviations_of
from report.frontier import Point, Snapshot, at_dates, over_time, pareto
from report.load import Entry, suite_label

AXES = {
    "price_in": "list price (USD per million input tokens)",
    "run_cost_usd": "measured cost of the run (USD)",
}
POOLED = "all models"
BREAKDOWNS = ("by_dataset", "by_category", "by_skill", "by_severity")


@dataclass(frozen=True)
class Stat:
    value: float
    lo: float | None = None
    hi: float | None = None
    n: int | None = None


@dataclass
class SuiteView:
    suite: str
    label: str
    slug: str
    metric: str
    entries: list[Entry]
    """Ranked: best first; models without a score last."""
    front: dict[str, list[Point]] = field(default_factory=dict)
    snaps: dict[str, list[Snapshot]] = field(default_factory=dict)
    unplaced: dict[str, list[str]] = field(default_factory=dict)
    """Per cost axis: models left off the frontier because their cost is unknown."""
    breakdowns: dict[str, dict[str, dict[str, Stat]]] = field(default_factory=dict)
    """kind (by_category...) → model → key → Stat."""
    skill_effects: dict[str, dict[str, Stat]] = field(default_factory=dict)
    """POOLED (one regression over every model) and/or model name → skill → average marginal effect, pp."""
    chance: float | None = None
    """The score of random guessing, when the suite reports it (VRB: `chance` in scores.json)."""
    skill_notes: dict[str, str] = field(default_factory=dict)
    """Skills of a pooled fit that it could not estimate, with its reason."""
    paper_tables: list[dict[str, Any]] = field(default_factory=list)
    """scores.json `tables`: the suite's own tables as `evalsweep score` prints them."""
    deviations: list[str] = field(default_factory=list)
    """scores.json `protocol.deviations`: where this run departs from the paper's protocol."""
    figures: list[tuple[str, Path]] = field(default_factory=list)
    """The paper's figures a suite drew beside scores.json (its `*_png` keys: JEEBench Fig. 7/8, M3GIA
    Fig. 4-right/5), shown in the suite's details."""
    shaping: dict[str, dict[str, str]] = field(default_factory=dict)
    """scores.json `protocol.request_shaping`: per model, how its request departs from the suite's."""
    factor_correlation: dict[str, dict[str, float]] = field(default_factory=dict)
    """M3GIA: Pearson r between CHC factor accuracies across the run's models (the paper's factor figure)."""
    partial: str | None = None
    """"partial run (20 of 515 items)" when --limit cut the suite short."""
    left_out: list[str] = field(default_factory=list)
    """scores.json `frontier.excluded_models`: models the paper's figures leave out (VRB's EXCLUDE_MODELS),
    kept off the frontier and out of the mean over models."""
    snapshot_dates: bool = False
    """The frontier over time at the paper's dates (scores.json `frontier.snapshots`), not at every change."""
    paper_frontier: list[str] = field(default_factory=list)
    """scores.json `frontier.paper`: what the paper's text says of its frontier, shown beside ours."""
    threshold: float | None = None
    """scores.json `usefulness_threshold`: the paper's bar (VRB: 94%), drawn on the leaderboard."""

    def cost(self, e: Entry, axis: str) -> float | None:
        return e.info.price_in if axis == "price_in" else e.run_cost_usd

    def on(self, e: Entry, axis: str) -> bool:
        return any(p.name == e.model for p in self.front.get(axis, []))

    def name(self, model: str) -> str:
        """The display name; a model the paper's figures leave out (left_out) is marked † wherever shown."""
        mark = " †" if model in self.left_out else ""
        for e in self.entries:
            if e.model == model:
                return e.info.display_name + mark
        return model + mark


def _stat(v: Any) -> Stat | None:
    """A breakdown cell: a bare number or {accuracy|value|acc|ame_pp, ci95|ci95_pp, n|n_items}."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return Stat(float(v))
    if isinstance(v, dict):
        for k in ("accuracy", "value", "acc", "ame_pp", "mean"):
            x = v.get(k)
            if isinstance(x, int | float) and not isinstance(x, bool):
                ci = v.get("ci95", v.get("ci95_pp"))
                ok = (
                    isinstance(ci, list | tuple)
                    and len(ci) == 2
                    and all(isinstance(c, int | float) for c in ci)
                )
                n = v.get("n", v.get("n_items"))
                return Stat(
                    float(x),
                    float(ci[0]) if ok else None,
                    float(ci[1]) if ok else None,
                    n if isinstance(n, int) else None,
                )
    return None


def _stats(d: Any) -> dict[str, Stat]:
    """Cells that hold a number; VRB's skill-effect fit keeps its cells under "effects"."""
    if not isinstance(d, dict):
        return {}
    if isinstance(d.get("effects"), dict):
        d = d["effects"]
    return {str(k): s for k, v in d.items() if (s := _stat(v)) is not None}


def _unestimated(d: Any) -> dict[str, str]:
    """Skills the fit could not estimate (ame_pp null), with the fit's reason."""
    if isinstance(d, dict) and isinstance(d.get("effects"), dict):
        d = d["effects"]
    if not isinstance(d, dict):
        return {}
    return {
        str(k): str(v.get("note") or "not estimated")
        for k, v in d.items()
        if isinstance(v, dict) and "ame_pp" in v and v["ame_pp"] is None
    }


def slugify(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", s).strip("-").lower() or "suite"


def _setting(name: str, v: Any) -> str:
    """One setting in words: `cot-sc`, `judge gpt-4o-mini`, `no judge`, `8 samples`, `all items`."""
    if name == "variant":
        return str(v) if v is not None else "default variant"
    if name == "limit":
        return "all items" if v is None else f"first {v} items"
    if name == "samples":
        return "default samples" if v is None else f"{v} samples"
    if name == "temperature":
        return "default temperature" if v is None else f"T={v}"
    words = name.replace("_", " ")
    if v is None or v is False:
        return f"no {words}"
    if v is True:
        return words
    if isinstance(v, list | tuple):
        v = ",".join(map(str, v))
    return f"{words} {v}"


def _labels(entries: list[Entry]) -> dict[str, str]:
    """Each experiment's name in words: its suite and variant, plus the settings that tell apart
    experiments of one suite (`jeebench (cot)`, `jeebench (cot-sc, judge gpt-4o-mini)`); unique even
    for same-named jsonl files."""
    exps = {e.experiment: (suite_label(e.suite), e.spec) for e in entries}
    out: dict[str, str] = {}
    for label in dict.fromkeys(lb for lb, _ in exps.values()):
        keys = [k for k, (lb, _) in exps.items() if lb == label]
        flat = {
            k: {
                **exps[k][1].get("options", {}),
                **{f: exps[k][1].get(f) for f in ("samples", "temperature", "limit", "data")},
            }
            for k in keys
        }
        names = list(dict.fromkeys(n for f in flat.values() for n in f))
        differ = [n for n in names if len({repr(f.get(n)) for f in flat.values()}) > 1 and n != "variant"]
        for k in keys:
            tags = [str(flat[k]["variant"])] if flat[k].get("variant") is not None else []
            tags += [_setting(n, flat[k].get(n)) for n in differ]
            out[k] = f"{label} ({', '.join(tags)})" if tags else label
    seen: dict[str, int] = {}
    for k, lb in out.items():
        seen[lb] = seen.get(lb, 0) + 1
        if seen[lb] > 1:
            out[k] = f"{lb} #{seen[lb]}"
    return out


def views_of(entries: list[Entry], extras: dict[str, dict[str, Any]]) -> list[SuiteView]:
    """One view per experiment, in the order the run directories were given."""
    labels = _labels(entries)
    slugs: set[str] = set()
    views = []
    for exp, label in labels.items():
        slug = slugify(label)
        while slug in slugs:
            slug += "-x"
        slugs.add(slug)
        views.append(
            build_view(label, slug, [e for e in entries if e.experiment == exp], extras.get(exp, {}))
        )
    return views


def build_view(label: str, slug: str, entries: list[Entry], extra: dict[str, Any]) -> SuiteView:
    ranked = sorted(entries, key=lambda e: (e.accuracy is None, -(e.accuracy or 0.0), e.info.display_name))
    v = SuiteView(suite=ranked[0].suite, label=label, slug=slug, metric=ranked[0].metric, entries=ranked)
    fx = extra.get("frontier") if isinstance(extra.get("frontier"), dict) else {}
    v.left_out = [m for m in fx.get("excluded_models") or [] if any(e.model == m for e in ranked)]
    dates = [date.fromisoformat(d) for d in fx.get("snapshots") or []]
    v.snapshot_dates, v.paper_frontier = bool(dates), [str(x) for x in fx.get("paper") or []]
    dirs = sorted({e.run_dir for e in ranked})
    v.figures = [(f"{k[:-4]} ({d.name})" if len(dirs) > 1 else k[:-4], d / name) for k, name in extra.items()
                 if k.endswith("_png") and isinstance(name, str) and "/" not in name for d in dirs
                 if (d / name).is_file()]  # fmt: skip
    th = extra.get("usefulness_threshold")
    v.threshold = float(th) if isinstance(th, int | float) and not isinstance(th, bool) else None
    for axis in AXES:
        pts = [Point(e.model, v.cost(e, axis), e.accuracy, e.info.release_date) for e in ranked
               if e.model not in v.left_out]  # fmt: skip
        v.front[axis] = pareto(pts)
        v.snaps[axis] = at_dates(pts, dates) if dates else over_time(pts)
        v.unplaced[axis] = [e.model for e in ranked if e.accuracy is not None and v.cost(e, axis) is None]
    for kind in BREAKDOWNS:
        per = {e.model: s for e in ranked if (s := _stats(e.scores.get(kind)))}
        if per:
            v.breakdowns[kind] = per
    v.deviations = deviations_of(extra.get("protocol"))
    shaping = (extra.get("protocol") or {}).get("request_shaping") if isinstance(extra.get("protocol"), dict) else None
    v.shaping = {str(m): dict(r) for m, r in shaping.items() if isinstance(r, dict)} if isinstance(shaping, dict) else {}
    v.paper_tables = [t for t in extra.get("tables") or [] if isinstance(t, dict)]
    fc = extra.get("factor_correlation")
    v.factor_correlation = fc if isinstance(fc, dict) and all(isinstance(r, dict) for r in fc.values()) else {}
    c = extra.get("chance")
    v.chance = float(c) if isinstance(c, int | float) and not isinstance(c, bool) else None
    per_model = {e.model: s for e in ranked if (s := _stats(e.scores.get("skill_effects")))}
    pooled = _stats(extra.get("skill_effects"))
    if pooled:  # VRB: the pooled fit (model fixed effects) and each model's own fit
        v.skill_effects = {POOLED: pooled, **per_model}
        v.skill_notes = _unestimated(extra.get("skill_effects"))
    elif len(per_model) > 1 and all(s == next(iter(per_model.values())) for s in per_model.values()):
        v.skill_effects = {POOLED: next(iter(per_model.values()))}  # one pooled fit copied per model
        v.skill_notes = _unestimated(ranked[0].scores.get("skill_effects"))
    else:
        v.skill_effects = per_model
    return v


def prompt_cache_of(e: Entry) -> dict[str, Any]:
    """scores.json's per-model `prompt_cache`: share of input read from the providers' prompt caches,
    tokens written to them, USD saved against no caching (None when absent: scored before #29)."""
    pc = e.scores.get("prompt_cache")
    pc = pc if isinstance(pc, dict) else {}
    return {"cached_input_share": pc.get("cached_share"), "cache_write_tokens": pc.get("cache_write_tokens"),
            "cache_saved_usd": pc.get("saved_usd")}


def coverage_of(e: Entry) -> dict[str, Any]:
    """scores.json's per-model `n_planned, n_scored, n_errors, coverage` (None when absent)."""
    out: dict[str, Any] = {}
    for k in ("n_planned", "n_scored", "n_errors", "n_reasoning_exhausted"):
        x = e.scores.get(k)
        out[k] = x if isinstance(x, int) and not isinstance(x, bool) else None
    c = e.scores.get("coverage")
    out["coverage"] = float(c) if isinstance(c, int | float) and not isinstance(c, bool) else None
    if out["coverage"] is None and out["n_planned"] and out["n_scored"] is not None:
        out["coverage"] = out["n_scored"] / out["n_planned"]
    return out


def is_fraction(v: SuiteView) -> bool:
    """Suites report accuracies as fractions 0–1 (shown as %); anything above 1 is shown as given."""
    return all(e.accuracy is None or e.accuracy <= 1.0 for e in v.entries)
