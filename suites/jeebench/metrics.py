"""The paper's scoring rules: per-question score, exam marks, self-consistency voting, aggregates."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from suites.base import SuiteError
from suites.jeebench.data import SUBJECTS, TYPES
from suites.jeebench.extract import Answer
from suites.stats import ci_list

TOLERANCE = 0.01


def score_answer(gold: str, ans: Answer, qtype: str) -> float:
    """MCQ: 1 iff the gold letter. MCQ(multiple): 1 iff the gold set, 0.25 per letter for a non-empty strict
    subset, 0 for any wrong letter. Integer/Numeric: 1 iff |gold - answer| <= 0.01. None scores 0."""
    if ans is None:
        return 0.0
    if qtype == "MCQ":
        return float(ans == gold)
    if qtype == "MCQ(multiple)":
        g, r = set(gold), set(str(ans))
        if r == g:
            return 1.0
        return 0.25 * len(r) if r and r < g else 0.0
    return float(abs(float(gold) - float(ans)) <= TOLERANCE + 1e-12)


@dataclass(frozen=True)
class Marks:
    """JEE Advanced marking; every value can be changed with `--marks key=value,...`."""

    mcq_correct: float = 3
    mcq_wrong: float = -1
    multi_correct: float = 4
    multi_partial: float = 1
    multi_wrong: float = -2
    integer_correct: float = 3
    integer_wrong: float = 0
    numeric_correct: float = 3
    numeric_wrong: float = 0

    @classmethod
    def parse(cls, spec: str | None) -> Marks:
        if not spec:
            return cls()
        kw: dict[str, float] = {}
        for part in spec.split(","):
            key, _, val = part.partition("=")
            key = key.strip()
            if key not in cls.__dataclass_fields__:
                raise SuiteError(
                    f"--marks: unknown key {key!r}; known: {', '.join(cls.__dataclass_fields__)}"
                )
            try:
                kw[key] = float(val)
            except ValueError:
                raise SuiteError(
                    f"--marks: {key}={val!r} is not a number (e.g. --marks mcq_wrong=-1)"
                ) from None
        return cls(**kw)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def marks_for(gold: str, ans: Answer, qtype: str, m: Marks = Marks()) -> float:
    """Exam marks of one answer; a None answer is a skip (0)."""
    if ans is None:
        return 0.0
    if qtype == "MCQ":
        return m.mcq_correct if ans == gold else m.mcq_wrong
    if qtype == "MCQ(multiple)":
        g, r = set(gold), set(str(ans))
        if r == g:
            return m.multi_correct
        return m.multi_partial * len(r) if r < g else m.multi_wrong
    ok = abs(float(gold) - float(ans)) <= TOLERANCE + 1e-12
    if qtype == "Integer":
        return m.integer_correct if ok else m.integer_wrong
    return m.numeric_correct if ok else m.numeric_wrong


def mark_totals(values: Iterable[float]) -> dict[str, float]:
    v = np.asarray(list(values), dtype=float)
    pos, neg = float(v[v > 0].sum()) if v.size else 0.0, float(v[v < 0].sum()) if v.size else 0.0
    return {"positive": pos, "negative": neg, "total": pos + neg}


# --- self-consistency ----------------------------------------------------------------------------------


def option_shares(answers: Sequence[Answer]) -> dict[str, float]:
    """Vote share of each option over all n samples (a None answer casts no vote but counts in n)."""
    n = len(answers)
    return {c: (sum(1 for a in answers if isinstance(a, str) and c in a) / n if n else 0.0) for c in "ABCD"}


def self_consistency(
    answers: Sequence[Answer], qtype: str, tau_single: float = 0.0, tau_multiple: float = 0.5
) -> Answer:
    """The aggregate answer of n samples. MCQ and numbers: majority among non-None answers, numbers
    compared by value; an MCQ winner is kept only if its share >= tau_single. MCQ(multiple): every letter
    with share >= tau_multiple (none → None).

    Ties (the paper is silent) break as in the authors' compute_metrics.get_aggregate: np.argmax over the
    A-D counts takes the first letter, np.unique's sorted values the smallest number. Unlike theirs, eight
    unreadable samples aggregate to None (their argmax over all-zero counts answers "A")."""
    if qtype == "MCQ(multiple)":
        shares = option_shares(answers)
        chosen = "".join(c for c in "ABCD" if shares[c] >= tau_multiple - 1e-12)
        return chosen or None
    counts: dict[Any, int] = {}
    for a in answers:
        if a is None:
            continue
        key = float(a) if qtype in ("Integer", "Numeric") else a
        counts[key] = counts.get(key, 0) + 1
    if not counts:
        return None
    top = max(counts.values())
    best = min(k for k, c in counts.items() if c == top)  # first letter A-D / smallest value
    if qtype == "MCQ" and counts[best] / len(answers) < tau_single - 1e-12:
        return None
    return best


# --- aggregates ----------------------------------------------------------------------------------------


def aggregate(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Plain means over the answered questions: overall, by subject, by type (keys only for groups
    present), each with a 95% percentile bootstrap CI over questions (`ci95`, `ci95_by_subject`,
    `ci95_by_type`)."""
    scores = [r["score"] for r in rows]
    out: dict[str, Any] = {"overall": float(np.mean(scores)) if scores else None, "n": len(scores)}
    out["ci95"] = ci_list(scores)
    groups = {
        "by_subject": (SUBJECTS, "subject"),
        "by_type": (TYPES, "type"),
    }
    for key, (names, field) in groups.items():
        vals = {g: [r["score"] for r in rows if r[field] == g] for g in names}
        out[key] = {g: float(np.mean(v)) for g, v in vals.items() if v}
        out[f"ci95_{key}"] = {g: ci_list(v) for g, v in vals.items() if v}
    return out


def marks_ci(rows: Sequence[dict[str, Any]]) -> list[float] | None:
    """95% percentile bootstrap CI of the total exam marks (questions resampled; total = n x mean)."""
    ci = ci_list([r["marks"] for r in rows])
    return None if ci is None else [ci[0] * len(rows), ci[1] * len(rows)]
