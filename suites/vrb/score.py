"""VRB metrics per model: item accuracy with bootstrap CIs, by dataset, task category, skill and
image-quality severity, and skill effects (see effects.py).

- An item's score is the mean over its answered samples (0/1 with the default single sample). A failed
  call is not a wrong answer: its scored row has `score: None` and its `error_kind`, and it is left out
  of every figure (an item with no answered sample is left out of the accuracy). Accuracy is the mean
  over items, so the combined accuracy is the datasets' accuracies weighted by question count, as in
  the paper. An answer the rules cannot read stays wrong, as the paper scores it.
- 95% CIs: percentile bootstrap over items, 1,000 resamples, seed 0 (`suites.stats.bootstrap_ci`).
- Category accuracy keeps every item, as the reference's category views (visualisations_paper.py: Figs 8,
  12 group all answers by category); the severity breakdown leaves out items annotated `fatal`; per-skill
  accuracy, as the reference's skill analysis (visualisations_paper.py §2), leaves out every item with an
  image-error annotation and the skill `Other`; the skill and category effects use the reference's item
  set (EFFECT_ITEMS); the headline accuracy keeps every item. An item counts once for each of its skills.
- Severity levels: no_error, minor, medium (`moderate` is read as medium), as in the reference.
- Skill and category effects pool the run's models but the reference's excluded list (REFERENCE_EXCLUDED;
  `--exclude-models`), with model fixed effects (scores.json's top-level `skill_effects`); each model's own `skill_effects` fits the same regression on its answers alone
  (dataset and category fixed effects), where estimable.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from core.types import Row
from suites.base import RunSpec, ScoreReport, Sink, SuiteError, Table, by_model, ranked, scored_row
from suites.stats import bootstrap_ci, ci_method, mean
from suites.vrb import data, paper
from suites.vrb.categories import category_effects, category_table
from suites.vrb.data import CATEGORIES, SKILLS, Item
from suites.vrb.effects import OTHER, Answers, skill_effects
from suites.vrb.extract import EXTRACTORS
from suites.vrb.severity import LEVELS, severity_effects, severity_mean, severity_tables, severity_tiers

SEVERITY_LEVELS = ("no_error", "minor", "medium")
"""The reference's order (error_by_model_analysis.py `severity_order`); fatal items are left out."""
REFERENCE_EXCLUDED = frozenset({
    "gpt-5-mini-2025-08-07-high", "gpt-5-2025-08-07-high", "gpt-5-nano-2025-08-07-high",
    "gpt-5-nano-2025-08-07-low", "gpt-5-mini-2025-08-07-low", "gpt-5-2025-08-07-low",
    "gemini-2.0-flash-thinking-exp-01-21", "gemini-2.0-flash-thinking-exp-1219", "lfm2-vl-1.6b",
    "claude-3-7-sonnet-20250219-thinking-low", "gpt-5.1-2025-11-13-high", "claude-opus-4-5-20251101-thinking-high",
})  # fmt: skip
"""`EXCLUDE_MODELS` of the reference's category_analysis.py, skill_difficulty_analysis.py and
error_by_model_analysis.py: left out of the pooled effects (a model matches by the last `/` part of its name)."""
N_RESAMPLES = 1000
SEED = 0


EFFECT_ITEMS = {
    "reference": lambda it: it.severity in (None, "no_error"),
    "nonfatal": lambda it: it.severity != "fatal",
}
"""Items in the skill and category effects: the reference's (every item with an image-error annotation
dropped, as its category_analysis.py does; the default) or all but the fatal ones (`--effects-items nonfatal`)."""


def _acc(scores: list[float]) -> dict[str, Any]:
    ci = bootstrap_ci(scores, n_resamples=N_RESAMPLES, seed=SEED)
    return {"accuracy": mean(scores), "ci95": list(ci) if ci else None, "n": len(scores)}


def _ordered(found: Iterable[str], known: tuple[str, ...]) -> list[str]:
    found = set(found)
    return [k for k in known if k in found] + sorted(found - set(known))


def breakdowns(item_scores: dict[str, float], items: dict[str, Item]) -> dict[str, Any]:
    """Accuracy overall and by dataset, category, skill and severity for one model's item scores."""
    its = [items[k] for k in item_scores]
    out = _acc(list(item_scores.values()))

    def by(key) -> dict[str, list[float]]:
        groups: dict[str, list[float]] = {}
        for it in its:
            for g in key(it):
                groups.setdefault(g, []).append(item_scores[it.key])
        return groups

    clean = EFFECT_ITEMS["reference"]
    ds = by(lambda it: [it.dataset])
    cat = by(lambda it: [it.category] if it.category else [])  # every item, as the reference's Figs 8 and 12
    skl = by(lambda it: [s for s in it.skills if s != OTHER] if clean(it) else [])
    sev = by(lambda it: [it.severity] if it.severity in SEVERITY_LEVELS else [])
    out["by_dataset"] = {k: _acc(ds[k]) for k in ds}
    out["by_category"] = {k: _acc(cat[k]) for k in _ordered(cat, CATEGORIES)}
    out["by_skill"] = {k: _acc(skl[k]) for k in _ordered(skl, SKILLS)}
    out["by_severity"] = {k: _acc(sev[k]) for k in SEVERITY_LEVELS if k in sev}
    return out


def _answers(rows: list[Row], items: dict[str, Item], which: str = "reference") -> Answers:
    """Scored answers to the annotated items of the effects' item set (EFFECT_ITEMS): the regressions' sample."""
    use = [
        r
        for r in rows
        if r["score"] is not None and (it := items[r["item"]]).category and EFFECT_ITEMS[which](it)
    ]
    return Answers(
        correct=[r["score"] for r in use],
        item=[r["item"] for r in use],
        model=[r["model"] for r in use],
        dataset=[items[r["item"]].dataset for r in use],
        category=[items[r["item"]].category for r in use],
        skills=[items[r["item"]].skills for r in use],
    )


def extractor(spec: RunSpec) -> str:
    """`--extractor`: the reference's eight steps (default) or our rules (extract.py)."""
    name = spec.opt("extractor") or "reference"
    if name not in EXTRACTORS:
        raise SuiteError(f"--extractor {name!r}: use {' or '.join(EXTRACTORS)}")
    return name


def _scored(r: Row, it: Item, how: str) -> Row:
    """A reasoning model's empty answer cut at the token limit (runner error_kind `reasoning_exhausted`) is
    an answer the model gave, scored wrong as the reference does (run.py: the empty `Message` reads no
    label); only a failed call stays an unscored error row."""
    cut = r.get("error_kind") == "reasoning_exhausted"
    if cut:
        r = {**r, "error": None, "text": r.get("text") or ""}
    text = None if r.get("error") else r.get("text")
    ext, step = EXTRACTORS[how](text, it.labels)
    out = scored_row(r, extracted=ext, gold=it.solution, score=float(ext == it.solution), extract_step=step,
                     dataset=it.dataset, category=it.category, skills=list(it.skills), severity=it.severity)  # fmt: skip
    if cut:
        out.update(cut_at_limit=True, finish_reason=r.get("finish_reason"))
    return out


def score(rows: Iterable[Row], spec: RunSpec, run_dir: Path, sink: Sink | None = None) -> ScoreReport:
    """One model at a time: its scored rows go to `sink`; kept are its item scores and, for the pooled
    skill-effect fit, one small record per answer to an annotated item."""
    sink = sink if sink is not None else Sink()
    which, how, leave_out = effect_items(spec), extractor(spec), excluded_models(spec)
    covariates = spec.opt("category_covariates") or "skills"
    estimand = spec.opt("category_estimand") or "reference"
    root = data.data_dir(spec)
    items = {it.key: it for it in data.load(spec)}
    annotated = any(it.category for it in items.values())
    models: dict[str, dict[str, Any]] = {}
    pooled: list[Row] = []
    for m, groups in by_model(rows):
        mine: list[Row] = []
        for item, grp in groups:
            it = items.get(item)
            if it is None:
                raise SuiteError(
                    f"{run_dir}: results hold item {item!r}, which is not in the VRB data at {root}; "
                    "score with the --data-dir/--datasets the run used"
                )
            for r in grp:
                if r.get("pass", "answer") == "answer":
                    row = _scored(r, it, how)
                    sink(row)
                    mine.append({k: row[k] for k in ("model", "item", "score", "extracted", "error")})
        per_item: dict[str, list[float]] = {}
        for x in mine:
            if x["score"] is not None:
                per_item.setdefault(x["item"], []).append(x["score"])
        item_scores = {k: float(np.mean(v)) for k, v in per_item.items()}
        models[m] = breakdowns(item_scores, items)
        models[m]["no_answer"] = sum(x["extracted"] is None and x["error"] is None for x in mine)
        models[m]["errors"] = sum(x["error"] is not None for x in mine)
        answered = [x["score"] for x in mine if x["score"] is not None]  # the reference: a failure is wrong
        models[m]["accuracy_failures_wrong"] = sum(answered) / len(mine) if mine else None
        if annotated:
            fit = skill_effects(_answers(mine, items, which), SKILLS, fixed=("dataset", "category"))
            models[m]["skill_effects"] = fit["effects"]
            if not _excluded(m, leave_out):
                pooled += mine
        else:
            models[m]["skill_effects"] = {}
    models = {m: models[m] for m in sorted(models)}

    extra: dict[str, Any] = {"chance": float(np.mean([1 / len(it.labels) for it in items.values()]))}
    excluded = sorted(m for m in models if _excluded(m, leave_out))
    kept = [m for m in models if m not in excluded]
    extra["usefulness_threshold"] = paper.USEFULNESS_THRESHOLD  # §1, §3.3
    for v in models.values():
        v["meets_usefulness_threshold"] = v["accuracy"] is not None and v["accuracy"] >= paper.USEFULNESS_THRESHOLD
    extra["frontier"] = {  # read by the report: the paper's snapshots, the models its figures leave out
        "snapshots": list(paper.FRONTIER_SNAPSHOTS.values()),
        "excluded_models": excluded,
        "paper": list(paper.FRONTIER_TEXT),
    }
    per_level = {m: {k: x["accuracy"] for k, x in models[m]["by_severity"].items()} for m in kept}
    extra["severity_mean"] = {"models": kept, "excluded_models": excluded, "mean": severity_mean(per_level),
                              "paper": paper.SEVERITY_MEAN}  # fmt: skip
    if annotated and pooled:
        extra["skill_effects"] = {
            "models": sorted(set(models) - set(excluded)),
            "excluded_models": excluded,
            "items": which,
            **skill_effects(_answers(pooled, items, which), SKILLS),
            "paper_ame_pp": {k: v[0] for k, v in paper.SKILL_AME_PP.items()},
        }
        unknown = sorted({s for it in items.values() for s in it.skills} - set(SKILLS))
        if unknown:
            extra["skill_effects"]["unknown_skills"] = unknown  # not among the paper's ten: not in the fits
        extra["category_effects"] = {
            "items": which,
            "excluded_models": excluded,
            **category_effects(_answers(pooled, items, which), covariates=covariates, estimand=estimand),
        }
        sev = _answers(pooled, items, "nonfatal")
        extra["severity_effects"] = {
            "excluded_models": excluded,
            **severity_effects(sev, [items[k].severity or "no_error" for k in sev.item]),
        }
        per_model: dict[str, list[tuple[str, float]]] = {m: [] for m in kept}
        for r in pooled:
            it = items[r["item"]]
            if r["score"] is not None and it.severity in LEVELS:
                per_model[r["model"]].append((it.severity, r["score"]))
        extra["severity_tiers"] = {"excluded_models": excluded, **severity_tiers(per_model)}
    else:
        extra["skill_effects"] = {
            "note": f"no <dataset>{data.CATEGORIES_SUFFIX} in {root}: no skill annotations"
        }
    return ScoreReport(models=models, scored=sink.rows, tables=tables(models, extra), extra=extra)


ITEMS_NOTE = {
    "reference": "items with any image-error annotation excluded (the reference's set)",
    "nonfatal": "items with fatal image errors excluded",
}


def excluded_models(spec: RunSpec) -> frozenset[str]:
    """`--exclude-models`: names (lower case) left out of the pooled effects; default the reference's."""
    raw = spec.opt("exclude_models")
    if raw is None:
        return REFERENCE_EXCLUDED
    names = raw.split(",") if isinstance(raw, str) else list(raw)
    names = [str(n).strip().lower() for n in names if str(n).strip()]
    return frozenset() if names in ([], ["none"]) else frozenset(names)


def _excluded(model: str, names: frozenset[str]) -> bool:
    return model.lower() in names or model.rsplit("/", 1)[-1].lower() in names


def effect_items(spec: RunSpec) -> str:
    which = spec.opt("effects_items", "reference")
    if which not in EFFECT_ITEMS:
        raise SuiteError(f"--effects-items {which!r}: use reference or nonfatal")
    return which


BREAKDOWN_NOTE = {
    "by_category": "every item, as the reference's category views (Figs 8, 12: no image-error filter)",
    "by_skill": "items with any image-error annotation and the skill Other excluded (the reference's skill "
    "analysis, visualisations_paper.py §2)",
}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _pool_note(effects: dict[str, Any]) -> str:
    out = ITEMS_NOTE[effects["items"]]
    if effects.get("excluded_models"):
        out += "; models left out (--exclude-models): " + ", ".join(effects["excluded_models"])
    return out


SPREAD_NOTE = (
    "overall: the model's accuracy (Fig. 8's diamond); best, worst: its best and worst task category; range pp: "
    "best − worst, points (the grey line); paper range: the text's figure for the models it names; gap pp: range − "
    "paper range; " + paper.TASK_SPREAD_TEXT
)


def _spread(model: str, v: dict[str, Any]) -> list[str]:
    """Fig. 8's cells for one model: overall, best and worst task category, their range and the paper's."""
    acc = {c: x["accuracy"] for c, x in v["by_category"].items() if x["accuracy"] is not None}
    if not acc:
        return [_pct(v["accuracy"]), "-", "-", "-", "-", "-"]
    best, worst = max(acc, key=acc.__getitem__), min(acc, key=acc.__getitem__)
    span = 100 * (acc[best] - acc[worst])
    theirs = paper.task_range(model)
    return [_pct(v["accuracy"]), best, worst, f"{span:.1f}", theirs, paper.gap(span, theirs)]


def _range_note(accuracies: list[float | None]) -> str:
    """§4.1's range over the paper's 45 models beside this run's (the models its tables show)."""
    lo, hi = paper.ACCURACY_RANGE
    got = [100 * a for a in accuracies if a is not None]
    ours = f"{min(got):.1f}-{max(got):.1f}% over these {len(got)}" if got else "none here"
    return f"range: the paper's 45 models {lo:.0f}-{hi:.0f}% (§4.1), {ours}"


def _ci(ci: list[float] | None) -> str:
    return "-" if not ci else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def tables(models: dict[str, dict[str, Any]], extra: dict[str, Any]) -> list[Table]:
    left_out = extra.get("frontier", {}).get("excluded_models") or []
    # the paper's per-model views never show the reference's EXCLUDE_MODELS; --exclude-models none keeps them
    order = [m for m in ranked(models, "accuracy") if m not in left_out]
    dsets = _ordered({d for v in models.values() for d in v["by_dataset"]}, ())
    th = extra.get("usefulness_threshold", paper.USEFULNESS_THRESHOLD)
    gone = (f"; left out of every per-model table, the severity mean and analyses and the frontier, as the "
            f"paper's figures (kept with --exclude-models none): {', '.join(left_out)}" if left_out else "")  # fmt: skip
    out = [
        Table(
            title=f"vrb: accuracy % (chance {100 * extra['chance']:.0f}%; the paper's usefulness threshold "
            f"{100 * th:.0f}%)",
            columns=["model", "n", "accuracy", "95% CI", *dsets, "no answer", "errors", "failures wrong",
                     f"vs {100 * th:.0f}%", "paper", "gap"],  # fmt: skip
            rows=[
                [
                    m,
                    v["n"],
                    _pct(v["accuracy"]),
                    _ci(v["ci95"]),
                    *(_pct(v["by_dataset"].get(d, {}).get("accuracy")) for d in dsets),
                    v["no_answer"],
                    v["errors"],
                    _pct(v.get("accuracy_failures_wrong")),
                    "-" if v["accuracy"] is None else f"{100 * (v['accuracy'] - th):+.1f}",
                    paper.accuracy(m),
                    paper.gap(None if v["accuracy"] is None else 100 * v["accuracy"], paper.accuracy(m)),
                ]
                for m, v in ((m, models[m]) for m in order)
            ],
            note=ci_method(max((v["n"] for v in models.values()), default=0), N_RESAMPLES, SEED)
            + "; over answered items; 'failures wrong': the reference's count, failed calls as wrong answers; "
            f"'vs {100 * th:.0f}%': points to the paper's minimum capability threshold for classroom use (§1, "
            "§3.3: the share of items the three annotators agreed on); 'paper': the accuracy its text gives "
            "(§4.1, §4.1.1; Fig. 4's bars carry no numbers in the text); 'gap': accuracy − paper, points, "
            "where the paper gives a number ('≈' read as the number; the model and the protocol together); "
            + _range_note([models[m]["accuracy"] for m in order]) + "; " + paper.NOT_MATCHED
            + gone,
            key=("accuracy", "95% CI"),
        )
    ]
    for key, title, known in (
        ("by_category", "accuracy % by task category", CATEGORIES),
        ("by_skill", "accuracy % by skill", SKILLS),
        ("by_severity", "accuracy % by image-quality severity", SEVERITY_LEVELS),
    ):
        cols = _ordered({c for v in models.values() for c in v[key]}, known)
        if cols:
            rows = [[m, *(_pct(models[m][key].get(c, {}).get("accuracy")) for c in cols)] for m in order]
            note = BREAKDOWN_NOTE.get(key, "") + gone
            if key == "by_severity" and (sm := extra.get("severity_mean")):
                rows.append(["mean over models", *(_pct(sm["mean"].get(c)) for c in cols)])
                rows.append(["paper (Fig. 10, §4.3)", *(sm["paper"].get(c, "-") for c in cols)])
                mean = sm["mean"]
                rows.append(["gap (mean − paper, points)", *(paper.gap(None if mean.get(c) is None else
                             100 * mean[c], sm["paper"].get(c, "-")) for c in cols)])  # fmt: skip
                note = "'mean over models': the mean of the models' accuracies (Fig. 10's thick line)" + gone
            out.append(Table(title=f"vrb: {title}", columns=["model", *cols], rows=rows, note=note))
            if key == "by_category":
                out.append(Table(title="vrb: task spread per model (Fig. 8)",
                                 columns=["model", "overall", "best", "worst", "range pp", "paper range", "gap pp"],
                                 rows=[[m, *_spread(m, models[m])] for m in order], note=note + "; " + SPREAD_NOTE))  # fmt: skip
    eff = extra.get("skill_effects", {}).get("effects")
    if eff:
        out.append(
            Table(
                title="vrb: skill effects, pooled over models (average marginal effect, percentage points)",
                columns=["skill", "AME pp", "95% CI", "items", "paper (Fig. 9)", "gap pp"],
                rows=[
                    [
                        s,
                        "-" if e["ame_pp"] is None else f"{e['ame_pp']:+.1f}",
                        "-" if e["ci95_pp"] is None else f"[{e['ci95_pp'][0]:+.1f}, {e['ci95_pp'][1]:+.1f}]",
                        e["n_items"],
                        paper.SKILL_AME_PP.get(s, (None, "-"))[1],
                        paper.gap(e["ame_pp"], paper.SKILL_AME_PP.get(s, (None, "-"))[1]),
                    ]
                    for s, e in eff.items()
                ],
                note=extra["skill_effects"]["formula"] + "; " + _pool_note(extra["skill_effects"])
                + "; paper: §4.2.2's values for Fig. 9; gap: AME − paper, points"
                + (f"; skills not among the paper's ten, left out of the fits: "
                   f"{', '.join(extra['skill_effects']['unknown_skills'])}"
                   if extra["skill_effects"].get("unknown_skills") else ""),  # fmt: skip
            )
        )
    cat = extra.get("category_effects")
    t = category_table(cat, _pool_note(cat)) if cat else None
    out += [t] if t else []
    if "severity_effects" in extra:
        dropped = extra["severity_effects"]["excluded_models"]
        note = "items with fatal image errors excluded" + (
            f"; models left out (--exclude-models): {', '.join(dropped)}" if dropped else "")
        out += severity_tables(extra["severity_effects"], extra.get("severity_tiers", {}), note)
    return out
