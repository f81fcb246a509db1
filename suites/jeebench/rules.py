"""The rules that read a final answer out of a response: option letters (verdicts, lists, boxed and
bracketed letters) and numbers (boxed values, "final answer" cues, a last line stating a value).

The reading order and the fallbacks are in `extract` (the entry points); this module is what both it
and `fallbacks` build on.
"""

from __future__ import annotations

import re

from suites.jeebench.mathexpr import evaluate, latex_to_python

Answer = str | float | None
LETTERS = "ABCD"

# --- normalising option tokens to "(A)" ------------------------------------------------------------------

_WRAPPED = re.compile(r"\\(?:textbf|text|mathrm|mathbf|textrm|bf)\s*\{\s*((?:\(\s*[A-D]\s*\)\s*)+)\}")
_WRAPPED_OPEN = re.compile(r"\\(?:textbf|text|mathrm|mathbf|textrm|bf)\s*\{\s*\(\s*([A-D])\s*\)")
_WRAPPED_BARE = re.compile(r"\\(?:textbf|text|textrm|bf)\s*\{\s*([A-D])\s*\}")
_BRACKET = re.compile(r"(?<!\\)\[\s*([A-D](?:\s*(?:,|and|&)\s*[A-D])*)\s*\]")
# "$[\mathrm{D}]$", "[\mathbf{B}, \mathbf{D}]": wrapped letters in brackets → "[B, D]" for _BRACKET
_BRACKET_WRAPPED = re.compile(
    r"(?<!\\)\[((?:\s*(?:,|and|&)?\s*\\(?:mathrm|mathbf|textbf|text|textrm)\s*\{\s*[A-D]\s*\})+)\s*\]"
)
_BOLD = re.compile(r"\*\*\(?([A-D])\)?\*\*")
_GROUP = re.compile(r"\(\s*([A-D](?:\s*(?:,|and|&)\s*[A-D])+)\s*\)")
_SEP = r"(?:\s*,\s*(?:and\s+|or\s+)?|\s+and\s+|\s+or\s+|\s*&\s*)"
# a bare list "A, B, and D" right after "options"/"is (are):"/"Answer:", or "D is correct" opening a line
_BARE_LIST = re.compile(
    rf"(?:(?<=\b(?i:options))|(?<=\b(?i:option))|(?<=\bare)|(?<=\bis)|(?<=\(are\))|(?<=:)|(?<=\bchoices)|(?<=\bstatements)"
    rf"|(?<=\bstatement)|(?<=\banswers))(\s*)([A-D](?:{_SEP}[A-D])*)(?![\w}}$^_'(\\])",
)
_LINE_LETTER = re.compile(
    r"(?m)^(\s*(?:[-*]\s*)?)([A-D])(?:\)|\.|:)?(?=\s+(?:is|are|[Ff]alse|[Tt]rue|[Cc]orrect|[Ii]ncorrect)\b|[):.]\s)"
)
_OPT = re.compile(r"\(\s*([A-D])\s*\)")
_UNDECIDED = re.compile(r"\(\s*[A-D]\s*\)(?:\\text\s*\{)?\s*,?\s*\bor\s+\(\s*[A-D]\s*\)")
_TEXT_ARG = re.compile(r"\\(?:text|textrm|textbf|mathrm|mathbf)\s*\{([^{}]*)\}")


def _normalise(text: str) -> str:
    t = text.replace("\\left", "").replace("\\right", "")
    t = _GROUP.sub(lambda m: "".join(f"({c})" for c in re.findall(r"[A-D]", m.group(1))), t)
    t = _WRAPPED.sub(r"\1", t)
    t = _WRAPPED_BARE.sub(r"(\1)", t)
    t = _WRAPPED_OPEN.sub(r"(\1)\\text{", t)
    t = _BRACKET_WRAPPED.sub(lambda m: "[" + ", ".join(re.findall(r"\{\s*([A-D])\s*\}", m.group(1))) + "]", t)
    t = _BRACKET.sub(lambda m: ", ".join(f"({c})" for c in re.findall(r"[A-D]", m.group(1))), t)
    t = _BOLD.sub(r"(\1)", t)
    t = re.sub(r"(?:(?<=^)|(?<=[\s,:]))([A-D])\)(?=\s)", r"(\1)", t, flags=re.M)
    t = _BARE_LIST.sub(lambda m: m.group(1) + re.sub(r"([A-D])", r"(\1)", m.group(2)), t)
    t = _LINE_LETTER.sub(r"\1(\2)", t)
    return t


def _boxed(text: str) -> list[tuple[int, str]]:
    """(position, content) of every \\boxed{...} (balanced braces)."""
    out = []
    for m in re.finditer(r"\\boxed\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out.append((m.start(), text[m.end() : i - 1]))
    return out


# --- option letters ------------------------------------------------------------------------------------

_NEG = r"(?:false|incorrect|wrong|invalid|not\s+(?:correct|true|valid|right|possible|the\s+(?:correct\s+)?answer)|eliminated|ruled\s+out)"
_POS = r"(?:correct|true|right|valid|possible|the\s+(?:correct\s+)?answer)"
_VERDICT = re.compile(
    rf"^(?:[^.;:()\n]{{0,80}}?\b(?:is|are|seems|appears)\s+(?:also\s+|both\s+|all\s+|therefore\s+|thus\s+|hence\s+|\w+ly\s+)*"
    rf"|[^\n]{{0,300}}?:\s*(?:this|the)\s+(?:statement|option)\s+is\s+(?:also\s+)?|\s*[:\-–.]?\s*)"
    rf"(?:(?P<neg>{_NEG}|not\b)|(?P<pos>{_POS}))",
    re.I,
)
_CUE = re.compile(
    r"final\s+answers?|\banswers?\b"
    r"|\b(?:correct|true|false|incorrect|valid|possible|right|wrong)\s+(?:options?|statements?|choices?|alternatives?|responses?)"
    r"|\b(?:options?|statements?|choices?)\s*\(s\)"
    r"|\b(?:corresponds?\s+to|(?:I|we)\s+(?:choose|select|pick))\b",
    re.I,
)
_CONCLUDE = re.compile(
    r"\b(?:therefore|hence|thus|so|conclude|in\s+conclusion|in\s+summary|to\s+summari[sz]e|overall|consequently|finally)\b",
    re.I,
)
_ALL = re.compile(
    r"\ball\s+(?:of\s+)?(?:the\s+)?(?:four\s+|given\s+|above\s+|4\s+)?(?:options|statements|choices|expressions|answers"
    r"|functions|of\s+the\s+above|(?:\(A\)\s*,?\s*)?\(A\)\s*,\s*\(B\)\s*,\s*\(C\)\s*,?\s*(?:and\s+)?\(D\))"
    r"[^.\n]{0,60}?\b(?:are|is)\s+(?:all\s+)?(?:\w+ly\s+)?(?:correct|true|valid|right|possible)"
    r"|\(A\)\s*,\s*\(B\)\s*,\s*\(C\)\s*,?\s*(?:and\s+)?\(D\)\s+are\s+all\s+(?:correct|true)",
    re.I,
)
_NONE = re.compile(
    r"\bnone\s+of\s+(?:the\s+)?(?:given\s+|above\s+|four\s+)?(?:options|choices|statements|answers|above|alternatives)"
    r"|\bno\s+(?:correct\s+)?(?:option|choice|answer)\s+is\s+correct",
    re.I,
)
# a question asking for the FALSE / INCORRECT / NOT ... statements: "(A) is false" then chooses A
_ASKS_FALSE = re.compile(
    r"\b(?:FALSE|INCORRECT|NOT|WRONG)\b|\b(?:false|incorrect)\s+statement|\bnot\s+correct\b"
)
_END = re.compile(r"\.(?=\s*$|\s*\n|\s+[A-Z(\[])|\n")


def _sentence_end(t: str, start: int) -> int:
    m = _END.search(t, start)
    return m.start() if m else len(t)


def _sentence_start(t: str, pos: int) -> int:
    ends = [m.end() for m in _END.finditer(t, 0, pos)]
    return ends[-1] if ends else 0


def _tail(t: str, start: int) -> str:
    """The rest of the sentence after a cue; a cue ending its line ("Final answer:") takes the next lines."""
    end = _sentence_end(t, start)
    seg = t[start:end]
    bare = not re.search(r"[A-Za-z0-9]", re.sub(r"\b(?:is|are|the|options?)\b", "", seg))
    if (bare or seg.rstrip().endswith(":")) and end < len(t):
        m = re.compile(r"\n\s*\n").search(t, end + 1)
        seg = t[start : (m.start() if m else len(t))][:600]
    return seg


def _verdict_groups(seg: str) -> list[tuple[list[str], bool | None]]:
    """Letters of a statement in groups with the verdict that follows them: `(A) and (C) are true` →
    (["A", "C"], True); `... are (B)` → (["B"], None)."""
    toks = list(_OPT.finditer(seg))
    groups: list[tuple[list[str], bool | None]] = []
    i = 0
    while i < len(toks):
        j = i
        while j + 1 < len(toks) and re.fullmatch(
            r"[\s,]*(?:and|or|&)?[\s,]*(?:options?\s*|statements?\s*)?",
            seg[toks[j].end() : toks[j + 1].start()],
        ):
            j += 1
        after = seg[toks[j].end() : (toks[j + 1].start() if j + 1 < len(toks) else len(seg))]
        v = _VERDICT.match(after)
        verdict = None if not v else (v.group("neg") is None)
        groups.append(([m.group(1) for m in toks[i : j + 1]], verdict))
        i = j + 1
    return groups


def _chosen(seg: str, asks_false: bool) -> set[str]:
    out: set[str] = set()
    for letters, verdict in _verdict_groups(seg):
        if verdict is None or verdict != asks_false:
            out |= set(letters)
    return out


def _letter_candidates(t: str, asks_false: bool, multiple: bool) -> list[tuple[int, str | None, bool]]:
    """Every place that states a final choice: (position, letters or None for "no option", is_verdict)."""
    cands: list[tuple[int, str | None, bool]] = []
    for m in _CUE.finditer(t):
        chosen = _chosen(_tail(t, m.end()), asks_false)
        if chosen:
            cands.append((m.start(), "".join(sorted(chosen)), False))
    for m in _CONCLUDE.finditer(t):
        seg = t[m.end() : _sentence_end(t, m.end())]
        groups = _verdict_groups(seg)
        chosen = _chosen(seg, asks_false)
        if chosen:
            # "Therefore, (D) is correct." after a walk through the options judges one option only
            single_verdict = multiple and len(chosen) == 1 and all(v is not None for _, v in groups)
            cands.append((m.start(), "".join(sorted(chosen)), single_verdict))
    for pos, content in _boxed(t):
        content = _TEXT_ARG.sub(r"\1", content)  # "\boxed{\text{A, B, and D}}"
        letters = set(_OPT.findall(content))
        if not letters:
            b = re.fullmatch(r"\s*([A-D](?:\s*[,&]?\s*(?:and\s+)?[A-D])*)\s*", content)
            letters = set(re.findall(r"[A-D]", b.group(1))) if b else set()
        if letters:
            cands.append((pos, "".join(sorted(letters)), False))
    for pos, letters in _option_lines(t, asks_false):
        cands.append((pos, letters, False))
    for m in _ALL.finditer(t):
        cands.append((m.start(), LETTERS, False))
    for m in _TRAILING_OPTION.finditer(t):  # "The final answer is 380. (A)"
        cands.append((m.start(1), m.group(1), False))
    for m in _NONE.finditer(t):
        cands.append((m.start(), None, False))
    return sorted(cands, key=lambda c: c[0])


_TRAILING_OPTION = re.compile(r"[.}$]\s*\(([A-D])\)\.?\s*\Z")
# "The correct options are:" / "Hence the statements that hold are" followed by one option per line
_LIST = re.compile(
    r"(?m)^(?P<head>[^\n]{0,200}?)[ \t]*\n(?:[ \t]*\n)?"
    r"(?P<items>(?:[ \t]*(?:[-*•]|\d+[.)])?[ \t]*\(\s*[A-D]\s*\)[^\n]*(?:\n[ \t]*(?=\n))*(?:\n|$))+)"
)
_LIST_CUE = re.compile(r"\b(?:hold|holds|correct|true|valid|right)\b", re.I)
_LIST_WALK = re.compile(r"\b(?:each|check|analy[sz]|examin|evaluat|consider|verify|let'?s|let\s+us)", re.I)
_LIST_CHOSEN = re.compile(r"\b(?:correct|true)\s+(?:options?|statements?|answers?)\s+(?:is|are)\s*:\s*$", re.I)
_ITEM = re.compile(r"(?m)^[ \t]*(?:[-*•]|\d+[.)])?[ \t]*\(\s*([A-D])\s*\)")


def _option_lines(t: str, asks_false: bool) -> list[tuple[int, str]]:
    """A conclusion that lists the chosen options one per line after a heading sentence."""
    out = []
    for m in _LIST.finditer(t):
        head, items = m.group("head"), m.group("items")
        if not (_CUE.search(head) or _CONCLUDE.search(head) or _LIST_CUE.search(head)):
            continue
        if _LIST_WALK.search(head) and not _LIST_CHOSEN.search(head):  # "we find that the correct options are:"
            continue
        if not head.rstrip(" *").endswith((":", "are", "is")):
            continue
        if any(re.search(rf"\b{_NEG}\b", ln, re.I) for ln in items.splitlines()):
            continue  # a walk through the options with verdicts, not a list of the chosen ones
        if bool(re.search(r"\b(?:false|incorrect|wrong)\b", head, re.I)) != asks_false:
            continue
        out.append((m.start("items"), "".join(sorted(set(_ITEM.findall(items))))))
    return out


def _verdicts(t: str, asks_false: bool) -> str:
    """The per-option verdicts a response walks through ("(A) is true. (B) is false. ..."), last one wins."""
    state: dict[str, bool] = {}
    for letters, verdict in _verdict_groups(t):
        if verdict is not None:
            for c in letters:
                state[c] = verdict != asks_false
    return "".join(sorted(k for k, ok in state.items() if ok))


def extract_letters(text: str, qtype: str, question: str | None = None) -> str | None:
    t = _normalise(text)
    stem = (question or "").split("(A)")[0]
    asks_false = bool(_ASKS_FALSE.search(stem))
    cands = _letter_candidates(t, asks_false, qtype == "MCQ(multiple)")
    if not cands:
        ans = _verdicts(t, asks_false) or None
    else:
        pos, ans, is_verdict = cands[-1]
        if is_verdict:
            ans = _verdicts(t, asks_false) or ans
        elif ans is not None:
            # "the correct options are \boxed{(A)} and \boxed{(B)}": one sentence, several places
            start = _sentence_start(t, pos)
            same = [c[1] for c in cands if c[0] >= start and c[1] is not None and not c[2]]
            ans = "".join(sorted(set("".join(same))))
            if _UNDECIDED.search(t[pos : pos + 160]):
                ans = None  # "Either (A) or (B).": no choice made
    if ans is None or (qtype == "MCQ" and len(ans) != 1):
        return None
    return ans


# --- numbers -------------------------------------------------------------------------------------------

_ANCHOR = re.compile(
    r"\bis\b|\bare\b|\bequals?\b|\bbe\b|\bto\b|\bmost\b|\bleast\b|=|:|\\approx|≈|\\sim|\\simeq|\\leq?|\\geq?|<|>"
)
_NUM = re.compile(r"(?<![\w.])-?\s?(?:\d{1,3}(?:,\d{3})+(?![\d.])|\d+(?:\.\d+)?|\.\d+)")


_QUALIFIER = re.compile(
    r"\((?:rounded|correct|approx|up\s*to|to\s+\d|in\s+\w+|i\.e)[^()]*\)"
    r"|,?\s*(?:correct|rounded|accurate)\s+(?:up\s*)?to\s+(?:the\s+)?(?:\d|two|2nd|second)[^.,;]*",
    re.I,
)
_VAR = re.compile(
    r"(?<![A-Za-z\\])(?!sqrt|pi)[A-Za-z](?![A-Za-z])|\\(?:vec|alpha|beta|gamma|theta|lambda|omega|phi|infty|ln|log|sin|cos|tan|det)\b"
)


_SPAN = re.compile(
    r"(?:\s*(?:sqrt|pi|ln|\\[a-zA-Z]+)|[()+\-*/.\d,|]|\s(?![A-Za-z\\])|(?<!\s)[A-Za-z](?![A-Za-z]))*"
)


def _value_after_anchor(seg: str) -> float | None | bool:
    """The answer a statement gives: the math after its last anchor ("is", "=", ":"). False: no number
    at all; None: the stated answer is not a number (`undefined`, `12\\beta`, `n+1`, `0.36(0.9-x)^2`)."""
    expr = re.sub(r"(\d+(?:\.\d+)?)\s*:\s*1(?!\d)", r"\1", seg)  # a ratio "6:1" answers 6
    expr = _QUALIFIER.sub(" ", expr)
    expr = re.sub(r"\bzero\b", "0", latex_to_python(expr), flags=re.I)
    anchors = [m for m in _ANCHOR.finditer(expr)]
    for k, a in enumerate([*reversed(anchors), None]):
        rest = expr[a.end() if a else 0 :]
        num = _NUM.search(rest)
        if not num:
            strong = a is not None and a.group(0) not in ("be", "to", "most", "least")
            if k == 0 and strong and re.search(r"[A-Za-z]{4,}", rest.replace("unit", "")):
                return None  # "... is undefined", "is infinity"
            continue
        head = rest[: num.start()]
        if _VAR.search(head.replace("unit", "")):
            return None  # "a + sqrt(r**2-4)": a variable is part of the stated answer
        span = _SPAN.match(rest).group(0)  # type: ignore[union-attr]  # the math, up to a unit or prose
        span = span.strip().rstrip(".,;").strip()
        if _VAR.search(span.replace("\\mu", " ")):
            return None  # "n+1", "5x/4", "12\\beta", "144 \\vec{c}": an expression, not a number
        v = evaluate(re.sub(r"(?<=[\d)])\s*(?=\(|sqrt|pi|ln)", "*", span.replace("\\mu", "")))
        if v is not None:
            return v
        if re.search(r"[+*/]|sqrt|pi|\d\s*-|-\s*$", span):
            return None  # math we cannot evaluate (a negative base to a fractional power, a dangling "-")
        return float(num.group(0).replace(",", "").replace(" ", ""))
    return False


_VALUE_LINE = re.compile(
    r"(?m)^([^\n]*?(?:\bis\b|=|\\approx|≈|\bequals\b|\bapproximately\b|\bwill\s+be\b)[^\n]*?\d[^\n]*)\s*\Z"
)
_CLOSERS = re.compile(r"(?:\s*(?:\$\$|\\\]|\\end\{\w+\*?\}))+\s*\Z")  # a display block's end after the value
"""The response's last line states a value: "Hence, the value of X is -6.6.", "The frequency of beats ...
is 2.86 Hz.", "x = 6.3 m" (nothing but whitespace after it); read when no cue comes after it."""
_WHICH_IS = re.compile(r",?\s*which\s+is\s+(?:the|our|my)\s+(?:final\s+)?answer", re.I)
_FINAL_NUM = re.compile(r"final\s+answer|\banswer\s*(?:is|:|=)", re.I)


_ASKS_ABS = re.compile(
    r"(?:value|magnitude|what)\s+(?:of|is)\s*(?:the\s+)?\$?\s*(?:\\left)?\s*(?:\\mid|\\vert|\|)", re.I
)


def asks_absolute(question: str | None) -> bool:
    """The question asks for |X| (a non-negative quantity), so a signed final "X = -4" answers 4."""
    return bool(question and _ASKS_ABS.search(question[-400:]))


def extract_number(text: str, qtype: str, question: str | None = None) -> float | None:
    t = re.sub(r"\*\*|__", " ", text)  # markdown bold around a number: "**Answer: 6**"
    t = _WHICH_IS.sub("", t)  # "the number is $14180$, which is the final answer." states it before
    cands: list[tuple[int, float | None]] = []
    for pos, content in _boxed(t):
        v = _value_after_anchor(content)
        if isinstance(v, float) and _MINUS_BEFORE.search(t, max(0, pos - 12), pos):
            v = -v  # "\approx -\boxed{5.44}": the sign outside the box
        cands.append((pos, None if v is False else v))  # type: ignore[arg-type]
    for m in _FINAL_NUM.finditer(t):
        v = _value_after_anchor(_tail(t, m.end()))
        cands.append((m.start(), None if v is False else v))  # type: ignore[arg-type]
    last = _VALUE_LINE.search(_CLOSERS.sub("", t))
    if last and not any(p >= last.start() for p, _ in cands):
        v = _value_after_anchor(last.group(1))  # a final line "Hence, the value of X is -6.6." after the cues
        if v is not False:
            cands.append((last.start(), v))  # type: ignore[arg-type]
    if not cands:
        for m in _CONCLUDE.finditer(t):
            v = _value_after_anchor(t[m.end() : _sentence_end(t, m.end())])
            if v is not False:
                cands.append((m.start(), v))  # type: ignore[arg-type]
    if not cands:
        return None
    cands.sort(key=lambda c: c[0])
    ans = cands[-1][1]
    if ans is None:
        return None
    if ans < 0 and asks_absolute(question):
        ans = -ans
    if qtype == "Integer" and abs(ans - round(ans)) > 1e-9:
        return None
    return ans


_MINUS_BEFORE = re.compile(r"(?:=|\\approx|≈|:)\s*-\s*\Z")
