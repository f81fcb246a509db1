"""Extract: rules first, in a fixed order per question type; None when no rule applies.

AVR → the chosen choice 1-4; fine-grained → which of the two option words the answer asserts;
coarse → a count (digits or number words); pattern → one of the six pattern names. A refusal with no
explicit answer is None. Failures can be re-read by an LLM judge (see JUDGE_INSTRUCTIONS), whose
short reply goes through the same rules.
"""

from __future__ import annotations

import re

from suites.marvel.data import PATTERNS, Puzzle

NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4}

_CANT = r"(?:determine|tell|see|view|identify|answer|solve|help|assist|access|provide|analy[sz]e|interpret)"
REFUSAL = re.compile(
    rf"\b(?:i'?m sorry|i am sorry|i apologi[sz]e|(?:can(?:no|')t|unable to|not able to) {_CANT}|"
    r"cannot be determined|impossible to (?:tell|determine)|not possible to (?:tell|determine)|"
    r"don'?t have enough|not enough information|as an ai)\b|^\s*(?:none|n/?a|unknown)\W*$",
    re.I,
)


def clean(text: str | None) -> str:
    """Markdown emphasis and LaTeX boxes removed: `**3**` and `\\boxed{3}` read as `3`."""
    t = re.sub(r"\\boxed\s*\{([^{}]*)\}", r"\1", text or "")
    t = re.sub(r"\\text\s*\{([^{}]*)\}", r"\1", t)
    return re.sub(r"[*`#$]", "", t).replace("\u2019", "'").strip()


def is_refusal(text: str | None) -> bool:
    return bool(REFUSAL.search(clean(text)))


def _last(pattern: re.Pattern[str], text: str) -> str | None:
    hits = [next(g for g in m.groups() if g) for m in pattern.finditer(text)]
    return hits[-1] if hits else None


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


# --- AVR: the chosen choice 1-4 ---------------------------------------------------------------

_C = r"(?:choice|option|answer choice|candidate|panel)"
_N = r"([1-4]|one|two|three|four)\b"
_ANSWER = re.compile(
    rf"\b(?:final answer|answer|correct (?:choice|option)|solution)\s*(?:is|:|would be|should be|=)\s*:?\s*"
    rf"(?:{_C}\s*(?:#|no\.|number)?\s*[(\[]?\s*{_N}|[(\[]?\s*([1-4])\b(?![.,]\d))",
    re.I,
)
_ASSERT = re.compile(
    rf"\b(?:{_C}\s*[(\[]?\s*([1-4])\b[)\]]?\s*(?:is|would be|seems(?: to be)?|appears(?: to be)?)\s+"
    r"(?:the\s+)?(?:most\s+)?(?:correct|right|best|appropriate|answer|logical|fitting|suitable|likely)|"
    rf"(?:choose|select|pick|go with|opt for)\s+(?:the\s+)?(?:{_C}\s*)?[(\[]?\s*([1-4])\b)",
    re.I,
)
_MENTION = re.compile(
    rf"\b{_C}\s*(?:#|no\.|number)?\s*[(\[]?\s*{_N}|\b(first|second|third|fourth)\s+(?:choice|option)\b",
    re.I,
)
_PAREN = re.compile(r"[(\[]\s*([1-4])\s*[)\]]")
_LONE = re.compile(r"^\W*([1-4])\W*$")


def _choice_num(s: str) -> int:
    s = s.lower()
    return int(s) if s.isdigit() else NUMBER_WORDS.get(s) or ORDINALS[s]


def extract_choice(text: str | None) -> int | None:
    """Rules, first match wins: 1 `answer is (choice) N` (last); 2 `choice N is correct` / `I choose N`
    (last); refusal → None; 3 a lone digit on the last line; 4 `choice N` / `option three` / `third
    option` mentions (the last one, in the last line that has any); 5 `(N)` (last)."""
    t = clean(text)
    if not t:
        return None
    for rule in (_ANSWER, _ASSERT):
        hit = _last(rule, t)
        if hit:
            return _choice_num(hit)
    if is_refusal(t):
        return None
    lines = _lines(t)
    m = _LONE.match(lines[-1])
    if m:
        return int(m.group(1))
    for ln in reversed(lines):
        hit = _last(_MENTION, ln)
        if hit:
            return _choice_num(hit)
    hit = _last(_PAREN, t)
    return int(hit) if hit else None


# --- fine-grained: which of two option words the answer asserts --------------------------------


def _option_body(option: str) -> str:
    """`top left` also matches `top-left`; `left/right` also `left or right`; `two` also `2`."""
    o = option.lower().strip()
    if "/" in o:
        a, b = (re.escape(x.strip()) for x in o.split("/", 1))
        body = rf"{a}\s*(?:/|or|and|-)\s*{b}"
    else:
        body = r"[\s-]+".join(re.escape(w) for w in o.split())
    if o in NUMBER_WORDS:
        return rf"(?:{body}|{NUMBER_WORDS[o]})"
    if o.isdigit() and int(o) < len(NUMBER_WORDS):
        return rf"(?:{body}|{list(NUMBER_WORDS)[int(o)]})"
    return body


def _bounded(body: str) -> str:
    return rf"(?<![\w-]){body}(?![\w-])"


def _mentions(text: str, options: list[str]) -> list[tuple[int, str]]:
    """(position, option) of each mention; a longer option masks a shorter one inside it."""
    found: list[tuple[int, str]] = []
    t = text.lower()
    for o in sorted(options, key=len, reverse=True):
        rx = _bounded(_option_body(o))
        found += [(m.start(), o.lower().strip()) for m in re.finditer(rx, t)]
        t = re.sub(rx, lambda m: " " * len(m.group()), t)
    return sorted(found)


def _only(text: str, options: list[str]) -> str | None:
    said = {o for _, o in _mentions(text, options)}
    return said.pop() if len(said) == 1 else None


_ECHO = r"(?<![\w-]){x}(?:\s+\w+){{0,2}}\s*,?\s*or\s+(?:the\s+|a\s+|an\s+)?{y}(?![\w-])"
_NEGATED = r"(?:\bnot|n't|\brather than|\binstead of|\bneither|\bnor)\s+(?:\w+\s+){{0,3}}?{x}(?![\w-])"


def extract_binary(text: str | None, answer: str, distractor: str) -> str | None:
    """Which of `answer` / `distractor` the response asserts (returned as given), or None.

    `choice 2` / `option 3` are dropped first (the questions name a choice; `2` must not read as
    `two`). Rules: no option named → None (refusals included); 1 the response starts with an option
    (`Upper.`, `Yes, ...`, `Three circles`); 2 `answer is/: ... X`; 3 after removing echoes of the
    question (`upper part or lower part`) and negated mentions (`not X`, `rather than X`) exactly one
    option is left; 4 the last sentence that names exactly one option. yes/no items follow the same rules.
    """
    t = re.sub(r"\b(?:choice|option|panel|grid|row|column)\s*#?\s*\d+\b", " ", clean(text), flags=re.I)
    options = [answer, distractor]
    if not _mentions(t, options):
        return None
    low = t.lower()
    a, b = (_option_body(o) for o in options)
    for x, y in ((a, b), (b, a)):
        low = re.sub(_ECHO.format(x=x, y=y), " ", low)
    found = _mentions(low, options)
    if found and found[0][0] == len(low) - len(low.lstrip(" \t\n\"'(-:")):
        return _pick(found[0][1], options)
    for m in re.finditer(r"\banswer\s*(?:is|:)\s*([^.\n]*)", low):
        hit = _only(m.group(1), options)
        if hit:
            return _pick(hit, options)
    for x in (a, b):
        low = re.sub(_NEGATED.format(x=x), " ", low)
    hit = _only(low, options)
    if hit:
        return _pick(hit, options)
    for sentence in reversed(re.split(r"(?<=[.!?])\s+|\n+", t)):
        hit = _only(sentence, options)
        if hit:
            return _pick(hit, options)
    return None


def _pick(lowered: str, options: list[str]) -> str:
    return next(o for o in options if o.lower().strip() == lowered)


# --- coarse: a count -------------------------------------------------------------------------

_NUM = r"(\d+|" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + r")\b"
_COUNT_ANSWER = re.compile(
    rf"(?:\b(?:final answer|answer|total|in all|altogether)\s*(?:is|:|=|of)?|=)\s*{_NUM}", re.I
)
_COUNT_NOUN = re.compile(
    rf"\b{_NUM}\s+(?:\w+\s+)?(?:grids?|panels?|pieces?|images?|cells?|boxes|squares?|pictures?|"
    r"figures?|choices|options|frames?|parts?)\b|\b" + _NUM + r"\s+(?:in total|in all|altogether)",
    re.I,
)
_NOT_COUNT = re.compile(
    r"\b(?:choice|option|row|column|panel|grid|number)\s*#?\d+\b|\b\d+\s*(?:by|x|×)\s*\d+\b|\d+\s*[+\-*/×]|"
    r"\b(?:the|a|blank|missing|empty|each|every|this|that|last|any|no|which)\s+one\b|\bone\s+of\b",
    re.I,
)
_LEAD = re.compile(rf"^[\W_]*{_NUM}(?![\w-])", re.I)


def _count(s: str) -> int:
    s = s.lower()
    return int(s) if s.isdigit() else NUMBER_WORDS[s]


def extract_count(text: str | None) -> int | None:
    """Rules, after dropping non-counts (`choice 3`, `3 by 3`, operands of `3 + 4`, `the blank one`):
    1 `answer is N` / `total of N` / `= N` (last); 2 refusal → None; 3 the response starts with a number
    (`5`, `Nine.`); 4 `N grids` / `N panels` ... (last); 5 the last number."""
    t = _NOT_COUNT.sub(" ", clean(text))
    if not t.strip():
        return None
    hit = _last(_COUNT_ANSWER, t)
    if hit:
        return _count(hit)
    if is_refusal(t):
        return None
    m = _LEAD.match(t)
    if m:
        return _count(m.group(1))
    hit = _last(_COUNT_NOUN, t)
    if hit:
        return _count(hit)
    nums = re.findall(rf"(?<![\w.]){_NUM}", t, re.I)
    return _count(nums[-1]) if nums else None


# --- pattern classification --------------------------------------------------------------------

_PATTERN_RE = {
    "Temporal Movement": r"temporal(?:[\s-]+movements?)?",
    "Spatial Relationship": r"spatial(?:[\s-]+relation(?:ship)?s?)?",
    "Quantities": r"quantit(?:y|ies)",
    "Mathematical": r"mathematical|math",
    "2D-Geometry": r"2[\s-]?d(?:[\s-]+geometry)?",
    "3D-Geometry": r"3[\s-]?d(?:[\s-]+geometry)?",
}


def extract_pattern(text: str | None) -> str | None:
    """Rules: refusal → None; 1 `pattern is/: X` or `answer is/: X`; 2 the only pattern named;
    3 the pattern named in the last line that names exactly one."""
    t = clean(text)
    if not t or (is_refusal(t) and not _named(t)):
        return None
    for m in re.finditer(r"\b(?:pattern|answer|category)\s*(?:is|:)\s*([^.\n]*)", t, re.I):
        names = _named(m.group(1))
        if names:
            return names[0]
    if len(set(_named(t))) == 1:
        return _named(t)[0]
    for ln in reversed(_lines(t)):
        if len(set(_named(ln))) == 1:
            return _named(ln)[0]
    return None


def _named(text: str) -> list[str]:
    hits = [
        (m.start(), name)
        for name, rx in _PATTERN_RE.items()
        for m in re.finditer(rf"(?<![\w-]){rx}(?![\w-])", text, re.I)
    ]
    return [name for _, name in sorted(hits)]


# --- dispatch -------------------------------------------------------------------------------


def extract(kind: str, text: str | None, p: Puzzle) -> int | str | None:
    if kind == "avr":
        return extract_choice(text)
    if kind == "fine":
        return extract_binary(text, p.fine_answer, p.fine_distractor)
    if kind == "pattern":
        return extract_pattern(text)
    return extract_count(text)


_JUDGE_ASK = {
    "avr": "Which choice (1, 2, 3 or 4) does it give as its final answer? Reply with the digit.",
    "fine": "The question asked to choose between '{a}' and '{b}'. Which one does the response assert? "
    "Reply with exactly that word.",
    "pattern": "Which of these pattern names does it give: {patterns}? Reply with the name.",
    "coarse": "The question asked for a count. What number does the response give? Reply with the number "
    "in digits.",
}


def judge_instruction(kind: str, p: Puzzle) -> str:
    """What the judge is asked: the answer the response gives, in a form the same rules read back.
    The two fine-grained options are listed alphabetically, so the order never hints at the gold."""
    a, b = sorted([p.fine_answer, p.fine_distractor])
    ask = _JUDGE_ASK.get(kind, _JUDGE_ASK["coarse"]).format(a=a, b=b, patterns=", ".join(PATTERNS))
    return (
        "Below is a model's response to a question about a visual puzzle. "
        + ask
        + " Reply None if the response refuses or gives no answer. Reply with nothing else."
    )
