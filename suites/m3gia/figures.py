"""The paper's GIA figures from a run's scores, written beside scores.json.

Fig. 4 (right): each model's GIA against its accuracy, per language, with the least-squares line and its R²
(the paper: R² >= 0.93). Fig. 5: (left) normalized GIA across the six languages, human = 100, with the
paper's Table 2 models as dashed `paper:` series; (right) English GIA against the human average (16.01).
The paper's Fig. 5 also draws the human confidence interval, which its text does not give: not drawn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from suites.m3gia import gia
from suites.m3gia.paper import FIG4_R2, TABLE2, TABLE2_LANGS, TABLE2_NORMALIZED


def _figure(size: tuple[float, float], ncols: int = 1) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=100)
    return fig, fig.subplots(1, ncols)


def fig4_right_png(models: dict[str, Any], corr: dict[str, dict[str, Any]], path: Path) -> Path | None:
    """GIA (x) against accuracy (y), a colour per language; None when no model has a GIA."""
    import numpy as np

    pts = {lang: [(s["gia"][lang], s["by_language"][lang]) for s in models.values() if s["gia"].get(lang) is not None]
           for lang in TABLE2_LANGS}  # fmt: skip
    pts = {k: v for k, v in pts.items() if v}
    if not pts:
        return None
    fig, ax = _figure((6.5, 4.5))
    for lang, xy in pts.items():
        x, y = np.array(xy).T
        r2 = (corr.get(lang) or {}).get("r2")
        ax.scatter(x, y, s=18, label=f"{lang}" + (f" (R² {r2:.2f})" if r2 is not None else ""))
        if r2 is not None:
            slope, icept = np.polyfit(x, y, 1)
            xs = np.linspace(x.min(), x.max(), 2)
            ax.plot(xs, slope * xs + icept, lw=1)
    ax.set(xlabel="GIA (lavaan regression factor score)", ylabel="accuracy of the language",
           title=f"m3gia: GIA vs accuracy (Fig. 4 right; the paper: R² >= {FIG4_R2})")  # fmt: skip
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    return path


def fig5_png(models: dict[str, Any], path: Path) -> Path | None:
    """Normalized GIA across languages and English GIA against the human average; None without any GIA."""
    ours = {m: s for m, s in models.items() if any(v is not None for v in s["gia"].values())}
    if not ours:
        return None
    fig, (left, right) = _figure((12, 4.5), 2)
    xs = range(len(TABLE2_LANGS))
    for m, s in ours.items():
        left.plot(xs, [s["gia_normalized"].get(c) or float("nan") for c in TABLE2_LANGS], "-o", ms=4, label=m)
    for m, style in (("GPT-4o", "--"), ("GPT-4v", ":")):
        left.plot(xs, TABLE2_NORMALIZED[m], style, color="gray", lw=1.2, label=f"paper: {m}")
    left.axhline(100, color="black", lw=1, label="human average (100)")
    left.set_xticks(list(xs), list(TABLE2_LANGS))
    left.set(ylabel="normalized GIA (human = 100)", title="Fig. 5 (left): normalized GIA across languages")
    left.legend(fontsize=7)
    english = [(m, s["gia"]["en"]) for m, s in ours.items() if s["gia"].get("en") is not None]
    english += [(f"paper: {m}", v[0]) for m, v in TABLE2.items()]
    right.barh(range(len(english)), [v for _, v in english],
               color=["#4c72b0" if not n.startswith("paper") else "#bbbbbb" for n, _ in english])  # fmt: skip
    right.set_yticks(range(len(english)), [n for n, _ in english], fontsize=7)
    right.axvline(gia.HUMAN_GIA["en"], color="black", lw=1, label=f"human average ({gia.HUMAN_GIA['en']})")
    right.set(xlabel="GIA, English", title="Fig. 5 (right): English GIA vs the human average")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    return path
