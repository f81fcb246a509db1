"""Read the final answer out of a response the way a person grading it would (rules first, judge second).

Answers are normalised per question type: MCQ types → a sorted letter string ("B", "ABD"); Integer and
Numeric → a float. Anything that does not fit the type is None (letters outside A-D, several letters for a
single-correct MCQ, a non-integer for Integer, no number for Numeric), and so is a refusal or "none of
the options". The last stated final answer wins.
"""

from __future__ import annotations

import re

from suites.base import TRUNCATED
from suites.jeebench.fallbacks import (
    affirmed_answer,
    bare_answer,
    boxed_option,
    cut_mid_formula,
    ends_in_error_claim,
    final_line_answer,
    option_of_text,
    option_of_value,
)
from suites.jeebench.rules import (  # noqa: F401  (Answer, LETTERS: the answer types, re-exported)
    LETTERS,
    Answer,
    extract_letters,
    extract_number,
)

_SUB_ITEM = re.compile(r"\[([A-D])\((?:i{1,3}|iv|v|[a-d1-4])\)\]")

# --- the entry points ----------------------------------------------------------------------------------

_REFUSAL = re.compile(
    r"^\s*(?:i'?m sorry|i am sorry|i cannot|i can'?t|as an ai)|\bunable to (?:solve|determine|answer)\b", re.I
)


def extract(text: str | None, qtype: str, question: str | None = None) -> Answer:
    """The rule-based answer of `text` for a question of type `qtype` (None: no answer that fits)."""
    if not text or not text.strip():
        return None
    if (_REFUSAL.search(text[:300]) and len(text) < 600) or ends_in_error_claim(text):
        return None
    if qtype in ("MCQ", "MCQ(multiple)"):
        text = _SUB_ITEM.sub(r"[\1]", text)  # "[D(i)]": option D's first part, still option D
        ans = (
            extract_letters(text, qtype, question)
            or option_of_value(text, question)
            or option_of_text(text, question, qtype)
            or boxed_option(text, question)
            or affirmed_answer(text, qtype, question)
        )
    elif cut_mid_formula(text):  # the authors' extracts: None for a number cut off mid-formula (not MCQs)
        return None
    else:
        ans = extract_number(text, qtype, question)
    if ans is None:
        ans = bare_answer(text, qtype)
    return ans if ans is not None else final_line_answer(text, qtype)


CUT = TRUNCATED
"""finish_reason of a response stopped at its token limit."""


def extract_critique(text: str | None, qtype: str, question: str | None, finish_reason: str | None) -> Answer:
    """The new answer of a self-critique (§4.4). One stopped at its token limit (25 of the authors' 200 released
    critiques stop at 512) is cut mid-working and states no new answer: None, as a person reading it would,
    where the rules would read the letters or numbers of the working (chosen on the critiques' dev half)."""
    return None if finish_reason in CUT else extract(text, qtype, question)


def parse_answer(s: str | None, qtype: str) -> Answer:
    """A bare answer string ("B", "ABD", "0.5", "None") → the normalised answer; used for hand extracts
    and judge replies. Does not search; anything that does not fit the type is None."""
    if s is None:
        return None
    s = s.strip().strip(".").strip()
    if not s or s.lower() in ("none", "null", "n/a", "no answer"):
        return None
    if qtype in ("MCQ", "MCQ(multiple)"):
        letters = re.sub(r"[\s,()\[\]&]|and", "", s.upper())
        if not letters or not set(letters) <= set(LETTERS):
            return None
        ans = "".join(sorted(set(letters)))
        return None if qtype == "MCQ" and len(ans) != 1 else ans
    try:
        v = float(s.replace(",", ""))
    except ValueError:
        return None
    if qtype == "Integer" and abs(v - round(v)) > 1e-9:
        return None
    return v


def parse_judge(text: str | None, qtype: str) -> Answer:
    """The judge's reply (asked for only the answer, or "None"): its last line, tolerant of "Answer: B"."""
    if not text:
        return None
    line = [ln for ln in text.strip().splitlines() if ln.strip()][-1]
    line = re.sub(r"^\s*(?:final\s+)?answer\s*[:\-]\s*", "", line, flags=re.I).strip().strip("$*`").strip()
    line = re.sub(r"\\boxed\{(.*)\}", r"\1", line)
    return parse_answer(line, qtype)


def answer_str(a: Answer) -> str | None:
    """How an answer is written in scored rows and tables: letters as-is, numbers without a trailing .0."""
    if a is None or isinstance(a, str):
        return a
    return str(int(a)) if float(a).is_integer() and abs(a) < 1e15 else repr(float(a))
