"""Fallbacks for answers the main rules do not read: an MCQ answered with a value equal to one option's,
and a response that is nothing but its answer (`A, C and D`, `[B] 198`, `3.75`)."""

from __future__ import annotations

import re

from suites.jeebench.extract import _SEP, Answer, extract_number
from suites.jeebench.mathexpr import evaluate, latex_to_python

_BARE_LETTERS = re.compile(rf"\(?([A-D])\)?((?:{_SEP}\(?[A-D]\)?)*)(?:\s+(?:are|is)\s+(?:true|correct))?\.?")
_BARE_OPTION = re.compile(r"(?:\(([A-D])\)|\[([A-D])\]|([A-D])[).:])(?:\s.*)?")
_BARE_NUMBER = re.compile(
    r"(?:[A-Za-z]\w*\s*=\s*)?\$?\s*(-?(?:\d+(?:\.\d*)?|\.\d+)(?:e-?\d+)?)\s*\$?(?:\s*(?:[A-Za-z%°\\][^=]{0,24}))?\.?"
)


def bare_answer(text: str, qtype: str) -> Answer:
    """A response that is nothing but its answer, on one short line: `A, C and D`, `(D) 205`, `[B] 198`,
    `C) 12096`, `3.75`, `N = 8`, `1.25e-2`, `0.056 M` (answers to the paper's "normal" prompt often are)."""
    line = text.strip()
    lines = [ln.strip() for ln in line.splitlines() if ln.strip()]
    if qtype == "MCQ(multiple)" and 1 < len(lines) <= 4:  # "(A) Chemisorption ...\n(D) Lowering ..."
        opts = [_BARE_OPTION.fullmatch(ln) for ln in lines]
        if all(opts):
            return "".join(sorted({next(g for g in o.groups() if g) for o in opts if o}))
    if "\n" in line or len(line) > 80:
        return None
    if qtype in ("MCQ", "MCQ(multiple)"):
        m = _BARE_LETTERS.fullmatch(line)
        if m:
            letters = "".join(sorted(set(m.group(1) + "".join(re.findall(r"[A-D]", m.group(2))))))
        else:
            o = _BARE_OPTION.fullmatch(line)
            letters = next((g for g in o.groups() if g), "") if o else ""
        return letters if letters and (qtype == "MCQ(multiple)" or len(letters) == 1) else None
    n = _BARE_NUMBER.fullmatch(line)
    if not n:
        return None
    v = float(n.group(1))
    return None if qtype == "Integer" and abs(v - round(v)) > 1e-9 else v


_OPTION = re.compile(r"\(\s*([A-D])\s*\)\s*(.*?)\s*(?=\(\s*[A-D]\s*\)|\Z)", re.S)


def option_values(question: str | None) -> dict[str, float]:
    """The options whose text is a number or plain math (`(A) $\frac{1}{2}$ (B) 4`): letter → value."""
    out: dict[str, float] = {}
    for m in _OPTION.finditer(question or ""):
        v = evaluate(latex_to_python(m.group(2).strip().strip("$").strip()))  # None: text, not a number
        if v is not None:
            out[m.group(1)] = v
    return out


def option_of_value(text: str, question: str | None) -> str | None:
    """An MCQ answered with a value, not a letter ("The answer is 6"): the one option equal to it."""
    vals = option_values(question)
    if len(vals) < 2:
        return None
    v = extract_number(text, "Numeric", None)
    if v is None:
        return None
    hits = [c for c, x in vals.items() if abs(x - v) <= 1e-6 * max(1.0, abs(x))]
    return hits[0] if len(hits) == 1 else None


_FINAL_LINE = re.compile(r"(?:final\s+answer|answer\s+is|correct\s+(?:options?|answers?)\s+(?:is|are))\s*:?(.*)", re.I)
_TEX_NOISE = re.compile(r"\\(?:mathrm|text|mathbf|left|right)|[\s${}~]")


def _plain(s: str) -> str:
    return _TEX_NOISE.sub("", s).lower()


def option_of_text(text: str, question: str | None, qtype: str) -> str | None:
    """An MCQ answered by naming the options' contents ("Final Answer: ... are ClF3 and XeF4"): the options
    whose text (4+ characters once LaTeX markup is dropped) appears in the final-answer line, longest first
    so that an option inside another does not count twice."""
    opts = {m.group(1): _plain(m.group(2)) for m in _OPTION.finditer(question or "")}
    if len(opts) < 2:
        return None
    lines = [m.group(1) for ln in text.strip().splitlines() if (m := _FINAL_LINE.search(ln))]
    if not lines:
        return None
    line = _plain(lines[-1])
    hits = []
    for letter, body in sorted(opts.items(), key=lambda kv: -len(kv[1])):
        if len(body) >= 4 and body in line:
            hits.append(letter)
            line = line.replace(body, "|")
    if not hits or (qtype == "MCQ" and len(hits) != 1):
        return None
    return "".join(sorted(hits))

