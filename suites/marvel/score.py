"""Score and aggregate: instance and group accuracy, AVR by pattern/configuration, output bias.

Per model (scores.json, fractions 0-1): instance accuracy per question type; group accuracy
(`perc_c`: the 3 coarse questions of a puzzle all right; `perc_cf`: + fine; `perc_cf_avr`: all 5);
AVR accuracy by pattern, by configuration and by both; fine-grained accuracy by question category
(`by_fine_category`, Table 6: categories.py); the share of each predicted choice 1-4 with
a chi-square test against uniform (`biased` when p < 0.001: AVR accuracy then reflects a preference
for some choices, not reasoning — flagged in every table).

With --samples N > 1 every figure is a mean over samples: an item's accuracy is the mean over its
samples, a group is judged per sample, and the chi-square test uses the choice counts per sample
(pooled counts / N), so its sample size stays the number of puzzles.

A provider's block of the request (`content_filter`, a content-policy refusal) is the provider's answer,
not a failed call: it counts as a refusal (stage `blocked`, `n_blocked`). A failed call is not a wrong
answer: its scored row has `score: None` (stage `error`, also when the
judge pass a rule-unreadable answer needed failed) and every figure is over the answered rows; a group
with a failed member is left out of the group accuracy, a question never asked still counts as wrong.
Each instance and group accuracy has a 95% percentile bootstrap CI over puzzles (`ci95_<metric>`;
`ci95` is AVR's, the headline's). Rows are read one model at a time.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import chisquare

from core.types import Row, blocked
from suites.base import RunSpec, ScoreReport, Sink, SuiteError, by_model, scored_row
from suites.marvel.categories import category
from suites.marvel.data import CONFIGURATIONS, KINDS, PATTERNS, REFERENCE, Puzzle, by_id
from suites.marvel.extract import extract, is_refusal
from suites.marvel.paper import CATEGORIES
from suites.marvel.paper_tables import ZERO_SHOT, Prompting
from suites.marvel.tables import pattern_table, tables
from suites.stats import bootstrap_ci, mean

BIAS_ALPHA = 0.001
INSTANCE = {"avr": "avr", "fine": "fine", "coarse-context": "coarse_context",
            "coarse-choices": "coarse_choices", "coarse-whole": "coarse_whole"}  # fmt: skip
GROUPS = {
    "perc_c": ("coarse-context", "coarse-choices", "coarse-whole"),
    "perc_cf": ("coarse-context", "coarse-choices", "coarse-whole", "fine"),
    "perc_cf_avr": KINDS,
}


def score_row(r: Row, p: Puzzle, kind: str, judge: Row | None) -> dict[str, Any]:
    """One scored row. stage: rules | judge (rules failed, judge re-read it) | none | blocked (the
    provider declined the request itself, e.g. `content_filter`: a refusal, wrong in the headline and
    left out of the left set, as the paper treats refusals) | error (the call, or the judge call it
    needed, failed: score None)."""
    gold = p.gold(kind)
    if blocked(r):
        return scored_row({**r, "error": None}, puzzle=p.id, question=kind, pattern=p.pattern,
                          configuration=p.configuration, extracted=None, gold=gold, score=0.0, stage="blocked",
                          refused=True, blocked=r["error"])  # fmt: skip
    ext = extract(kind, r.get("text"), p) if not r.get("error") else None
    stage = "error" if r.get("error") else ("rules" if ext is not None else "none")
    if ext is None and stage == "none" and judge is not None:
        if judge.get("error"):
            r, stage = judge, "error"
        else:
            ext = extract(kind, judge.get("text"), p)
            stage = "judge"
    ok = ext is not None and str(ext).lower() == str(gold).lower()
    refused = ext is None and stage in ("none", "judge") and is_refusal(r.get("text"))
    return scored_row(r, puzzle=p.id, question=kind, pattern=p.pattern, configuration=p.configuration,
                      extracted=ext, gold=gold, score=float(ok), stage=stage, refused=refused)  # fmt: skip


def choice_bias(preds: list[int | None], n_samples: int = 1) -> dict[str, Any]:
    """Shares of predicted choices 1-4 and a chi-square goodness-of-fit test against uniform."""
    counts = Counter(x for x in preds if x in (1, 2, 3, 4))
    obs = np.array([counts[c] for c in (1, 2, 3, 4)], dtype=float)
    total = obs.sum()
    out: dict[str, Any] = {
        "choice_counts": {str(c): int(counts[c]) for c in (1, 2, 3, 4)},
        "choice_distribution": {str(c): (counts[c] / total if total else None) for c in (1, 2, 3, 4)},
        "choice_none": sum(1 for x in preds if x not in (1, 2, 3, 4)),
        "chi2": None,
        "chi2_p": None,
        "biased": False,
    }
    if total > 0:
        res = chisquare(obs / max(n_samples, 1))
        out.update(chi2=float(res.statistic), chi2_p=float(res.pvalue), biased=bool(res.pvalue < BIAS_ALPHA))
    return out


def _item_means(scored: list[dict[str, Any]]) -> dict[str, float]:
    """Mean score per item over its answered samples (items with none answered left out)."""
    per: dict[str, list[float]] = defaultdict(list)
    for s in scored:
        if s["score"] is not None:
            per[s["item"]].append(s["score"])
    return {k: float(np.mean(v)) for k, v in per.items()}


def _group_values(scored: list[dict[str, Any]], kinds: tuple[str, ...]) -> dict[int, list[float]]:
    """Per puzzle, per sample: 1 if every question in `kinds` is right (a missing one counts as wrong);
    a (puzzle, sample) with a failed call in the group is left out."""
    answers: dict[tuple[int, int], dict[str, float | None]] = defaultdict(dict)
    for s in scored:
        answers[(s["puzzle"], s["sample"])][s["question"]] = s["score"]
    out: dict[int, list[float]] = defaultdict(list)
    for (puzzle, _), a in answers.items():
        if any(k in a and a[k] is None for k in kinds):
            continue
        out[puzzle].append(float(all(a.get(k, 0.0) == 1.0 for k in kinds)))
    return out


def group_accuracy(scored: list[dict[str, Any]], kinds: tuple[str, ...]) -> float | None:
    """Share of answered (puzzle, sample) with every question in `kinds` right."""
    return mean([v for vals in _group_values(scored, kinds).values() for v in vals])


def _by(scored: list[dict[str, Any]], *keys: str) -> dict[Any, float]:
    groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for s in scored:
        if s["score"] is None:
            continue
        groups[tuple(s[k] for k in keys) if len(keys) > 1 else s[keys[0]]].append(s)
    return {k: mean(list(_item_means(v).values())) for k, v in groups.items()}  # type: ignore[misc]


def aggregate(scored: list[dict[str, Any]], kinds: tuple[str, ...]) -> dict[str, Any]:
    """One model's scores.json entry (task puzzles)."""
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in scored:
        by_kind[s["question"]].append(s)
    out: dict[str, Any] = {}
    cis: dict[str, list[float] | None] = {}
    for kind, key in INSTANCE.items():
        vals = list(_item_means(by_kind[kind]).values())
        out[key] = mean(vals) if kind in kinds else None
        cis[key] = _ci(vals) if kind in kinds else None
    for key, group in GROUPS.items():
        per = _group_values(scored, group)
        out[key] = mean([v for vals in per.values() for v in vals]) if set(group) <= set(kinds) else None
        cis[key] = _ci([float(np.mean(v)) for v in per.values()]) if set(group) <= set(kinds) else None
    avr = [s for s in by_kind["avr"] if s["score"] is not None]
    out["ci95"] = cis["avr"]
    out.update({f"ci95_{k}": v for k, v in cis.items()})
    out["n"] = len({s["puzzle"] for s in avr})
    out["by_pattern"] = {
        k: v for k, v in sorted(_by(avr, "pattern").items(), key=lambda kv: PATTERNS.index(kv[0]))
    }
    out["by_configuration"] = {
        k: v for k, v in sorted(_by(avr, "configuration").items(), key=lambda kv: CONFIGURATIONS.index(kv[0]))
    }
    both = _by(avr, "pattern", "configuration")
    fine = [s for s in by_kind["fine"] if s["score"] is not None]
    cats = _by([{**s, "category": category(by_id()[s["puzzle"]])} for s in fine], "category")
    out["by_fine_category"] = {c: cats[c] for c in CATEGORIES if c in cats}
    out["by_pattern_configuration"] = {
        pat: {cfg: both[(pat, cfg)] for cfg in CONFIGURATIONS if (pat, cfg) in both}
        for pat in PATTERNS
        if any(k[0] == pat for k in both)
    }
    n_samples = len({s["sample"] for s in avr}) or 1
    out.update(choice_bias([s["extracted"] for s in avr], n_samples))
    out["left_set"] = left_set(by_kind, kinds)
    out.update(_counts(scored))
    return out


def left_set(by_kind: dict[str, list[dict[str, Any]]], kinds: tuple[str, ...]) -> dict[str, Any]:
    """The paper's "left set": accuracy per question over the answers that are not refusals (a refusal
    is a response the rules and judge cannot read that declines to answer), with the refusal counts."""
    out: dict[str, Any] = {}
    for kind, key in INSTANCE.items():
        if kind not in kinds:
            continue
        kept = [s for s in by_kind[kind] if not s.get("refused")]
        out[key] = mean(list(_item_means(kept).values()))
        out[f"{key}_refused"] = sum(bool(s.get("refused")) for s in by_kind[kind])
        out[f"{key}_blocked"] = sum(s.get("stage") == "blocked" for s in by_kind[kind])  # among the refused
    return out


def aggregate_pattern(scored: list[dict[str, Any]]) -> dict[str, Any]:
    """One model's scores.json entry (task pattern): accuracy, per true pattern, prediction shares."""
    answered = [s for s in scored if s["score"] is not None]
    preds = Counter(s["extracted"] for s in answered if s["extracted"] is not None)
    total = sum(preds.values())
    confusion: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for s in answered:
        confusion[s["gold"]][s["extracted"] or "None"] += 1
    out = {
        "pattern": mean(list(_item_means(scored).values())),
        "ci95": _ci(list(_item_means(scored).values())),
        "n": len({s["puzzle"] for s in answered}),
        "by_pattern": {
            k: v for k, v in sorted(_by(answered, "pattern").items(), key=lambda kv: PATTERNS.index(kv[0]))
        },
        "prediction_distribution": {p: (preds[p] / total if total else None) for p in PATTERNS},
        "confusion": {g: dict(v) for g, v in confusion.items()},
    }
    out.update(_counts(scored))
    return out


def _ci(values: list[float]) -> list[float] | None:
    """95% bootstrap CI over puzzles (each puzzle's mean over samples)."""
    ci = bootstrap_ci(values)
    return list(ci) if ci else None


def _counts(scored: list[dict[str, Any]]) -> dict[str, int]:
    stages = Counter(s["stage"] for s in scored)
    return {"n_puzzles": len({s["puzzle"] for s in scored}), "n_rows": len(scored),
            "n_errors": stages["error"], "n_unparsed": stages["none"], "n_judged": stages["judge"],
            "n_blocked": stages["blocked"],
            "n_judged_parsed": sum(1 for s in scored if s["stage"] == "judge" and s["extracted"] is not None)}  # fmt: skip


def _model_rows(
    groups: Iterable[tuple[str, list[Row]]], puzzles: dict[int, Puzzle], run_dir: Path
) -> Iterator[Row]:
    """One model's scored rows, from its (item, rows) groups (answers with their judge passes)."""
    for item, grp in groups:
        judged = {r["sample"]: r for r in grp if r.get("pass") == "judge"}
        for r in grp:
            if r.get("pass", "answer") != "answer":
                continue
            pid, _, kind = str(item).partition("/")
            p = puzzles.get(int(pid)) if pid.isdigit() else None
            if p is None or kind not in (*KINDS, "pattern"):
                raise SuiteError(f"{run_dir / 'results.jsonl'}: item {item!r} is not a MARVEL question id")
            yield score_row(r, p, kind, judged.get(r["sample"]))


def score(
    rows: Iterable[Row],
    spec: RunSpec,
    run_dir: Path,
    kinds: tuple[str, ...] = KINDS,
    sink: Sink | None = None,
    prompting: Prompting = ZERO_SHOT,
) -> ScoreReport:
    """One model at a time: its scored rows go to `sink` and are aggregated, then dropped."""
    sink = sink if sink is not None else Sink()
    puzzles = by_id()
    models: dict[str, dict[str, Any]] = {}
    gold: dict[int, Any] = {}
    for model, groups in by_model(rows):
        mine = []
        for s in _model_rows(groups, puzzles, run_dir):
            sink(s)
            mine.append(s)
            if s["question"] == "avr":
                gold[s["puzzle"]] = s["gold"]
        models[model] = aggregate_pattern(mine) if kinds == ("pattern",) else aggregate(mine, kinds)
    if kinds == ("pattern",):
        extra = {**_extra(spec), "headline": "pattern"}  # ranks pattern-classification runs by their accuracy
        return ScoreReport(models=models, scored=sink.rows, tables=[pattern_table(models)], extra=extra)
    return ScoreReport(
        models=models,
        scored=sink.rows,
        tables=tables(models, kinds, list(gold.values()), BIAS_ALPHA, prompting),
        extra=_extra(spec),
    )


def _extra(spec: RunSpec) -> dict[str, Any]:
    opts = {k: (str(v) if isinstance(v, Path) else v) for k, v in spec.options.items()}
    return {"reference": REFERENCE, "bias_alpha": BIAS_ALPHA, "options": opts}
