"""`evalsweep report RUN_DIR [RUN_DIR...] --out DIR`: leaderboards, the cost/accuracy value frontier
(and how it moved over release dates), VRB's category/skill/severity breakdowns, as one
self-contained HTML page plus the PNGs and CSVs of every number shown.

load (run dirs + models table) → tables (plain rows) → plots (PNG) → html; CSVs from the same rows.
"""

from __future__ import annotations

import argparse
import csv
import io
from pathlib import Path
from typing import Any

from core.term import plural
from report import paperfigs, plots
from report.frontier import pick_snapshots
from report.load import ReportError, atomic_write, load_runs, read_json, run_dirs_of, suite_label
from report.page import render
from report.rows import (
    FRONTIER_COLUMNS,
    best_worst_rows,
    breakdown_rows,
    frontier_list_rows,
    frontier_rows,
    group_rows,
    leaderboard_rows,
    snapshot_rows,
)
from report.samples import partial_note, write_view
from report.sweeps import add_sweep_tables
from report.tables import AXES, POOLED, views_of

__all__ = ["main", "add_arguments", "ReportError"]


def add_arguments(p: argparse.ArgumentParser, out_required: bool = True) -> None:
    """The `report` subcommand's flags (for the CLI to call)."""
    p.add_argument(
        "run_dirs",
        nargs="+",
        type=Path,
        metavar="RUN_DIR",
        help="run folders, or a sweep's folder (every run under it); others given here (a cache, the "
        "report's own folder) are skipped with a note",
    )
    p.add_argument("--out", required=out_required, type=Path, help="folder for index.html, PNGs, CSVs")
    p.add_argument(
        "--models-table",
        type=Path,
        default=None,
        help="CSV in the models.csv format (model_id, open, release_date MM/YYYY, input_cost, ...) "
        "filling metadata the config leaves unset",
    )


def cli_main(argv: list[str]) -> int:
    """`evalsweep report RUN_DIR... --out DIR [--models-table CSV]`."""
    p = argparse.ArgumentParser(
        prog="evalsweep report", description="Leaderboards, cost/accuracy frontier, per-sample viewer."
    )
    add_arguments(p)
    a = p.parse_args(argv)

    main(run_dirs_of(a.run_dirs), a.out, a.models_table)
    return 0


def _cell(v: Any) -> Any:
    return "" if v is None else v


def write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str] | None = None) -> None:
    columns = columns or (list(rows[0]) if rows else [])
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(columns)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in columns])
    atomic_write(path, buf.getvalue())


def _runs(run_dirs: list[Path]) -> list[dict[str, Any]]:
    out = []
    for d in run_dirs:
        m = read_json(d / "manifest.json")
        cmd = m.get("command")
        out.append(
            {
                "run_dir": str(d),
                "suite": suite_label(str(m.get("suite", ""))),
                "models": len(m.get("models") or []),
                "status": m.get("status"),
                "created": m.get("created"),
                "updated": m.get("updated"),
                "command": " ".join(cmd) if isinstance(cmd, list) else cmd,
            }
        )
    return out


def main(run_dirs: list[Path], out: Path, models_table: Path | None = None, show: bool = True) -> None:
    """Write DIR/index.html, the PNGs and the CSVs for the given scored run directories.

    Raises ReportError (a SuiteError) naming the file and the fix on bad input. `show`: print the
    cross-run tables on the terminal too (they are always in DIR/tables.txt and the page).
    """
    out = Path(out)
    run_dirs = [Path(d) for d in run_dirs]
    loaded = load_runs(run_dirs, Path(models_table) if models_table else None, skip=[out])
    views = views_of(loaded.entries, loaded.extras)
    out.mkdir(parents=True, exist_ok=True)
    add_sweep_tables(views, show, out / "tables.txt")

    images: dict[str, Path | None] = {"frontier": plots.frontier(views, out / "frontier.png")}
    chosen = {(v.slug, a): pick_snapshots(v.snaps[a]) for v in views for a in AXES}
    images["frontier_time"] = plots.frontier_over_time(views, out / "frontier_time.png", chosen)
    for v in views:
        v.partial = partial_note(v)
        if any(e.accuracy is not None for e in v.entries):
            images[f"leaderboard_{v.slug}"] = plots.leaderboard(v, out / f"leaderboard_{v.slug}.png")
        if "by_category" in v.breakdowns:
            images[f"categories_{v.slug}"] = plots.category_range(v, out / f"categories_{v.slug}.png")
        if POOLED in v.skill_effects:
            images[f"skills_{v.slug}"] = plots.skill_effects(v, out / f"skills_{v.slug}.png")
        if any(m != POOLED for m in v.skill_effects):
            images[f"skill_models_{v.slug}"] = plots.skill_effects_by_model(
                v, out / f"skill_models_{v.slug}.png"
            )
        if "by_severity" in v.breakdowns:
            images[f"severity_{v.slug}"] = plots.severity(v, out / f"severity_{v.slug}.png")
        if v.factor_correlation:
            images[f"factors_{v.slug}"] = paperfigs.factor_correlation(v, out / f"factors_{v.slug}.png")
        if any((e.scores.get("thresholding") or {}).get("curve") for e in v.entries):
            images[f"thresholds_{v.slug}"] = paperfigs.threshold_curves(v, out / f"thresholds_{v.slug}.png")
        if any((e.scores.get("thresholding") or {}).get("by_type") for e in v.entries):
            images[f"threshold_marks_{v.slug}"] = paperfigs.threshold_marks(v, out / f"threshold_marks_{v.slug}.png")
    for stale in ("frontier", "frontier_time"):  # an older report's figure must not outlive its data
        if images[stale] is None:
            (out / f"{stale}.png").unlink(missing_ok=True)

    csvs = {
        "frontier.csv": (frontier_rows(views), FRONTIER_COLUMNS),
        "leaderboard.csv": ([r for v in views for r in leaderboard_rows(v)], None),
        "groups.csv": ([r for v in views for r in group_rows(v)], None),
        "frontier_models.csv": ([r for v in views for r in frontier_list_rows(v)], None),
        "frontier_snapshots.csv": ([r for v in views for r in snapshot_rows(v)], None),
        "breakdowns.csv": ([r for v in views for r in breakdown_rows(v)], None),
        "best_worst_category.csv": ([r for v in views for r in best_worst_rows(v)], None),
    }
    written = []
    for name, (rows, cols) in csvs.items():
        if rows or cols:
            write_csv(out / name, rows, cols)
            written.append(name)
    samples = [write_view(out, v.slug, v.label, v.entries) for v in views]
    page = render(views, images, loaded.notes, _runs(loaded.run_dirs), written, samples, chosen)
    atomic_write(out / "index.html", page)
    n = len({e.model for e in loaded.entries})
    print(f"report: {plural(n, 'model')}, {plural(len(views), 'suite')} → {out / 'index.html'}")
    for note in loaded.notes:
        print(f"  note: {note}")
