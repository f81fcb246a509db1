"""JEEBench §4.5, self-consistency (`--variant cot-sc`): 8 CoT samples at T=0.5, one answer by vote
(metrics.self_consistency); `--tau-single`/`--tau-multiple` threshold the vote as §4.5.3 does, whose
scores are then not Table 2's SC@8 row (thresholded, said wherever a score appears)."""

from __future__ import annotations

from suites.base import RunSpec, SuiteError
from suites.jeebench import options
from suites.jeebench.report import PAPER_TAU

VARIANT = "cot-sc"
SC_SAMPLES, SC_TEMPERATURE = 8, 0.5
"""inference.py's SC run: 8 samples at T=0.5."""


def taus(spec: RunSpec) -> tuple[float, float]:
    """(--tau-single, --tau-multiple), vote shares in [0, 1]; 0/0.5 (the default): Table 2's majority."""
    ts, tm = float(spec.opt("tau_single", 0.0)), float(spec.opt("tau_multiple", 0.5))
    for name, t in (("--tau-single", ts), ("--tau-multiple", tm)):
        if not 0.0 <= t <= 1.0:
            raise SuiteError(f"{name} {t} must be between 0 and 1")
    return ts, tm


def tau_deviations(ts: float, tm: float) -> list[str]:
    """Thresholds other than Table 2's (0/0.5) and §4.5.3's tuned ones."""
    out = []
    if ts not in (0.0, PAPER_TAU[0]):
        out.append(f"--tau-single {ts:g}: an SC MCQ winner below this vote share is skipped (the paper: 0 for "
                   f"Table 2, {PAPER_TAU[0]:g} tuned in §4.5.3)")  # fmt: skip
    if tm not in (0.5, PAPER_TAU[1]):
        out.append(f"--tau-multiple {tm:g}: SC MCQ(multiple) letters at this vote share (the paper: 0.5 for "
                   f"Table 2, {PAPER_TAU[1]:g} tuned in §4.5.3)")  # fmt: skip
    return out


def thresholded(spec: RunSpec) -> str | None:
    """Said wherever a score appears (Table 2's title, scores.json, protocol.deviations and so the report's
    leaderboard) when SC answers are thresholded: they are §4.5.3's answers, not Table 2's SC@8 row's."""
    ts, tm = taus(spec)
    sc = options.variant(spec) == VARIANT or (spec.samples or 1) > 1
    if not sc or (ts, tm) == (0.0, 0.5):
        return None
    return (f"thresholded scores: SC answers at tau {ts:g}/{tm:g} (an MCQ vote winner below {ts:g} of the votes "
            f"and MCQ(multiple) letters below {tm:g} are skipped, §4.5.3), so Table 2, `overall` and the "
            f"leaderboard are not Table 2's SC@8 row (majority, 0/0.5)")  # fmt: skip


TABLE6_DEVIATION = (
    "Table 6's CoT row is sample 0 of this SC run at T=0.5 (the paper: a greedy CoT run, "
    "`--variant cot`)"
)
