"""The report's figures. Each function writes one PNG through matplotlib's object API (`Figure`
renders with Agg: no display, no pyplot global state, nothing fetched)."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from report.load import Entry, atomic_write
from report.rows import level_means, levels
from report.tables import AXES, POOLED, SuiteView, is_fraction

COLORS = {True: "#1b9e77", False: "#d95f02", None: "#7f7f7f"}  # open weights / proprietary / unknown
MARKERS = {True: "^", False: "o", None: "s"}  # reasoning / non-reasoning / unknown


def _save(fig: Figure, path: Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    atomic_write(path, buf.getvalue())
    return path


def _scale(v: SuiteView) -> tuple[float, str]:
    return (100.0, f"{v.metric} (%)") if is_fraction(v) else (1.0, v.metric)


def _legend_handles(entries: list[Entry] | None = None, frontier: bool = True) -> list:
    """Every colour and marker the plot can use: the unknown (grey, square) ones when some entry has
    them, so no marker on a figure is left out of its legend."""
    from matplotlib.lines import Line2D

    ws = {e.info.open_weights for e in entries} if entries is not None else {True, False}
    rs = {e.info.reasoning for e in entries} if entries is not None else {True, False}
    names_w = {True: "open weights", False: "proprietary", None: "weights unknown"}
    names_r = {True: "reasoning", False: "non-reasoning", None: "type unknown"}
    h = [
        Line2D([], [], ls="", marker="o", color=COLORS[k], label=names_w[k])
        for k in (True, False, None)
        if k in ws
    ]
    h += [
        Line2D([], [], ls="", marker=MARKERS[k], color="k", mfc="none", label=names_r[k])
        for k in (True, False, None)
        if k in rs
    ]
    return h + ([Line2D([], [], color="k", lw=1.2, label="Pareto frontier")] if frontier else [])


def _title(ax: Axes, text: str, size: float = 9) -> None:
    ax.set_title(textwrap.fill(text, 70), fontsize=size)


def _log_x(ax: Axes) -> None:
    """Log x axis with labels at 1, 2, 5 × 10^k only: minor labels crowd into each other."""
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def declutter(fig: Figure, texts: list) -> None:
    """Hide annotations that would overlap one already kept (earlier = more important)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    kept: list = []
    for t in texts:
        bb = t.get_window_extent(renderer)
        if t.axes is not None and bb.x1 > t.axes.get_window_extent(renderer).x1:  # past the right edge
            t.set_horizontalalignment("right")
            t.xyann = (-t.xyann[0], t.xyann[1])
            bb = t.get_window_extent(renderer)
        bb = bb.expanded(1.05, 1.1)
        if any(bb.overlaps(k) for k in kept):
            t.set_visible(False)
        else:
            kept.append(bb)


def _floor(costs: list[float]) -> float:
    pos = [c for c in costs if c > 0]
    return min(pos) / 3 if pos else 1e-3


def _at(c: float, floor: float) -> float:
    """A log axis has no 0: a free model is drawn at the left edge (and the axis label says so)."""
    return c if c > 0 else floor


def has_cost(v: SuiteView, axis: str) -> bool:
    return any(e.accuracy is not None and v.cost(e, axis) is not None for e in v.entries)


def _frontier_panel(ax: Axes, v: SuiteView, axis: str) -> list:
    """One (suite, cost axis) panel; returns its annotations, most important first."""
    k, ylabel = _scale(v)
    es = [e for e in v.entries if e.accuracy is not None and v.cost(e, axis) is not None
          and e.model not in v.left_out]  # fmt: skip
    floor = _floor([v.cost(e, axis) for e in es])
    for e in es:
        ax.scatter(
            _at(v.cost(e, axis), floor),
            e.accuracy * k,
            c=COLORS[e.info.open_weights],
            marker=MARKERS[e.info.reasoning],
            s=36,
            alpha=0.85,
            zorder=3,
        )
    front = v.front[axis]
    ax.plot([_at(p.cost, floor) for p in front], [p.accuracy * k for p in front], color="k", lw=1.2, zorder=2)
    texts = [
        ax.annotate(
            v.name(p.name),
            (_at(p.cost, floor), p.accuracy * k),
            fontsize=7,
            xytext=(4, 3),
            textcoords="offset points",
        )
        for p in front
    ]
    if len(es) <= 15:  # small sweeps: name the dominated models too (grey); 45 labels would be noise
        texts += [
            ax.annotate(
                v.name(e.model),
                (_at(v.cost(e, axis), floor), e.accuracy * k),
                fontsize=6,
                color="#777777",
                xytext=(4, -8),
                textcoords="offset points",
            )
            for e in es
            if not v.on(e, axis)
        ]
    _log_x(ax)
    if v.chance is not None:
        ax.axhline(v.chance * k, ls="--", color="#bbbbbb", lw=1)
        texts.append(
            ax.annotate(
                "chance", (0.01, v.chance * k), xycoords=("axes fraction", "data"), fontsize=7, color="#888"
            )
        )
    if any(v.cost(e, axis) == 0 for e in es):
        ax.axvline(floor, ls=":", color="#999999", lw=1)
    ax.set_xlabel(
        AXES[axis] + (" — free ($0) on the dotted line" if any(v.cost(e, axis) == 0 for e in es) else "")
    )
    ax.set_ylabel(ylabel)
    missing = len(v.unplaced[axis])
    _title(ax, f"{v.label}" + (f"  ({missing} without a known cost not shown)" if missing else ""))
    ax.grid(True, which="both", alpha=0.25)
    return texts


def _grid(n: int, height: float) -> tuple[Figure, list[Axes]]:
    cols = 2 if n > 1 else 1
    rows = (n + cols - 1) // cols
    fig = Figure(figsize=(6 * cols, height * rows))
    axes = list(fig.subplots(rows, cols, squeeze=False).flat)
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def frontier(views: list[SuiteView], path: Path) -> Path | None:
    """Accuracy vs list price (log) and vs the measured cost of the run (log), one panel per suite
    and axis that has a model with a known cost; None when no panel has one."""
    panels = [(v, axis) for v in views for axis in AXES if has_cost(v, axis)]
    if not panels:
        return None
    fig, axes = _grid(len(panels), 4.2)
    texts = [t for ax, (v, axis) in zip(axes, panels, strict=True) for t in _frontier_panel(ax, v, axis)]
    entries = [e for v, _ in panels for e in v.entries]
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_figheight()))
    fig.legend(
        handles=_legend_handles(entries), loc="upper center", ncol=4, fontsize=8, bbox_to_anchor=(0.5, 1.0)
    )
    declutter(fig, texts)
    return _save(fig, path)


def over_time_title(v: SuiteView, snaps: list) -> str:
    """Says which dates are shown: a paper's fixed snapshots (VRB's Fig. 7 right) are not release dates."""
    if v.snapshot_dates:
        return f"{v.label}: frontier at the paper's {len(snaps)} snapshot dates (models released by each)"
    return f"{v.label}: frontier at successive release dates"


def pooled_skills_title(v: SuiteView) -> str:
    """Says who the pooled fit covers: the models the paper leaves out (v.left_out) are not in it."""
    who = f"all models but the {len(v.left_out)} the paper leaves out" if v.left_out else "all models"
    return f"{v.label}: skill effects, {who} (logistic regression, fixed effects)"


def frontier_over_time(
    views: list[SuiteView], path: Path, snaps_per_plot: dict[tuple[str, str], list]
) -> Path | None:
    """The frontier as it stood at successive release dates, darker = later; one panel per suite and
    cost axis that has snapshots (None when none has: no release dates, or no known costs)."""
    from matplotlib.lines import Line2D

    panels = [(v, axis) for v in views for axis in AXES if snaps_per_plot.get((v.slug, axis))]
    if not panels:
        return None
    fig, axes = _grid(len(panels), 4.2)
    for ax, (v, axis) in zip(axes, panels, strict=True):
        k, ylabel = _scale(v)
        snaps = snaps_per_plot[(v.slug, axis)]
        es = [e for e in v.entries if e.accuracy is not None and v.cost(e, axis) is not None
              and e.model not in v.left_out]  # fmt: skip
        floor = _floor([v.cost(e, axis) for e in es])
        ax.scatter(
            [_at(v.cost(e, axis), floor) for e in es],
            [e.accuracy * k for e in es],
            c="#cccccc",
            s=16,
            zorder=1,
        )
        # later frontiers are drawn wider and underneath, so a stretch shared with an earlier one
        # shows both colours; each snapshot's new entrants are ringed in its colour
        cmap = colormaps["viridis_r"]
        for j, s in enumerate(snaps):
            c = cmap(0.15 + 0.85 * j / max(1, len(snaps) - 1))
            day = "" if s.when.day == 1 else f"-{s.when:%d}"
            xs = [_at(p.cost, floor) for p in s.frontier]
            ys = [p.accuracy * k for p in s.frontier]
            lw = 1.0 + 3.0 * j / max(1, len(snaps) - 1)
            label = f"{s.when:%Y-%m}{day}: {len(s.frontier)} on frontier"
            ax.plot(xs, ys, "-", color=c, lw=lw, label=label, zorder=20 - j, solid_capstyle="round")
            new = [p for p in s.frontier if p.name in s.new]
            ax.scatter(
                [_at(p.cost, floor) for p in new],
                [p.accuracy * k for p in new],
                s=46,
                facecolors="none",
                edgecolors=[c],
                linewidths=1.8,
                zorder=30,
            )
        _log_x(ax)
        free = any(v.cost(e, axis) == 0 for e in es)
        if free:
            ax.axvline(floor, ls=":", color="#999999", lw=1)
        ax.set_xlabel(AXES[axis] + (" — free ($0) on the dotted line" if free else ""))
        ax.set_ylabel(ylabel)
        _title(ax, over_time_title(v, snaps))
        ax.grid(True, which="both", alpha=0.25)
        extra = [
            Line2D([], [], ls="", marker="o", color="#cccccc", label="any model (all dates)"),
            Line2D([], [], ls="", marker="o", mfc="none", color="k", label="new on the frontier then"),
        ]
        ax.legend(handles=ax.get_legend_handles_labels()[0] + extra, fontsize=7, loc="lower right")
    fig.tight_layout()
    return _save(fig, path)


def _without(v: SuiteView) -> str:
    """A title's note: the models the paper's figures leave out (VRB's EXCLUDE_MODELS) are not drawn."""
    return f" (without the {len(v.left_out)} models the paper leaves out)" if v.left_out else ""


def _rows_height(n: int) -> float:
    return max(2.5, 0.28 * n + 1.2)


def leaderboard(v: SuiteView, path: Path) -> Path:
    """Forest plot: each model's headline score with its 95% CI, best at the top."""
    k, label = _scale(v)
    es = [e for e in v.entries if e.accuracy is not None and e.model not in v.left_out][::-1]
    fig = Figure(figsize=(8, _rows_height(len(es))))
    ax = fig.subplots()
    y = np.arange(len(es))
    for yi, e in zip(y, es, strict=True):
        if e.ci95:
            ax.plot([e.ci95[0] * k, e.ci95[1] * k], [yi, yi], color=COLORS[e.info.open_weights], lw=1.5)
        ax.scatter(
            e.accuracy * k, yi, color=COLORS[e.info.open_weights], marker=MARKERS[e.info.reasoning], zorder=3
        )
    if v.chance is not None:
        ax.axvline(v.chance * k, ls="--", color="#bbbbbb", lw=1, label="chance")
    if v.threshold is not None:
        ax.axvline(v.threshold * k, ls="-.", color="#d62728", lw=1, label="paper: usefulness threshold")
    ax.set_yticks(y, [e.info.display_name for e in es], fontsize=8)
    ax.set_xlabel(label + " with 95% CI")
    _title(ax, f"{v.label}: leaderboard{_without(v)}", 10)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(
        handles=_legend_handles(es, frontier=False) + ax.get_legend_handles_labels()[0],
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
    )
    fig.tight_layout()
    return _save(fig, path)


def category_range(v: SuiteView, path: Path, kind: str = "by_category") -> Path:
    """Per model: the spread from its worst to its best task category; dots are the categories,
    the black tick is the model's overall score."""
    k, label = _scale(v)
    per = v.breakdowns[kind]
    es: list[Entry] = [e for e in v.entries if e.model in per and e.model not in v.left_out][::-1]
    cats = list(dict.fromkeys(c for e in es for c in per[e.model]))
    cmap = colormaps["tab10" if len(cats) <= 10 else "tab20"]
    fig = Figure(figsize=(9, _rows_height(len(es))))
    ax = fig.subplots()
    spans = [[s.value for s in per[e.model].values()] for e in es]
    ax.hlines(
        range(len(es)),
        [min(x) * k for x in spans],
        [max(x) * k for x in spans],
        color="#999999",
        lw=3,
        zorder=1,
        label="worst to best category",
    )
    for j, c in enumerate(cats):  # one scatter per category (45 models x 20 categories is 20 calls)
        ys = [yi for yi, e in enumerate(es) if c in per[e.model]]
        xs = [per[es[yi].model][c].value * k for yi in ys]
        ax.scatter(xs, ys, color=cmap(j % cmap.N), s=22, zorder=2, label=c)
    scored = [(yi, e.accuracy * k) for yi, e in enumerate(es) if e.accuracy is not None]
    if scored:
        ax.scatter(
            [x for _, x in scored], [y for y, _ in scored], marker="|", color="k", s=120, zorder=3, label="overall"
        )
    ax.set_yticks(range(len(es)), [e.info.display_name for e in es], fontsize=8)
    ax.set_xlabel(label)
    _title(ax, f"{v.label}: best to worst {kind.removeprefix('by_')} per model{_without(v)}", 10)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    return _save(fig, path)


def skill_effects(v: SuiteView, path: Path) -> Path:
    """The pooled fit: average marginal effect of each skill on accuracy (pp) with its 95% CI."""
    d = v.skill_effects[POOLED]
    skills = sorted(d, key=lambda s: d[s].value)
    fig = Figure(figsize=(7, _rows_height(len(skills))))
    ax = fig.subplots()
    for yi, s in enumerate(skills):
        st = d[s]
        if st.lo is not None:
            ax.plot([st.lo, st.hi], [yi, yi], color="#4c72b0", lw=1.5)
        ax.scatter(st.value, yi, color="#4c72b0", zorder=3)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(range(len(skills)), skills, fontsize=8)
    ax.set_xlabel("average marginal effect on accuracy (pp), 95% CI")
    _title(ax, pooled_skills_title(v), 10)
    fig.tight_layout()
    return _save(fig, path)


def skill_effects_by_model(v: SuiteView, path: Path) -> Path:
    """Each model's own fit as a model × skill heat map (red: the skill costs accuracy)."""
    models = [m for m in v.skill_effects if m != POOLED]
    skills = list(dict.fromkeys(s for m in models for s in v.skill_effects[m]))
    z = np.full((len(models), len(skills)), np.nan)
    for i, md in enumerate(models):
        for j, s in enumerate(skills):
            if s in v.skill_effects[md]:
                z[i, j] = v.skill_effects[md][s].value
    lim = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
    fig = Figure(figsize=(2.5 + 0.8 * len(skills), _rows_height(len(models))))
    ax = fig.subplots()
    im = ax.imshow(z, cmap="RdBu", vmin=-(lim or 1.0), vmax=lim or 1.0, aspect="auto")
    if z.size <= 600:
        for i, j in zip(*np.nonzero(np.isfinite(z)), strict=True):
            ax.text(j, i, f"{z[i, j]:+.0f}", ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(skills)), skills, rotation=40, ha="right", fontsize=8)
    ax.set_yticks(range(len(models)), [v.name(md) for md in models], fontsize=8)
    fig.colorbar(im, ax=ax, label="average marginal effect (pp)")
    _title(ax, f"{v.label}: skill effects, each model's own fit", 10)
    fig.tight_layout()
    return _save(fig, path)


def severity(v: SuiteView, path: Path) -> Path:
    """Accuracy by image-quality severity: one line per model; the mean over models in black."""
    k, label = _scale(v)
    per = {m: d for m, d in v.breakdowns["by_severity"].items() if m not in v.left_out}
    order = levels(per, "by_severity")
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    few = len(per) <= 12
    for j, (m, d) in enumerate(per.items()):
        xs = [i for i, lv in enumerate(order) if lv in d]
        ax.plot(
            xs,
            [d[order[i]].value * k for i in xs],
            "-o",
            ms=3,
            lw=1,
            alpha=0.8 if few else 0.35,
            color=colormaps["tab20"](j % 20) if few else "#999999",
            label=v.name(m) if few else ("each model" if j == 0 else None),
        )
    mean = [x * k for x in level_means(v, "by_severity").values()]
    ax.plot(range(len(order)), mean, "-s", color="k", lw=2.2, label="mean over models")
    ax.set_xticks(range(len(order)), order)
    ax.set_ylabel(label)
    _title(ax, f"{v.label}: accuracy by image-quality severity{_without(v)}", 10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    return _save(fig, path)

