"""The paper's printed numbers (Jiang et al., NeurIPS 2024 D&B; ../shared/papers/marvel.txt), each with its
table, so every table we reproduce can print them beside ours. Percentages as printed (0-100).

Model names are the paper's, shortened to one spelling across its tables (Table 2 prints "Qwen-VL (7B)",
Table 6 "Blip2"); `BIASED` are the models its Tables 2, 4 and 5 mark † ("attributed to inductive bias").
The paper's own inconsistencies are in README.md ("The paper's numbers").
"""

from __future__ import annotations

import re

MODELS = ("Qwen-VL", "Fuyu", "BLIP-2", "InstructBLIP", "LLaVA-1.5",
          "GPT-4V", "GPT-4o", "Gemini", "Claude3 (Sonnet)", "Claude3 (Opus)")  # fmt: skip
BIASED = frozenset({"Fuyu", "BLIP-2", "InstructBLIP", "Gemini", "Claude3 (Sonnet)"})  # † in Tables 2, 4, 5
CLOSED = ("GPT-4V", "GPT-4o", "Gemini", "Claude3 (Sonnet)", "Claude3 (Opus)")  # the few-shot tables' models

TABLE2_COLS = ("avr", "fine", "perc_c", "perc_cf", "perc_cf_avr")
TABLE2 = {  # Table 2: zero-shot AVR, Fine-grained, PercC, PercC&F, PercC&F&AVR (Gemini: the left set, "*")
    "Qwen-VL": (19.61, 37.27, 0.52, 0.39, 0.00),
    "Fuyu": (24.29, 34.94, 0.00, 0.00, 0.00),
    "BLIP-2": (24.81, 53.38, 1.04, 0.52, 0.26),
    "InstructBLIP": (24.68, 49.48, 0.00, 0.00, 0.00),
    "LLaVA-1.5": (26.36, 51.43, 1.14, 0.52, 0.13),
    "GPT-4V": (22.34, 51.56, 18.31, 9.22, 2.73),
    "GPT-4o": (27.79, 68.44, 62.73, 43.77, 12.21),
    "Gemini": (25.06, 44.42, 15.19, 6.75, 1.69),
    "Claude3 (Sonnet)": (26.49, 50.91, 38.70, 19.87, 5.06),
    "Claude3 (Opus)": (28.83, 47.27, 44.94, 20.13, 5.97),
}
HUMAN = {"avr": 68.86, "avr_sd": 9.74, "fine": 98.67}  # Table 2 ("68.86 ± 9.74"; §6: "a standard deviation of 9.74")
RANDOM = {"avr": 25.00, "fine": 50.00}  # Table 2

PATTERN_ROWS = ("Temporal Movement", "Spatial Relationship", "Quantities", "Mathematical", "2D-Geometry", "3D-Geometry")
TABLE4_COLS = ("Human", "Qwen-VL", "Fuyu", "BLIP-2", "InstructBLIP", "LLaVA-1.5",
               "GPT-4o", "GPT-4V", "Gemini", "Claude3 (Sonnet)", "Claude3 (Opus)")  # fmt: skip
_T4 = {  # Table 4: AVR by pattern, rows as printed (its Quantities/Mathematical model values fit each other's counts)
    "Temporal Movement": (82.08, 23.81, 24.76, 25.71, 25.71, 20.95, 23.81, 26.67, 22.86, 23.81, 31.43),
    "Spatial Relationship": (70.42, 20.83, 25.00, 26.67, 26.67, 26.67, 30.83, 24.17, 29.17, 34.17, 26.67),
    "Quantities": (81.57, 15.76, 24.85, 27.88, 27.27, 28.48, 29.09, 21.21, 24.85, 24.85, 27.88),
    "Mathematical": (60.00, 21.25, 25.00, 24.17, 24.17, 28.75, 26.25, 21.67, 23.75, 23.33, 27.50),
    "2D-Geometry": (59.17, 17.50, 22.50, 20.83, 20.83, 25.00, 30.0, 18.33, 25.00, 30.83, 33.33),
    "3D-Geometry": (50.00, 15.00, 15.00, 15.00, 15.00, 15.00, 25.00, 30.00, 30.00, 20.00, 25.00),
}
TABLE4 = {row: dict(zip(TABLE4_COLS, v, strict=True)) for row, v in _T4.items()}

CONFIGURATION_ROWS = ("Sequence", "Two-row", "Matrix", "Group", "Reassembling")  # Table 5's order and labels
CONFIGURATION_LABEL = {"Sequence": "Sequence", "Two-row": "Two-row", "Matrix": "Matrix", "Group": "Group",
                       "3D": "Reassembling"}  # fmt: skip
"""The data's `task_configuration` -> the paper's name (§3.1, Tables 1 and 5: "Reassembling"; the data: "3D")."""
_T5 = {  # Table 5: AVR by task configuration, same columns as Table 4
    "Sequence": (67.84, 18.18, 22.42, 23.03, 23.03, 23.64, 31.52, 28.48, 23.03, 26.06, 30.30),
    "Two-row": (71.56, 16.00, 22.67, 24.89, 24.44, 25.78, 25.78, 22.22, 24.00, 25.78, 32.00),
    "Matrix": (73.56, 23.56, 29.78, 28.89, 28.89, 30.67, 27.11, 20.44, 26.67, 27.56, 27.56),
    "Group": (58.18, 21.48, 21.48, 21.48, 21.48, 25.19, 28.15, 17.04, 25.93, 27.41, 24.44),
    "Reassembling": (50.00, 15.00, 15.00, 15.00, 15.00, 15.00, 25.00, 30.00, 30.00, 20.00, 25.00),
}
TABLE5 = {row: dict(zip(TABLE4_COLS, v, strict=True)) for row, v in _T5.items()}

CATEGORIES = ("Location", "Color", "Shape", "Quantity", "Comparison")  # §4's five fine-grained question types
CATEGORY_COUNTS = {"Location": 65, "Color": 53, "Shape": 177, "Quantity": 304, "Comparison": 171}
"""Questions per category implied by Table 6: 9 of its 10 columns are exact fractions of these (Qwen-VL
26/65, 20/53, 59/177, 112/304, 70/171 = 287/770 = its Table 2 fine 37.27); sum 770. The tenth, GPT-4o,
fits them too with four of its values in other rows (TABLE6_GPT4O_FITS)."""
TABLE6_COLS = ("Qwen-VL", "Fuyu", "BLIP-2", "InstructBLIP", "LLaVA-1.5",
               "GPT-4o", "GPT-4V", "Gemini", "Claude3 (Sonnet)", "Claude3 (Opus)")  # fmt: skip
_T6 = {  # Table 6 (Appendix F; titled "Coarse-grained", it holds the fine-grained question categories, §6)
    "Location": (40.00, 15.38, 40.00, 35.38, 61.54, 66.15, 41.54, 41.54, 32.31, 32.31),
    "Color": (37.74, 26.42, 58.49, 58.49, 58.49, 69.01, 52.83, 54.72, 47.17, 62.26),
    "Shape": (33.33, 36.16, 45.20, 36.72, 29.38, 69.08, 45.76, 53.67, 57.63, 45.76),
    "Quantity": (36.84, 36.84, 60.86, 56.25, 57.57, 58.49, 51.64, 39.47, 56.58, 48.36),
    "Comparison": (40.94, 40.35, 52.05, 53.22, 57.31, 70.62, 60.82, 41.52, 42.11, 47.95),
}
TABLE6 = {row: dict(zip(TABLE6_COLS, v, strict=True)) for row, v in _T6.items()}
TABLE6_GPT4O_FITS = {"Location": "Location", "Color": "Comparison", "Shape": "Quantity", "Quantity": "Color",
                     "Comparison": "Shape"}  # fmt: skip
"""Table 6's GPT-4o column, row as printed -> the only category whose implied count its value fits: 43/65,
118/171, 210/304, 31/53, 125/177, which add up to 527/770 = 68.44, its Table 2 fine. Only Location fits its
own row; the other four values look printed in the wrong rows. We print them as labelled (README)."""

TABLE7 = {  # Table 7 / Fig. 5: pattern classification accuracy (all 770; Qwen-VL 19.22 = 148/770)
    "Qwen-VL": 19.22, "Fuyu": 15.58, "BLIP-2": 16.10, "InstructBLIP": 17.14, "LLaVA-1.5": 17.01,
    "GPT-4o": 27.53, "GPT-4V": 21.56, "Gemini": 18.96, "Claude3 (Sonnet)": 22.60, "Claude3 (Opus)": 25.84,
}  # fmt: skip

TABLE8 = {  # Table 8: few-shot CoT AVR accuracy (all 770): zero-shot, one-shot, two-shot
    "Gemini": (25.06, 28.7, 26.75),
    "GPT-4o": (27.79, 30.78, 28.05),
    "GPT-4V": (22.34, 26.1, 28.31),
    "Claude3 (Sonnet)": (26.49, 25.97, 26.23),
    "Claude3 (Opus)": (28.83, 27.79, 23.64),
}
TABLE9 = {  # Table 9: one-shot vs one-shot (OOD): multiples of 1/260, an undescribed subset
    "Gemini": (23.85, 24.62), "GPT-4o": (28.08, 23.08), "GPT-4V": (27.31, 23.85),
    "Claude3 (Sonnet)": (25.00, 26.92), "Claude3 (Opus)": (29.62, 25.00),
}  # fmt: skip
TABLE10 = {  # Table 10: two-shot vs two-shot (mix): multiples of 1/210, an undescribed subset
    "Gemini": (30.48, 24.29), "GPT-4o": (27.62, 27.14), "GPT-4V": (29.52, 28.10),
    "Claude3 (Sonnet)": (28.57, 23.81), "Claude3 (Opus)": (21.90, 22.86),
}  # fmt: skip
TABLE11 = {"Gemini": (20.00, 13.33), "GPT-4V": (20.00, 17.78)}  # zero-shot vs one-by-one ("50 puzzles"; fits 45)

TABLE12_COLS = ("Gemini", "GPT-4o", "GPT-4V", "Claude3 (Sonnet)", "Claude3 (Opus)")
_T12 = {  # Table 12: few-shot AVR by pattern, one-shot then two-shot columns, rows as printed
    "Temporal Movement": ((24.76, 28.57, 27.62, 17.14, 29.52), (33.33, 17.14, 28.57, 24.76, 18.10)),
    "Spatial Relationship": ((30.00, 30.83, 33.33, 24.17, 26.67), (25.83, 32.5, 22.50, 30.83, 19.17)),
    "Quantities": ((21.21, 25.42, 27.88, 27.88, 26.67), (25.45, 24.17, 31.52, 25.45, 27.27)),
    "Mathematical": ((27.92, 30.3, 28.75, 25.42, 26.67), (25.83, 30.91, 27.50, 22.92, 22.08)),
    "2D-Geometry": ((26.67, 45.0, 25.00, 30.83, 30.83), (26.67, 38.33, 30.00, 28.33, 31.67)),
    "3D-Geometry": ((25.00, 25.0, 35.00, 45.00, 30.00), (20.00, 20.00, 35.00, 40.00, 20.00)),
}
TABLE12 = {k + 1: {row: dict(zip(TABLE12_COLS, v[k], strict=True)) for row, v in _T12.items()} for k in (0, 1)}
"""Table 12 by shots (1, 2): pattern -> model -> AVR %. Its two-shot half names four models (Gemini, GPT-4V,
Claude3 (Sonnet), Claude3 (Opus)) over five columns: the second is GPT-4o's, as in the one-shot half, since each
column's puzzles (value × its pattern's count) are whole and add up exactly to one model's Table 8 two-shot:
206, 216, 218, 202, 182 of 770 = 26.75 (Gemini), 28.05 (GPT-4o), 28.31 (GPT-4V), 26.23, 23.64. In the one-shot
half the Gemini and GPT-4V columns add up to each other's Table 8 one-shot (201/770 = 26.10, GPT-4V's; 221/770 =
28.70, Gemini's): printed as labelled. GPT-4o's columns fit the data's Quantities/Mathematical counts (240/165),
the others the swapped ones, as Table 4 (Opus's one-shot fits both)."""
TABLE12_NOTE = (
    "the paper's model columns are Table 12's {k}-shot, printed as labelled; its two-shot header names four models "
    "over five columns: the second is GPT-4o (each column adds up to one model's Table 8 two-shot exactly); its "
    "one-shot Gemini and GPT-4V columns add up to each other's Table 8 one-shot (26.10, 28.70); GPT-4o's Quantities "
    "and Mathematical rows fit the data's counts (240, 165), the other models' the swapped ones"
)

def avr_column(shots: int, demos: str, panels: str) -> tuple[str, dict[str, float]]:
    """The paper's AVR figures for the run's prompting (which table, and its values per model)."""
    if panels == "one-by-one":
        return "Table 11, one-by-one (a 45-50 puzzle sample)", {m: v[1] for m, v in TABLE11.items()}
    if shots == 1 and demos == "ood":
        return "Table 9, one-shot (OOD) (a 260-puzzle subset)", {m: v[1] for m, v in TABLE9.items()}
    if shots == 2 and demos == "mix":
        return "Table 10, two-shot (mix) (a 210-puzzle subset)", {m: v[1] for m, v in TABLE10.items()}
    if shots:
        return f"Table 8, {('one', 'two')[shots - 1]}-shot", {m: v[shots] for m, v in TABLE8.items()}
    return "Table 2", {m: v[0] for m, v in TABLE2.items()}


SAME_MODEL = (
    ("GPT-4o", r"gpt-4o(?!-mini)"), ("GPT-4V", r"gpt-4-(?:\d{4}-)?vision|gpt-4v"),
    ("Gemini", r"gemini-(?:1\.0-)?pro-vision|gemini-pro$"), ("Claude3 (Sonnet)", r"claude-3-sonnet"),
    ("Claude3 (Opus)", r"claude-3-opus"), ("InstructBLIP", r"instructblip"), ("BLIP-2", r"blip-?2"),
    ("LLaVA-1.5", r"llava-v?1\.5"), ("Qwen-VL", r"qwen-vl(?:-chat)?$"), ("Fuyu", r"fuyu"),
)  # fmt: skip
"""Model ids that name one of the paper's models (the part after the last `/`, lower case): its gap is the
protocol's and the model version's; any other model's gap is against REFERENCE_MODEL (model and protocol)."""
REFERENCE_MODEL = "GPT-4o"
"""The paper's row a model it did not test is compared with: its strongest and newest (Table 2)."""


def paper_model(model: str, among: tuple[str, ...] | None = None) -> tuple[str, bool] | None:
    """The paper's row our `model` is compared with, and whether it is the same model (else the reference,
    GPT-4o, or the first of `among` when the table has no GPT-4o); None when `among` is empty."""
    tail = model.lower().rsplit("/", 1)[-1]
    names = tuple(among) if among is not None else MODELS
    same = next((name for name, pat in SAME_MODEL if re.search(pat, tail)), None)
    if same in names:
        return same, True
    if not names:
        return None
    return (REFERENCE_MODEL if REFERENCE_MODEL in names else names[0]), False
