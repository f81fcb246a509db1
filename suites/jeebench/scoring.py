"""JEEBench's scoring, one model at a time: each question's row scored by the paper's rules and marks
(metrics.py; self-consistency by vote), then the model's aggregates, marks, calibration and confidence
thresholding, and the paper's tables beside ours (report.py, baselines.py, exam.py)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from core.types import Row
from suites.base import RunSpec, ScoreReport, Sink, SuiteError, Truncation, by_model, ranked, with_protocol
from suites.jeebench import options
from suites.jeebench.answers import question
from suites.jeebench.baselines import (
    by_year,
    latest_vs_rest,
    mcq_marks,
    mcq_marks_table,
    random_row,
    random_table,
    table1,
    year_table,
)
from suites.jeebench.critique import VARIANT as CRITIQUE
from suites.jeebench.data import Item, items_by_id
from suites.jeebench.exam import exam_table, fig7_png, fig8_png
from suites.jeebench.extract import answer_str
from suites.jeebench.metrics import (
    Marks,
    aggregate,
    mark_totals,
    marks_ci,
    marks_for,
    score_answer,
    self_consistency,
)
from suites.jeebench.protocol import deviations
from suites.jeebench.report import (
    calibration,
    calibration_pairs,
    reliability_png,
    safe_name,
    tables,
    thresholding,
)
from suites.jeebench.selfconsistency import taus, thresholded
from suites.jeebench.tools import VARIANT as TOOLS
from suites.jeebench.tools import counts


def _scored(
    model: str, it: Item, q: dict[str, Any], variant: str, ts: float, tm: float, marks: Marks, ex: str
) -> Row:
    """One question's scored row: its vote (or its one sample) scored and marked; unscored (`score` None,
    the failure kept) when no sample answered, so a failed call never counts as a wrong answer."""
    base = {"model": model, "item": it.id, "subject": it.subject, "type": it.type, "year": it.year,
            "gold": it.gold, "variant": variant, "errors": q["errors"]}  # fmt: skip
    if not q["answers"]:  # every sample's call failed: no answer to score
        f = q["failed"] or {}
        return {**base, "extracted": None, "score": None, "marks": None,
                "error": f.get("error") or "judge failed", "error_kind": f.get("error_kind") or "error"}  # fmt: skip
    final = self_consistency(q["answers"], it.type, ts, tm, ex) if q["planned"] > 1 else q["answers"][0]
    row: Row = {**base, "extracted": answer_str(final), "score": score_answer(it.gold, final, it.type, ex),
                "marks": marks_for(it.gold, final, it.type, marks, it.year, ex)}  # fmt: skip
    if q["planned"] > 1:
        row["samples"] = [answer_str(a) for a in q["answers"]]
        row["stages"] = q["stages"]
    else:
        row["stage"] = q["stages"][0]
    if q["sources"]:
        row["source"] = q["sources"][0] if len(q["sources"]) == 1 else q["sources"]
    return row


def score(rows: Iterable[Row], spec: RunSpec, run_dir: Path, sink: Sink | None = None) -> ScoreReport:
    """One model at a time: its questions' scored rows go to `sink`, its aggregates to scores.json."""
    sink = sink if sink is not None else Sink()
    variant, (ts, tm) = options.variant(spec), taus(spec)
    marks, ex = Marks.parse(spec.opt("marks")), options.extractor(spec)
    items = items_by_id()
    trunc = Truncation()
    models: dict[str, dict[str, Any]] = {}
    for model, groups in by_model(trunc.watch(rows)):
        srows: list[Row] = []
        qs: list[dict[str, Any]] = []
        failed = [0, 0, 0]  # questions with no answered sample, samples whose call failed, critiques that failed
        tool_use: dict[str, int] = {}
        for item, grp in groups:
            it = items.get(item)
            if it is None:
                raise SuiteError(f"{run_dir}: results hold item {item!r}, which is not in the JEEBench data")
            q = question(grp, it)
            if variant == TOOLS:
                used = counts(grp)
                tool_use = {k: tool_use.get(k, 0) + v for k, v in used.items()}
            if not q["planned"]:
                continue  # only follow-up rows survived (cannot happen in a complete run)
            row = _scored(model, it, q, variant, ts, tm, marks, ex)
            sink(row)
            failed[0] += row["score"] is None
            failed[1] += q["errors"]
            failed[2] += q["critique_failed"] if row["score"] is not None else 0
            if row["score"] is not None:
                srows.append(row)
                qs.append(q)
        models[model] = _model_scores(model, srows, qs, variant, marks, run_dir, ex)
        models[model]["failed"] = {"questions": failed[0], "samples": failed[1]}
        if variant == CRITIQUE:
            models[model]["critique_failed"] = failed[2]
        if variant == TOOLS:
            models[model]["tools"] = tool_use
    extra = {"variant": variant, "marking": marks.as_dict(), "tau_single": ts, "tau_multiple": tm, "extractor": ex}
    asked = options.items(variant)[: spec.limit] if spec.limit is not None else options.items(variant)
    extra["random_baseline"] = rand = random_row(asked)
    order = ranked(models, "overall")
    exam = exam_table(models, variant, order)
    if exam is not None and fig8_png(exam.rows, run_dir / "jeebench_fig8.png", f"jeebench ({variant}): Fig. 8"):
        extra["fig8_png"] = "jeebench_fig8.png"
    f7 = {m: s["thresholding"]["fig7"] for m in order if (s := models[m]).get("thresholding")}
    if fig7_png(f7, run_dir / "jeebench_fig7.png", f"jeebench ({variant}): Fig. 7"):
        extra["fig7_png"] = "jeebench_fig7.png"
    more = [table1(asked), random_table(rand, variant), year_table(models, variant), mcq_marks_table(models, variant),
            exam]  # fmt: skip
    report = ScoreReport(
        models=models, scored=sink.rows, tables=tables(models, variant) + [t for t in more if t], extra=extra
    )
    if (th := thresholded(spec)) is not None:  # e.g. the paper's own 0.125 / 0.75: §4.5.3's answers
        report.tables[0].note += f"; SC answers thresholded at tau {ts:g}/{tm:g} (Table 2's SC@8 row: 0/0.5)"
        report.tables[0].title += f" — thresholded scores, tau {ts:g}/{tm:g}"
        extra["scores_thresholded"] = th
    lost = {m: s["failed"] for m, s in models.items() if s["failed"]["samples"]}
    kept = {m: s["critique_failed"] for m, s in models.items() if s.get("critique_failed")}
    return with_protocol(report, deviations(spec, unread(models), lost, kept), trunc)


def _model_scores(
    model: str,
    srows: list[Row],
    qs: list[dict[str, Any]],
    variant: str,
    marks: Marks,
    run_dir: Path,
    ex: str = "reference",
) -> dict[str, Any]:
    """One model's scores.json entry over its answered questions."""
    s = aggregate(srows)
    s["marks"] = mark_totals(r["marks"] for r in srows)
    s["marks_ci95"] = marks_ci(srows)
    s["marks_mcq"] = mcq_marks(srows)
    s["by_year"] = by_year(srows)
    s["latest_vs_rest"] = latest_vs_rest(srows)
    s["marks_by_year"] = {
        str(y): {"total": float(sum(r["marks"] for r in srows if r["year"] == y)),
                 "questions": sum(r["year"] == y for r in srows)}
        for y in sorted({r["year"] for r in srows})
    }  # fmt: skip  (§4.6: the 2023 paper as an exam)
    s["answered"] = sum(r["extracted"] is not None for r in srows)
    s["unread"] = sum(st is None for q in qs for st in q["stages"])  # answers no rule (or judge) could read
    s["stages"] = _count(st for r in srows for st in (r.get("stages") or [r.get("stage")]))
    if variant == CRITIQUE:
        s["critique_used"] = sum(r.get("source") == "critique" for r in srows)
    if any(len(q["answers"]) > 1 for q in qs):
        cal = calibration(*calibration_pairs(qs))
        if cal["pairs"]:
            png = run_dir / f"jeebench_reliability_{safe_name(model)}.png"
            reliability_png(cal, png, f"{model} ({variant})")
            cal["png"] = png.name
            s["calibration"] = cal
        s["thresholding"] = thresholding(qs, marks, ex)
    return s


def unread(models: dict[str, dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Each model's (unread answers, answers read): samples included, failed calls not."""
    return {m: (s.get("unread", 0), sum((s.get("stages") or {}).values())) for m, s in models.items()}


def _count(values: Iterable[str | None]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        k = v or "none"
        out[k] = out.get(k, 0) + 1
    return out
