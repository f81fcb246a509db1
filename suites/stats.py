"""Shared statistics (numpy/scipy), used by every suite's aggregation.

Bootstrap CIs never build an n_resamples x N index matrix: resamples are drawn in chunks of rows
(each chunk `rng.integers(0, N, (k, N))`, which continues the generator's stream exactly, so the
result equals the one-matrix computation for the same seed), and above `EXACT_MAX` items a score with
few distinct values (0/1, JEEBench's quarters) is resampled as multinomial counts of its values: the
same bootstrap distribution in O(n_resamples x values) memory and time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

N_RESAMPLES = 1000
SEED = 0
LEVEL = 0.95
CHUNK_ELEMENTS = 1 << 22
"""Index draws per chunk (32 MiB of int64 plus as many float64 gathered values)."""
EXACT_MAX = 100_000
"""Up to this many items, resample indices (the classic method); above it, multinomial counts of the
distinct values when there are at most `MAX_LEVELS` of them."""
MAX_LEVELS = 64


def mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def _levels(x: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(distinct values, counts) when there are few of them, else None."""
    u, c = np.unique(x, return_counts=True)
    return (u, c) if len(u) <= MAX_LEVELS else None


def bootstrap_means(
    x: np.ndarray, n_resamples: int = N_RESAMPLES, seed: int = SEED, chunk_elements: int = CHUNK_ELEMENTS
) -> np.ndarray:
    """The means of `n_resamples` resamples of x (items drawn with replacement), bounded memory."""
    rng = np.random.default_rng(seed)
    n = x.size
    if n > EXACT_MAX and (lv := _levels(x)) is not None:
        u, c = lv
        counts = rng.multinomial(n, c / n, size=n_resamples)
        return (counts @ u) / n
    means = np.empty(n_resamples)
    step = max(1, chunk_elements // n)
    for i in range(0, n_resamples, step):
        k = min(step, n_resamples - i)
        means[i : i + k] = x[rng.integers(0, n, size=(k, n))].mean(axis=1)
    return means


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
    chunk_elements: int = CHUNK_ELEMENTS,
) -> tuple[float, float] | None:
    """Percentile bootstrap CI of the mean over items (resampling items with replacement)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return None
    means = bootstrap_means(x, n_resamples, seed, chunk_elements)
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [a, 1.0 - a])
    return float(lo), float(hi)


def ci_list(values: Sequence[float] | np.ndarray, **kw: float) -> list[float] | None:
    """bootstrap_ci as scores.json stores it: [lo, hi] or None."""
    ci = bootstrap_ci(values, **kw)  # type: ignore[arg-type]
    return list(ci) if ci else None


def ci_method(
    n_items: int = 0, n_resamples: int = N_RESAMPLES, seed: int = SEED, level: float = LEVEL
) -> str:
    """The one line a table prints to name how its CIs were computed (`n_items`: its largest sample)."""
    big = f"; multinomial counts above {EXACT_MAX:,} items" if n_items > EXACT_MAX else ""
    return (
        f"{100 * level:.0f}% CI: percentile bootstrap over items, {n_resamples:,} resamples, seed {seed}{big}"
    )
