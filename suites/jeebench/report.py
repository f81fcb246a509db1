"""Calibration (MCE, ACE, reliability diagram), confidence thresholding, and the paper's tables."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from suites.base import Table, ranked
from suites.jeebench.data import ALL_YEARS, SUBJECTS, TEST_YEARS, TYPES, VALIDATION_YEARS
from suites.jeebench.extract import Answer
from suites.jeebench.metrics import Marks, mark_totals, marks_for, option_shares, self_consistency
from suites.stats import ci_list, ci_method

N_BINS = 10
GRID = np.round(np.arange(0.0, 1.0 + 1e-9, 0.125), 3)


def calibration_pairs(questions: Sequence[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """(confidence, correct) for every (MCQ-type question, option) pair; confidence = the option's vote share."""
    conf, ok = [], []
    for q in questions:
        if q["type"] not in ("MCQ", "MCQ(multiple)"):
            continue
        for c, share in option_shares(q["answers"]).items():
            conf.append(share)
            ok.append(float(c in q["gold"]))
    return np.asarray(conf, dtype=float), np.asarray(ok, dtype=float)


def calibration(conf: np.ndarray, ok: np.ndarray, n_bins: int = N_BINS) -> dict[str, Any]:
    """Equal-width bins on [0, 1] (1.0 falls in the last); MCE / ACE = max / mean over non-empty bins of
    |mean confidence - accuracy|."""
    idx = np.minimum(np.floor(np.round(conf * n_bins, 9)).astype(int), n_bins - 1)
    bins = []
    for b in range(n_bins):
        sel = idx == b
        if sel.any():
            c, a = float(conf[sel].mean()), float(ok[sel].mean())
            bins.append(
                {
                    "bin": b,
                    "lo": b / n_bins,
                    "hi": (b + 1) / n_bins,
                    "n": int(sel.sum()),
                    "confidence": c,
                    "accuracy": a,
                    "gap": abs(c - a),
                }
            )
    gaps = [b["gap"] for b in bins]
    return {
        "MCE": max(gaps) if gaps else None,
        "ACE": float(np.mean(gaps)) if gaps else None,
        "pairs": int(conf.size),
        "bins": bins,
    }


def reliability_png(cal: dict[str, Any], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 4.5), dpi=100)
    w = 1.0 / N_BINS
    for b in cal["bins"]:
        ax.bar(
            b["lo"] + w / 2, b["accuracy"], width=w * 0.95, color="#4c72b0", edgecolor="black", linewidth=0.5
        )
    ax.plot([0, 1], [0, 1], "--", color="gray", linewidth=1)
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence (vote share)", ylabel="accuracy", title=title)
    ax.text(0.03, 0.92, f"MCE {cal['MCE']:.3f}  ACE {cal['ACE']:.3f}", transform=ax.transAxes, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _marks_list(
    questions: Sequence[dict[str, Any]], years: range, ts: float, tm: float, m: Marks, ex: str = "reference"
) -> list[float]:
    vals = []
    for q in questions:
        if q["year"] in years:
            a: Answer = self_consistency(q["answers"], q["type"], ts, tm, ex)
            vals.append(marks_for(q["gold"], a, q["type"], m, q["year"], ex))
    return vals


def _marks_at(
    questions: Sequence[dict[str, Any]], years: range, ts: float, tm: float, m: Marks, ex: str = "reference"
) -> dict[str, float]:
    return mark_totals(_marks_list(questions, years, ts, tm, m, ex))


def total_ci(marks: Sequence[float]) -> list[float] | None:
    """95% percentile bootstrap CI of a total of marks (questions resampled; total = n x mean)."""
    ci = ci_list(marks)
    return None if ci is None else [ci[0] * len(marks), ci[1] * len(marks)]


def thresholding(
    questions: Sequence[dict[str, Any]], m: Marks, tau_single: float, tau_multiple: float, ex: str = "reference"
) -> dict[str, Any]:
    """Grid-search (tau_single, tau_multiple) on the validation years for total marks (ties → the smaller
    thresholds), then report marks on the test years with the default and the chosen thresholds."""
    best: tuple[float, float, float] | None = None
    for ts in GRID:
        for tm in GRID:
            total = _marks_at(questions, VALIDATION_YEARS, float(ts), float(tm), m, ex)["total"]
            if best is None or total > best[0] + 1e-9:
                best = (total, float(ts), float(tm))
    assert best is not None
    _, ts_best, tm_best = best
    single = []
    for q in questions:
        if q["year"] in TEST_YEARS:
            a0 = q["answers"][0] if q["answers"] else None
            single.append(marks_for(q["gold"], a0, q["type"], m, q["year"], ex))
    return {
        "tau_single": ts_best,
        "tau_multiple": tm_best,
        "test_ci95": {
            "cot_sc": total_ci(_marks_list(questions, TEST_YEARS, tau_single, tau_multiple, m, ex)),
            "cot_sc_thresholding": total_ci(_marks_list(questions, TEST_YEARS, ts_best, tm_best, m, ex)),
            "single_sample": total_ci(single),
        },
        "validation_marks": _marks_at(questions, VALIDATION_YEARS, ts_best, tm_best, m, ex),
        "test": {
            "cot_sc": _marks_at(questions, TEST_YEARS, tau_single, tau_multiple, m, ex),
            "cot_sc_thresholding": _marks_at(questions, TEST_YEARS, ts_best, tm_best, m, ex),
            "single_sample": mark_totals(single),
        },
        "test_questions": sum(1 for q in questions if q["year"] in TEST_YEARS),
        "by_type": by_type_curves(questions, m, ex),
        "curve": {  # validation-year total marks along each threshold, the other held at its chosen value
            "tau_single": [[float(t), _marks_at(questions, VALIDATION_YEARS, float(t), tm_best, m, ex)["total"]]
                           for t in GRID],
            "tau_multiple": [[float(t), _marks_at(questions, VALIDATION_YEARS, ts_best, float(t), m, ex)["total"]]
                             for t in GRID],
        },
    }


def by_type_curves(questions: Sequence[dict[str, Any]], m: Marks, ex: str = "reference") -> dict[str, list[list[float]]]:
    """The authors' "Threshold v/s Marks" plots (`marks_dump` beside their CoT+SC responses): per MCQ type, over
    every year, [threshold, positive, negative, total] marks with that type's threshold at each grid value."""
    out: dict[str, list[list[float]]] = {}
    for kind in ("MCQ", "MCQ(multiple)"):
        qs = [q for q in questions if q["type"] == kind]
        rows = []
        for t in GRID:  # one type at a time: only that type's threshold acts
            mk = _marks_at(qs, ALL_YEARS, float(t), float(t), m, ex)
            rows.append([float(t), mk["positive"], mk["negative"], mk["total"]])
        out[kind] = rows
    return out


def safe_name(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model)


def _r3(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def tables(models: dict[str, dict[str, Any]], variant: str) -> list[Table]:
    """The paper's tables, models ranked by the headline (overall score), CIs named once per table."""
    cols = [*SUBJECTS, *TYPES]
    order = ranked(models, "overall")
    n_max = max((s["n"] for s in models.values()), default=0)
    note = ci_method(n_max) + "; over answered questions"
    rows = []
    for name in order:
        s = models[name]
        vals = [s["by_subject"].get(c) for c in SUBJECTS] + [s["by_type"].get(c) for c in TYPES]
        rows.append([name, variant, *map(_r3, vals), _r3(s["overall"]), s.get("ci95"), s["n"]])
    out = [
        Table(
            title=f"jeebench ({variant}): scores (the paper's Table 2 layout)",
            columns=["model", "variant", *cols, "overall", "95% CI", "questions"],
            rows=rows,
            note=note,
            key=("overall", "95% CI"),
        )
    ]
    out.append(
        Table(
            title=f"jeebench ({variant}): 95% CIs by subject and question type",
            columns=["model", *cols],
            rows=[
                [
                    n,
                    *(models[n].get("ci95_by_subject", {}).get(c) for c in SUBJECTS),
                    *(models[n].get("ci95_by_type", {}).get(c) for c in TYPES),
                ]  # fmt: skip
                for n in order
            ],
            note=note,
        )
    )
    out.append(
        Table(
            title=f"jeebench ({variant}): exam marks",
            columns=["model", "variant", "positive", "negative", "total", "95% CI", "answered", "questions"],
            rows=[
                [
                    n,
                    variant,
                    models[n]["marks"]["positive"],
                    models[n]["marks"]["negative"],
                    models[n]["marks"]["total"],
                    _ci0(models[n].get("marks_ci95")),
                    models[n]["answered"],
                    models[n]["n"],
                ]
                for n in order
            ],
            note=ci_method(n_max) + " (total = questions x mean marks)",
            key=("total", "95% CI"),
        )
    )
    th_rows = []
    for n in order:
        th = models[n].get("thresholding")
        if th:
            t, tci = th["test"], th.get("test_ci95", {})
            th_rows += [
                [
                    n,
                    "CoT (single sample: sample 0)",
                    *(t["single_sample"][k] for k in ("positive", "negative", "total")),
                    _ci0(tci.get("single_sample")),
                ],
                [
                    n,
                    "CoT+SC",
                    *(t["cot_sc"][k] for k in ("positive", "negative", "total")),
                    _ci0(tci.get("cot_sc")),
                ],
                [
                    n,
                    f"CoT+SC+thresholding (tau_single={th['tau_single']}, tau_multiple={th['tau_multiple']})",
                    *(t["cot_sc_thresholding"][k] for k in ("positive", "negative", "total")),
                    _ci0(tci.get("cot_sc_thresholding")),
                ],
            ]
    if th_rows:
        out.append(
            Table(
                title="jeebench: confidence thresholding, marks on the test years 2022-2023 "
                "(thresholds tuned on 2016-2021)",
                columns=["model", "method", "positive", "negative", "total", "95% CI"],
                rows=th_rows,
                note=ci_method() + " (test-year questions; thresholds held fixed)",
                key=("total", "95% CI"),
            )
        )
    curves = [(n, models[n]["thresholding"]["curve"]) for n in order if models[n].get("thresholding", {}).get("curve")]
    if curves:
        out.append(
            Table(
                title="jeebench: validation-year (2016-2021) total marks along each threshold (the thresholding curve)",
                columns=["model", "threshold", *(f"{t:g}" for t in GRID)],
                rows=[[n, k, *(v for _, v in c[k])] for n, c in curves for k in ("tau_single", "tau_multiple")],
                note="each curve holds the other threshold at its chosen value; the chosen point is the curve's "
                "maximum (ties: the smaller threshold)",
            )
        )
    cal_rows = [
        [
            n,
            models[n]["calibration"]["MCE"],
            models[n]["calibration"]["ACE"],
            models[n]["calibration"]["pairs"],
        ]
        for n in order
        if models[n].get("calibration")
    ]
    if cal_rows:
        out.append(
            Table(
                title="jeebench: calibration of option vote shares (MCQ types, 10 bins)",
                columns=["model", "MCE", "ACE", "pairs"],
                rows=cal_rows,
            )
        )
    return out


def _ci0(ci: list[float] | None) -> str:
    """A CI of marks, in whole marks."""
    return "-" if not ci else f"[{ci[0]:.0f}, {ci[1]:.0f}]"
