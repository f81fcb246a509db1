"""Answer extraction in the paper's three stages: rules, then an LLM judge, then a seeded random letter."""

from __future__ import annotations

import hashlib
import re

STRIP = ",.!?;:'"


def by_rules(response: str | None, letters: tuple[str, ...], options: tuple[str, ...]) -> str | None:
    """Stage 1 (the authors' parse_multi_choice_response without the fallbacks).

    Candidates, in order of preference: `(X)`; else `X)`, `X.`, `X:`; else ` X `; else, for responses of
    more than 5 words, option texts found as case-insensitive substrings. Several candidates: the one
    occurring last wins (the authors' intent; their index bookkeeping for `X)`/`X.`/`X:` can pick another).
    """
    if not response:
        return None
    r = " " + response.strip().strip(STRIP) + " "  # spaces avoid partial matches at the ends
    pos = {x: r.rfind(f"({x})") for x in letters}
    if not any(p >= 0 for p in pos.values()):
        pos = {x: max(r.rfind(f"{x}{c}") for c in ").:") for x in letters}
    if not any(p >= 0 for p in pos.values()):
        pos = {x: r.rfind(f" {x} ") for x in letters}
    if not any(p >= 0 for p in pos.values()) and len(r.split()) > 5:
        low = r.lower()
        pos = {x: low.rfind(o.lower()) for x, o in zip(letters, options, strict=True) if o.strip()}
    found = [(p, x) for x, p in pos.items() if p >= 0]  # in letter order: ties go to the first letter
    return max(found, key=lambda t: t[0])[1] if found else None


_JUDGE_LETTER = re.compile(r"\b([A-Z])\b")


def from_judge(text: str | None, letters: tuple[str, ...], lenient: bool = False) -> str | None:
    """Stage 2: the judge's reply is a letter, or Z / anything else for no match (None: scored wrong, as
    the authors score it). The authors compare the raw reply with the gold (`eval_multi_choice`:
    `gold == pred`), so it counts only when it is exactly one of the letters: " B" or "B\n" is wrong there,
    and so here. `lenient` (ours, `--judge-parse lenient`) also reads those, "B." or "Answer: B". A failed
    judge call never reaches here: it is unscored (see score.py)."""
    if not lenient:
        return text if text in letters else None
    m = _JUDGE_LETTER.search(text or "")
    return m.group(1) if m and m.group(1) in letters else None


def random_letter(model: str, item: str, iteration: int, letters: tuple[str, ...]) -> str:
    """Stage 3: a letter that depends only on (model, question, iteration), never on call order."""
    h = hashlib.sha256(f"{model}\x1f{item}\x1f{iteration}".encode()).digest()
    return letters[int.from_bytes(h[:8], "big") % len(letters)]


def authors_rules(
    response: str | None, letters: tuple[str, ...], options: tuple[str, ...], absent: str | None = None
) -> str | None:
    """Stage 1 as the authors' parse_multi_choice_response behaves (utils/eval_utils.py), edge cases included,
    only to count the answers where `by_rules` reads otherwise (a recorded deviation; never used to score).

    Their edge cases: only punctuation is stripped, one character class after another, never whitespace;
    `X)`/`X.`/`X:` candidates are collected per punctuation mark, and with several the position list
    (three entries per candidate) is argmax'ed, an index past the candidates giving the last one collected;
    the text tier also tries `absent`, the printed first absent option cell ("None", "nan": their
    `get_options` keeps it in `index2ans`), which may be a letter that is not an option.
    """
    if response is None:
        return None
    r = response
    for ch in STRIP:
        r = r.strip(ch)
    r = " " + r + " "
    cands = [x for x in letters if f"({x})" in r]
    where: list[int] = [r.rfind(f"({x})") for x in cands]
    if not cands:
        cands = list(dict.fromkeys(x for ch in ").:" for x in letters if f"{x}{ch}" in r))
        where = [r.rfind(f"{x}{ch}") for ch in ").:" for x in cands]
    if not cands:
        cands = [x for x in letters if f" {x} " in r]
        where = [r.rfind(f" {x} ") for x in cands]
    if not cands and len(r.split()) > 5:
        texts = dict(zip(letters, options, strict=True))
        if absent is not None and len(letters) < len(ALL_LETTERS):
            texts[ALL_LETTERS[len(letters)]] = absent
        cands = [x for x, o in texts.items() if o.lower() in r.lower()]
        where = [r.lower().rfind(texts[x].lower()) for x in cands]
    if not cands:
        return None
    i = max(range(len(where)), key=lambda k: (where[k], -k))  # np.argmax: the first of equal maxima
    return cands[i] if i < len(cands) else cands[-1]


ALL_LETTERS = ("A", "B", "C", "D", "E", "F")
"""The authors' all_options: the letters `get_options` walks, so the one after the last option."""
