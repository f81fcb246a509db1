"""suites.api's scoring on hand-made cases: SC@k by majority (ties to the first given, unreadable answers
not voting, an item with none wrong), the samples' mean, a failed call never a wrong answer, the CI over
items (not rows), per pass and per category; shuffled choices fixed per item."""

from __future__ import annotations

import numpy as np

from suites.api import extract, score_items, shuffled
from suites.stats import ci_list


def _rows(answers: dict[str, list[str | None]], pass_: str = "answer") -> list[dict]:
    out = []
    for item, got in answers.items():
        for s, a in enumerate(got):
            err = "HTTP 500" if a == "ERR" else None
            out.append({"model": "m", "item": item, "sample": s, "pass": pass_, "error": err,
                        "error_kind": "transient" if err else None,
                        "text": None if err else (f"Answer: {a}" if a else "I cannot tell")})
    return out


GOLD = {"q1": "A", "q2": "B", "q3": "C", "q4": "D"}
ANSWERS = {"q1": ["A", "A", "B"], "q2": ["C", "B", "B"], "q3": ["A", "B", None], "q4": [None, None, "ERR"]}


def read(t):
    return extract(t, r"Answer: ([A-D])")


def test_majority_vote_over_items():
    rep = score_items(_rows(ANSWERS), GOLD, read, category={"q1": "x", "q2": "x", "q3": "y", "q4": "y"})
    m = rep.models["m"]
    # q1 A right; q2 B right (C first, B twice); q3 tie A/B -> A (first), wrong; q4 no readable vote: wrong
    assert m["accuracy"] == 0.5 and m["n"] == 4
    assert m["ci95"] == ci_list(np.array([1.0, 1.0, 0.0, 0.0]))
    assert m["accuracy[x]"] == 1.0 and m["accuracy[y]"] == 0.0
    failed = [r for r in rep.scored if r.get("error")]
    assert len(failed) == 1 and failed[0]["score"] is None  # a failed call is not a wrong answer


def test_the_mean_of_samples_and_a_second_pass():
    rows = _rows(ANSWERS) + _rows({"q1": ["A"], "q2": ["A"], "q3": ["C"], "q4": ["D"]}, "critique")
    m = score_items(rows, GOLD, read, passes=("answer", "critique"), vote=False).models["m"]
    assert abs(m["accuracy"] - np.mean([2 / 3, 2 / 3, 0, 0])) < 1e-12  # q4's answered samples: two, both wrong
    assert m["accuracy_critique"] == 0.75


def test_shuffled_choices_are_fixed_per_item():
    a = shuffled(["right", "w1", "w2", "w3"], 0, 7, "q1")
    assert a == shuffled(["right", "w1", "w2", "w3"], 0, 7, "q1")
    assert a[0]["ABCD".index(a[1])] == "right"
