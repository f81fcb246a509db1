"""Scoring: extract each (model, question, iteration), then accuracy by type/cluster/factor/language and GIA.

Every metric is computed per iteration (`sample` index) and averaged over iterations, the paper's
protocol against randomness. A failed call is not a wrong answer: a question whose row for an iteration
is an error (or whose needed judge pass failed; stage `error`) or is absent (stage `missing`: never
asked) is scored None and left out, so each figure is over the answered questions (an iteration with
none answered in a group is left out of that group's mean). GIA's per-type counts are then the answered
accuracy times the type's question count; with every question answered they are the plain counts.
Rows are read one model at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from scipy import stats as sps

from core.types import Row
from suites.base import Sink, Table, by_model, ranked
from suites.m3gia import extract, gia
from suites.m3gia.data import CLUSTERS, FACTORS, LANGS, TYPES, Question, answer_key, factor_labels
from suites.m3gia.factors import overall_beside, table1
from suites.m3gia.paper import (
    FIG4_R2,
    GAP_NOTE,
    TABLE1,
    TABLE2,
    TABLE2_LANGS,
    TABLE2_NORMALIZED,
    TABLE2_SHOWN,
    TABLE4,
    paper_model,
    vs,
)
from suites.stats import bootstrap_ci, ci_method

STAGES = ("rule", "judge", "random", "error", "missing")


def extract_one(
    q: Question, model: str, iteration: int, answer: Row | None, judge: Row | None, lenient: bool = False
) -> tuple[str | None, str]:
    """(extracted letter, stage) for one question and iteration."""
    if answer is None:
        return None, "missing"
    if answer.get("error"):
        return None, "error"
    letter = extract.by_rules(answer.get("text"), q.letters, q.options)
    if letter is not None:
        return letter, "rule"
    if judge is not None and judge.get("error"):
        return None, "error"  # the judge call failed: not read, so not scored (a failed call is not wrong)
    if judge is not None:
        # a reply of Z (no option matches) or anything not a valid letter is scored wrong, as the authors do
        return extract.from_judge(judge.get("text"), q.letters, lenient), "judge"
    return extract.random_letter(model, q.item, iteration, q.letters), "random"


def _mean_over_iterations(t: np.ndarray, mask: np.ndarray) -> float | None:
    """Mean over iterations of the per-iteration accuracy on the masked questions (NaN: unanswered)."""
    if not mask.any():
        return None
    sub = t[mask]
    nan = np.isnan(sub)
    if not nan.any():
        return float(sub.mean(axis=0).mean())
    n = (~nan).sum(axis=0)
    ok = n > 0
    return float((np.nansum(sub, axis=0)[ok] / n[ok]).mean()) if ok.any() else None


def _type_count(t: np.ndarray) -> float:
    """Correct answers of a question type (rows of t), averaged over iterations; unanswered questions
    count at the type's answered accuracy of that iteration."""
    nan = np.isnan(t)
    if not nan.any():
        return float(t.sum(axis=0).mean())
    n = (~nan).sum(axis=0)
    ok = n > 0
    return float((np.nansum(t, axis=0)[ok] / n[ok] * t.shape[0]).mean()) if ok.any() else 0.0


def _breakdown(t: np.ndarray, qs: Sequence[Question], sel: np.ndarray) -> dict[str, Any]:
    types = np.array([q.qtype for q in qs])
    by_factor: dict[str, float | None] = {}
    for f in FACTORS:
        involved = np.array([q.qid in factor_labels(q.lang)[f] for q in qs], dtype=bool)
        by_factor[f] = _mean_over_iterations(t, sel & involved)  # sum F_i T_i / sum F_i
    return {
        "accuracy": _mean_over_iterations(t, sel),
        "by_type": {
            ty: _mean_over_iterations(t, sel & (types == ty)) for ty in TYPES if (sel & (types == ty)).any()
        },
        "by_cluster": {
            c: _mean_over_iterations(t, sel & np.isin(types, ts))
            for c, ts in CLUSTERS.items()
            if (sel & np.isin(types, ts)).any()
        },
        "by_factor": {f: v for f, v in by_factor.items() if v is not None},
    }


def _question_ci(t: np.ndarray) -> list[float] | None:
    """95% bootstrap CI over the answered questions of t, each question's mean over its iterations."""
    if not np.isnan(t).any():
        per_q = t.mean(axis=1)
    else:
        answered = ~np.isnan(t).all(axis=1)
        per_q = np.nansum(t[answered], axis=1) / (~np.isnan(t[answered])).sum(axis=1)
    ci = bootstrap_ci(per_q.tolist())
    return list(ci) if ci else None


def model_scores(t: np.ndarray, qs: Sequence[Question], stages: dict[str, int]) -> dict[str, Any]:
    """One model's scores.json entry from its correctness matrix `t` (questions x iterations)."""
    langs = np.array([q.lang for q in qs])
    types = np.array([q.qtype for q in qs])
    everything = np.ones(len(qs), dtype=bool)
    out = _breakdown(t, qs, everything)
    answered = ~np.isnan(t).all(axis=1)
    out.update(n_questions=len(qs), iterations=int(t.shape[1]), ci95=_question_ci(t))
    out["n"] = int(answered.sum())
    out["by_language"], out["gia"], out["gia_normalized"], per_lang = {}, {}, {}, {}
    out["ci95_by_language"] = {}
    for lang in LANGS:
        sel = langs == lang
        if not sel.any():
            continue
        b = _breakdown(t, qs, sel)
        out["ci95_by_language"][lang] = _question_ci(t[sel])
        # the GIA input: per-type correct counts, summed over questions, averaged over iterations
        b["type_counts"] = {ty: _type_count(t[sel & (types == ty)]) for ty in TYPES}
        complete = {q.qid for q, s in zip(qs, sel, strict=True) if s} == set(answer_key(lang))
        g = gia.gia(b["type_counts"], lang) if complete else None
        out["by_language"][lang] = b["accuracy"]
        out["gia"][lang] = g
        out["gia_normalized"][lang] = gia.normalized(g, lang) if g is not None else None
        per_lang[lang] = b
    out["stages"] = stages
    out["per_language"] = per_lang
    return out


def score_rows(
    rows: Iterable[Row], qs: Sequence[Question], iterations: int, sink: Sink | None = None, lenient: bool = False
) -> tuple[dict[str, Any], list[Row], int]:
    """Per-model scores, the scored rows the sink kept, and how many rows matched no selected question.
    Reads one model's rows at a time; its scored rows go to `sink` as soon as the model is done."""
    sink = sink if sink is not None else Sink()
    index = {q.item for q in qs}
    per_model: dict[str, Any] = {}
    unmatched = 0
    for m, groups in by_model(rows):
        answers: dict[tuple[str, int], Row] = {}
        judges: dict[tuple[str, int], Row] = {}
        n_iter = iterations
        for item, grp in groups:
            if item not in index:
                unmatched += len(grp)
                continue
            for r in grp:
                n_iter = max(n_iter, int(r["sample"]) + 1)
                key = (item, int(r["sample"]))
                if r.get("pass") == "judge":
                    judges[key] = r
                elif r.get("pass") == "answer":
                    answers[key] = r
        if not answers and not judges:
            continue
        per_model[m] = _score_model(m, qs, n_iter, answers, judges, sink, lenient)
    return per_model, sink.rows, unmatched


def _score_model(
    m: str,
    qs: Sequence[Question],
    iterations: int,
    answers: dict[tuple[str, int], Row],
    judges: dict[tuple[str, int], Row],
    sink: Sink,
    lenient: bool = False,
) -> dict[str, Any]:
    t = np.zeros((len(qs), iterations))
    stages = dict.fromkeys(STAGES, 0)
    failed_calls = {"answer": 0, "judge": 0}
    authors = {"answers": 0, "differ": 0}
    for i, q in enumerate(qs):
        for s in range(iterations):
            answer, judge = answers.get((q.item, s)), judges.get((q.item, s))
            letter, stage = extract_one(q, m, s, answer, judge, lenient)
            unscored = stage in ("error", "missing")
            t[i, s] = np.nan if unscored else float(letter == q.answer)
            stages[stage] += 1
            failed = answer if answer is not None and answer.get("error") else judge
            row = {"model": m, "item": q.item, "sample": s, "lang": q.lang, "question_type": q.qtype,
                   "extracted": letter, "gold": q.answer, "score": None if unscored else float(t[i, s]),
                   "stage": stage, "error": None}  # fmt: skip
            if stage == "error" and failed is not None:
                row.update(error=failed.get("error"), error_kind=failed.get("error_kind") or "error")
                failed_calls["answer" if failed is answer else "judge"] += 1
            if answer is not None and not answer.get("error"):
                ours = extract.by_rules(answer.get("text"), q.letters, q.options)
                theirs = extract.authors_rules(answer.get("text"), q.letters, q.options, q.absent)
                authors["answers"] += 1
                if ours != theirs:  # the README's edge cases: counted, recorded as a deviation
                    authors["differ"] += 1
                    row["authors_rule"] = theirs
            sink(row)
    out = model_scores(t, qs, stages)
    out["failed_calls"] = failed_calls
    out["rules_vs_authors"] = authors
    return out


def pearson(models: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Pearson r between GIA and accuracy across models, per language and overall (mean normalized GIA)."""
    out: dict[str, dict[str, Any]] = {}
    keys = [*LANGS, "overall"]
    for k in keys:
        pairs = []
        for s in models.values():
            if k == "overall":
                norm = list(s["gia_normalized"].values())
                if norm and all(v is not None for v in norm):
                    pairs.append((float(np.mean(norm)), s["accuracy"]))
            elif s["gia"].get(k) is not None:
                pairs.append((s["gia"][k], s["by_language"][k]))
        if not pairs:
            continue
        x, y = np.array(pairs).T
        r = p = None
        if len(pairs) >= 3 and np.ptp(x) > 0 and np.ptp(y) > 0:
            res = sps.pearsonr(x, y)
            r, p = float(res.statistic), float(res.pvalue)
        out[k] = {"r": r, "p": p, "n_models": len(pairs), "r2": None if r is None else r * r}
    return out


def _paper2(table: dict[str, tuple[float, ...]], model: str, lang: str) -> float:
    return table[model][TABLE2_LANGS.index(lang)]


def tables(
    models: dict[str, Any], corr: dict[str, dict[str, Any]], note: str, images: bool = True
) -> list[Table]:
    ms = list(models)
    langs = [c for c in LANGS if any(c in models[m]["by_language"] for m in ms)]
    ms = ranked(models, "accuracy")
    models = {m: models[m] for m in ms}
    t1 = tuple(k for k in TABLE1 if not k.startswith("Human"))
    main = Table(
        title="m3gia: accuracy (mean over iterations)",
        columns=[
            "model",
            "questions",
            "iterations",
            "accuracy",
            "vs paper",
            "paper Overall",
            "gap",
            "95% CI",
            "extracted by " + "/".join(STAGES),
        ],
        rows=[
            [
                m,
                s["n_questions"],
                s["iterations"],
                s["accuracy"],
                *overall_beside(m, s["accuracy"], t1, {k: v[-1] for k, v in TABLE1.items()}),
                s["ci95"],
                "/".join(map(str, s["stages"].values())),
            ]
            for m, s in models.items()
        ],
        note="; ".join(
            x
            for x in (
                ci_method(max((s["n"] for s in models.values()), default=0))
                + " (questions; a question's value is its mean over iterations)",
                "`paper Overall`: Table 1's Overall (all six languages, percent / 100); " + GAP_NOTE,
                note,
            )
            if x
        ),  # fmt: skip
        key=("accuracy", "95% CI"),
    )
    t4 = "with images" if images else "without images"
    clusters = Table(
        title="m3gia: accuracy by cluster",
        columns=["model", *CLUSTERS, "Overall", "vs paper", "paper Overall", "gap"],
        rows=[[m, *(s["by_cluster"].get(c) for c in CLUSTERS), s["accuracy"],
               *overall_beside(m, s["accuracy"], ("GPT-4v",), {"GPT-4v": TABLE4[t4][-1]})]
              for m, s in models.items()]  # fmt: skip
        + [[f"paper: GPT-4v {t4}", *(v / 100 for v in TABLE4[t4]), None, None, None]],
        note=f"Row `paper: ...` is the paper's Table 4 (GPT-4v {t4}, percent / 100); with and without images "
        f"side by side: `evalsweep report` over a run and its --no-images run; {GAP_NOTE}.",
    )
    by_lang = Table(
        title="m3gia: accuracy by language (95% CI)",
        columns=["model", *langs],
        rows=[
            [m, *(_with_ci(s["by_language"].get(c), s.get("ci95_by_language", {}).get(c)) for c in langs)]
            for m, s in models.items()
        ],  # fmt: skip
        note=ci_method() + " (questions of the language)",
    )
    factors = table1(models)  # Table 1's layout: I, RG, RQ, Gf, Gc, Gq, Grw, Gv, Overall
    types = Table(
        title="m3gia: accuracy by question type",
        columns=["question type", *ms],
        rows=[[ty, *(models[m]["by_type"].get(ty) for m in ms)] for ty in TYPES],
    )
    g = Table(
        title="m3gia: GIA (lavaan regression factor score) and normalized GIA (100 = human average)",
        columns=["model", *(f"GIA {c}" for c in langs), *(f"norm {c}" for c in langs), "vs paper",
                 "paper norm mean", "gap norm mean"],  # fmt: skip
        rows=[
            [m, *(s["gia"].get(c) for c in langs), *(s["gia_normalized"].get(c) for c in langs),
             *_gia_beside(m, s, langs)]
            for m, s in models.items()
        ]  # fmt: skip
        + [["human (average)", *(gia.HUMAN_GIA[c] for c in langs), *(100.0 for _ in langs), None, None, None]]
        + [[f"paper: {m}", *(_paper2(TABLE2, m, c) for c in langs), *(_paper2(TABLE2_NORMALIZED, m, c) for c in langs),
            None, None, None] for m in TABLE2_SHOWN],  # fmt: skip
        note="GIA needs all 300 questions of a language (no --limit); missing values are shown empty. The human "
        "row is the paper's human-average GIA per language (the normalisation base, gia.HUMAN_GIA); rows "
        "`paper: ...` are the paper's Table 2 (Fig. 5 plots it: m3gia_fig5.png beside scores.json). `paper norm "
        "mean`: the paper's normalized GIA (Table 2) of the model under `vs paper`, averaged over the languages "
        "where ours has one, and `gap norm mean` ours − it over the same languages (points of the human "
        "average); the model compared as for the other tables' gap: the same model, else GPT-4o (ref.).",
    )
    c = Table(
        title="m3gia: Pearson correlation of GIA with accuracy across models (Fig. 4 right)",
        columns=["language", "models", "r", "p", "R²", "gap R²"],
        rows=[[k, v["n_models"], v["r"], v["p"], v.get("r2"), _bound_gap(v.get("r2"))] for k, v in corr.items()]
        + [["paper (Fig. 4 right; §4.2)", None, None, None, f">= {FIG4_R2}", None]],
        note="per language: GIA vs that language's accuracy; overall: mean normalized GIA vs accuracy; "
        "r needs at least 3 models; R² of the least-squares line (r²). The paper's Fig. 4 caption gives "
        f"R² >= {FIG4_R2}, its §4.2 'cor > {FIG4_R2}' (r > {FIG4_R2} would be R² > {FIG4_R2 ** 2:.2f}); the "
        f"scatter: m3gia_fig4_right.png beside scores.json. gap R² = ours − the paper's bound {FIG4_R2} (>= 0: "
        "the bound holds; the paper's models are not ours, so the gap mixes models with protocol).",
    )
    return [main, clusters, by_lang, factors, types, g, c]


def _bound_gap(r2: float | None) -> float | None:
    """R² − the paper's lower bound (Fig. 4 right), to 3 places."""
    return None if r2 is None else round(r2 - FIG4_R2, 3)


def _gia_beside(model: str, s: dict[str, Any], langs: list[str]) -> list[Any]:
    """`vs paper`, the paper's mean normalized GIA over the languages where ours has one, and the gap."""
    among = tuple(TABLE2_NORMALIZED)
    found = paper_model(model, among)
    have = [c for c in langs if s["gia_normalized"].get(c) is not None]
    if found is None or not have:
        return [vs(model, among), None, None]
    theirs = float(np.mean([_paper2(TABLE2_NORMALIZED, found[0], c) for c in have]))
    ours = float(np.mean([s["gia_normalized"][c] for c in have]))
    return [vs(model, among), round(theirs, 2), round(ours - theirs, 2)]


def _with_ci(v: float | None, ci: list[float] | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
