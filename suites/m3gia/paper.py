"""The paper's printed numbers (Song et al., 2024, arXiv:2406.05343), printed beside ours as `paper: ...` rows.

Percentages as printed; the tables divide by 100 to our fractions. tests/test_m3gia_paper.py checks every
value against the paper's text (../shared/papers/m3gia.txt).
"""

from __future__ import annotations

import re

TABLE1_COLUMNS = ("I", "RG", "RQ", "Gf", "Gc", "Gq", "Grw", "Gv", "Overall")
TABLE1: dict[str, tuple[float, ...]] = {
    "Human (average)": (86.8, 60.0, 71.2, 69.7, 79.1, 65.4, 78.1, 81.1, 76.9),
    "GPT-4o": (58.0, 59.2, 33.9, 50.1, 72.3, 42.8, 79.6, 46.3, 59.8),
    "GPT-4v": (56.7, 56.3, 40.9, 51.9, 74.8, 46.4, 77.5, 52.4, 59.2),
    "Gemini-1.5-Pro": (54.3, 56.4, 41.8, 54.3, 75.8, 60.8, 77.1, 53.8, 62.4),
    "Gemini-Pro": (39.0, 30.8, 22.7, 32.4, 56.5, 31.7, 67.1, 43.1, 46.5),
    "Cluade3-Sonnet": (39.7, 32.9, 27.3, 34.0, 58.3, 34.2, 61.3, 43.9, 47.0),
    "Cluade3-Haiku": (35.3, 35.8, 30.3, 33.1, 55.8, 33.3, 57.9, 36.4, 43.1),
    "Mini-Gemini-34b": (37.7, 37.5, 30.6, 34.8, 61.0, 34.2, 62.9, 45.7, 48.2),
    "Mini-Gemini-8*7b": (28.7, 30.0, 26.7, 30.3, 58.1, 35.0, 61.3, 41.9, 44.8),
    "LLaVA-v1.6-34b": (20.7, 40.0, 28.5, 30.8, 53.8, 36.4, 61.7, 40.4, 42.8),
    "Yi-VL-34b": (25.0, 32.9, 35.8, 29.5, 48.1, 29.2, 54.6, 35.7, 38.2),
    "InternVL-chat-v1.2-plus": (45.0, 42.5, 32.4, 42.5, 64.6, 41.4, 66.7, 47.5, 51.9),
    "Mini-Gemini-13b": (22.3, 29.2, 23.3, 24.3, 41.5, 26.1, 44.2, 28.3, 32.9),
    "LLaVA-v1.5-13b": (17.7, 26.3, 15.2, 19.9, 42.1, 20.3, 40.0, 28.8, 30.4),
    "LLaVA-v1.6-vicuna-13b": (23.3, 19.6, 24.5, 23.1, 36.7, 26.9, 47.5, 28.5, 33.2),
    "Fuyu-8b": (21.7, 22.1, 27.3, 23.3, 27.3, 24.4, 27.1, 24.9, 25.1),
    "Mini-Gemini-8b": (37.3, 29.6, 31.8, 30.4, 51.5, 30.6, 56.3, 36.1, 41.4),
    "LLaVA-v1.5-7b": (18.0, 25.0, 15.8, 19.7, 41.5, 19.7, 35.0, 25.7, 28.4),
    "LLaVA-v1.6-vicuna-7b": (21.3, 22.9, 18.2, 20.5, 36.5, 19.4, 32.9, 26.9, 31.5),
    "LLaVA-v1.6-mistral-7b": (24.3, 25.8, 24.5, 24.9, 38.5, 24.2, 36.7, 32.1, 28.9),
    "Deepseek-VL-7b": (32.3, 29.2, 22.1, 28.3, 50.4, 24.4, 54.2, 32.4, 37.5),
    "Yi-VL-6b": (25.2, 35.5, 26.2, 28.8, 35.6, 29.0, 54.5, 30.8, 34.4),
    "Qwen-VL": (18.7, 23.8, 25.2, 22.5, 41.0, 27.5, 42.5, 30.1, 32.1),
    "CogVLM2-LLaMA3-Chinese": (29.7, 21.7, 29.7, 26.5, 54.8, 27.2, 37.9, 40.3, 38.7),
}
"""Table 1 (§4.1): accuracy (%) per CHC factor over the 6 languages; the Human row is the 480 participants'
average (§4: 80 per language). Model names as printed ("Cluade3" sic)."""
TABLE1_SHOWN = ("Human (average)", "GPT-4o", "GPT-4v", "Gemini-1.5-Pro", "Gemini-Pro", "Cluade3-Sonnet", "Cluade3-Haiku")
"""The rows our Table 1 prints beside a run's: the Human row and the API models (the rest stay in TABLE1)."""

TABLE2_LANGS = ("en", "zh", "fr", "es", "pt", "ko")
"""Table 2's columns En, Ch, Fr, Sp, Pt, Ko in our language codes."""
TABLE2: dict[str, tuple[float, ...]] = {
    "GPT-4o": (13.85, 11.46, 12.37, 13.12, 12.80, 13.01),
    "GPT-4v": (12.61, 10.95, 13.83, 14.04, 12.12, 12.25),
    "LLaVA-1.6-34b": (11.47, 9.25, 11.35, 7.96, 10.67, 9.04),
    "LLaVA-1.6-13b": (6.96, 6.89, 8.71, 7.75, 6.94, 7.75),
    "LLaVA-1.6-7b": (6.75, 5.99, 7.67, 6.74, 6.01, 5.93),
    "Mini-Gemini-34b": (11.00, 9.96, 12.75, 11.52, 9.45, 10.69),
    "Mini-Gemini-13b": (8.68, 7.76, 8.65, 7.73, 7.10, 7.98),
    "Mini-Gemini-8b": (9.32, 8.11, 11.25, 9.76, 8.99, 7.08),
}
"""Table 2 (§4.2): GIA per language (the Human row is gia.HUMAN_GIA; the Qwen ablation rows are left out)."""
TABLE2_NORMALIZED: dict[str, tuple[float, ...]] = {
    "GPT-4o": (86.5, 68.7, 63.3, 80.9, 80.0, 72.1),
    "GPT-4v": (78.8, 65.6, 70.8, 86.5, 75.8, 67.9),
    "LLaVA-1.6-34b": (71.6, 55.4, 58.1, 49.1, 66.7, 50.1),
    "LLaVA-1.6-13b": (43.5, 41.3, 44.6, 47.8, 43.4, 42.9),
    "LLaVA-1.6-7b": (42.1, 35.9, 39.3, 41.5, 37.6, 32.9),
    "Mini-Gemini-34b": (68.7, 59.7, 65.3, 71.0, 59.1, 59.2),
    "Mini-Gemini-13b": (54.2, 46.5, 44.3, 47.7, 44.4, 44.2),
    "Mini-Gemini-8b": (58.2, 48.6, 57.6, 60.2, 56.2, 39.3),
}
"""Table 2's right half (100 = the human average of the language); Fig. 5 (left) plots these."""
TABLE2_SHOWN = ("GPT-4o", "GPT-4v")

TABLE4_COLUMNS = ("Common Sense", "Visual-spatial", "Comprehension", "Mathematics", "Reasoning", "Overall")
TABLE4: dict[str, tuple[float, ...]] = {
    "with images": (87.0, 48.0, 77.8, 46.4, 56.5, 60.7),
    "without images": (44.5, 23.9, 50.4, 31.7, 37.8, 36.6),
}
"""Table 4 (App. D.1): GPT-4v's accuracy (%) per cluster with and without the images. Its Overall with images
(60.7) is not Table 1's GPT-4v Overall (59.2): the paper does not say which run each is."""

FIG4_R2 = 0.93
"""Fig. 4 (right) caption: the GIA scores explain overall performance with R² ≥ 0.93; §4.2 says "cor > 0.93"
(r > 0.93 is R² > 0.86: the two statements differ; both are shown)."""

TABLE3: dict[str, tuple[str, ...]] = {
    "General Information": ("Gc",),
    "Oral Vocabulary": ("Gc",),
    "Logo Problem": ("Gc", "Gv"),
    "Visualization": ("Gv",),
    "Picture Recognition": ("Gv",),
    "Real-world Spatial": ("Gv",),
    "Readings-text": ("Grw",),
    "Readings-VL": ("Grw",),
    "Comic Problem": ("Gv", "Grw"),
    "Math Facts": ("Gq",),
    "Algebra": ("Gq", "Gf", "RQ"),
    "Geometry": ("Gv", "Gq", "Gf", "RQ"),
    "Applied Problem": ("Gc", "Gq", "Gf", "RQ"),
    "Number Seres": ("Gf", "I", "RQ"),
    "Concept Formation": ("Gf", "I"),
    "Raven's Matrices": ("Gv", "Gf", "I"),
    "Syllogism Problem": ("Gf", "RG"),
    "Real-world Reasoning": ("Gc", "Gf", "RG"),
}
"""Table 3 (App. C): the CHC factors of each question type (Gf: any of I, RG, RQ)."""
TABLE3_COUNT: dict[str, int] = {
    "General Information": 20, "Oral Vocabulary": 15, "Logo Problem": 15, "Visualization": 30,
    "Picture Recognition": 15, "Real-world Spatial": 15, "Readings-text": 15, "Readings-VL": 10, "Comic Problem": 15,
    "Math Facts": 25, "Algebra": 15, "Geometry": 10, "Applied Problem": 10, "Number Seres": 20,
    "Concept Formation": 20, "Raven's Matrices": 10, "Syllogism Problem": 20, "Real-world Reasoning": 20,
}  # fmt: skip
"""Table 3's "Num" column: questions of each type per language (its "N × 6"; 300 in all)."""


SAME_MODEL = (
    ("GPT-4o", r"gpt-4o(?!-mini)"), ("GPT-4v", r"gpt-4-(?:\d{4}-)?vision|gpt-4v"),
    ("Gemini-1.5-Pro", r"gemini-1\.5-pro"), ("Gemini-Pro", r"gemini-(?:1\.0-)?pro(?:-vision)?$"),
    ("Cluade3-Sonnet", r"claude-3-sonnet"), ("Cluade3-Haiku", r"claude-3-haiku"),
)  # fmt: skip
"""Model ids that name one of the paper's API models (the part after the last `/`, lower case); the open
models match by name with case and punctuation ignored ("llava-v1.6-34b" = "LLaVA-v1.6-34b")."""
REFERENCE_MODEL = "GPT-4o"
"""The paper's row a model it did not test is compared with: its newest API model (Tables 1, 2)."""


def _bare(name: str) -> str:
    """A name without case, punctuation or a version's `v` ("LLaVA-v1.6-34b" = Table 2's "LLaVA-1.6-34b")."""
    return re.sub(r"v(?=\d)", "", re.sub(r"[^a-z0-9]", "", name.lower()))


def paper_model(model: str, among: tuple[str, ...]) -> tuple[str, bool] | None:
    """The paper's row (of `among`) our `model` is compared with, and whether it is the same model (else the
    reference, GPT-4o, or the first of `among` when it has no GPT-4o); None when `among` is empty."""
    tail = model.lower().rsplit("/", 1)[-1]
    same = next((name for name, pat in SAME_MODEL if re.search(pat, tail)), None)
    same = same or next((name for name in among if _bare(name) == _bare(tail)), None)
    if same in among:
        return same, True
    if not among:
        return None
    return (REFERENCE_MODEL if REFERENCE_MODEL in among else among[0]), False


def vs(model: str, among: tuple[str, ...]) -> str | None:
    """`vs paper` cell: the paper's model compared with, `(ref.)` when it is not the same model."""
    found = paper_model(model, among)
    return None if found is None else found[0] + ("" if found[1] else " (ref.)")


def gap(ours: float | None, paper_pct: float | None) -> float | None:
    """Ours (a fraction) − the paper's percentage / 100, to 3 places."""
    return None if ours is None or paper_pct is None else round(ours - paper_pct / 100, 3)


GAP_NOTE = (
    "gap = ours − the paper's value (/ 100) of the model under `vs paper`: the same model where the name names "
    "one of the paper's, leaving the protocol's and the version's difference; else `GPT-4o (ref.)` (Table 4: "
    "GPT-4v, its only model), which mixes the model's difference with the protocol's"
)
