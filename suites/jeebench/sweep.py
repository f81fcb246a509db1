"""JEEBench tables over several runs of a sweep (one run per variant): Table 2 across variants, Table 5 side
by side (cot against cot-exam, MCQ types), and §4.6's exam view (marks on the 2023 paper, out of 229 and
scaled to the exam's 360). `evalsweep report` builds them from the runs' scores.json and shows them in the
report and on the terminal; each table's note carries every run's recorded deviations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from suites.base import Table
from suites.jeebench.data import SUBJECTS, TYPES
from suites.jeebench.exam import exam_rows, exam_view
from suites.jeebench.paper import SEC46, TABLE5, TABLE5_MAX, TABLE5_QUESTIONS
from suites.jeebench.report import GAP_NOTE, gap, table2_paper_rows

ORDER = ("normal", "cot", "cot-1shot", "cot-critique", "cot-sc", "cot-exam")
MAX_2023, EXAM_TOTAL = SEC46["of"], SEC46["exam_total"]
"""The 2023 questions' maximum marks (27 MCQ x 3 + 10 MCQ(multiple) x 4 + 24 Integer x 4 + 4 Numeric x 3;
`metrics.Marks`) and the 2023 exam's full marks (both papers: 360; the paper scales by 360/229)."""


def _r3(v: Any) -> float | None:
    return round(v, 3) if isinstance(v, int | float) else None


def _variant_key(r: Mapping[str, Any]) -> tuple[int, str]:
    v = str(r.get("variant"))
    return (ORDER.index(v) if v in ORDER else len(ORDER), str(r.get("label")))


def _note(runs: Sequence[Mapping[str, Any]], note: str) -> str:
    devs = [f"{r['label']}: " + "; ".join(r["deviations"]) for r in runs if r.get("deviations")]
    return note + ("\nDeviations from the paper's protocol: " + " | ".join(devs) + "." if devs else "")


def table2(runs: Sequence[Mapping[str, Any]]) -> Table | None:
    """Table 2 across variants: a row per (model, variant), by subject, by type, overall."""
    runs = sorted(runs, key=_variant_key)
    models = sorted({m for r in runs for m in r["models"]})
    rows = []
    for m in models:
        for r in runs:
            s = r["models"].get(m)
            if s is None or s.get("overall") is None:
                continue
            vals = [(s.get("by_subject") or {}).get(c) for c in SUBJECTS]
            vals += [(s.get("by_type") or {}).get(c) for c in TYPES]
            rows.append([m, r["variant"], *map(_r3, vals), _r3(s["overall"]), gap(s["overall"], r["variant"]),
                         s.get("n")])  # fmt: skip
    if len({r["variant"] for r in runs}) < 2 or not rows:
        return None
    for v in dict.fromkeys(r["variant"] for r in runs):
        rows += [[*p[:-2], p[-1]] for p in table2_paper_rows(v)]  # no CI column here
    return Table(
        title="jeebench: Table 2 across variants (one row per model and prompting method)",
        columns=["model", "variant", *SUBJECTS, *TYPES, "overall", "gap", "questions"],
        rows=rows,
        note=_note(runs, "Each run scored over its answered questions (see each run's own table for CIs); rows "
                   "`paper: ...` are the paper's Table 2; " + GAP_NOTE + "."),
        key=("overall", "gap"),
    )


def table5(runs: Sequence[Mapping[str, Any]]) -> Table | None:
    """Table 5 side by side: each model's MCQ-type marks under the CoT prompt and the exam prompt."""
    cot = [r for r in runs if r["variant"] == "cot"]
    exam = [r for r in runs if r["variant"] == "cot-exam"]
    if not cot or not exam:
        return None
    c, e = cot[0], exam[0]
    rows = []
    for m in sorted(set(c["models"]) & set(e["models"])):
        a, b = c["models"][m].get("marks_mcq"), e["models"][m].get("marks_mcq")
        if a and b:
            whole = a["questions"] == b["questions"] == TABLE5_QUESTIONS  # a gap only against the paper's 296 MCQs
            rows.append([m, *(a[k] for k in ("positive", "negative", "total")),
                         *(b[k] for k in ("positive", "negative", "total")), b["total"] - a["total"],
                         a["total"] - TABLE5["cot"][2] if whole else None,
                         b["total"] - TABLE5["cot-exam"][2] if whole else None])  # fmt: skip
    if rows:
        pc, pe = TABLE5["cot"], TABLE5["cot-exam"]
        rows.append(["paper: GPT-4 (gpt-4-0314)", *pc, *pe, pe[2] - pc[2], None, None])
    if not rows:
        return None
    return Table(
        title="jeebench: Table 5 side by side, exam marks on the MCQ types (cot against cot-exam)",
        columns=["model", "cot +", "cot −", "cot total", "exam +", "exam −", "exam total", "exam − cot", "gap cot",
                 "gap exam"],  # fmt: skip
        rows=rows,
        note=_note([c, e], "The exam prompt states the marking scheme (MCQ types only); the paper finds it "
                   f"does not teach the model to skip. The paper's row: Table 5, out of {TABLE5_MAX} "
                   "(its negative marks printed unsigned). gap cot / gap exam = ours − the paper's total, when "
                   f"both runs asked all {TABLE5_QUESTIONS} MCQs (model and protocol together)."),  # fmt: skip
        key=("cot total", "exam total"),
    )


def human_view(runs: Sequence[Mapping[str, Any]]) -> Table | None:
    """§4.6: each run's marks on the 2023 paper out of its 229 marks, scaled to the exam's 360, beside the
    candidates' top 10% and top 20% and the paper's GPT-4 (`exam.exam_rows`). One run: its own table has it."""
    if len(runs) < 2:
        return None
    rows, used = [], []
    for r in sorted(runs, key=_variant_key):
        for m, s in sorted(r["models"].items()):
            mine = exam_rows(m, r["variant"], s)
            rows += mine
            used += [r] if mine and r not in used else []
    if not rows:
        return None
    t = exam_view(rows, "")
    t.note = _note(used, t.note)
    return t


def sweep_tables(runs: Sequence[Mapping[str, Any]]) -> list[Table]:
    """Every cross-run table the runs allow. `runs`: one mapping per run with `label`, `variant`, `models`
    (model → its scores.json entry) and `deviations` (its `protocol.deviations`)."""
    return [t for t in (table2(runs), table5(runs), human_view(runs)) if t is not None]
