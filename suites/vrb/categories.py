"""Task category effects (the reference's Fig. 11): how hard each kind of task is.

The reference fits `correct ~ category + has_<skill>... + (1|model) + (1|dataset)` (Bayesian, bambi;
`category_analysis.py`; the `has_` indicators are every skill but Other) and plots
`bmb.interpret.predictions(..., average_by=["category"])`: with no `conditional` bambi predicts on the
observed rows, so a category's value is the mean of its own answers' fitted probabilities. Here the same
predictors (`covariates="skills"`, the default; `"none"` drops the skill indicators) enter a fixed-effects
logit (statsmodels binomial GLM on answers grouped by cell, the per-answer likelihood), and a category's
predicted accuracy is that same mean (`estimand="reference"`). Under the maximum-likelihood fit it equals
the category's observed share of right answers (the score equation of its dummy), whatever the covariates;
the reference's posterior, shrunk by its priors, lies close to it. `estimand="standardised"` (recorded)
instead averages P(correct | category = c) over every answer, models, datasets and skills as observed:
how hard the task format is with the skill mix held fixed. 95% CIs: percentile bootstrap over items
(200 resamples, refitted; the reference: per-answer 94% HDI bounds averaged, bambi `average_by`). Same
item set as the skill effects (suites.vrb.score.EFFECT_ITEMS).
"""

from __future__ import annotations

import warnings

import numpy as np
import statsmodels.api as sm

from suites.base import Table
from suites.vrb.effects import OTHER, Answers

N_RESAMPLES = 200


def _design(codes: dict[str, np.ndarray], sizes: dict[str, int], extra: np.ndarray) -> np.ndarray:
    """Intercept + treatment dummies (level 0 the reference) of each factor, from integer codes, + `extra`
    columns (the skill indicators, as observed)."""
    cols = [np.ones(len(next(iter(codes.values()))))]
    for f, c in codes.items():
        cols += [(c == k).astype(float) for k in range(1, sizes[f])]
    return np.column_stack(cols + list(extra.T))


def _predicted(
    codes: dict[str, np.ndarray],
    sizes: dict[str, int],
    extra: np.ndarray,
    w: np.ndarray,
    y: np.ndarray,
    estimand: str = "reference",
) -> np.ndarray | None:
    """Fit on cells (weights w = answers per cell, y = share right); each category's predicted accuracy:
    the mean of its own answers' fitted probabilities (reference) or over every answer set to it."""
    X = _design(codes, sizes, extra)
    keep = w > 0
    out = np.empty(sizes["focal"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # separated cells (all right / all wrong) push the fit to the bounds
        try:
            fit = sm.GLM(y[keep], X[keep], family=sm.families.Binomial(), var_weights=w[keep]).fit()
        except (np.linalg.LinAlgError, ValueError):
            return None
        if estimand == "reference":
            p = fit.predict(X)
            for c in range(sizes["focal"]):
                mine = codes["focal"] == c
                out[c] = float(np.sum((p * w)[mine]) / np.sum(w[mine])) if np.sum(w[mine]) else np.nan
            return out
        for c in range(sizes["focal"]):
            alt = {**codes, "focal": np.full_like(codes["focal"], c)}
            p = fit.predict(_design(alt, sizes, extra))
            out[c] = float(np.sum(p * w) / np.sum(w))
    return out


COVARIATES = ("skills", "none")
"""`--category-covariates`: the skill indicators beside category (the reference's Fig. 11 model) or none."""
ESTIMANDS = ("reference", "standardised")
"""`--category-estimand`: each category's own fitted probabilities averaged (the reference) or every answer
set to the category in turn (marginal standardisation)."""
_ESTIMATOR = {
    "reference": "the mean of each category's own fitted probabilities (bambi predictions, average_by category)",
    "standardised": "marginal standardisation (every answer set to each category in turn)",
}


def category_effects(
    a: Answers,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
    covariates: str = "skills",
    estimand: str = "reference",
) -> dict:
    """{"formula", "estimator", "categories": {name: {"accuracy", "ci95", "n_items"}}} or a note."""
    names_ = {s for sk in a.skills for s in sk} - {OTHER}  # the reference's has_ columns leave out Other
    skill_names = sorted(names_) if covariates == "skills" else []
    out: dict = {
        "formula": "correct ~ C(category) + "
        + "".join(f"has_{s} + " for s in skill_names)
        + "C(model) + C(dataset)",
        "covariates": covariates,
        "estimand": estimand,
        "estimator": f"logit (statsmodels GLM binomial); predicted accuracy: {_ESTIMATOR[estimand]}; "
        f"percentile item bootstrap ({n_resamples})",
    }
    if not len(a.correct) or len(set(a.category)) < 2:
        out["categories"] = {}
        out["note"] = "needs answers to at least two categories"
        return out
    cats = level_effects(a, a.category, ("model", "dataset"), skill_names, seed, n_resamples, estimand)
    if cats is None:
        out["categories"], out["note"] = {}, "fit failed"
        return out
    out["categories"] = dict(sorted(cats.items(), key=lambda kv: kv[1]["accuracy"]))
    return out


def level_effects(
    a: Answers,
    focal: list[str] | tuple[str, ...],
    others: tuple[str, ...],
    skill_names: list[str],
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
    estimand: str = "reference",
) -> dict[str, dict] | None:
    """Predicted accuracy per level of `focal` (one label per answer) from a logit on C(focal) + skill
    indicators + C(each of `others`, Answers fields): {level: {"accuracy", "ci95", "n_items"}}, None when
    the fit fails. Also the reference's severity regression (severity.py)."""
    patterns = ["|".join(sorted(set(sk) & set(skill_names))) for sk in a.skills]
    columns = {"focal": focal, **{f: getattr(a, f) for f in others}, "pattern": patterns}
    names = {f: np.unique(np.asarray(v, dtype=object), return_inverse=True) for f, v in columns.items()}
    levels = {f: list(v[0]) for f, v in names.items()}
    codes = {f: v[1].ravel() for f, v in names.items()}
    sizes = {f: len(levels[f]) for f in levels}
    # cells: one row per (focal level, others..., skill pattern) present
    order = tuple(columns)
    key = np.zeros(len(a.correct), dtype=np.int64)
    for f in order:
        key = key * sizes[f] + codes[f]
    cells, cell_of = np.unique(key, return_inverse=True)
    cell_codes, rest = {}, cells.copy()
    for f in reversed(order):
        cell_codes[f], rest = rest % sizes[f], rest // sizes[f]
    pattern_skills = np.array(
        [[float(s in str(p).split("|")) for s in skill_names] for p in levels["pattern"]]
    ).reshape(sizes["pattern"], len(skill_names))
    extra = pattern_skills[cell_codes.pop("pattern")]
    extra = extra[:, (extra.min(axis=0) < extra.max(axis=0))] if len(extra) else extra  # constant: no column
    sizes.pop("pattern")
    y = np.asarray(a.correct, dtype=float)
    item_codes, item_idx = np.unique(np.asarray(a.item, dtype=object), return_inverse=True)

    def fit(weights: np.ndarray) -> np.ndarray | None:
        w = np.bincount(cell_of, weights=weights, minlength=len(cells))
        s = np.bincount(cell_of, weights=weights * y, minlength=len(cells))
        share = np.divide(s, w, out=np.zeros_like(s), where=w > 0)
        return _predicted(cell_codes, sizes, extra, w, share, estimand)

    point = fit(np.ones(len(y)))
    if point is None:
        return None
    rng = np.random.default_rng(seed)
    reps = []
    for _ in range(n_resamples):
        counts = np.bincount(rng.integers(0, len(item_codes), len(item_codes)), minlength=len(item_codes))
        r = fit(counts[item_idx].astype(float))
        if r is not None:
            reps.append(r)
    R = np.array(reps)
    out: dict[str, dict] = {}
    for c, name in enumerate(levels["focal"]):
        ok = len(R) and np.isfinite(R[:, c]).any()  # a resample may miss a level
        lo, hi = np.nanquantile(R[:, c], [0.025, 0.975]) if ok else (np.nan, np.nan)
        n_items = len(np.unique(item_idx[codes["focal"] == c]))
        out[str(name)] = {"accuracy": float(point[c]), "ci95": [float(lo), float(hi)], "n_items": n_items}
    return out


def category_table(effects: dict, items_note: str = "fatal items excluded") -> Table | None:
    """Fig. 11 in percent, hardest first; the paper prints it as a plot without numbers (App. C)."""
    cats = effects.get("categories") or {}
    if not cats:
        return None
    pct = lambda x: f"{100 * x:.1f}"  # noqa: E731
    return Table(
        title="vrb: task category effects (Fig. 11): predicted accuracy %",
        columns=["category", "items", "predicted accuracy %", "95% CI", "paper"],
        rows=[[c, v["n_items"], pct(v["accuracy"]), f"[{pct(v['ci95'][0])}, {pct(v['ci95'][1])}]", "-"]
              for c, v in cats.items()],  # fmt: skip
        note=effects["formula"] + "; " + effects["estimator"] + "; " + items_note
        + "; paper: Fig. 11 is a plot, its text gives no numbers",
    )
