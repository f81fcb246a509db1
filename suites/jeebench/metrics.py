"""The paper's scoring rules: per-question score, exam marks, self-consistency voting, aggregates."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from suites.base import SuiteError
from suites.jeebench.data import SUBJECTS, TYPES
from suites.jeebench.extract import Answer, answer_str
from suites.stats import ci_list

TOLERANCE = 0.01
EXTRACTORS = ("reference", "rules")
"""How numbers compare and samples vote. `reference` (default): exactly the authors' compute_metrics.py
(`abs(g - r) <= 0.01` in floats, so 0.5 vs 0.51 is wrong; np.unique over answer strings). `rules`: ours
(0.01 + 1e-12, so a boundary answer within 0.01 on paper counts; votes by value) — a recorded deviation."""


def close(gold: str, ans: Answer, extractor: str = "reference") -> bool:
    """Integer/Numeric: |gold - answer| <= 0.01, strictly in floats as the authors' code, or with 1e-12
    slack (`rules`: 0.51 against 0.5 counts, as the rule says on paper)."""
    slack = 1e-12 if extractor == "rules" else 0.0
    return abs(float(gold) - float(ans)) <= TOLERANCE + slack  # type: ignore[arg-type]


def score_answer(gold: str, ans: Answer, qtype: str, extractor: str = "reference") -> float:
    """MCQ: 1 iff the gold letter. MCQ(multiple): 1 iff the gold set, 0.25 per letter for a non-empty strict
    subset, 0 for any wrong letter. Integer/Numeric: 1 iff |gold - answer| <= 0.01 (`close`). None scores 0."""
    if ans is None:
        return 0.0
    if qtype == "MCQ":
        return float(ans == gold)
    if qtype == "MCQ(multiple)":
        g, r = set(gold), set(str(ans))
        if r == g:
            return 1.0
        return 0.25 * len(r) if r and r < g else 0.0
    return float(close(gold, ans, extractor))


@dataclass(frozen=True)
class Marks:
    """JEE Advanced marking; every value can be changed with `--marks key=value,...`. Integer answers earn
    +4 in 2023 (`integer_correct_2023`): the paper's 2023 maximum of 229 marks needs it (27 MCQ x 3 +
    10 MCQ(multiple) x 4 + 24 Integer x 4 + 4 Numeric x 3 = 229; +3 would give 205)."""

    mcq_correct: float = 3
    mcq_wrong: float = -1
    multi_correct: float = 4
    multi_partial: float = 1
    multi_wrong: float = -2
    integer_correct: float = 3
    integer_correct_2023: float = 4
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

    def changed(self) -> list[str]:
        """`key=value` for every mark that is not the paper's (a recorded deviation)."""
        d = Marks()
        return [f"{k}={v:g} (the paper: {getattr(d, k):g})" for k, v in asdict(self).items() if v != getattr(d, k)]


def marks_for(
    gold: str, ans: Answer, qtype: str, m: Marks = Marks(), year: int | None = None, extractor: str = "reference"
) -> float:
    """Exam marks of one answer in its exam `year`; a None answer is a skip (0)."""
    if ans is None:
        return 0.0
    if qtype == "MCQ":
        return m.mcq_correct if ans == gold else m.mcq_wrong
    if qtype == "MCQ(multiple)":
        g, r = set(gold), set(str(ans))
        if r == g:
            return m.multi_correct
        return m.multi_partial * len(r) if r < g else m.multi_wrong
    ok = close(gold, ans, extractor)
    if qtype == "Integer":
        return (m.integer_correct_2023 if year == 2023 else m.integer_correct) if ok else m.integer_wrong
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


def reference_aggregate(
    answers: Sequence[Answer], qtype: str, tau_single: float = 0.0, tau_multiple: float = 0.5
) -> Answer:
    """The authors' compute_metrics.get_aggregate, line for line: MCQ np.argmax over the A-D counts (first
    letter on ties; all samples unreadable → "A"), kept if count/n >= tau_single; MCQ(multiple) letters with
    count >= n x tau_multiple; numbers: np.unique over the non-None answer *strings* (sorted as strings, so
    a tie between "10" and "9" gives "10", and "2" and "2.5" are two answers), the first most common."""
    n = len(answers)
    if qtype in ("MCQ", "MCQ(multiple)"):
        abcd = [sum(c in a for a in answers if isinstance(a, str)) for c in "ABCD"]
        if qtype == "MCQ":
            best = int(np.argmax(abcd))
            return "ABCD"[best] if tau_single <= 0 or abcd[best] / n >= tau_single else None
        return "".join(c for c, k in zip("ABCD", abcd, strict=True) if k >= n * tau_multiple) or None
    strs = [answer_str(a) for a in answers if a is not None]
    if not strs:
        return None
    unique, counts = np.unique(strs, return_counts=True)
    return float(unique[int(np.argmax(counts))])


def self_consistency(
    answers: Sequence[Answer],
    qtype: str,
    tau_single: float = 0.0,
    tau_multiple: float = 0.5,
    extractor: str = "reference",
) -> Answer:
    """The aggregate answer of n samples: `reference_aggregate` (the authors' code), or with
    `extractor="rules"` ours: MCQ and numbers: majority among non-None answers, numbers compared by value
    (the smallest on ties); an MCQ winner is kept only if its share >= tau_single; MCQ(multiple): every
    letter with share >= tau_multiple (none → None); eight unreadable samples aggregate to None (the
    authors' argmax over all-zero counts answers "A")."""
    if extractor != "rules":
        return reference_aggregate(answers, qtype, tau_single, tau_multiple)
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
