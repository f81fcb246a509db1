"""Prompt: the five questions per puzzle, few-shot CoT demonstrations, and pattern classification.

Every question is one user turn: the puzzle image first, then the question string exactly as the
dataset gives it. Few-shot CoT (AVR only) puts 1-2 solved puzzles before it in the same turn, each
image → its AVR question → a rationale built from its `explanation`, ending in its answer.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from core.types import Message, user
from suites.marvel.data import PATTERNS, Puzzle, image_path
from suites.marvel.panels import coarse_path

DEMO_CONFIGURATION = "Sequence"

PATTERN_DEFINITIONS = {
    "Temporal Movement": "position change or movement",
    "Spatial Relationship": "objects' relative positions",
    "Quantities": "number comprehension",
    "Mathematical": "elementary operations",
    "2D-Geometry": "2D shapes and their properties",
    "3D-Geometry": "3D shapes and their properties",
}

PATTERN_PROMPT = (
    "You are given a puzzle. The puzzle consists of a context part on the top and the choices part in "
    "the bottom. The puzzle follows one of the six patterns below.\n"
    + "".join(f"- {name}: {PATTERN_DEFINITIONS[name]}\n" for name in PATTERNS)
    + "Which pattern does this puzzle follow? Answer with the pattern name only."
)


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
    other pattern, itself drawn per puzzle. Puzzles whose explanation names choices by letter are left
    out (68 of the 165 Sequence puzzles; every pattern keeps at least 11).
    """
    if k <= 0:
        return []
    rng = random.Random(f"marvel-demos:{mode}:{target.id}")
    others = [p for p in puzzles if p.id != target.id and consistent(p)]
    if mode == "same":
        pool = [p for p in others if p.pattern == target.pattern and p.configuration == DEMO_CONFIGURATION]
        pool = pool or [p for p in others if p.pattern == target.pattern]
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
    question = PATTERN_PROMPT if kind == "pattern" else p.question(kind)
    image = coarse_path(root, p.id) if index_free and kind.startswith("coarse") else image_path(root, p.id)
    return user(*parts, image, question)
