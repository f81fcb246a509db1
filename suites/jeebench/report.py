"""Calibration (MCE, ACE, reliability diagram), confidence thresholding, and the paper's tables."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from suites.base import Table, ranked
from suites.jeebench.data import ALL_YEARS, MCQ_TYPES, SUBJECTS, TEST_YEARS, TYPES, VALIDATION_YEARS
from suites.jeebench.exam import ci0 as _ci0
from suites.jeebench.exam import threshold_tables
from suites.jeebench.extract import Answer
from suites.jeebench.metrics import Marks, mark_totals, marks_for, option_shares, self_consistency
from suites.jeebench.paper import FIG6, REPLAY, SEC42_FUNCTION_CALLING, T2_COLS, TABLE2, TABLE2_ROWS
from suites.stats import ci_list, ci_method

N_BINS = 10
SEC42_TOOLS = "gpt-4-0613 CoT + calculator"
"""The paper's row a cot-tools run's gap is taken against (§4.2)."""
GRID = np.round(np.arange(0.0, 1.0 + 1e-9, 0.125), 3)
PAPER_TAU = (0.125, 0.75)
"""§4.5.3 / Fig. 7: the paper's optimum (τ_single, τ_multiple) on GPT-4's validation years."""
MAJORITY = (0.0, 0.5)
"""Table 2's SC@8 and Table 6's CoT+SC rows: the plain majority vote (MCQ winner kept at any share; letters
in at least half the samples)."""


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


def fig7_curves(
    questions: Sequence[dict[str, Any]], m: Marks, ex: str = "reference"
) -> dict[str, list[list[float]]]:
    """Fig. 7 (§4.5.3): per MCQ type, [threshold, positive, negative, total] marks of that type's questions
    of the validation years 2016-2021 along its own threshold (the two types are disjoint, so each threshold
    acts on its own type only)."""
    out: dict[str, list[list[float]]] = {}
    for kind in MCQ_TYPES:
        qs = [q for q in questions if q["type"] == kind]
        rows = []
        for t in GRID:
            mk = _marks_at(qs, VALIDATION_YEARS, float(t), float(t), m, ex)
            rows.append([float(t), mk["positive"], mk["negative"], mk["total"]])
        out[kind] = rows
    return out


def best_tau(curve: Sequence[Sequence[float]]) -> float:
    """The threshold of a curve's highest total; on a tie, the middle of the tied thresholds (the lower
    middle of an even count). The paper states no tie rule; its Fig. 7 optimum τ_single = 0.125 lies in the
    middle of the authors' flat stretch 0-0.25 (their released mcq_single_marks.png: 185 marks at 0, 0.125
    and 0.25), which neither "smallest" (0) nor "largest" (0.25) gives."""
    top = max(r[-1] for r in curve)
    tied = [float(r[0]) for r in curve if r[-1] >= top - 1e-9]
    return tied[(len(tied) - 1) // 2]


def thresholding(
    questions: Sequence[dict[str, Any]], m: Marks, ex: str = "reference"
) -> dict[str, Any]:
    """§4.5.3: τ_single and τ_multiple from the validation years (Fig. 7's curves, `best_tau`), then Table 6:
    marks on the MCQ types of the test years 2022-2023 (the paper's Table 6 counts MCQs only: the released
    greedy CoT extracts give its 109/43/66 so; all types give 144/43/101) by the plain majority vote (its
    CoT+SC row: τ 0/0.5, whatever thresholds the run's Table 2 uses) and with the chosen thresholds;
    `test_all_types` keeps every type. `exam_2023`: §4.6's marks on the whole 2023 paper with the chosen
    thresholds on MCQs and the majority vote on Integer and Numeric."""
    fig7 = fig7_curves(questions, m, ex)
    ts_best, tm_best = best_tau(fig7["MCQ"]), best_tau(fig7["MCQ(multiple)"])
    mcq = [q for q in questions if q["type"] in MCQ_TYPES]
    single: dict[str, list[float]] = {"mcq": [], "all": []}
    for q in questions:
        if q["year"] in TEST_YEARS:
            a0 = q["answers"][0] if q["answers"] else None
            v = marks_for(q["gold"], a0, q["type"], m, q["year"], ex)
            single["all"].append(v)
            if q["type"] in MCQ_TYPES:
                single["mcq"].append(v)

    ts0, tm0 = MAJORITY  # Table 6's CoT+SC row is the majority vote, not the run's thresholds

    def test(qs: Sequence[dict[str, Any]], key: str) -> dict[str, dict[str, float]]:
        return {"cot_sc": _marks_at(qs, TEST_YEARS, ts0, tm0, m, ex),
                "cot_sc_thresholding": _marks_at(qs, TEST_YEARS, ts_best, tm_best, m, ex),
                "single_sample": mark_totals(single[key])}  # fmt: skip

    y2023 = range(2023, 2024)
    return {
        "tau_single": ts_best,
        "tau_multiple": tm_best,
        "test_ci95": {
            "cot_sc": total_ci(_marks_list(mcq, TEST_YEARS, ts0, tm0, m, ex)),
            "cot_sc_thresholding": total_ci(_marks_list(mcq, TEST_YEARS, ts_best, tm_best, m, ex)),
            "single_sample": total_ci(single["mcq"]),
        },
        "validation_marks": _marks_at(mcq, VALIDATION_YEARS, ts_best, tm_best, m, ex),
        "test": test(mcq, "mcq"),
        "test_all_types": test(questions, "all"),
        "test_questions": sum(1 for q in mcq if q["year"] in TEST_YEARS),
        "exam_2023": {
            "total": _marks_at(questions, y2023, ts_best, tm_best, m, ex)["total"],
            "questions": sum(1 for q in questions if q["year"] == 2023),
            "paper_tau": _marks_at(questions, y2023, PAPER_TAU[0], PAPER_TAU[1], m, ex)["total"],
        },
        "fig7": fig7,
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
        rows.append([name, variant, *map(_r3, vals), _r3(s["overall"]), gap(s["overall"], variant), s.get("ci95"),
                     s["n"]])  # fmt: skip
    rows += table2_paper_rows(variant)
    out = [
        Table(
            title=f"jeebench ({variant}): scores (the paper's Table 2 layout)",
            columns=["model", "variant", *cols, "overall", "gap", "95% CI", "questions"],
            rows=rows,
            note=note + "; rows `paper: ...` are the paper's Table 2 (gpt-4-0314 and the models it names); " + GAP_NOTE
            + ("; cot-tools: gap = overall − §4.2's gpt-4-0613 CoT + calculator (0.274), its only figures being "
               "gpt-4-0613's overall with and without the calculator" if variant == "cot-tools" else ""),
            key=("overall", "gap", "95% CI"),
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
    out += threshold_tables(models, order)
    cal_rows = [
        [n, c["MCE"], c["ACE"], c["pairs"], _r3(c["MCE"] - FIG6["MCE"]), _r3(c["ACE"] - FIG6["ACE"])]
        for n in order
        if (c := models[n].get("calibration"))
    ]
    if cal_rows:
        out.append(
            Table(
                title="jeebench: calibration of option vote shares (MCQ types, 10 bins; §4.5.2, Fig. 6)",
                columns=["model", "MCE", "ACE", "pairs", "gap MCE", "gap ACE"],
                rows=cal_rows + [["paper: GPT-4+CoT+SC@8", FIG6["MCE"], FIG6["ACE"], None, None, None]],
                note="The paper gives no number of bins; its row is GPT-4's (gpt-4-0314) 8 samples at T=0.5. "
                "gap = ours − the paper's (model and protocol together).",
            )
        )
    return out


GAP_NOTE = (
    "gap = overall − the paper's GPT-4 row of this method (gpt-4-0314), which mixes the model's difference with "
    "the protocol's; rows `replay: ...` are the authors' released responses read by our rules and scored by us, "
    "their gap against the paper's row of the same responses (read by hand) is the protocol's alone"
)


def gap(overall: float | None, variant: str, name: str | None = None) -> float | None:
    """Ours − the paper's Table 2 overall: against row `name`, else the paper's GPT-4 row of this method."""
    if variant == "cot-tools" and name is None:  # §4.2: the paper's gpt-4-0613 with its calculator
        return None if overall is None else round(overall - SEC42_FUNCTION_CALLING[SEC42_TOOLS], 3)
    rows = TABLE2_ROWS.get(variant, ())
    ref = name if name is not None else (rows[-1] if rows else None)
    if overall is None or ref not in TABLE2:
        return None
    return round(overall - TABLE2[ref]["overall"], 3)


def table2_paper_rows(variant: str) -> list[list[Any]]:
    """The paper's Table 2 rows of this prompting method, then the replay rows of the authors' released
    responses of it (`replay: ...`, paper.REPLAY), in our Table 2 layout; the CI column left empty."""
    cols = [*SUBJECTS, *TYPES, "overall"]
    out = [[f"paper: {name}", variant, *(TABLE2[name][c] for c in cols), None, None, 515]
           for name in TABLE2_ROWS.get(variant, ())]  # fmt: skip
    if variant == "cot-tools":  # §4.2 gives gpt-4-0613's overall only, with and without the calculator
        out += [[f"paper: {name} (§4.2)", variant, *[None] * (len(cols) - 1), v,
                 gap(v, variant), None, 515] for name, v in SEC42_FUNCTION_CALLING.items()]  # fmt: skip
    for name, (v, _, vals, unread) in REPLAY.items():
        if v == variant:
            row = dict(zip(T2_COLS, vals, strict=True))
            out.append([f"replay: {name} (released, {unread} unread)", variant, *(row[c] for c in cols),
                        gap(row["overall"], variant, name), None, 515])  # fmt: skip
    return out
