"""Image-quality severity beyond the per-model breakdown (Fig. 10, §4.3), as the reference's
error_by_model_analysis.py computes it, over the models the reference keeps (EXCLUDE_MODELS left out):

- the mean over models of each model's accuracy per level (Fig. 10's thick line; the paper: 38% → ≈30%);
- the severity regression `correct ~ C(severity, Treatment('no_error')) + (1|category) + (1|model) +
  (1|dataset)` (bambi), each level's predicted accuracy the mean of its own answers' fitted probabilities
  (`predictions(average_by=["severity_level"])`). Here a fixed-effects logit (the recorded estimator
  deviation), whose own-fitted means equal each level's observed share of right answers;
- model tiers: the models ranked by accuracy on the non-fatal items, the first n//3 "Top", the next n//3
  "Middle", the rest "Low"; each tier's accuracy per level pooled over its answers (the reference's
  line plot; it backs §4.3's "the steepest rate of decline was for the highest performing models").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from suites.base import Table
from suites.vrb.categories import N_RESAMPLES, level_effects
from suites.vrb.effects import Answers

LEVELS = ("no_error", "minor", "medium")
"""The reference's `severity_order`; fatal items are left out."""
TIERS = ("Top", "Middle", "Low")
FORMULA = "correct ~ C(severity, Treatment('no_error')) + C(category) + C(model) + C(dataset)"


def severity_mean(per_model: dict[str, dict[str, float]]) -> dict[str, float]:
    """Mean over the models that have each level of their accuracy at that level (pandas' mean skips NaN)."""
    return {
        lv: float(np.mean([d[lv] for d in per_model.values() if lv in d]))
        for lv in LEVELS
        if any(lv in d for d in per_model.values())
    }


def severity_effects(a: Answers, severity: Sequence[str], seed: int = 0, n_resamples: int = N_RESAMPLES) -> dict:
    """{"formula", "estimator", "levels": {level: {"accuracy", "ci95", "n_items"}}} or a note."""
    out: dict = {
        "formula": FORMULA,
        "estimator": "logit (statsmodels GLM binomial); predicted accuracy: the mean of each level's own fitted "
        f"probabilities (bambi predictions, average_by severity); percentile item bootstrap ({n_resamples})",
    }
    if len(set(severity)) < 2 or "no_error" not in severity:
        return {**out, "levels": {}, "note": "needs answers at no_error and another level"}
    got = level_effects(a, list(severity), ("category", "model", "dataset"), [], seed, n_resamples)
    if got is None:
        return {**out, "levels": {}, "note": "fit failed"}
    return {**out, "levels": {lv: got[lv] for lv in LEVELS if lv in got}}


def severity_tiers(answers: dict[str, list[tuple[str, float]]]) -> dict:
    """answers: model → [(severity level, score)] on the non-fatal items. {"tiers": {tier: {"models",
    "overall": [lo, hi], "by_severity": {level: {"accuracy", "n"}}}}}; needs three models."""
    overall = {m: float(np.mean([s for _, s in v])) for m, v in answers.items() if v}
    if len(overall) < 3:
        return {"tiers": {}, "note": "needs at least three models"}
    ranked = sorted(overall, key=lambda m: (-overall[m], m))
    k = len(ranked) // 3
    groups = dict(zip(TIERS, (ranked[:k], ranked[k : 2 * k], ranked[2 * k :]), strict=True))
    tiers = {}
    for tier, ms in groups.items():
        by = {}
        for lv in LEVELS:
            xs = [s for m in ms for sev, s in answers[m] if sev == lv]
            if xs:
                by[lv] = {"accuracy": float(np.mean(xs)), "n": len(xs)}
        accs = [overall[m] for m in ms]
        tiers[tier] = {"models": ms, "overall": [min(accs), max(accs)], "by_severity": by}
    return {"tiers": tiers}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def severity_tables(effects: dict, tiers: dict, note: str) -> list[Table]:
    """The regression's predicted accuracy per level and the tiers' accuracy per level, in %."""
    out = []
    lv = effects.get("levels") or {}
    if lv:
        out.append(Table(
            title="vrb: image-error severity regression (the reference's error_by_model_analysis.py): "
            "predicted accuracy %",
            columns=["severity", "items", "predicted accuracy %", "95% CI"],
            rows=[[k, v["n_items"], _pct(v["accuracy"]), f"[{_pct(v['ci95'][0])}, {_pct(v['ci95'][1])}]"]
                  for k, v in lv.items()],
            note=effects["formula"] + "; " + effects["estimator"] + "; " + note
            + "; paper: code only, no figure or number",
        ))  # fmt: skip
    ts = tiers.get("tiers") or {}
    if ts:
        def drop(t: dict) -> str:
            b = t["by_severity"]
            return "-" if not {"no_error", "medium"} <= set(b) else \
                f"{100 * (b['medium']['accuracy'] - b['no_error']['accuracy']):+.1f}"

        out.append(Table(
            title="vrb: accuracy % by model tier and image-error severity (the reference's top/middle/low thirds)",
            columns=["tier", "models", "overall", *LEVELS, "medium - no_error pp"],
            rows=[[t, len(v["models"]), f"{_pct(v['overall'][0])}-{_pct(v['overall'][1])}",
                   *(_pct(v["by_severity"].get(lv_, {}).get("accuracy")) for lv_ in LEVELS), drop(v)]
                  for t, v in ts.items()],
            note="tiers: models ranked by accuracy on the non-fatal items, first n//3 Top, next n//3 Middle, the "
            "rest Low; a tier's accuracy pools its models' answers; paper (§4.3): the steepest decline for the "
            "highest-performing models (no numbers); " + note,
        ))  # fmt: skip
    return out
