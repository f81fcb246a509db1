"""VRB in the report: the frontier over time at the paper's three snapshots (Fig. 7 right), and the models
the paper's figures leave out (EXCLUDE_MODELS) kept off the frontier and out of the severity mean."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from report import main as report_main
from report.load import load_runs
from report.rows import level_means
from report.tables import views_of
from suites.vrb import paper
from tests.report_runs import make_run

MODELS = {  # name: (price_in, accuracy, released, no_error accuracy)
    "old": (1.0, 0.3, "2024-06-01", 0.4),
    "mid25": (0.5, 0.5, "2025-03-01", 0.6),
    "late": (0.5, 0.7, "2025-10-01", 0.8),
    "lfm2-vl-1.6b": (0.01, 0.9, "2024-01-01", 1.0),  # the reference's EXCLUDE_MODELS: would dominate every snapshot
    "future": (0.1, 0.8, "2026-01-15", 0.9),  # after the last snapshot
}


def _run(tmp_path: Path, frontier: dict | None) -> Path:
    models = {m: {"price_in": p, "release_date": d} for m, (p, _, d, _) in MODELS.items()}
    scores = {m: {"accuracy": a, "ci95": [a - 0.1, a + 0.1], "n": 10, "by_severity": {"no_error": {"accuracy": ne}}}
              for m, (_, a, _, ne) in MODELS.items()}  # fmt: skip
    extra = {"frontier": frontier, "usefulness_threshold": 0.94} if frontier else {}
    return make_run(tmp_path, "vrb", "vrb", models, scores, [], extra=extra)


def _snaps(out: Path) -> dict[str, list[str]]:
    with (out / "frontier_snapshots.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["cost_axis"] == "price_in"]
    got: dict[str, list[str]] = {}
    for r in rows:
        got.setdefault(r["snapshot"], []).append(r["model"])
    return got


def test_paper_snapshots_and_left_out_models(tmp_path: Path) -> None:
    fx = {"snapshots": list(paper.FRONTIER_SNAPSHOTS.values()), "excluded_models": ["lfm2-vl-1.6b", "not-run"],
          "paper": list(paper.FRONTIER_TEXT)}  # fmt: skip
    run = _run(tmp_path, fx)
    [v] = views_of(*(lambda lr: (lr.entries, lr.extras))(load_runs([run])))
    assert v.left_out == ["lfm2-vl-1.6b"] and v.snapshot_dates and v.threshold == 0.94
    assert [p.name for p in v.front["price_in"]] == ["future"]  # lfm2 would dominate it
    assert level_means(v, "by_severity")["no_error"] == pytest.approx((0.4 + 0.6 + 0.8 + 0.9) / 4)
    out = tmp_path / "rep"
    report_main([run], out)
    # Nov 2024: old only; Apr 2025: mid25 (cheaper and better); Dec 2025: late; future is after every snapshot
    assert _snaps(out) == {"2024-11-30": ["old"], "2025-04-30": ["mid25"], "2025-12-31": ["late"]}
    page = (out / "index.html").read_text()
    assert "3 at the paper&#x27;s dates" in page or "3 at the paper's dates" in page
    assert "Left out, as the paper" in page and "Paper: Gemini-3 Flash 78% at $0.50" in page


def test_without_the_hint_every_change_and_every_model(tmp_path: Path) -> None:
    run = _run(tmp_path, None)
    [v] = views_of(*(lambda lr: (lr.entries, lr.extras))(load_runs([run])))
    assert v.left_out == [] and not v.snapshot_dates and v.paper_frontier == [] and v.threshold is None
    assert [p.name for p in v.front["price_in"]] == ["lfm2-vl-1.6b"]
    assert [s.when.isoformat() for s in v.snaps["price_in"]] == ["2024-01-01"]  # lfm2 on top from its release


def test_titles_say_what_is_shown(tmp_path: Path) -> None:
    """#38: the paper's three snapshot dates are not 'successive release dates'; the pooled skill fit leaves
    the paper's excluded models out, so it is not over 'all models'."""
    from report.plots import over_time_title, pooled_skills_title

    fx = {"snapshots": list(paper.FRONTIER_SNAPSHOTS.values()), "excluded_models": ["lfm2-vl-1.6b"]}
    [v] = views_of(*(lambda lr: (lr.entries, lr.extras))(load_runs([_run(tmp_path / "a", fx)])))
    t = over_time_title(v, v.snaps["price_in"])
    assert "successive release dates" not in t and "paper's 3 snapshot dates" in t
    assert "all models but the 1 the paper leaves out" in pooled_skills_title(v)
    [w] = views_of(*(lambda lr: (lr.entries, lr.extras))(load_runs([_run(tmp_path / "b", None)])))
    assert "successive release dates" in over_time_title(w, w.snaps["price_in"])
    assert "skill effects, all models (" in pooled_skills_title(w)


def test_left_out_models_leave_the_groups_and_are_marked(tmp_path: Path) -> None:
    """#38: the paper's excluded models (EXCLUDE_MODELS) are out of the Groups table's count, best and median
    (audit: proprietary median 51.9% over 32 models vs 54.3% over 28), marked † wherever they are named."""
    from report.rows import group_rows

    models = {m: {"price_in": p, "release_date": d, "open_weights": False} for m, (p, _, d, _) in MODELS.items()}
    scores = {m: {"accuracy": a, "ci95": [a - 0.1, a + 0.1], "n": 10} for m, (_, a, _, _) in MODELS.items()}
    fx = {"snapshots": list(paper.FRONTIER_SNAPSHOTS.values()), "excluded_models": ["lfm2-vl-1.6b"]}
    run = make_run(tmp_path, "vrb", "vrb", models, scores, [], extra={"frontier": fx})
    [v] = views_of(*(lambda lr: (lr.entries, lr.extras))(load_runs([run])))
    [g] = [r for r in group_rows(v) if r["group"] == "proprietary"]
    assert (g["models"], g["best_model"], g["left_out"]) == (4, "future", 1)
    assert g["median_accuracy"] == pytest.approx((0.5 + 0.7) / 2)  # with lfm2 (0.9): 0.7
    assert v.name("lfm2-vl-1.6b").endswith(" †") and not v.name("late").endswith("†")
    out = tmp_path / "rep"
    report_main([run], out)
    page = (out / "index.html").read_text()
    assert "† Left out of the groups" in page and "lfm2-vl-1.6b †" in page
