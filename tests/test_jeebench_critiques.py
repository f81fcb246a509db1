"""JEEBench self-critique (§4.4) reading: the rules against the hand-read answers of the authors' 191 released
critiques of the 515 (tests/data/extraction/jeebench/critiques.json), rules chosen on the dev half only; a
critique cut at its token limit states no new answer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from suites.base import RunSpec, Sink
from suites.jeebench import build, follow_up, score
from suites.jeebench.data import items_by_id
from suites.jeebench.devtools import critique_agreement
from suites.jeebench.extract import extract, extract_critique

LABELS = Path(__file__).parent / "data" / "extraction" / "jeebench" / "critiques.json"

# critiques of the dev half that restate the solution's answer in passing (responses_old.json, gpt-4-0314)
AFFIRMED = [
    ("2016-p2-4", "The given solution is correct, and the change in length of wire PQ is indeed 1.56 mm (option C). "
                  "The steps followed to arrive at the answer are logical and well-explained.", "C"),
    ("2017-p2-47", "The given solution is correct, and both options [A] and [C] are indeed the correct answers. The "
                   "function $f(x)$ approaches $0$ as $x$ approaches $1$ from both the left and the right.", "AC"),
    ("2018-p2-20", "The given solution is correct, and all the options (A), (B), (C), and (D) are indeed correct.",
     "ABCD"),
    ("2017-p2-42", "The given solution is correct, and the final answer is 125.", "C"),  # option "[C] 125"
]  # fmt: skip


@pytest.mark.parametrize("item,text,want", AFFIRMED)
def test_an_affirming_critique_names_its_answer(item: str, text: str, want: str) -> None:
    it = items_by_id()[item]
    assert extract(text, it.type, it.question) == want


def test_an_affirmation_that_calls_an_option_wrong_is_not_read_as_choosing_it() -> None:
    it = items_by_id()["2017-p2-47"]
    text = "The given solution is correct: option [A] is not correct and [C] is."
    assert extract(text, it.type, it.question) != "AC"


def test_a_cut_critique_gives_no_new_answer(tmp_path: Path) -> None:
    """25 of the authors' 200 critiques stop at 512 tokens mid-working; a reader finds no new answer there
    (the rules would read the working's letters: 2016-p2-47 read ACD). No judge is asked, and it scores 0."""
    it = items_by_id()["2016-p1-1"]
    working = "Let us check the options.\n(B) $6.4 \\times 10^{-34}$: substituting the data,"
    assert extract(working, it.type, it.question) == "B"
    assert extract_critique(working, it.type, it.question, "length") is None
    assert extract_critique(working, it.type, it.question, "stop") == "B"
    spec = RunSpec("jeebench", {"variant": "cot-critique", "judge": "sim/judge"}, limit=1)
    req = next(iter(build(spec))).model_copy(update={"model": "m"})
    ans = {"model": "m", "item": it.id, "sample": 0, "pass": "answer", "text": "The answer is (A)."}
    crit = {"model": "m", "item": it.id, "sample": 0, "pass": "critique", "text": working, "finish_reason": "length"}
    (creq,) = follow_up(req, ans, spec)
    assert follow_up(creq, crit, spec) == []  # nothing for a judge to read
    rep = score([ans, crit], spec, tmp_path, Sink())
    (row,) = rep.scored
    assert row["extracted"] is None and row["score"] == 0 and row["source"] == "critique"


def test_agreement_with_the_hand_read_critiques() -> None:
    """Tuning half, then the held-out half measured once after the rules were fixed (its misses not used):
    dev 80/89 → 87/89, held-out 94/102 → 97/102. JEEBENCH_RELEASES: cs678-jeebench's data/responses."""
    root = os.environ.get("JEEBENCH_RELEASES")
    path = Path(root or ".") / "GPT4_CoT_self_refine_responses" / "responses_old.json"
    if not root or not path.is_file():
        pytest.skip("JEEBENCH_RELEASES (cs678-jeebench's data/responses) not set")
    dev, held = critique_agreement(path, LABELS, "dev"), critique_agreement(path, LABELS, "heldout")
    assert dev[:2] == (87, 89) and held[:2] == (97, 102)
    assert dev[0] / dev[1] >= 0.95 and held[0] / held[1] >= 0.95
