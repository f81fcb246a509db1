"""The run's JEEBench settings, read from the spec and checked once for every stage: an unknown variant or
extractor stops the run before its first call (check), and scoring reads the same values the run used."""

from __future__ import annotations

from suites.base import RunSpec, SuiteError
from suites.jeebench.data import MCQ_TYPES, Item, load_items
from suites.jeebench.metrics import EXTRACTORS
from suites.jeebench.prompts import VARIANTS


def variant(spec: RunSpec) -> str:
    """The prompting protocol (default cot, Table 2's main rows); an unknown one stops the run in check."""
    v = spec.opt("variant", "cot")
    if v not in VARIANTS:
        raise SuiteError(f"--variant {v!r} is not one of {', '.join(VARIANTS)}")
    return v


def extractor(spec: RunSpec) -> str:
    """How numbers are compared and votes counted: the authors' compute_metrics.py (default) or ours."""
    ex = spec.opt("extractor", "reference")
    if ex not in EXTRACTORS:
        raise SuiteError(f"--extractor {ex!r} is not one of {', '.join(EXTRACTORS)}")
    return ex


def items(variant: str) -> list[Item]:
    """The questions `variant` asks: cot-exam only the MCQ types (its marking prompt is theirs alone)."""
    its = load_items()
    return [it for it in its if it.type in MCQ_TYPES] if variant == "cot-exam" else list(its)
