"""JEEBench's departures from the paper's protocol (README.md: Protocol), said before a run's first call
and again when it is scored, with each model's unread answers, failed calls and failed critiques counted."""

from __future__ import annotations

from suites.base import RunSpec
from suites.jeebench import options
from suites.jeebench.critique import DEVIATION as CRITIQUE_DEVIATION
from suites.jeebench.critique import VARIANT as CRITIQUE
from suites.jeebench.metrics import Marks
from suites.jeebench.selfconsistency import (
    SC_SAMPLES,
    SC_TEMPERATURE,
    TABLE6_DEVIATION,
    tau_deviations,
    taus,
    thresholded,
)
from suites.jeebench.selfconsistency import VARIANT as SC
from suites.jeebench.tools import DEVIATION as TOOLS_DEVIATION
from suites.jeebench.tools import VARIANT as TOOLS


def reading(spec: RunSpec, counts: dict[str, tuple[int, int]] | None = None) -> str:
    """The reading deviation: the paper's answers were extracted by hand; ours by rules (and a judge)."""
    judge = spec.opt("judge")
    how = "rules (extract.py)" + (f", then the LLM judge {judge}," if judge else "")
    line = f"answers read by {how} where the paper read them by hand"
    if counts is None:
        return line + " (unread answers are counted when scored; they score 0)"
    per = ", ".join(f"{m} {u}/{n}" for m, (u, n) in sorted(counts.items()))
    return f"{line}; unread answers (scored 0): {per or 'none scored'}"


def deviations(
    spec: RunSpec,
    counts: dict[str, tuple[int, int]] | None = None,
    lost: dict[str, dict[str, int]] | None = None,
    kept: dict[str, int] | None = None,
) -> list[str]:
    """Departures from the paper's protocol (README.md: Protocol). At scoring time, `counts`: each model's
    unread answers, said in the reading line; `lost`: each model's failed calls (questions and samples);
    `kept`: each model's critique calls that failed, whose questions keep the CoT answer (cot-critique)."""
    variant, out = options.variant(spec), []
    sc = variant == SC
    out += tau_deviations(*taus(spec))
    changed = Marks.parse(spec.opt("marks")).changed()
    if changed:
        out.append("exam marks " + ", ".join(changed))
    if (th := thresholded(spec)) is not None:
        out.append(th)
    if options.extractor(spec) == "rules":
        out.append(
            "--extractor rules: numbers within 0.01 + 1e-12 (the authors compare abs(g - r) <= 0.01 strictly "
            "in floats) and SC votes on numbers by value, smallest on ties (the authors: np.unique over the "
            "answer strings); eight unreadable MCQ samples give None (the authors' argmax gives A)"
        )
    if variant == CRITIQUE:
        out.append(CRITIQUE_DEVIATION)
    if variant == TOOLS:
        out.append(TOOLS_DEVIATION)
    if spec.samples not in (None, SC_SAMPLES if sc else 1):
        out.append(f"{spec.samples} samples (the paper: {SC_SAMPLES if sc else 1})")
    if spec.temperature not in (None, SC_TEMPERATURE if sc else 0.0):
        out.append(f"temperature {spec.temperature} (the paper: {SC_TEMPERATURE if sc else 0})")
    if sc:
        out.append(TABLE6_DEVIATION)
    if spec.limit is not None:
        out.append(f"--limit {spec.limit}: a subset of the 515 questions")
    if lost:
        per = ", ".join(f"{m} {v['questions']} questions, {v['samples']} samples" for m, v in sorted(lost.items()))
        out.append(f"calls that failed are left out (the authors' inference.py retries until it gets an answer): "
                   f"{per}; scores are over the answered questions")  # fmt: skip
    if kept:
        per = ", ".join(f"{m} {k}" for m, k in sorted(kept.items()))
        out.append(f"critique calls that failed keep the CoT answer they would have replaced, so those questions are "
                   f"scored as plain CoT (the authors' inference.py retries until every critique answers): {per}")  # fmt: skip
    return out + [reading(spec, counts)]
