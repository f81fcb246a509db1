"""JEEBench data, prompts, agreement with the authors' hand extracts on held-out responses, the
judge/critique follow-ups and how scoring uses them (the extractor's rules case by case:
tests/test_jeebench_rules.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.types import Request, text_of
from suites.base import RunSpec, SuiteError
from suites.jeebench import SUITE, build, follow_up
from suites.jeebench.data import item_id, items_by_id, load_few_shot, load_items
from suites.jeebench.devtools import agreement, load_dev
from suites.jeebench.devtools import main as devtools_main
from suites.jeebench.prompts import prompt


def test_data_ids_and_bad_input(tmp_path: Path) -> None:
    items = load_items()
    assert len(items) == 515 and len({it.id for it in items}) == 515
    assert items[0].id == "2016-p1-1" and items[0].gold == "B" and items[0].year == 2016
    assert item_id("JEE Adv 2023 Paper 2", 17) == "2023-p2-17"
    bad = tmp_path / "dataset.json"
    bad.write_text(
        json.dumps(
            [
                {
                    "description": "JEE Adv 2016 Paper 1",
                    "index": 1,
                    "subject": "bio",
                    "type": "MCQ",
                    "question": "q",
                    "gold": "A",
                }
            ]
        )
    )
    with pytest.raises(SuiteError, match=r"dataset.json: entry 0: field 'subject'"):
        load_items(tmp_path)
    bad.write_text(
        json.dumps(
            [
                {
                    "description": "Paper one",
                    "index": 1,
                    "subject": "phy",
                    "type": "MCQ",
                    "question": "q",
                    "gold": "A",
                }
            ]
        )
    )
    with pytest.raises(SuiteError, match="description"):
        load_items(tmp_path)


def test_normal_prompt_matches_the_authors_prompts(shared_data: Path) -> None:
    rows = load_dev(shared_data / "jeebench" / "dev_responses" / "text-davinci-003_normal.json")
    items = items_by_id()
    assert all(prompt(items[r["id"]], "normal") == r["prompt"] for r in rows)


def test_variant_prompts_and_decoding() -> None:
    it = items_by_id()["2016-p1-1"]
    q = it.question.replace("\n\n", "\n").strip()
    pre = "In this problem, only one option will be correct. Give a detailed solution and end the solution with the final answer."
    assert prompt(it, "cot") == pre + "\n\nProblem: " + q + "\nSolution: Let's think step by step."
    exam = (
        "If the answer is wrong, you'll be given -1 marks. If the answer is correct, you'll be given +3 marks. "
        "If you're unsure of the answer, you can skip the question, and you'll be given 0 marks."
    )
    assert (
        prompt(it, "cot-exam")
        == pre + " " + exam + "\n\nProblem: " + q + "\nSolution: Let's think step by step."
    )
    reqs = {
        v: next(iter(build(RunSpec("jeebench", {"variant": v})))) for v in ("normal", "cot-1shot", "cot-sc")
    }
    ex = load_few_shot()["phy"]["MCQ"]
    one_shot = pre + "\n\nProblem: " + ex["problem"] + "\nSolution: " + ex["solution"] + "\n\nProblem: " + q
    assert text_of(reqs["cot-1shot"].messages[1].content) == one_shot + "\nSolution:"
    assert reqs["normal"].decoding.temperature == 0.0 and reqs["normal"].decoding.max_tokens == 2048
    # inference.py: [{"role": "system", "content": ""}, {"role": "user", ...}]
    assert [(m.role, m.content) for m in reqs["normal"].messages[:1]] == [("system", "")]
    assert [m.role for m in reqs["normal"].messages] == ["system", "user"]
    assert (reqs["cot-sc"].decoding.n, reqs["cot-sc"].decoding.temperature) == (8, 0.5)
    spec = RunSpec("jeebench", {"variant": "cot-sc"}, samples=3, temperature=0.7)
    assert next(iter(build(spec))).decoding.n == 3
    assert all(
        r.meta["type"] in ("MCQ", "MCQ(multiple)")
        for r in build(RunSpec("jeebench", {"variant": "cot-exam"}))
    )
    with pytest.raises(SuiteError, match="--tau-single"):
        SUITE.check(RunSpec("jeebench", {"tau_single": 1.5}))  # type: ignore[misc]


def _row(req: Request, text: str | None, pass_: str = "answer", error: str | None = None) -> dict:
    return {
        "model": "m",
        "suite": "jeebench",
        "item": req.item,
        "sample": req.sample,
        "pass": pass_,
        "text": text,
        "error": error,
    }


def test_follow_up_critique_then_judge_terminates() -> None:
    spec = RunSpec("jeebench", {"variant": "cot-critique", "judge": "sim/judge"})
    req = next(iter(build(spec))).model_copy(update={"model": "m"})
    hedge = "I am not able to determine the final answer with certainty."
    out = follow_up(req, _row(req, hedge), spec)
    assert [r.pass_ for r in out] == ["critique", "judge"]
    crit, judge = out
    assert crit.messages[0].role == "system" and crit.messages[0].content == ""
    assert text_of(crit.messages[1].content).endswith(
        hedge + "\n-----------\nFind any problems(if any) with the given solution. If there are any errors, "
        "correct it and give the new answer."  # the authors' released critique prompts
    )
    assert judge.via == "sim/judge" and judge.model == "m"
    assert [r.pass_ for r in follow_up(crit, _row(crit, hedge, "critique"), spec)] == ["critique-judge"]
    assert follow_up(judge, _row(judge, "B", "judge"), spec) == []
    assert follow_up(req, _row(req, None, error="HTTP 500"), spec) == []
    assert (
        follow_up(req, _row(req, "The correct answer is (B)."), RunSpec("jeebench", {"variant": "cot"})) == []
    )


def test_score_uses_critique_and_judge_and_counts_errors(tmp_path: Path) -> None:
    spec = RunSpec("jeebench", {"variant": "cot-critique"})
    rows = [
        # 2016-p1-1 (gold B): the critique corrects the answer
        {
            "model": "m",
            "item": "2016-p1-1",
            "sample": 0,
            "pass": "answer",
            "text": "The answer is (A).",
            "error": None,
        },
        {
            "model": "m",
            "item": "2016-p1-1",
            "sample": 0,
            "pass": "critique",
            "text": "Fixed: the answer is (B).",
            "error": None,
        },
        # 2016-p1-2 (gold D): the critique gives no answer; the paper re-evaluates the new answer: none
        {
            "model": "m",
            "item": "2016-p1-2",
            "sample": 0,
            "pass": "answer",
            "text": "The answer is (D).",
            "error": None,
        },
        {
            "model": "m",
            "item": "2016-p1-2",
            "sample": 0,
            "pass": "critique",
            "text": "The solution is fine.",
            "error": None,
        },
        # 2016-p1-14 (gold 9): unreadable by the rules, read by the judge
        {
            "model": "m",
            "item": "2016-p1-14",
            "sample": 0,
            "pass": "answer",
            "text": "I'd say nine.",
            "error": None,
        },
        {"model": "m", "item": "2016-p1-14", "sample": 0, "pass": "judge", "text": "9", "error": None},
        # 2016-p1-15: a failed call is not a wrong answer: scored None with its kind, never dropped
        {
            "model": "m",
            "item": "2016-p1-15",
            "sample": 0,
            "pass": "answer",
            "text": None,
            "error": "timeout",
            "error_kind": "timeout",
        },  # fmt: skip
        # 2016-p1-16: unreadable by the rules and the judge call failed: not read, so not scored either
        {"model": "m", "item": "2016-p1-16", "sample": 0, "pass": "answer", "text": "Hmm.", "error": None},
        {
            "model": "m",
            "item": "2016-p1-16",
            "sample": 0,
            "pass": "judge",
            "text": None,
            "error": "HTTP 500",
            "error_kind": "server",
        },  # fmt: skip
    ]
    rep = SUITE.score(rows, spec, tmp_path)
    by = {r["item"]: r for r in rep.scored}
    assert (by["2016-p1-1"]["extracted"], by["2016-p1-1"]["source"], by["2016-p1-1"]["score"]) == (
        "B",
        "critique",
        1.0,
    )
    assert (by["2016-p1-2"]["extracted"], by["2016-p1-2"]["source"], by["2016-p1-2"]["score"]) == (
        None,
        "critique",
        0.0,
    )
    assert (by["2016-p1-14"]["extracted"], by["2016-p1-14"]["stage"], by["2016-p1-14"]["score"]) == (
        "9",
        "judge",
        1.0,
    )
    assert by["2016-p1-15"]["extracted"] is None and by["2016-p1-15"]["errors"] == 1
    assert (by["2016-p1-15"]["score"], by["2016-p1-15"]["error_kind"]) == (None, "timeout")
    assert (by["2016-p1-16"]["score"], by["2016-p1-16"]["error_kind"]) == (None, "server")
    s = rep.models["m"]
    # 1 and 14 right, 2 wrong (the critique gave no answer); 15 and 16 failed calls: not in n
    assert s["overall"] == pytest.approx(2 / 3) and s["n"] == 3 and s["critique_used"] == 2
    assert s["marks"] == {"positive": 6.0, "negative": 0.0, "total": 6.0}


HELD_OUT = range(2022, 2024)  # never looked at while the rules were written (tuned on 2016-2021)


def test_extractor_agreement_on_held_out_years(shared_data: Path) -> None:
    """>= 95% agreement with the authors' hand extracts on the held-out years (both response sets
    together; each set alone >= 94%)."""
    tot_ok = tot = 0
    for f in sorted((shared_data / "jeebench" / "dev_responses").glob("*.json")):
        rows = [r for r in load_dev(f) if r["year"] in HELD_OUT]
        ok, n, _ = agreement(rows)
        assert n > 100 and ok / n >= 0.94, (f.name, ok, n)
        tot_ok, tot = tot_ok + ok, tot + n
    assert tot_ok / tot >= 0.95, (tot_ok, tot)


def test_devtools_replay_file(shared_data: Path, tmp_path: Path) -> None:
    src = shared_data / "jeebench" / "dev_responses" / "gpt-3.5-turbo-0301_normal.json"
    out = tmp_path / "r.jsonl"
    devtools_main(["replay", str(src), str(out)])
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 515 and lines[0]["item"] == "2016-p1-1"
    assert all(set(x) == {"item", "sample", "pass", "text"} and x["pass"] == "answer" for x in lines)


def test_suite_flags_reach_spec_options() -> None:
    import argparse

    p = argparse.ArgumentParser()
    SUITE.add_arguments(p)
    ns = vars(
        p.parse_args(
            ["--variant", "cot-sc", "--judge", "gpt-x", "--tau-single", "0.25", "--tau-multiple", "0.75"]
        )
    )
    assert {k: ns[k] for k in ("variant", "judge", "tau_single", "tau_multiple")} == {
        "variant": "cot-sc",
        "judge": "gpt-x",
        "tau_single": 0.25,
        "tau_multiple": 0.75,
    }
    assert SUITE.name == "jeebench" and SUITE.headline == "overall"
    assert SUITE.run_name(RunSpec("jeebench", {})) == "jeebench-cot"
