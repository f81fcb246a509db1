"""Fine-grained question categories (§4: Location, Color, Shape, Quantity, Comparison) for Table 6.

The label file has no category, so each fine question is classified by rules on its own question (the
last sentence of `f_perception_question`) and its two option words, in this order:

1. Quantity: both options are numbers ("two or three circles"), unless the question names a digit or
   letter ("a number six or nine": what a shape is, Shape).
2. Color: both options are colour or fill words (black/white, filled/empty, solid/hollow, shaded), or the
   question asks which part is "filled in" a colour ("Is the top left or bottom right half ... filled in black").
3. Comparison: a relation between two things or two parts: same/different, longer/shorter, symmetry,
   intersecting/separate/parallel/connected, and every yes/no question (a property checked, "Are the left
   and right halves ... the same?", §4's example).
4. Location: one element's position relative to another element: positional options (inside/outside,
   above/below, left/right, top/bottom, corners) with a reference object ("of the star", "the trapezoid"),
   unless the question asks which way a shape points or faces (Shape).
5. Shape: the rest: which shape, letter or digit, open or closed, which way it points, where in the choice.

The rules follow §4's definitions and examples; their counts are reported beside the paper's implied
65/53/177/304/171 (paper.CATEGORY_COUNTS), never tuned to them (README: Table 6).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

from suites.marvel.data import Puzzle
from suites.marvel.paper import CATEGORIES

NUMBERS = set("zero one two three four five six seven eight nine ten eleven twelve".split()) | set("0123456789")
COLORS = {"black", "white", "gray", "grey", "filled", "empty", "solid", "hollow", "shaded", "dash", "dark", "light"}
RELATIONS = re.compile(
    r"\b(?:same|different|longer|shorter|larger|smaller|bigger|symmetr\w*|intersect\w*|separat\w*|seperat\w*|"
    r"parallel|connected|equal)\b"
)
POSITIONS = {"inside", "outside", "above", "below", "left", "right", "top", "bottom", "upper", "lower",
             "middle", "center", "leftmost", "rightmost", "up", "down"}  # fmt: skip
REFERENCE = re.compile(
    r"\b(?:inside|outside|above|below|of|side of|part of|corner of|quarter of|half of|region of)\s+(?:the|an?|two)\s+"
    r"(?!choice\b)[a-z-]+|\b(?:inside|outside)\b|\b(?:above|below)\s+(?:or\s+(?:above|below)\s+)?(?!choice\b)(?:the\s+)?[a-z-]+"
)
"""A reference element the position is relative to ("outside of the star"), not the choice itself."""
DIRECTION = re.compile(r"\b(?:pointing|facing|points|faces)\b|\ba (?:top|bottom) (?:left|right) quarter\b")
"""Which way a shape points, or which piece it is: what the shape is (Shape), not where it is."""
_TAIL = re.compile(r"\(marked by 1, 2, 3,? or 4\)\.?\s*|represents the correct three-dimensional assembly\.\s*")
_GROUP = re.compile(r"Based on a specific pattern, one option .*? into a different group\.\s*")


def question_text(p: Puzzle) -> str:
    """The fine question itself: the dataset's string without its puzzle description."""
    q = _TAIL.split(p.fine_question)[-1]
    return _GROUP.sub("", q).strip()


def _words(option: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", option.lower()))


@lru_cache(maxsize=1024)
def category(p: Puzzle) -> str:
    """The puzzle's fine-question category (module docstring: the rules and their order)."""
    q = question_text(p).lower()
    a, d = _words(p.fine_answer), _words(p.fine_distractor)
    if a and d and a <= NUMBERS and d <= NUMBERS and not re.search(r"\b(?:number|letter|digit)\b", q):
        return "Quantity"
    if (a and d and a <= COLORS and d <= COLORS) or re.search(r"\bfilled (?:in|with) (?:color )?(?:black|white)\b", q):
        return "Color"
    if a | d == {"yes", "no"} or RELATIONS.search(" ".join(a | d)) or "symmetr" in q:
        return "Comparison"
    if (a | d) & POSITIONS and REFERENCE.search(q) and not DIRECTION.search(q):
        return "Location"
    return "Shape"


def counts(puzzles: Iterable[Puzzle]) -> dict[str, int]:
    c = Counter(category(p) for p in puzzles)
    return {k: c[k] for k in CATEGORIES}
