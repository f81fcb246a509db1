"""Our answer extraction (`--extractor rules`): the reference's eight steps (`run.py::extract_answer`,
ported exactly in reference.py, the default), first hit wins, with four fixes.

1. The last line, stripped of `*`, `_`, `$`, is exactly a valid label.
2. `<|begin_of_box|>X<|end_of_box|>` (GLM) in the last line, else the first one anywhere.
3. The first `\\boxed{X}`.  4. The first `<answer>X</answer>`.
5. `(final answer|answer|option)(:| is:?) X` at the end of the response, else the first `(the )?answer is X`.
6. Per label in option-set order: `final answer is/: X`, `answer is/: X`, `solution is/: X`, `choose X`,
   `select X`, `option X is correct`, `option X`.
7. The last standalone label (outside `$...$`), case as in the option set.
8. None: no answer, scored wrong.

Steps 2, 5 and 6 match case-insensitively and return the label in the option set's case ("b" → "B" for
`alpha_upper`); steps 1, 3, 4 and 7 need the exact label, as in the reference. "First"/"last" occurrences
follow the reference too, so results stay comparable with the paper's.

The four fixes (each with tests; on simulated responses they move accuracy, so they are a recorded deviation):
- labels are word-bounded everywhere (the reference's last resort takes any matching character, and its
  step 5 takes "C" out of "Clearly"); `_` counts as a boundary so `__B__` still reads as B;
- step 5's `answer is: C` is matched as the issue writes it (the reference's pattern needs "answeris");
- markdown emphasis around the letter (`**B**`) is allowed in steps 5-6, `\\boxed{\\text{B}}` in step 3;
- for upper-case option sets, a lower-case "a" followed by a word in steps 5-6 is the English article
  ("the answer is a circle", "I choose a different approach"), not option A.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

from suites.vrb.reference import reference_step

_BOX_TOKEN = re.compile(r"<\|begin_of_box\|>(.*?)<\|end_of_box\|>", re.S)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S)
_DOLLAR_MATH = re.compile(r"\$[^$]*\$")
_ARTICLE_AFTER = re.compile(r"\s+[A-Za-z]")
_LB, _RB = r"(?<![A-Za-z0-9])", r"(?![A-Za-z0-9])"  # word boundary where `_` (markdown) is not a letter
_MD = r"[*_]*"
_COLON = r"\s*(?::\s*)?"  # "is", "is:", "is :" — written so that no two \s* meet (no quadratic backtracking)


class _Patterns:
    """Regexes for one option set, compiled once (a sweep extracts 45 models x 701 answers)."""

    def __init__(self, labels: tuple[str, ...]) -> None:
        self.labels = labels
        self.lower = {lab.lower(): lab for lab in labels}
        alt = "|".join(re.escape(lab) for lab in sorted(labels, key=len, reverse=True))
        x = f"{_LB}({alt}){_RB}"
        self.boxed = re.compile(rf"\\boxed\{{\s*(?:\\text(?:bf)?\{{\s*)?({alt})\s*(?:\}}\s*)?\}}")
        self.end = re.compile(
            rf"(?:final\s+answer|answer|option)(?:\s*:\s*|\s+is{_COLON}){_MD}{x}{_MD}$", re.I
        )
        self.answer_is = re.compile(rf"(?:the\s+)?answer\s+is{_COLON}{_MD}{x}", re.I)
        self.per_label = [
            (lab, [re.compile(p.format(x=f"{_LB}({re.escape(lab)}){_RB}"), re.I) for p in _STEP6])
            for lab in labels
        ]
        self.standalone = re.compile(x)

    def canon(self, found: str) -> str | None:
        if found in self.labels:
            return found
        return self.lower.get(found.lower())

    def article(self, m: re.Match[str], text: str) -> bool:
        """`a` + a word, where the option set says `A`: the English article, not a label."""
        return m.group(1) == "a" and "a" not in self.labels and bool(_ARTICLE_AFTER.match(text, m.end(1)))


_STEP6 = [
    r"\bfinal\s+answer\s*(?:is" + _COLON + r"|:\s*)" + _MD + "{x}",
    r"\banswer\s*(?:is" + _COLON + r"|:\s*)" + _MD + "{x}",
    r"\bsolution\s*(?:is" + _COLON + r"|:\s*)" + _MD + "{x}",
    r"\bchoose\s*" + _MD + "{x}",
    r"\bselect\s*" + _MD + "{x}",
    r"\boption\s+" + _MD + "{x}" + _MD + r"\s+is\s+correct\b",
    r"\boption\s+" + _MD + "{x}",
]


@lru_cache(maxsize=64)
def _patterns(labels: tuple[str, ...]) -> _Patterns:
    return _Patterns(labels)


def extract_step(text: str | None, labels: Sequence[str]) -> tuple[str | None, int]:
    """(answer, the step that found it); (None, 8) when there is no answer."""
    if not text or not text.strip():
        return None, 8
    p = _patterns(tuple(labels))
    text = text.strip()
    last = text.split("\n")[-1].strip()

    bare = re.sub(r"[*_$]", "", last).strip()  # 1
    if bare in p.labels:
        return bare, 1

    m = _BOX_TOKEN.search(last) or _BOX_TOKEN.search(text)  # 2
    if m and (c := p.canon(m.group(1).strip())):
        return c, 2

    if m := p.boxed.search(text):  # 3
        return m.group(1), 3

    if (m := _ANSWER_TAG.search(text)) and m.group(1).strip() in p.labels:  # 4
        return m.group(1).strip(), 4

    for rx in (p.end, p.answer_is):  # 5
        for m in rx.finditer(text):
            if not p.article(m, text):
                return p.canon(m.group(1)), 5

    for lab, rxs in p.per_label:  # 6
        for rx in rxs:
            if any(not p.article(m, text) for m in rx.finditer(text)):
                return lab, 6

    hits = p.standalone.findall(_DOLLAR_MATH.sub(" ", text))  # 7
    if hits:
        return hits[-1], 7
    return None, 8


def extract(text: str | None, labels: Sequence[str]) -> str | None:
    """The chosen label in the option set's case, or None (counts as wrong)."""
    return extract_step(text, labels)[0]


EXTRACTORS: dict[str, Callable[[str | None, Sequence[str]], tuple[str | None, int]]] = {
    "reference": reference_step,
    "rules": extract_step,
}
"""`--extractor`: the reference's eight steps exactly (default) or ours with the four fixes above."""
