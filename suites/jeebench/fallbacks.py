"""Fallbacks for answers the main rules do not read: an MCQ answered with a value equal to one option's,
a response that is nothing but its answer (`A, C and D`, `[B] 198`, `3.75`), and a last line that
states the choice ("A, C and D are TRUE.", "(C) <the option's text>", "x = 1 (Option C)")."""

from __future__ import annotations

import re

from suites.jeebench.mathexpr import evaluate, latex_to_python
from suites.jeebench.rules import _SEP, Answer, extract_number

_BARE_LETTERS = re.compile(rf"\(?([A-D])\)?((?:{_SEP}\(?[A-D]\)?)*)(?:\s+(?:are|is)\s+(?:true|correct))?\.?")
_BARE_OPTION = re.compile(r"(?:\(([A-D])\)|\[([A-D])\]|([A-D])[).:])(?:\s.*)?")
_BARE_NUMBER = re.compile(
    r"(?:[A-Za-z]\w*\s*=\s*)?\$?\s*(-?(?:\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+(?:\.\d*)?|\.\d+)(?:e-?\d+)?)\s*\$?(?:\s*(?:[A-Za-z%°\\][^=]{0,24}))?\.?"
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
    v = float(n.group(1).replace(",", ""))  # "2,944.00"
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


_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*)\}")


def boxed_option(text: str, question: str | None) -> str | None:
    """An MCQ answered by boxing one option's content ("the only possible point Q is $\\boxed{\\hat{k}}$"):
    the one option whose text, LaTeX markup dropped, equals the last boxed expression's."""
    boxed = _BOXED.findall(text)
    if not boxed:
        return None
    got = _plain(boxed[-1])
    hits = [m.group(1) for m in _OPTION.finditer(question or "") if got and _plain(m.group(2)) == got]
    return hits[0] if len(hits) == 1 else None


_ERROR_CLAIM = re.compile(
    r"(?:error|mistake|inconsistenc\w*|typo)s?\s+in\s+the\s+(?:problem|question|given)|please\s+check\s+the\s+"
    r"(?:problem|question)",
    re.I,
)
_ANSWER_LIKE = re.compile(r"\d|\\boxed|[(\[][A-D][)\]]")


def ends_in_error_claim(text: str) -> bool:
    """A response that ends by declaring the problem faulty ("...there is an error in the problem statement.
    Please check the given information.") with nothing answer-like after the claim: no answer (the
    authors' hand extracts give None; a number read from the working before it is not the answer)."""
    tail = text[-400:]
    claims = list(_ERROR_CLAIM.finditer(tail))
    return bool(claims) and not _ANSWER_LIKE.search(tail[claims[-1].end():])


def cut_mid_formula(text: str) -> bool:
    """A response cut off inside a formula (its last line opens more `\\left` than it closes, or ends on `=`,
    an operator or an opening bracket): a number read from it is working, not the final answer."""
    last = text.rstrip().splitlines()[-1] if text.strip() else ""
    return last.count("\\left") > last.count("\\right") or last.rstrip().endswith(("=", "\\", "+", "-", "(", "{", "["))


_L = r"[(\[]?[A-D][)\]]?"
_TRUE_LIST = re.compile(
    rf"(?i:options?\s+)?({_L}(?:{_SEP}{_L})*)\s+(?i:are|is)\s+(?i:all\s+)?"
    rf"(?i:true|correct|(?:a\s+)?possible|the\s+correct\s+(?:option|answer|choice))\b(.*)"
)
_REST_FALSE = re.compile(rf"[.,;]?\s*(?i:but|while)?\s*(?:{_L}(?:{_SEP}{_L})*\s+(?i:are|is)\s+(?i:false|incorrect|wrong)\.?)?")
_LABEL_LINE = re.compile(r"(?:\(([A-D])\)|\[([A-D])\]|([A-D])\))\s+(\S.*)")
_LABEL_START = re.compile(r"\s*(?:\(|\[)?[A-D][)\]]")
_NOT = re.compile(r"\b(?:not|incorrect|false|wrong|cannot)\b", re.I)
_ONLY = re.compile(rf"(?i:\bonly)\s+({_L})\s+(?i:is)\b(?!\s+(?i:not|incorrect|false|wrong))")
_FALSE_ONLY = re.compile(rf"{_L}(?:{_SEP}{_L})*\s+(?i:are|is)\s+(?i:false|incorrect|wrong)\.?")
_CLOSEST = re.compile(r"(?i:closest\s+(?:to\s+)?(?:the\s+)?option\s*(?:is\s*)?)\(?([A-D])\)?")
_OPTION_NAMED = re.compile(r"\(\s*option\s+([A-D])\s*\)\W*\Z", re.I)
_IS_LABEL = re.compile(r"\b(?:is|are)\s+(?:(?:option|choice)\s+)?\(([A-D])\)(?=[\s.,;:$]|\Z)", re.I)


def final_line_answer(text: str, qtype: str) -> str | None:
    """The choice stated by the last line of a longer MCQ answer: letters said to be true ("A, B, and D
    are true, but C is false.", "only (D) is a possible value"), one option quoted with its label after the
    working ("(C) <the option's text>", not a walk through the options or a verdict against it), or
    "x = 1 (Option C)", "closest to option (D)", "... is (B) <its text>"; a last line naming only the false
    ones defers to the one before it."""
    if qtype not in ("MCQ", "MCQ(multiple)"):
        return None
    lines = [ln.strip().strip("*") for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    last = lines[-2] if len(lines) > 1 and _FALSE_ONLY.fullmatch(lines[-1]) else lines[-1]  # "D is false."
    letters = ""
    if m := _ONLY.search(last) or _CLOSEST.search(last):
        letters = m.group(1).strip("()[]")
    elif m := _TRUE_LIST.fullmatch(last):
        if _REST_FALSE.fullmatch(m.group(2)):
            letters = "".join(sorted(set(re.findall(r"[A-D]", m.group(1)))))
    elif (i := _IS_LABEL.search(last)) and not _NOT.search(last) and set(re.findall(r"\(([A-D])\)", last)) == {i[1]}:
        letters = i[1]  # "The interval that contains the value ... is (B) $(1,2)$."
    elif (o := _LABEL_LINE.fullmatch(last)) and not _NOT.search(last):
        earlier = lines[-2] if len(lines) > 1 else ""
        letters = "" if _LABEL_START.match(earlier) or qtype != "MCQ" else next(g for g in o.groups() if g)
    elif n := _OPTION_NAMED.search(last):
        letters = n.group(1)
    return letters if letters and (qtype == "MCQ(multiple)" or len(letters) == 1) else None


_AFFIRM = re.compile(r"\A\s*(?:the\s+)?(?:given\s+)?solution\s+is\s+(?:indeed\s+)?correct\b", re.I)
_NAMED = re.compile(r"\boption\s+([A-D])\b|[(\[]\s*([A-D])\s*[)\]]")
_BRACKET_OPTION = re.compile(r"(?m)^\s*[(\[]\s*([A-D])\s*[)\]]\s*(.*?)\s*$")


def affirmed_answer(text: str, qtype: str, question: str | None) -> str | None:
    """A short critique that affirms the solution and restates its answer in passing, a form the other rules
    miss ("The given solution is correct, and ... is indeed 1.56 mm (option C)"; "both options [A] and [C] are
    indeed the correct answers"; "... the final answer is 125" for the option "[C] 125"): the options it
    names, when it calls none wrong; else the one option equal to the value it states."""
    if not _AFFIRM.match(text) or len(text) > 600 or _NOT.search(text):
        return None
    letters = sorted({a or b for a, b in _NAMED.findall(text)})
    if letters:
        return None if qtype == "MCQ" and len(letters) != 1 else "".join(letters)
    v = extract_number(text, "Numeric", None)
    if v is None:
        return None
    vals: dict[str, float] = {}
    for c, body in _BRACKET_OPTION.findall(question or ""):
        try:
            vals[c] = float(body.strip("$ ."))
        except ValueError:
            continue
    hits = [c for c, x in vals.items() if abs(x - v) <= 1e-6 * max(1.0, abs(x))]
    return hits[0] if len(hits) == 1 else None
