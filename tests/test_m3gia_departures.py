"""M3GIA: the departures from the authors' code that only the answers show, recorded when a run is scored:
stage-1 edge cases (counted against `authors_rules`, their parse_multi_choice_response as it behaves),
random letters seeded per item, failed calls left unscored, the text-only wrapper, the factor labels."""

from __future__ import annotations

from pathlib import Path

import pytest

from suites.base import RunSpec
from suites.m3gia import SUITE, deviations, extract
from suites.m3gia.departures import JUDGE_CODE, TEXT_ONLY
from tests.test_m3gia_scoring import _rows
from tests.test_m3gia_suite import make_parquet, spec

L4 = ("A", "B", "C", "D")
O4 = ("red circle", "blue square", "green triangle", "yellow star")


@pytest.mark.parametrize(
    ("text", "absent", "ours", "theirs"),
    [
        ("(B)", None, "B", "B"),  # (X) first
        ("(A) or rather (C)", None, "C", "C"),  # several (X): the last
        ("The answer is B.", None, "B", "B"),  # X. (the final '.' is stripped, 'B' then found as ' B ')
        ("C. no, B) no, A. yes", None, "A", "C"),  # their position list runs past the candidates: the last added
        ("A) is wrong, B. is right", None, "B", "B"),  # the same bookkeeping, here the same letter
        ("B\n", None, "B", None),  # they never strip whitespace: 'B\n' is no ' B '
        ("B.\n", None, "B", "B"),  # ... but 'B.' still matches X.
        ("B,.", None, "B", None),  # they strip ',' then '.' in turn: 'B,' is left, no candidate
        ("I would pick yellow star here", None, "D", "D"),  # option text, more than 5 words
        ("yellow star", None, None, None),  # option text in 5 words or fewer: unread by both
        ("I think none of the options is right here", "None", None, "E"),  # the printed absent (null) cell
        ("The financial district is the answer here", "nan", None, "E"),  # ... and a NaN cell, inside a word
        ("The financial district is the answer here", None, None, None),  # six options: no absent cell
        ("red circle or blue square, I am not sure", None, "B", "B"),  # several texts: the last
        ("", None, None, None),
        (None, None, None, None),
    ],
)
def test_authors_rules_edge_cases(text: str | None, absent: str | None, ours: str | None, theirs: str | None) -> None:
    """Hand-made cases for each rule of the authors' stage 1 (checked against their function itself on 200,000
    generated responses and the 316-answer corpus while writing it; their code is not part of this project)."""
    assert extract.by_rules(text, L4, O4) == ours
    assert extract.authors_rules(text, L4, O4, absent) == theirs


def test_ties_go_to_the_first_candidate_as_np_argmax() -> None:
    # 'B)' and 'B.' never coexist at one index; equal positions only arise from one text inside another
    assert extract.authors_rules("I would say it is the red one here", ("A", "B"), ("red", "red")) == "A"


def _score(tmp_path: Path, rows: list, **opts: object) -> tuple[dict, list[str]]:
    """The scored report and the deviations recorded at scoring, after those its options give before a run."""
    s = spec(tmp_path, languages="en", samples=2, **opts)
    rep = SUITE.score(rows, s, tmp_path)
    before, devs = deviations(s), rep.extra["protocol"]["deviations"]
    assert devs[: len(before)] == before
    return rep, devs[len(before) :]


def test_scoring_records_what_the_answers_show(tmp_path: Path) -> None:
    make_parquet(tmp_path, "en", ["1", "2", "16", "46"])  # 4 options each (the fixture's absent cell is null)
    rows = _rows(
        "m",
        {
            ("en/1", 0): "C. no, B) no, A. yes",  # ours A, theirs C
            ("en/2", 0): "I think none of the options is right here",  # ours unread -> judge; theirs E
            ("en/16", 0): RuntimeError("HTTP 500"),  # a failed answer
            ("en/46", 0): "I am not sure",  # unread -> its judge call failed
            ("en/1", 1): "D",
            ("en/2", 1): "D",
            ("en/16", 1): "D",  # en/46 iteration 1: missing
        },
        judges={("en/2", 0): "Z"},
    )
    rows.append({"model": "m", "item": "en/46", "sample": 0, "pass": "judge", "text": None, "error": "HTTP 429"})
    rep, devs = _score(tmp_path, rows, judge="gpt-4-turbo")
    m = rep.models["m"]
    assert m["rules_vs_authors"] == {"answers": 6, "differ": 2}
    assert m["failed_calls"] == {"answer": 1, "judge": 1} and m["stages"]["missing"] == 1
    by = {(r["item"], r["sample"]): r for r in rep.scored}
    assert by[("en/1", 0)]["extracted"] == "A"  # ours is what is scored
    assert by[("en/1", 0)]["authors_rule"] == "C" and by[("en/2", 0)]["authors_rule"] == "E"
    assert "authors_rule" not in by[("en/1", 1)]
    assert devs[0].startswith("stage-1 rules read some answers otherwise than the authors'") and "(m 2/6;" in devs[0]
    assert "theirs strips one mark after another: 'B,.' keeps its comma" in devs[0]  # each counted class named
    assert devs[1].startswith("failed calls are left unscored") and "m: answer call(s) 1, judge call(s) 1, missing 1" in devs[1]
    assert "a judge call that failed 10 times a random letter" in devs[1]
    assert devs[2:] == [TEXT_ONLY, devs[3]] and devs[3].startswith("CHC factor accuracies use the authors' released")
    assert not any(d.startswith("stage-3 random letters") for d in devs)  # with a judge, none were drawn
    main = rep.tables[0]
    assert f"Judge: gpt-4-turbo; {JUDGE_CODE}." in main.note
    assert rep.extra["judge_sources"]["authors_code"].startswith("gpt-3.5")


def test_clean_answers_record_only_what_holds_for_every_run(tmp_path: Path) -> None:
    make_parquet(tmp_path, "en", ["1", "2"])
    rows = _rows("m", {("en/1", 0): "D", ("en/2", 0): "(D)", ("en/1", 1): "D", ("en/2", 1): "not sure at all"})
    rep, devs = _score(tmp_path, rows)
    no_judge = rep.extra["protocol"]["deviations"][0]
    assert no_judge.startswith("no --judge:") and "seeded per model, question and iteration" in no_judge
    assert devs[0] == "stage-3 random letters (m 1) are seeded per (model, question, iteration); the authors draw " \
        "random.choice from one stream seeded 42, so theirs depend on the order of the calls"  # fmt: skip
    assert devs[1:] == [TEXT_ONLY, devs[2]] and devs[2].startswith("CHC factor accuracies")


def test_a_non_paper_judge_names_the_codes_too() -> None:
    [d] = deviations(RunSpec("m3gia", {"judge": "gpt-3.5-turbo"}))
    assert d == ("judge gpt-3.5-turbo (the paper: GPT-4-turbo, gpt-4-turbo-2024-04-09; the authors' released code "
                 'calls "gpt-3.5")')  # fmt: skip
