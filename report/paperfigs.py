"""The papers' own figures that a sweep's scores.json can draw: M3GIA's correlation of CHC factor accuracies
and JEEBench's confidence-thresholding curves (validation marks along each threshold; and the authors' released
"Threshold v/s Marks" plots: positive, negative and total marks per MCQ type along its threshold)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from report.plots import _save, _title
from report.tables import SuiteView


def factor_correlation(v: SuiteView, path: Path) -> Path:
    """M3GIA's factor figure: Pearson r between CHC factor accuracies across models, as a heatmap."""
    fc = v.factor_correlation
    names = list(fc)
    r = np.array([[fc[a].get(b, np.nan) for b in names] for a in names], dtype=float)
    fig = Figure(figsize=(6, 5))
    ax = fig.subplots()
    im = ax.imshow(r, cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xticks(range(len(names)), names)
    ax.set_yticks(range(len(names)), names)
    for i in range(len(names)):
        for j in range(len(names)):
            if not np.isnan(r[i, j]):
                ax.text(j, i, f"{r[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if abs(r[i, j]) > 0.6 else "black")  # fmt: skip
    fig.colorbar(im, ax=ax, shrink=0.8, label="Pearson r")
    _title(ax, f"{v.label}: correlation of CHC factor accuracies across {len(v.entries)} models", 10)
    fig.tight_layout()
    return _save(fig, path)


def threshold_curves(v: SuiteView, path: Path) -> Path:
    """JEEBench thresholding: each model's validation-year total marks along tau_single and tau_multiple
    (the other held at its chosen value); the chosen point is each curve's maximum."""
    curves = {e.model: c for e in v.entries if (c := (e.scores.get("thresholding") or {}).get("curve"))}
    fig = Figure(figsize=(9, 4))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, key, label in zip(axes, ("tau_single", "tau_multiple"), ("τ single (MCQ)", "τ multiple (MCQ(multiple))"), strict=True):
        for j, (m, c) in enumerate(curves.items()):
            xs, ys = zip(*c[key], strict=True)
            ax.plot(xs, ys, "-o", ms=3, lw=1.2, color=colormaps["tab10"](j % 10), label=v.name(m))
        ax.set_xlabel(label)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("total marks, validation years 2016-2021")
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    _title(axes[0], f"{v.label}: confidence thresholding over self-consistency", 10)
    fig.tight_layout()
    return _save(fig, path)


def threshold_marks(v: SuiteView, path: Path) -> Path:
    """The authors' "Threshold v/s Marks" plots (marks_dump beside their CoT+SC responses): a row per MCQ type,
    positive / negative / total marks over every year along that type's threshold, a line per model."""
    curves = {e.model: c for e in v.entries if (c := (e.scores.get("thresholding") or {}).get("by_type"))}
    fig = Figure(figsize=(11, 6))
    axes = fig.subplots(2, 3)
    for row, (kind, tau) in enumerate((("MCQ", "τ single"), ("MCQ(multiple)", "τ multiple"))):
        for col, what in enumerate(("positive", "negative", "total")):
            ax = axes[row][col]
            for j, (m, c) in enumerate(curves.items()):
                pts = np.asarray(c.get(kind) or [[np.nan] * 4], dtype=float)
                ax.plot(pts[:, 0], pts[:, col + 1], "-o", ms=3, lw=1.2, color=colormaps["tab10"](j % 10),
                        label=v.name(m))  # fmt: skip
            ax.set_xlabel(f"{tau} ({kind})")
            ax.set_ylabel(f"{what} marks")
            ax.grid(True, alpha=0.3)
    axes[0][2].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    _title(axes[0][0], f"{v.label}: threshold v/s marks, every year", 10)
    fig.tight_layout()
    return _save(fig, path)
