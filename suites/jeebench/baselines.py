"""The paper's reference rows and breakdowns beyond Table 2: the random baseline (Table 2's "Random" row, as
the authors' compute_metrics.py computes it), per-year scores (§4.7, the contamination check: are questions
from before a model's training cutoff easier?), and Table 5's MCQ-only exam marks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from suites.base import Table, ranked
from suites.jeebench.data import MCQ_TYPES, SUBJECTS, TYPES, Item

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


def year_table(models: dict[str, dict[str, Any]], variant: str) -> Table | None:
    years = sorted({int(y) for s in models.values() for y in s.get("by_year", {})})
    if not years:
        return None
    return Table(
        title=f"jeebench ({variant}): score by exam year (§4.7)",
        columns=["model", *map(str, years)],
        rows=[[m, *(models[m].get("by_year", {}).get(y) for y in years)] for m in ranked(models, "overall")],
        note="A model much better on the years before its training cutoff may have seen those papers.",
    )


def random_table(row: dict[str, Any], variant: str) -> Table:
    cols = [*SUBJECTS, *TYPES, "overall"]
    vals = [row["by_subject"].get(c) for c in SUBJECTS] + [row["by_type"].get(c) for c in TYPES] + [row["overall"]]
    return Table(
        title=f"jeebench ({variant}): random baseline (Table 2's Random row, on these questions)",
        columns=["baseline", *cols],
        rows=[["Random", *(None if v is None else round(v, 3) for v in vals)]],
        note="Expected score of a random answer: MCQ 1/4; MCQ(multiple) by the number of correct options "
        "(1: 0.0625, 2: 0.09375, 3: 0.203, 4: 0.5); Integer and Numeric 0 (the authors' compute_metrics.py).",
    )


def mcq_marks_table(models: dict[str, dict[str, Any]], variant: str) -> Table | None:
    rows = [[m, variant, *(s["marks_mcq"][k] for k in ("positive", "negative", "total", "questions"))]
            for m, s in ((m, models[m]) for m in ranked(models, "overall")) if s.get("marks_mcq")]  # fmt: skip
    if not rows:
        return None
    return Table(
        title=f"jeebench ({variant}): exam marks on the MCQ types (Table 5: compare cot with cot-exam)",
        columns=["model", "variant", "positive", "negative", "total", "MCQ questions"],
        rows=rows,
        note="Table 5 scores single- and multi-correct MCQs only (the exam prompt applies to them).",
    )
