"""JEEBench scoring rules, marks, self-consistency, calibration and thresholding on hand-made cases,
plus the regression check against the authors' hand extracts."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from suites.base import RunSpec, Sink, SuiteError
from suites.jeebench import score
from suites.jeebench.data import load_items
from suites.jeebench.devtools import load_dev, replay_scores
from suites.jeebench.extract import parse_answer
from suites.jeebench.metrics import (
    Marks,
    aggregate,
    mark_totals,
    marks_for,
    option_shares,
    score_answer,
    self_consistency,
)
from suites.jeebench.paper import FIG7, REPLAY
from suites.jeebench.report import best_tau, calibration, thresholding


@pytest.mark.parametrize(
    ("gold", "ans", "qtype", "want"),
    [
        ("B", "B", "MCQ", 1.0),
        ("B", "C", "MCQ", 0.0),
        ("B", None, "MCQ", 0.0),
        ("ABD", "ABD", "MCQ(multiple)", 1.0),
        ("ABD", "AB", "MCQ(multiple)", 0.5),  # strict subset: 0.25 per letter
        ("ABD", "D", "MCQ(multiple)", 0.25),
        ("ABD", "ABC", "MCQ(multiple)", 0.0),  # any wrong letter
        ("ABD", "ABCD", "MCQ(multiple)", 0.0),
        ("ABD", None, "MCQ(multiple)", 0.0),
        ("9", 9.0, "Integer", 1.0),
        ("9", 10.0, "Integer", 0.0),
        ("9", None, "Integer", 0.0),
        ("0.5", 0.51, "Numeric", 1.0),  # rules: <= 0.01 with slack (reference: strict floats, 0)
        ("0.5", 0.49, "Numeric", 1.0),
        ("0.5", 0.5101, "Numeric", 0.0),
        ("-14.6", -14.6, "Numeric", 1.0),
        ("-14.6", 14.6, "Numeric", 0.0),
    ],
)
def test_score_rules(gold: str, ans: object, qtype: str, want: float) -> None:
    assert score_answer(gold, ans, qtype, "rules") == want  # type: ignore[arg-type]


def test_marks_rules_and_totals() -> None:
    m = Marks()
    assert marks_for("B", "B", "MCQ", m) == 3 and marks_for("B", "A", "MCQ", m) == -1
    assert marks_for("B", None, "MCQ", m) == 0
    assert marks_for("ABD", "ABD", "MCQ(multiple)", m) == 4
    assert marks_for("ABD", "AD", "MCQ(multiple)", m) == 2  # +1 per correct letter, no wrong one
    assert marks_for("ABD", "AC", "MCQ(multiple)", m) == -2
    assert marks_for("ABD", None, "MCQ(multiple)", m) == 0
    assert marks_for("7", 7.0, "Integer", m) == 3 and marks_for("7", 8.0, "Integer", m) == 0
    assert marks_for("2.5", 2.5, "Numeric", m) == 3 and marks_for("2.5", 3.0, "Numeric", m) == 0
    custom = Marks.parse("mcq_wrong=-2, numeric_wrong=-1")
    assert marks_for("B", "A", "MCQ", custom) == -2 and marks_for("2.5", 3.0, "Numeric", custom) == -1
    assert mark_totals([3, -1, 4, -2, 0]) == {"positive": 7.0, "negative": -3.0, "total": 4.0}
    with pytest.raises(SuiteError, match="unknown key"):
        Marks.parse("mcq_bogus=1")
    with pytest.raises(SuiteError, match="not a number"):
        Marks.parse("mcq_wrong=x")


def test_self_consistency_rules() -> None:
    # majority among non-None; None casts no vote
    assert self_consistency(["A", "B", "B", None, None, None], "MCQ") == "B"
    # ties (the paper is silent): as the authors' get_aggregate, the first letter A-D / the smallest value
    assert self_consistency(["C", "A", "A", "C"], "MCQ") == "A"
    assert self_consistency(["D", "B", "B", "D", None], "MCQ") == "B"
    assert self_consistency([7.0, 3.5, 7.0, 3.5], "Numeric") == 3.5
    assert self_consistency([None, None], "MCQ", extractor="rules") is None
    assert self_consistency([None, None], "MCQ") == "A"  # reference: the authors' argmax over zeros
    # numbers compared by value, not string
    assert self_consistency([2.0, 3.0, 2.0, 3.0, 3.0], "Integer") == 3.0
    assert (
        self_consistency([parse_answer("2", "Numeric"), parse_answer("2.00", "Numeric"), 3.0], "Numeric")
        == 2.0
    )
    assert self_consistency([None, 1.5, None], "Numeric") == 1.5
    # tau_single: the winner's share counts None answers in n; share == tau is kept
    assert self_consistency(["A", "A", None, None], "MCQ", tau_single=0.5) == "A"
    assert self_consistency(["A", "A", None, None, "B"], "MCQ", tau_single=0.5) is None
    # MCQ(multiple): letters with share >= tau_multiple
    answers = ["AB", "A", "ABD", None]
    assert option_shares(answers) == {"A": 0.75, "B": 0.5, "C": 0.0, "D": 0.25}
    assert self_consistency(answers, "MCQ(multiple)") == "AB"  # default 0.5: B at exactly 0.5 is in
    assert self_consistency(answers, "MCQ(multiple)", tau_multiple=0.75) == "A"
    assert self_consistency(answers, "MCQ(multiple)", tau_multiple=0.8) is None
    assert self_consistency(answers, "MCQ(multiple)", tau_multiple=0.25) == "ABD"
    assert self_consistency(answers, "MCQ(multiple)", tau_multiple=0.0) == "ABCD"  # share >= 0 always


def test_aggregate_plain_means() -> None:
    rows = [
        {"score": 1.0, "subject": "phy", "type": "MCQ"},
        {"score": 0.25, "subject": "phy", "type": "MCQ(multiple)"},
        {"score": 0.0, "subject": "chem", "type": "MCQ"},
        {"score": 1.0, "subject": "math", "type": "Numeric"},
    ]
    a = aggregate(rows)
    assert a["overall"] == pytest.approx(2.25 / 4)
    assert a["by_subject"] == pytest.approx({"chem": 0.0, "math": 1.0, "phy": 0.625})
    assert a["by_type"] == pytest.approx({"MCQ": 0.5, "MCQ(multiple)": 0.25, "Numeric": 1.0})


def test_calibration_bins_mce_ace() -> None:
    conf = np.array([0.05, 0.05, 0.35, 0.35, 1.0, 1.0, 0.1])
    ok = np.array([0, 1, 1, 1, 1, 0, 0], dtype=float)
    cal = calibration(conf, ok)
    by = {b["bin"]: b for b in cal["bins"]}
    assert set(by) == {0, 1, 3, 9}  # 0.1 falls in [0.1, 0.2); 1.0 in the last bin
    assert by[0]["gap"] == pytest.approx(0.45) and by[1]["gap"] == pytest.approx(0.1)
    assert by[3]["gap"] == pytest.approx(0.65) and by[9]["gap"] == pytest.approx(0.5)
    assert cal["MCE"] == pytest.approx(0.65)
    assert cal["ACE"] == pytest.approx((0.45 + 0.1 + 0.65 + 0.5) / 4)


def test_thresholding_picks_validation_best_and_reports_test_years() -> None:
    # validation: a confident right MCQ and a split wrong one; skipping the split one pays (-1 → 0)
    qs = [
        {"year": 2016, "type": "MCQ", "gold": "A", "answers": ["A"] * 8},
        {"year": 2017, "type": "MCQ", "gold": "A", "answers": ["B"] * 3 + ["C"] * 2 + ["D"] * 3},
        {"year": 2018, "type": "MCQ(multiple)", "gold": "AB", "answers": ["AB"] * 4 + ["ABC"] * 4},
        {"year": 2023, "type": "MCQ", "gold": "D", "answers": ["C"] * 3 + ["D"] * 2 + ["A"] * 3},
        {"year": 2022, "type": "MCQ(multiple)", "gold": "AB", "answers": ["ABC"] * 4 + ["AB"] * 4},
        {"year": 2022, "type": "Integer", "gold": "5", "answers": [5.0] * 8},  # not in Table 6
    ]
    th = thresholding(qs, Marks())
    # Fig. 7, validation years, each type along its own threshold: the split MCQ costs -1 up to 3/8; the
    # MCQ(multiple) has C (0.5) in up to 0.5 (-2), then AB (+4)
    fig7 = th["fig7"]
    assert [r[0] for r in fig7["MCQ"]] == [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0]
    assert [r[1:] for r in fig7["MCQ"]] == [[3.0, -1.0, 2.0]] * 4 + [[3.0, 0.0, 3.0]] * 5
    assert [r[1:] for r in fig7["MCQ(multiple)"]] == [[0.0, -2.0, -2.0]] * 5 + [[4.0, 0.0, 4.0]] * 4
    # ties: the middle of the tied thresholds (0.5-1.0 → 0.75; 0.625-1.0 → the lower middle, 0.75)
    assert th["tau_single"] == 0.75 and th["tau_multiple"] == 0.75
    assert th["validation_marks"] == {"positive": 7.0, "negative": 0.0, "total": 7.0}
    t = th["test"]  # Table 6: the MCQ types of 2022-2023 only
    assert th["test_questions"] == 2
    assert t["cot_sc"] == {"positive": 0.0, "negative": -3.0, "total": -3.0}  # A wrong (-1), ABC wrong (-2)
    assert t["cot_sc_thresholding"] == {"positive": 4.0, "negative": 0.0, "total": 4.0}  # MCQ skipped, AB
    assert t["single_sample"] == {"positive": 0.0, "negative": -3.0, "total": -3.0}
    every = th["test_all_types"]  # the Integer's +3 counts only here
    assert every["cot_sc"]["total"] == 0.0 and every["single_sample"]["total"] == 0.0
    assert every["cot_sc_thresholding"] == {"positive": 7.0, "negative": 0.0, "total": 7.0}
    # §4.6 on the 2023 questions: skipped at the tuned 0.75; at the paper's 0.125 A (3/8) is answered, wrong
    assert th["exam_2023"] == {"total": 0.0, "questions": 1, "paper_tau": -1.0}
    # the curve: validation totals along tau_single (tau_multiple 0.75) and tau_multiple (tau_single 0.75)
    curve = th["curve"]
    assert [v for _, v in curve["tau_single"]] == [6.0] * 4 + [7.0] * 5
    assert [v for _, v in curve["tau_multiple"]] == [1.0] * 5 + [7.0] * 4
    # the authors' per-type plots, every year: MCQ along tau_single (the two split ones -1 each up to 3/8),
    # MCQ(multiple) along tau_multiple (C at 0.5 is in up to 0.5: -2 twice; then AB twice: +8)
    by = th["by_type"]
    assert [r[1:] for r in by["MCQ"]] == [[3.0, -2.0, 1.0]] * 4 + [[3.0, 0.0, 3.0]] * 5
    assert [r[1:] for r in by["MCQ(multiple)"]] == [[0.0, -4.0, -4.0]] * 5 + [[8.0, 0.0, 8.0]] * 4


def test_tie_rule_gives_the_papers_optimum_on_the_authors_curves() -> None:
    """The authors' released marks_dump (GPT-4 CoT+SC; cs678-jeebench data/responses/GPT4_CoT+SC_responses/
    marks_dump/{positive,negative}_marks_τ.json, 0.99 standing for 1.0): positive minus negative marks per type.
    The single-correct curve is flat at 185 from 0 to 0.25; the paper's optimum is 0.125 and 0.75 (Fig. 7)."""
    grid = [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0]
    pos_s, neg_s = [208, 208, 208, 196, 172, 136, 100, 76, 48], [23, 23, 23, 23, 20, 12, 10, 8, 3]
    pos_m, neg_m = [4, 151, 208, 249, 289, 294, 279, 243, 188], [350, 270, 228, 192, 138, 104, 86, 58, 32]
    single = [[t, p, -n, p - n] for t, p, n in zip(grid, pos_s, neg_s, strict=True)]
    multiple = [[t, p, -n, p - n] for t, p, n in zip(grid, pos_m, neg_m, strict=True)]
    assert [r[3] for r in single[:3]] == [185, 185, 185]
    assert (best_tau(single), best_tau(multiple)) == (FIG7["tau_single"], FIG7["tau_multiple"]) == (0.125, 0.75)
    # the middle of a tie: odd and even counts; a unique maximum wins outright
    assert best_tau([[0.0, 0, 0, 1], [0.5, 0, 0, 1], [1.0, 0, 0, 0]]) == 0.0
    assert best_tau([[0.0, 0, 0, 0], [0.5, 0, 0, 2], [1.0, 0, 0, 1]]) == 0.5


EXPECTED = {
    "text-davinci-003_normal.json": {
        "chem": 0.135,
        "math": 0.107,
        "phy": 0.134,
        "Integer": 0.049,
        "MCQ": 0.291,
        "MCQ(multiple)": 0.133,
        "Numeric": 0.015,
        "overall": 0.122,
    },
    "gpt-3.5-turbo-0301_normal.json": {
        "chem": 0.228,
        "math": 0.146,
        "phy": 0.173,
        "Integer": 0.073,
        "MCQ": 0.318,
        "MCQ(multiple)": 0.249,
        "Numeric": 0.029,
        "overall": 0.177,
    },
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_regression_authors_extracts(shared_data: Path, name: str) -> None:
    rows = load_dev(shared_data / "jeebench" / "dev_responses" / name)
    scored = [
        {
            "score": score_answer(r["gold"], parse_answer(r["extract"], r["type"]), r["type"]),
            "subject": r["subject"],
            "type": r["type"],
        }
        for r in rows
    ]
    a = aggregate(scored)
    got = {**a["by_subject"], **a["by_type"], "overall": a["overall"]}
    assert {k: round(v, 3) for k, v in got.items()} == EXPECTED[name]


REPLAY_FILES = {"GPT-3": "text-davinci-003_normal.json", "GPT-3.5": "gpt-3.5-turbo-0301_normal.json"}


@pytest.mark.parametrize("name", list(REPLAY))
def test_replay_rows_are_our_protocol_on_the_released_responses(name: str, shared_data: Path) -> None:
    """paper.REPLAY, each row recomputed: the authors' released responses through our rules and scorer. GPT-3
    and GPT-3.5 from ../shared (the authors' dev sets); the GPT-4 sets with JEEBENCH_RELEASES (cs678-jeebench's
    data/responses, not bundled)."""
    variant, folder, vals, unread = REPLAY[name]
    if name in REPLAY_FILES:
        path = shared_data / "jeebench" / "dev_responses" / REPLAY_FILES[name]
    else:
        root = os.environ.get("JEEBENCH_RELEASES")
        path = Path(root or ".") / folder / "responses.json"
        if not root or not path.is_file():
            pytest.skip("JEEBENCH_RELEASES (cs678-jeebench's data/responses) not set")
    s = replay_scores(path, variant)
    got = [s["by_subject"][c] for c in ("chem", "math", "phy")] + [
        s["by_type"][c] for c in ("Integer", "MCQ", "MCQ(multiple)", "Numeric")] + [s["overall"]]  # fmt: skip
    assert [round(v, 3) for v in got] == list(vals) and s["unread"] == unread and s["n"] == 515


def test_table2_prints_the_gap_and_the_replay_row(tmp_path: Path) -> None:
    """Ours − the paper's GPT-4 row of the method on each of our rows; the replay rows' gap is against the
    paper's row of the same released responses (the protocol's part of the gap)."""
    items = load_items()[:20]
    rows = [{"model": "m", "item": it.id, "sample": 0, "pass": "answer", "text": f"Final answer: {it.gold}"}
            for it in items]  # fmt: skip
    t2 = score(rows, RunSpec("jeebench", {"variant": "normal"}, limit=20), tmp_path, Sink()).tables[0]
    g = t2.columns.index("gap")
    by = {r[0]: r for r in t2.rows}
    o = t2.columns.index("overall")
    assert by["m"][g] == round(by["m"][o] - 0.309, 3) and by["m"][o] > 0  # against the paper's GPT-4 (0.309)
    assert by["paper: GPT-4"][g] is None
    assert by["replay: GPT-3.5 (released, 58 unread)"][g] == round(0.178 - 0.177, 3)
    assert by["replay: GPT-4 (released, 49 unread)"][g] == round(0.308 - 0.309, 3)
    assert "gap" in t2.key and "the protocol's alone" in t2.note
