"""The reference's answer extraction exactly (vrb-benchmark `src/vrb_benchmark/run.py::extract_answer`):
eight steps, first hit wins, with the reference's quirks kept so accuracies match the paper's.

Quirks kept on purpose (each changes some answers; `--extractor rules` in extract.py fixes them):
- the last resort builds a character class from "A|B|C|D", so it takes the last capital A-D *anywhere*
  ("Definitely" reads D) and can even return "|" (then scored wrong);
- step 5's first pattern needs "answeris"/"answer:" and anchors at the very end of the text; its second
  takes the first "answer is X" with X any case, so "the answer is a circle" reads A;
- labels in steps 5-6 are not bounded on the left in pattern 1 and step 5 upper-cases what it found only
  for alpha_upper option sets (as the reference keys casing on the option set's id).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_BOX_TOKEN = re.compile(r"<\|begin_of_box\|>(.*?)<\|end_of_box\|>", re.DOTALL)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _option_id(labels: Sequence[str]) -> str:
    """The reference passes the option set's id; ours are known by their labels (options.csv)."""
    if all(lab.isalpha() and lab.isupper() for lab in labels):
        return "alpha_upper"
    if all(lab.isalpha() and lab.islower() for lab in labels):
        return "alpha_lower"
    return "numeric"


def _cased(found: str, option_id: str) -> str:
    return found.upper() if option_id == "alpha_upper" else found.lower() if option_id == "alpha_lower" else found


def reference_step(response_text: str | None, labels: Sequence[str]) -> tuple[str | None, int]:
    """(answer, the step that found it), line for line as `extract_answer`; (None, 8) when nothing is read."""
    if not response_text:
        return None, 8
    valid = list(labels)
    oid = _option_id(valid)
    chars = "|".join(re.escape(a) for a in valid)

    last = response_text.strip().split("\n")[-1].strip()  # 1
    last = last.replace("*", "").replace("_", "").replace("$", "")
    if last in valid:
        return last, 1

    m = _BOX_TOKEN.search(last) or _BOX_TOKEN.search(response_text)  # 2
    if m and (c := _cased(m.group(1).strip(), oid)) in valid:
        return c, 2

    for box in (rf"\\boxed\{{({chars})\}}", rf"\$\\boxed\{{({chars})\}}\$"):  # 3
        if m := re.search(box, response_text):
            return m.group(1), 3

    m = _ANSWER_TAG.search(response_text)  # 4
    if m and m.group(1).strip() in valid:
        return m.group(1).strip(), 4

    for pat in (  # 5
        rf"(?:final\s+answer|answer|option)(?:\s*:|is\s*:?)\s*({chars})$",
        rf"(?:the\s+)?answer\s+is\s+({chars})",
    ):
        if m := re.search(pat, response_text, re.IGNORECASE):
            return _cased(m.group(1), oid), 5

    for a in valid:  # 6
        e = re.escape(a)
        for pat in (
            rf"\bfinal\s+answer\s*(?:is|:)\s*{e}\b",
            rf"\banswer\s*(?:is|:)\s*{e}\b",
            rf"\bsolution\s*(?:is|:)\s*{e}\b",
            rf"\bchoose\s*{e}\b",
            rf"\bselect\s*{e}\b",
            rf"\boption\s+{e}\s+is\s+correct\b",
            rf"\boption\s+{e}\b",
        ):
            if re.search(pat, response_text, re.IGNORECASE):
                return a, 6

    hits = re.findall(f"([{chars}])", re.sub(r"\$[^$]*\$", "", response_text))  # 7
    if hits:
        return hits[-1], 7
    return None, 8
