"""The paper's own numbers (Huti et al., 2026, shared/papers/vrb.txt), printed beside ours wherever a table
reproduces one of its figures. Its figures are images; these are the values its text states ("≈" where
it says "approximately"/"around"). Fig. 11 and 12 and the per-model bars of Fig. 4-6 have no numbers
in the text."""

from __future__ import annotations

import re

USEFULNESS_THRESHOLD = 0.94
"""§1 and §3.3: the minimum capability threshold for classroom usefulness, the share of questions on which
the three adult annotators independently agreed (658 of 701 with full consensus: 93.9%)."""
CHANCE = 0.25
"""§4.1: four options."""

QWEN3_VL = r"qwen3-vl-30b-a3b-thinking"
"""The text's "Qwen3-VL" names no size; the reference's models.csv holds one Qwen3-VL, fw-qwen3-vl-30b-a3b-thinking
("Qwen3 VL 30B A3B Thinking"), so only that model is compared with it (another size is another model). Likewise
GLM-4.6V is models.csv's glm-4.6v, not GLM-4.6V-Flash."""

ACCURACY: tuple[tuple[str, str], ...] = (
    (r"gemini-3(\.0)?-flash", "78"),  # §4.1, §4.1.2
    (r"gemini-3(\.0)?-pro", "76"),  # §4.1
    (r"kimi-k2\.5", "60"),  # §4.1.1
    (r"glm-4\.6v(?![-.]?flash)", "≈45"),  # §4.1.1 "GLM-4.6V and QWEN3-VL ... reaching an accuracy ≈ 45%"
    (QWEN3_VL, "≈45"),  # §4.1.1
    (r"gemma-3-4b", "mid-20s"),  # §4.1.1 "Gemma-3 4B and Mistral Small 2.1 3B ... around the mid 20% range"
)
"""Per-model accuracy (%) the text names, matched on the model's name (lower case)."""
NOT_MATCHED = (
    "§4.1.1's \"Mistral Small 2.1 3B\" (mid-20s) names no model of the reference's models.csv (its 3B Mistral "
    "models: ministral-3b, ministral-3-3b-2512), so no model here is compared with it"
)
"""A model the text names that no name pattern can stand for: said under the accuracy table."""
ACCURACY_RANGE = (23.0, 78.0)
"""§4.1: "Across the full panel, accuracies range from 23% up to 78%" (its 45 models)."""

TASK_RANGE: tuple[tuple[str, str], ...] = (
    (r"kimi-k2\.5", "≈35"),  # §4.2.1 "this gap is even wider in ... Kimi-K2.5 and Qwen3-VL, where the difference
    (QWEN3_VL, "≈35"),  # is nearly 35 points"
)
"""Fig. 8 (§4.2.1): the points between a model's best and worst task category, where the text names a model."""
TASK_SPREAD_TEXT = (
    "Fig. 8 (§4.2.1): most top-15 models 10-25 points between best and worst task; the strongest best on Pattern "
    "Completion (Linear), most frontier models worst on Match (Process); the bottom 15 at 20-40% overall, best on "
    "Odd One Out"
)


def task_range(model: str) -> str:
    """The paper's best − worst task range for `model` where its text names it, else "-"."""
    name = model.lower()
    return next((v for pat, v in TASK_RANGE if re.search(pat, name)), "-")


SKILL_AME_PP: dict[str, tuple[float, str]] = {
    "Shape and Form": (-4.5, "-4.5"),
    "Counting": (1.4, "+1.4"),
    "Shading and Line Type": (-4.5, "-4.5"),
    "Rotation": (-5.0, "-5"),
    "Reflection": (-5.8, "-5.8"),
    "Scaling": (5.0, "≈+5"),
    "Folding": (-9.0, "-9"),
    "Reconfiguring Shapes": (-3.5, "≈-3.5"),
    "Layering": (-3.5, "≈-3.5"),
}
"""Fig. 9 (§4.2.2): average marginal effect of each skill, percentage points."""

SEVERITY_MEAN: dict[str, str] = {"no_error": "38", "minor": "-", "medium": "≈30"}
"""Fig. 10 (§4.3): "The mean accuracy across all evaluated models drops from 38% on pristine items to
approximately 30% on items with moderate error severity"; minor is not stated."""

FRONTIER_SNAPSHOTS: dict[str, str] = {
    "November 2024": "2024-11-30",
    "April 2025": "2025-04-30",
    "December 2025": "2025-12-31",
}
"""Fig. 7 right (§4.1.2 "snapshots from late 2024, mid-2025 and late 2025"): the dates of the reference's
visualisations_paper.py `target_dates`; a snapshot counts the models released on or before its date."""


FRONTIER_TEXT = (
    "Gemini-3 Flash 78% at $0.50 per million input tokens (§4.1.2)",
    "at $0.10-0.20 the best models ≈38-40%",
    "at ≈$0.10 the best accuracy rises from ≈30% to ≈38-39% over the snapshots, at higher costs from the "
    "low 30s to ≈60%",
    "at the lowest prices (from ≈$0.01) ≈23%",
    "a spread of ≈15-20 points between the lowest and highest model in a cost band",
)
"""Fig. 7 (§4.1.2) in the paper's words: shown beside the report's frontier."""


def accuracy(model: str) -> str:
    """The paper's accuracy for `model` where its text names it, else "-"."""
    name = model.lower()
    return next((v for pat, v in ACCURACY if re.search(pat, name)), "-")


def number(value: str) -> float | None:
    """The paper's value as a number where the text gives one ("≈45" reads 45; "mid-20s" and "-" none)."""
    try:
        return float(value.replace("≈", "").replace("+", ""))
    except ValueError:
        return None


def gap(ours: float | None, value: str) -> str:
    """ours − the paper's value, in the table's unit, signed ("-" where either is missing): as JEEBench's gap,
    it mixes the models' and the protocol's differences."""
    theirs = number(value)
    return "-" if ours is None or theirs is None else f"{ours - theirs:+.1f}"
