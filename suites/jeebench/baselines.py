"""The paper's reference rows and breakdowns beyond Table 2: the random baseline (Table 2's "Random" row, as
the authors' compute_metrics.py computes it), per-year scores (§4.7, the contamination check: are questions
from before a model's training cutoff easier?), and Table 5's MCQ-only exam marks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from suites.base import Table, ranked
from suites.jeebench.data import MCQ_TYPES, SUBJECTS, TYPES, Item
from suites.jeebench.paper import SEC47, TABLE1, TABLE2, TABLE5, TABLE5_MAX

TYPES_T1 = ("MCQ", "MCQ(multiple)", "Integer", "Numeric")  # Table 1's order
SUBJECTS_T1 = ("math", "phy", "chem")

RANDOM_MULTIPLE = {1: 0.0625, 2: 0.09375, 3: 0.203125, 4: 0.5}
"""Expected MCQ(multiple) score of a random answer by the number of correct options (compute_metrics.py)."""


def random_score(item: Item) -> float:
    """The authors' random-baseline score of one question: 1/4 for MCQ, by gold size for MCQ(multiple),
    0 for Integer and Numeric."""
    if item.type == "MCQ":
        return 0.25
    if item.type == "MCQ(multiple)":
        return RANDOM_MULTIPLE[len(item.gold)]
    return 0.0


def random_row(items: Iterable[Item]) -> dict[str, Any]:
    """Table 2's Random row over `items`: overall, by subject, by type."""
    scores = [(it.subject, it.type, random_score(it)) for it in items]
    out: dict[str, Any] = {"overall": float(np.mean([s for *_, s in scores])) if scores else None}
    out["by_subject"] = {g: float(np.mean([s for sub, _, s in scores if sub == g])) for g in SUBJECTS
                         if any(sub == g for sub, _, _ in scores)}  # fmt: skip
    out["by_type"] = {g: float(np.mean([s for _, ty, s in scores if ty == g])) for g in TYPES
                      if any(ty == g for _, ty, _ in scores)}  # fmt: skip
    return out


def by_year(rows: Sequence[dict[str, Any]]) -> dict[int, float]:
    """Mean score per exam year of one model's scored rows (answered questions)."""
    years = sorted({r["year"] for r in rows})
    return {y: float(np.mean([r["score"] for r in rows if r["year"] == y])) for y in years}


def mcq_marks(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Table 5's exam marks: MCQ types only (the paper's total is out of the MCQs' maximum)."""
    vals = [float(r["marks"]) for r in rows if r["type"] in MCQ_TYPES]
    return {
        "positive": float(sum(v for v in vals if v > 0)),
        "negative": float(sum(v for v in vals if v < 0)),
        "total": float(sum(vals)),
        "questions": len(vals),
    }


def latest_vs_rest(rows: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    """§4.7's comparison: the mean score on the 2023 questions and on every other question."""
    new = [r["score"] for r in rows if r["year"] == 2023]
    old = [r["score"] for r in rows if r["year"] != 2023]
    return {"2023": float(np.mean(new)) if new else None, "other years": float(np.mean(old)) if old else None}


def year_table(models: dict[str, dict[str, Any]], variant: str) -> Table | None:
    years = sorted({int(y) for s in models.values() for y in s.get("by_year", {})})
    if not years:
        return None
    rest = any(s.get("latest_vs_rest") for s in models.values())  # §4.7's two columns
    sc = rest and variant == "cot-sc"  # §4.7's numbers are GPT-4+CoT+SC@8's: a gap only beside them

    def _gaps(lv: dict[str, float] | None) -> list[float | None]:
        return [None if (lv or {}).get(k) is None else round(lv[k] - SEC47[k], 3) for k in SEC47] if sc else []  # type: ignore[index]

    rows = [[m, *(models[m].get("by_year", {}).get(y) for y in years),
             *((models[m].get("latest_vs_rest") or {}).get(k) for k in SEC47 if rest),
             *_gaps(models[m].get("latest_vs_rest"))]
            for m in ranked(models, "overall")]  # fmt: skip
    if sc:
        rows.append(["paper: GPT-4+CoT+SC@8", *(None for _ in years), *SEC47.values(), None, None])
    return Table(
        title=f"jeebench ({variant}): score by exam year (§4.7)",
        columns=["model", *map(str, years), *(["§4.7: 2023", "§4.7: other years"] if rest else []),
                 *(["gap: 2023", "gap: other years"] if sc else [])],
        rows=rows,
        note="A model much better on the years before its training cutoff may have seen those papers. §4.7 "
        "compares 2023 (released after GPT-4's training) with the rest: GPT-4+CoT+SC 0.338 against 0.396.",
    )


def table1(asked: Sequence[Item]) -> Table:
    """Table 1: the questions by type and subject, beside the paper's counts and the gap (ours − the paper's
    total: 0 on all 515; a --limit or cot-exam run asks fewer)."""
    rows = []
    for ty in TYPES_T1:
        ours = [sum(it.type == ty and it.subject == sub for it in asked) for sub in SUBJECTS_T1]
        paper = [TABLE1[ty][sub] for sub in SUBJECTS_T1]
        rows.append([ty, *ours, sum(ours), *paper, sum(paper)])
    tot = [sum(r[i] for r in rows) for i in range(1, 9)]
    rows.append(["Total", *tot])
    return Table(
        title="jeebench: questions by type and subject (Table 1)",
        columns=["type", "math", "phy", "chem", "total", "paper math", "paper phy", "paper chem", "paper total",
                 "gap"],  # fmt: skip
        rows=[[*r, r[4] - r[8]] for r in rows],
        note="The questions this run asked (all 515 unless --limit or cot-exam); gap = total − paper total.",
    )


def random_table(row: dict[str, Any], variant: str) -> Table:
    cols = [*SUBJECTS, *TYPES, "overall"]
    vals = [row["by_subject"].get(c) for c in SUBJECTS] + [row["by_type"].get(c) for c in TYPES] + [row["overall"]]
    ours = None if row["overall"] is None else round(row["overall"], 3)
    return Table(
        title=f"jeebench ({variant}): random baseline (Table 2's Random row, on these questions)",
        columns=["baseline", *cols, "gap"],
        rows=[["Random", *(None if v is None else round(v, 3) for v in vals),
               None if ours is None else round(ours - TABLE2["Random"]["overall"], 3)],
              ["paper: Random", *(TABLE2["Random"][c] for c in cols), None]],  # fmt: skip
        note="Expected score of a random answer: MCQ 1/4; MCQ(multiple) by the number of correct options "
        "(1: 0.0625, 2: 0.09375, 3: 0.203, 4: 0.5); Integer and Numeric 0 (the authors' compute_metrics.py); "
        "gap = overall − the paper's (0 on all 515 questions; other question sets differ by their mix).",
    )


def mcq_marks_table(models: dict[str, dict[str, Any]], variant: str) -> Table | None:
    paper = TABLE5.get(variant)
    rows = [[m, variant, *(s["marks_mcq"][k] for k in ("positive", "negative", "total", "questions")),
             s["marks_mcq"]["total"] - paper[2] if paper and s["marks_mcq"]["questions"] == 296 else None]
            for m, s in ((m, models[m]) for m in ranked(models, "overall")) if s.get("marks_mcq")]  # fmt: skip
    if not rows:
        return None
    if paper:
        rows.append(["paper: GPT-4 (gpt-4-0314)", variant, *paper, 296, None])
    return Table(
        title=f"jeebench ({variant}): exam marks on the MCQ types (Table 5: compare cot with cot-exam)",
        columns=["model", "variant", "positive", "negative", "total", "MCQ questions", "gap"],
        rows=rows,
        note=f"Table 5 scores single- and multi-correct MCQs only (the exam prompt applies to them); the paper's "
        f"row is out of {TABLE5_MAX}, its negative marks printed unsigned. gap = total − the paper's GPT-4 total, "
        f"on all 296 MCQs only (the released greedy CoT read by our rules gives 490/-183/307, gap -1).",
        key=("total", "gap"),
    )
