"""Table 1's layout (narrow factors I, RG, RQ, broad factors Gf, Gc, Gq, Grw, Gv, then Overall) and the
correlation of factor accuracies across models (does a model strong on one CHC factor tend to be strong on
the others — the "general factor" the paper's GIA builds on?)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats as sps

from suites.base import Table
from suites.m3gia.data import CLUSTERS, LANGS, Question, factor_labels
from suites.m3gia.paper import GAP_NOTE, TABLE1_SHOWN, TABLE3, TABLE3_COUNT, gap, paper_model, vs
from suites.m3gia.paper import TABLE1 as PAPER_TABLE1

TABLE1 = ("I", "RG", "RQ", "Gf", "Gc", "Gq", "Grw", "Gv")
"""Table 1's factor columns, in its order; Overall follows."""


def table1(models: dict[str, dict[str, Any]]) -> Table:
    """Our models' rows, then the paper's Human row and API models (`paper: ...`, Table 1 / 100)."""
    paper = [[f"paper: {m}", *(v / 100 for v in PAPER_TABLE1[m]), None, None, None] for m in TABLE1_SHOWN]
    among = tuple(k for k in PAPER_TABLE1 if not k.startswith("Human"))
    overall = {k: v[-1] for k, v in PAPER_TABLE1.items()}
    return Table(
        title="m3gia: accuracy by CHC factor (Table 1 layout)",
        columns=["model", *TABLE1, "Overall", "vs paper", "paper Overall", "gap"],
        rows=[[m, *(s["by_factor"].get(f) for f in TABLE1), s["accuracy"], *overall_beside(m, s["accuracy"], among, overall)]
              for m, s in models.items()]  # fmt: skip
        + paper,
        note="Rows `paper: ...` are the paper's Table 1 (percent / 100): the Human row is its 480 participants' "
        "average (not in the released data: the CFA models are fitted on standardised human scores), the others "
        "its API models (all 23 rows: suites/m3gia/paper.py, each a model `vs paper` can name); " + GAP_NOTE + ".",
    )


def overall_beside(model: str, ours: float | None, among: tuple[str, ...], overall: dict[str, float]) -> list[Any]:
    """`vs paper`, the paper's Overall (a fraction) of the model compared with, and ours − it."""
    found = paper_model(model, among)
    v = overall.get(found[0]) if found else None
    return [vs(model, among), None if v is None else v / 100, gap(ours, v)]


def factor_correlation(models: dict[str, dict[str, Any]]) -> tuple[dict[str, dict[str, float | None]], Table | None]:
    """Pearson r between every two factors' accuracies across models (None below 3 models or with no
    spread), and its table."""
    names = list(models)
    if len(names) < 3:
        return {}, None
    acc = {f: np.array([models[m]["by_factor"].get(f, np.nan) for m in names], dtype=float) for f in TABLE1}
    corr: dict[str, dict[str, float | None]] = {}
    for a in TABLE1:
        corr[a] = {}
        for b in TABLE1:
            x, y = acc[a], acc[b]
            ok = ~(np.isnan(x) | np.isnan(y))
            r = None
            if ok.sum() >= 3 and np.ptp(x[ok]) > 0 and np.ptp(y[ok]) > 0:
                r = float(sps.pearsonr(x[ok], y[ok]).statistic)
            corr[a][b] = r
    table = Table(
        title="m3gia: correlation of factor accuracies across models (Pearson r)",
        columns=["factor", *TABLE1],
        rows=[[a, *(corr[a][b] for b in TABLE1)] for a in TABLE1],
        note=f"over {len(names)} models; empty: fewer than 3 models with that factor, or no spread. The paper's "
        "Fig. 4 (left) is this matrix over its 24 models, drawn only (its text gives no values to print beside).",
    )
    return corr, table


TABLE3_FACTORS = ("Gc", "Gv", "Grw", "Gq", "Gf", "I", "RG", "RQ")
"""Table 3's factor columns, in its order."""


def _labelled(qids: list[str], labels: dict[str, frozenset[str]]) -> str:
    """The factors the released labels give a type's questions: `Gv` for all of them, `Gv (10/25)` for some."""
    out = []
    for f in TABLE3_FACTORS:
        k = sum(q in labels[f] for q in qids)
        if k:
            out.append(f if k == len(qids) else f"{f} ({k}/{len(qids)})")
    return ", ".join(out)


def table3(qs: list[Question]) -> Table:
    """Table 3: the run's questions per type (over its languages) beside the paper's `N × languages`, the gap,
    and each type's CHC factors in Table 3 against the released labels the scores use (departures.py)."""
    langs = [lang for lang in LANGS if any(q.lang == lang for q in qs)]
    first = langs[0] if langs else "en"
    labels = factor_labels(first)
    rows = []
    for cluster, types in CLUSTERS.items():
        for t in types:
            ours = sum(q.qtype == t for q in qs)
            paper = TABLE3_COUNT[t] * len(langs)
            ids = [q.qid for q in qs if q.qtype == t and q.lang == first]
            rows.append([cluster, t, ours, paper, ours - paper,
                         ", ".join(f for f in TABLE3_FACTORS if f in TABLE3[t]), _labelled(ids, labels)])  # fmt: skip
    total = [sum(r[i] for r in rows) for i in (2, 3, 4)]
    return Table(
        title="m3gia: questions by type and CHC factor (Table 3)",
        columns=["cluster", "question type", "questions", "paper", "gap", "factors (Table 3)",
                 "factors (released labels)"],  # fmt: skip
        rows=rows + [["Total", "", *total, "", ""]],
        note=f"Questions this run asked over its {len(langs)} language(s); `paper` = Table 3's N × the same "
        "languages (N × 6 = 300 per language in all); gap = questions − paper (a --limit run asks fewer). Factors: "
        f"Table 3's ticks (Gf stands for any of I, RG, RQ) and those of the authors' released labels on this run's "
        f"{first} questions, which the factor accuracies use (the differences are a recorded deviation).",
    )
