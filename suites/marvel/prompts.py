"""Prompt: the five questions per puzzle, few-shot CoT demonstrations, pattern classification, and the
AVR question with the panels one by one.

Every question is one user turn: the puzzle image first, then the question string exactly as the
dataset gives it. Few-shot CoT (AVR only) puts 1-2 solved puzzles before it in the same turn, each
image → its AVR question → a rationale built from its `explanation`, ending in its answer. Pattern
classification sends Table 13's prompt; one-by-one (Table 11) sends each panel with Appendix I's strings.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from core.types import Message, user
from suites.marvel.data import Puzzle, image_path
from suites.marvel.panels import coarse_path, panel_paths

DEMO_CONFIGURATION = "Sequence"
MIX_CONFIGURATIONS = ("Sequence", "Two-row")
"""Table 10's "mix": two-shot demos "from two different task formats (sequence and two-row)" (Appendix I)."""

PATTERN_LINES = (  # Table 13, "Pattern Classification" (the paper's order; "Quantity" as printed)
    "Temporal Movement patterns focus on the related position change or movement.",
    "Spatial Relationship patterns focus on the objects' relative positional relationship.",
    "Quantity patterns focus on the accuracy of number comprehension.",
    "Mathematical patterns focus on elementary mathematical operations.",
    "2D-Geometry patterns focus on the 2D-geometric shape and its properties.",
    "3D-Geometry patterns focus on the 3D-geometric shape and its properties.",
)
PATTERN_ASK = (
    "Please answer which pattern the puzzle is mostly related to. Output your final answer with the pattern "
    "name strictly."
)
_WHICH = re.compile(r"\s*Which (?:choice|option)\b[^?]*\?\s*$")
"""The AVR question's last sentence ("Which choice (either 1, 2, 3, or 4) is ...?"): all 770 end with one."""


def pattern_prompt(p: Puzzle) -> str:
    """Table 13's pattern-classification prompt: the puzzle's description (its AVR question without the
    question; Table 13's example is puzzle 1's, "... in a 1 by 5 sequence ..."), the patterns, the ask."""
    description = _WHICH.sub("", p.avr_question)
    return f"{description} The puzzle contains one of the following patterns:\n" + "\n".join(PATTERN_LINES) + (
        f"\n{PATTERN_ASK}"
    )


ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")
CONTEXT_PANEL = "This is the {index} panel in the context of the puzzle"  # Appendix I (Table 11)
CHOICE_PANEL = "This is the {index} choice of the puzzle"  # Appendix I (Table 11)


def one_by_one_message(p: Puzzle, root: Path) -> Message:
    """Table 11's one-by-one prompting: each context panel (the blank one included), then each choice,
    from the authors' Panel_data/, each followed by its string, then the AVR question as given. Our
    choices: {index} as an ordinal word, the string after its panel (the paper says neither)."""
    parts: list[str | Path] = []
    for part, text in (("question", CONTEXT_PANEL), ("answer", CHOICE_PANEL)):
        for k, path in enumerate(panel_paths(root, p.id, part)):
            parts += [path, text.format(index=ORDINALS[k])]
    return user(*parts, p.avr_question)


def rationale(demo: Puzzle) -> str:
    """The worked answer shown for a demonstration: its explanation, then its answer."""
    why = demo.explanation.rstrip()
    if why[-1:] not in ".!?":
        why += "."
    return f"Answer: Let's think step by step. {why} So the answer is choice {demo.answer}."


NAMES_LETTER = re.compile(
    r"\b[B-D]\b|\b(?:items?|options?|choices?|only|be|is|position of)\s+A\b(?![a-z])|\bA\s*(?:,|and|or)\s*[B-D]\b"
)
"""An explanation that names choices by letter ("Only item B is consistent"): the source exam's lettered
choices, which do not map reliably onto MARVEL's numbered ones (puzzle 15: answer 4, "only item B")."""


def consistent(p: Puzzle) -> bool:
    """A demonstration whose rationale cannot contradict its numbered answer."""
    return not NAMES_LETTER.search(p.explanation)


def pick_demos(target: Puzzle, puzzles: tuple[Puzzle, ...], k: int, mode: str) -> list[Puzzle]:
    """k demonstrations for `target`, never the target itself, deterministic per puzzle id.

    same: puzzles of the target's pattern in the Sequence configuration (3D-Geometry has no Sequence
    puzzles, so there the pool is the pattern's other puzzles). ood: the Sequence puzzles of one
    other pattern, itself drawn per puzzle. mix (k = 2, Table 10): one Sequence and one Two-row puzzle
    of the target's pattern, in that order (3D-Geometry: two of its other puzzles). Puzzles whose explanation names choices by letter are left
    out (68 of the 165 Sequence puzzles; every pattern keeps at least 11).
    """
    if k <= 0:
        return []
    rng = random.Random(f"marvel-demos:{mode}:{target.id}")
    others = [p for p in puzzles if p.id != target.id and consistent(p)]
    mine = [p for p in others if p.pattern == target.pattern]
    if mode == "mix":
        pools = [[p for p in mine if p.configuration == c] for c in MIX_CONFIGURATIONS[:k]]
        if all(pools):
            return [rng.choice(pool) for pool in pools]
        return rng.sample(mine, k)
    if mode == "same":
        pool = [p for p in mine if p.configuration == DEMO_CONFIGURATION] or mine
    else:
        seq = [p for p in others if p.configuration == DEMO_CONFIGURATION and p.pattern != target.pattern]
        pattern = rng.choice(sorted({p.pattern for p in seq}))
        pool = [p for p in seq if p.pattern == pattern]
    return rng.sample(pool, k)


def question_message(
    p: Puzzle, kind: str, root: Path, demos: list[Puzzle] | None = None, index_free: bool = False
) -> Message:
    """One user turn: [demo image, demo question, rationale]*, puzzle image, question as given; coarse
    questions on the index-free image (panels.py) when `index_free`."""
    parts: list[str | Path] = []
    for d in demos or []:
        parts += [image_path(root, d.id), d.avr_question, rationale(d)]
    question = pattern_prompt(p) if kind == "pattern" else p.question(kind)
    image = coarse_path(root, p.id) if index_free and kind.startswith("coarse") else image_path(root, p.id)
    return user(*parts, image, question)
