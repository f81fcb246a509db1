"""Skill effects: logistic regression of answer correctness on skill indicators with fixed effects.

    logit P(correct) = b0 + sum_s b_s [item needs skill s] + model + dataset + task category fixed effects

fitted with statsmodels (a binomial GLM on answers grouped by covariate pattern: the same likelihood as
the per-answer logit, far fewer rows). The effect of skill s is its average marginal effect (AME) in
percentage points: the mean over the answers of P(correct | s present) - P(correct | s absent), other
covariates as observed, as in the paper (which fitted a Bayesian version with random model and dataset
effects). Its 95% CI is a percentile bootstrap over items (an item's answers from every model move
together), 1,000 resamples by default. The replicates are refitted by a batched Newton solver in numpy
warm-started at the statsmodels estimate (tests check it gives statsmodels' fit). A fixed effect with
more than 10 levels (the 45 models of a sweep) is absorbed: answers are laid out on a grid of its levels x
the distinct rows of the other covariates, so the Hessian's big blocks are sums over the grid rather than
products with the full design (a 45-model x 701-item bootstrap takes seconds, not minutes).

Choices, all reported in the output: `Other` is not an indicator (it is the remainder, as in the
reference); a fixed-effect level whose answers are all right or all wrong carries no information on the
skills and is dropped with its answers (as Stata's logit does). A skill gets `ame_pp: null` and a
`note` when it never or always occurs, when every answer to its items is right (or wrong), when it is
collinear with the fixed effects and the other skills, or when its estimate diverges (|log-odds| or s.e.
above 10: the answers are separated and the maximum-likelihood estimate does not exist, common in a
single model's fit on few items).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import statsmodels.api as sm
from scipy.special import expit

OTHER = "Other"
ABSORB_OVER = 10
"""A fixed effect with more levels than this is laid out as the grid's rows rather than as dummies."""
SEPARATED = 10.0
"""|log-odds| or standard error above this: (quasi-)separation, the MLE does not exist (odds ratio > 2e4)."""


@dataclass
class Answers:
    """One row per scored answer (model, item, sample) of the items in the regression."""

    correct: Sequence[float]  # 0/1
    item: Sequence[str]
    model: Sequence[str]
    dataset: Sequence[str]
    category: Sequence[str]
    skills: Sequence[tuple[str, ...]]


@dataclass
class Design:
    """The answers grouped on a grid of cells (level, pattern): `n_levels` levels of the absorbed fixed
    effect (level 0 the reference) times the distinct rows `Zq` of the other covariates (skills, the
    other fixed effects' dummies, the intercept). Cell (l, q) has covariates [Zq[q], one-hot(l)[1:]]."""

    Zq: np.ndarray  # (Q, k)
    n_levels: int

    @property
    def X(self) -> np.ndarray:
        """The dense design, one row per cell, cells in (level, pattern) order."""
        L, Q = self.n_levels, len(self.Zq)
        onehot = np.repeat(np.eye(L)[:, 1:], Q, axis=0)
        return np.column_stack([np.tile(self.Zq, (L, 1)), onehot])

    def eta(self, beta: np.ndarray) -> np.ndarray:
        """Linear predictors (B, L, Q) for coefficient rows beta (B, k + L - 1)."""
        k = self.Zq.shape[1]
        lev = np.concatenate([np.zeros((len(beta), 1)), beta[:, k:]], axis=1)
        return (beta[:, :k] @ self.Zq.T)[:, None, :] + lev[:, :, None]


def newton_logit(
    d: Design, succ: np.ndarray, trials: np.ndarray, beta0: np.ndarray, max_iter: int = 30, tol: float = 1e-6
) -> np.ndarray:
    """Batched Newton-Raphson for the grouped binomial logit: succ, trials (B, L, Q); beta0 (p,) → (B, p).

    A replicate stops when its fitted probabilities settle (they converge even where a separated
    resample sends a coefficient to infinity); the others go on without it. Cells with no trials in a
    replicate drop out through their zero weight; a tiny ridge keeps the Hessian invertible when a
    resample leaves a column empty."""
    B, k, m = succ.shape[0], d.Zq.shape[1], d.n_levels - 1
    beta = np.tile(beta0, (B, 1))
    ridge = 1e-9 * np.eye(k + m)
    idx = np.arange(k, k + m)
    active = np.arange(B)
    prev = np.full(succ.shape, -1.0)
    ZZ = (d.Zq[:, :, None] * d.Zq[:, None, :]).reshape(
        len(d.Zq), k * k
    )  # Zq' diag(v) Zq = v @ ZZ, no (B, k, Q)
    for _ in range(max_iter):
        mu = expit(np.clip(d.eta(beta[active]), -35, 35))
        moving = np.max(np.abs(mu - prev[active]), axis=(1, 2)) >= tol
        active, mu = active[moving], mu[moving]
        if not len(active):
            break
        prev[active] = mu
        n = trials[active]
        r = succ[active] - n * mu
        v = n * mu * (1 - mu)
        H = np.zeros((len(active), k + m, k + m))
        H[:, :k, :k] = (v.sum(axis=1) @ ZZ).reshape(-1, k, k)
        H[:, k:, :k] = v[:, 1:, :] @ d.Zq
        H[:, :k, k:] = H[:, k:, :k].transpose(0, 2, 1)
        H[:, idx, idx] = v[:, 1:, :].sum(axis=2)
        grad = np.concatenate([r.sum(axis=1) @ d.Zq, r[:, 1:, :].sum(axis=2)], axis=1)
        beta[active] += np.linalg.solve(H + ridge, grad[..., None])[..., 0]
    return beta


def ames(d: Design, beta: np.ndarray, trials: np.ndarray, cols: Sequence[int]) -> np.ndarray:
    """Average marginal effects (probability scale) of binary Zq-columns `cols`: (B, len(cols)).

    trials (B, L, Q) weight the cells by their answers."""
    eta = d.eta(beta)
    mu = expit(eta)
    total = trials.sum(axis=(1, 2))
    out = np.empty((beta.shape[0], len(cols)))
    for j, c in enumerate(cols):
        has = d.Zq[:, c] == 1  # as observed there; the counterfactual flips the skill
        flipped = expit(eta + np.where(has, -1.0, 1.0) * beta[:, c, None, None])
        diff = np.where(has, mu - flipped, flipped - mu)
        out[:, j] = (diff * trials).sum(axis=(1, 2)) / total
    return out


def _drop_constant_levels(y: np.ndarray, keep: np.ndarray, factors: dict[str, np.ndarray]) -> dict[str, list]:
    """Drop (in place, via `keep`) fixed-effect levels whose kept answers are all right or all wrong."""
    dropped: dict[str, list] = {k: [] for k in factors}
    changed = True
    while changed:
        changed = False
        for name, codes in factors.items():
            levels = np.unique(codes[keep])
            for lev in levels:
                m = keep & (codes == lev)
                if len(levels) > 1 and y[m].min() == y[m].max():
                    keep &= ~m
                    dropped[name].append(str(lev))
                    changed = True
    return dropped


def _dummies(codes: np.ndarray) -> np.ndarray:
    levels = sorted(np.unique(codes).tolist())
    return np.column_stack([(codes == lev).astype(float) for lev in levels[1:]] or [np.empty(len(codes))])[
        :, : max(0, len(levels) - 1)
    ]


def _na(names: Sequence[str], note: str) -> dict:
    return {s: {"ame_pp": None, "ci95_pp": None, "n_items": 0, "note": note} for s in names}


def skill_effects(
    a: Answers,
    skills: Sequence[str],
    fixed: Sequence[str] = ("model", "dataset", "category"),
    n_resamples: int = 1000,
    seed: int = 0,
) -> dict:
    """AME of each skill (percentage points) with a 95% item-bootstrap CI; see the module docstring."""
    names = [s for s in skills if s != OTHER]
    out: dict = {
        "formula": "correct ~ " + " + ".join(["skills", *(f"C({f})" for f in fixed)]),
        "estimator": "logit (statsmodels GLM binomial); AME in percentage points; percentile item bootstrap",
        "resamples": n_resamples,
        "seed": seed,
    }
    y = np.asarray(a.correct, dtype=float)
    factors = {f: np.asarray(getattr(a, f), dtype=object) for f in fixed}
    keep = np.ones(len(y), dtype=bool)
    dropped = _drop_constant_levels(y, keep, factors) if len(y) else {}
    out["dropped_levels"] = {k: v for k, v in dropped.items() if v}
    if not keep.any() or y[keep].min() == y[keep].max():
        out.update(n_answers=int(keep.sum()), n_items=0, effects=_na(names, "no variation in correctness"))
        return out
    S = np.array([[s in sk for s in names] for sk in a.skills], dtype=float).reshape(len(y), len(names))
    y, S, items = y[keep], S[keep], np.asarray(a.item, dtype=object)[keep]
    factors = {f: c[keep] for f, c in factors.items()}

    notes: dict[str, str] = {}
    for j, s in enumerate(names):
        has = S[:, j] == 1
        if not has.any() or has.all():
            notes[s] = "skill never or always present in the regression sample"
        elif y[has].min() == y[has].max():
            notes[s] = "every answer to items with this skill is " + ("right" if y[has][0] else "wrong")
    cand = [j for j, s in enumerate(names) if s not in notes]

    # absorb a fixed effect with many levels (the models of a sweep); the others become dummies
    big = max(fixed, key=lambda f: len(np.unique(factors[f]))) if fixed else None
    absorbed = big if big and len(np.unique(factors[big])) > ABSORB_OVER else None
    small = [_dummies(factors[f]) for f in fixed if f != absorbed]
    Zall = np.column_stack([S[:, cand], *small, np.ones(len(y))])
    lev = np.unique(factors[absorbed], return_inverse=True)[1].ravel() if absorbed else np.zeros(len(y), int)
    L = int(lev.max()) + 1
    patterns, pat = np.unique(Zall, axis=0, return_inverse=True)
    cell = lev * len(patterns) + pat.ravel()
    item_codes, item_idx = np.unique(items, return_inverse=True)
    shape = (L * len(patterns), len(item_codes))
    A = sp.csr_matrix((np.ones(len(y)), (cell, item_idx.ravel())), shape=shape)
    Ay = sp.csr_matrix((y, (cell, item_idx.ravel())), shape=shape)
    trials = np.asarray(A.sum(axis=1)).ravel()
    succ = np.asarray(Ay.sum(axis=1)).ravel()
    used = trials > 0

    # a skill enters only if it adds a dimension beyond the fixed effects and the skills before it
    full = Design(patterns, L).X[used]
    gram = full.T @ full
    others = list(range(len(cand), full.shape[1]))

    def rank(cols: list[int]) -> int:
        ev = np.linalg.eigvalsh(gram[np.ix_(cols, cols)])
        return int((ev > 1e-10 * ev.max()).sum())

    kept: list[int] = []
    r0 = rank(others)
    for i, j in enumerate(cand):
        r = rank(others + kept + [i])
        if r > r0:
            kept.append(i)
            r0 = r
        else:
            notes[names[j]] = "collinear with the fixed effects or other skills (not identified)"
    est = [names[cand[i]] for i in kept]
    d = Design(patterns[:, kept + list(range(len(cand), Zall.shape[1]))], L)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # near-separation warnings: flagged below
            endog = np.column_stack([succ[used], (trials - succ)[used]])
            fit = sm.GLM(endog, d.X[used], family=sm.families.Binomial()).fit()
    except (np.linalg.LinAlgError, ValueError) as e:  # a degenerate sample must not stop a sweep's scoring
        out.update(n_answers=int(len(y)), n_items=len(item_codes), effects=_na(names, f"fit failed: {e}"))
        return out
    beta = np.asarray(fit.params)
    grid = (-1, L, len(patterns))
    point = ames(d, beta[None], trials.reshape(grid), range(len(est)))[0]

    reps = np.empty((n_resamples, len(est)))
    rng = np.random.default_rng(seed)
    n_items = len(item_codes)
    chunk = max(1, int(2e6 // shape[0]))  # bounds the (chunk, L, Q) buffers
    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        W = np.stack([np.bincount(rng.integers(0, n_items, n_items), minlength=n_items) for _ in range(b)])
        W = W.T.astype(float)
        tr, su = np.asarray(A @ W).T.reshape(grid), np.asarray(Ay @ W).T.reshape(grid)
        reps[start : start + b] = ames(d, newton_logit(d, su, tr, beta), tr, range(len(est)))

    effects = {}
    for k, s in enumerate(est):
        se = float(fit.bse[k])
        if not (abs(beta[k]) < SEPARATED and np.isfinite(se) and se < SEPARATED):
            notes[s] = (
                f"not estimable: log-odds {beta[k]:.3g} (s.e. {se:.3g}), the answers are (quasi-)separated; "
                "too few answers for this many fixed effects"
            )
    for j, s in enumerate(names):
        n_it = int(len(np.unique(items[S[:, j] == 1])))
        if s in est and s not in notes:
            k = est.index(s)
            lo, hi = np.quantile(reps[:, k], [0.025, 0.975])
            effects[s] = {
                "ame_pp": 100 * float(point[k]),
                "ci95_pp": [100 * float(lo), 100 * float(hi)],
                "log_odds": float(beta[k]),
                "se": float(fit.bse[k]),
                "n_items": n_it,
            }
        else:
            effects[s] = {"ame_pp": None, "ci95_pp": None, "n_items": n_it, "note": notes[s]}
    out.update(n_answers=int(len(y)), n_items=int(n_items), converged=bool(fit.converged), effects=effects)
    return out
