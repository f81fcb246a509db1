"""JEEBench data, prompts, the rule extractor on tricky responses, agreement with the authors' hand
extracts on held-out responses, the judge/critique follow-ups and how scoring uses them."""

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
from suites.jeebench.extract import extract, parse_judge
from suites.jeebench.prompts import prompt

FALSE_Q = "Which of the following statement(s) is(are) FALSE?\n(A) x\n(B) y\n(C) z\n(D) w"


@pytest.mark.parametrize(
    ("text", "qtype", "question", "want"),
    [
        ("Therefore, the correct answer is (B) $6.4 \\times 10^{-34}$.", "MCQ", None, "B"),
        ("Hence, the correct option is $\\boxed{\\textbf{(C)}}$.", "MCQ", None, "C"),
        ("The answer is [A] 58001 bar.", "MCQ", None, "A"),
        (
            "Option (A) is wrong. Option (C) is correct.\nOption (D) is incorrect because of X.",
            "MCQ",
            None,
            "C",
        ),
        ("So the answer is (B) or (C).", "MCQ", None, None),  # several letters for a single-correct MCQ
        ("The answer is (E).", "MCQ", None, None),  # outside A-D
        ("After checking, none of the options are correct.", "MCQ", None, None),
        ("I'm sorry, but I cannot solve this problem.", "MCQ", None, None),
        (
            "First I thought (A). The correct answer is (B).\nOn reflection, the final answer is (D).",
            "MCQ",
            None,
            "D",
        ),
        ("Therefore, the correct options are (A), (B), and (D).", "MCQ(multiple)", None, "ABD"),
        ("The answer is $\\boxed{ABD}$.", "MCQ(multiple)", None, "ABD"),
        ("Final Answer: A, B and D", "MCQ(multiple)", None, "ABD"),
        ("Hence, the correct options are A, B, and C.", "MCQ(multiple)", None, "ABC"),
        ("Options (A) and (C) are true, and options (B) and (D) are false.", "MCQ(multiple)", None, "AC"),
        ("Therefore, all options (A), (B), (C), and (D) are correct.", "MCQ(multiple)", None, "ABCD"),
        (
            "Therefore, all the given expressions for $l$ are dimensionally correct.",
            "MCQ(multiple)",
            None,
            "ABCD",
        ),
        ("Hence, the FALSE statement(s) is (are) (A).", "MCQ(multiple)", FALSE_Q, "A"),
        (
            "(A) is false. (B) is true. (C) is true. (D) is true.\nSo only (A) is false.",
            "MCQ(multiple)",
            FALSE_Q,
            "A",
        ),
        ("The final answers are:\n(A) False\n(B) True\n(C) True\n(D) Not given", "MCQ(multiple)", None, "BC"),
        (
            "In conclusion, the correct options are $\\boxed{\\textbf{(A)}}$ and $\\boxed{\\textbf{(B)}}$.",
            "MCQ(multiple)",
            None,
            "AB",
        ),
        (
            "(A) is correct.\n(B) is incorrect.\n(C) is correct.\nTherefore, option (D) is incorrect.",
            "MCQ(multiple)",
            None,
            "AC",
        ),
        ("Therefore, the answer is 3.", "Integer", None, 3.0),
        ("the value displayed is $\\boxed{5}$.", "Integer", None, 5.0),
        (
            "So the maximum kinetic energy is $\\boxed{9.009 \\mathrm{MeV}}$.",
            "Integer",
            None,
            None,
        ),  # not an integer
        ("Therefore, the value of $6(\\alpha + \\beta)$ is undefined.", "Integer", None, None),
        ("Final Answer: 6.00 s", "Numeric", None, 6.0),
        ("Therefore, the height is $h=2.88$ m.\n\nFinal Answer: 2.88 m", "Numeric", None, 2.88),
        ("Final answer: $\\mathbf{Y} = 10^{-5}$", "Numeric", None, 1e-5),
        ("Final Answer: $2.08 \\times 10^{3} \\mathrm{~L}$", "Numeric", None, 2080.0),
        (
            "we must have $\\frac{b}{a}=\\boxed{\\frac{\\sqrt{3}}{2}}$.",
            "Numeric",
            None,
            pytest.approx(0.8660254),
        ),
        ("Therefore, the final answer is $\\boxed{n+1}$.", "Numeric", None, None),
        ("The final answer is: $K = 0.36(0.9 - x)^2$", "Numeric", None, None),
        (
            "Therefore, the depression of freezing point is $0.84 \\mathrm{~K}$ (rounded to 2 decimal places).",
            "Numeric",
            None,
            0.84,
        ),
        (
            "Hence, the frequency heard when the two men are $10 \\mathrm{~m}$ apart is 33 Hz.",
            "Numeric",
            None,
            33.0,
        ),
        ("The ratio of anions to cations is 6:1.\nFinal answer: $\\boxed{6:1}$", "Numeric", None, 6.0),
        ("I am not able to determine the final answer with certainty.", "Numeric", None, None),
        ("", "Numeric", None, None),
    ],
)
def test_extract_tricky(text: str, qtype: str, question: str | None, want: object) -> None:
    assert extract(text, qtype, question) == want


@pytest.mark.parametrize(
    ("reply", "qtype", "want"),
    [
        ("B", "MCQ", "B"),
        ("Answer: (C)", "MCQ", "C"),
        ("AC", "MCQ", None),
        ("ACD", "MCQ(multiple)", "ACD"),
        ("None", "MCQ(multiple)", None),
        ("E", "MCQ(multiple)", None),
        ("12", "Integer", 12.0),
        ("1.5", "Integer", None),
        ("0.25", "Numeric", 0.25),
        ("no idea", "Numeric", None),
    ],
)
def test_parse_judge(reply: str, qtype: str, want: object) -> None:
    assert parse_judge(reply, qtype) == want


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
    assert text_of(reqs["cot-1shot"].messages[0].content) == one_shot + "\nSolution:"
    assert reqs["normal"].decoding.temperature == 0.0 and reqs["normal"].decoding.max_tokens == 2048
    assert len(reqs["normal"].messages) == 1 and reqs["normal"].messages[0].role == "user"
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
    assert text_of(crit.messages[0].content).endswith(
        hedge + "\n\nFind problems(if any) with the given solutions. If there are any errors, "
        "correct it and give the new answer."  # §4.4's text
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


def test_math_evaluator_is_bounded() -> None:
    from suites.jeebench.mathexpr import evaluate, latex_to_python

    assert evaluate(latex_to_python("\\frac{\\sqrt{3}}{2}")) == pytest.approx(0.8660254)
    assert evaluate("2*sqrt(2)+2*pi-6") == pytest.approx(3.1116124)
    assert evaluate("10**(9**9)") is None  # a runaway exponent from a model's answer is refused
    assert evaluate("(1)/(0)") is None and evaluate("(-18)**((1)/(3))") is None
    assert evaluate("__import__('os')") is None


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


# --- #19: rules widened for unseen model families (each case hand-made) ----------------------------------

Q_VALUES = r"What is $x$? (A) $2$ (B) $\frac{9}{2}$ (C) $6$ (D) $8$"


@pytest.mark.parametrize(
    "text,qtype,question,want",
    [
        (r"Thus $\boxed{\frac{1}{2}}$", "Numeric", None, 0.5),
        (r"So the frequency is $\boxed{0.76 \mathrm{~Hz}}$", "Numeric", None, 0.76),
        ("The answer is 3 if b = 1.\nHence, the value of X is -6.6.", "Numeric", None, -6.6),
        ("We solve it.\nThe frequency of beats heard by the man is 2.86 Hz.", "Numeric", None, 2.86),
        ("Steps.\nx = 6.3 m", "Numeric", None, 6.3),
        (r"Therefore the number of elements is $14180$, which is the final answer.", "Numeric", None, 14180.0),
        (r"The correct option is $[\mathrm{D}]$", "MCQ", None, "D"),
        (r"Therefore the final answer is $[\mathrm{B}, \mathrm{D}]$", "MCQ(multiple)", None, "BD"),
        ("So the answer is 4.5.", "MCQ", Q_VALUES, "B"),  # a value equal to one option's value
        ("So the answer is 5.", "MCQ", Q_VALUES, None),  # equal to no option
        ("This corresponds to option (A).", "MCQ", None, "A"),
        ("The final answer is 380. (A)", "MCQ", None, "A"),
        # answers that are nothing but the answer ("normal" prompt)
        ("A, C, and D are correct.", "MCQ(multiple)", None, "ACD"),
        ("(A), (C) and (D)", "MCQ(multiple)", None, "ACD"),
        ("[B] 198", "MCQ", None, "B"),
        ("C) 12096", "MCQ", None, "C"),
        ("B. Cu metal and conc. $\\mathrm{HNO}_{3}$", "MCQ", None, "B"),
        ("(A) Chemisorption gives one layer.\n(D) Lowering the temperature favours it.", "MCQ(multiple)", None, "AD"),
        ("A and D", "MCQ", None, None),  # two letters are no single-correct answer
        ("3.75", "Numeric", None, 3.75),
        ("N = 8", "Integer", None, 8.0),
        ("1.25e-2", "Numeric", None, 0.0125),
        ("0.056 M", "Numeric", None, 0.056),
        ("2.5", "Integer", None, None),  # not an integer
    ],
)
def test_widened_rules(text: str, qtype: str, question: str | None, want: object) -> None:
    assert extract(text, qtype, question) == want


LONE_PAIRS = "Which have two lone pairs on the central atom? (A) $\\mathrm{BrF}_{5}$ (B) $\\mathrm{ClF}_{3}$ (C) $\\mathrm{XeF}_{4}$ (D) $\\mathrm{SF}_{4}$"


@pytest.mark.parametrize(
    "text,qtype,question,want",
    [
        ("Final Answer: [B], [C], [D(i)]", "MCQ(multiple)", None, "BCD"),  # a sub-item of option D is D
        ("So the answer is [A(ii)].", "MCQ", None, "A"),
        ("Final Answer: The compounds are $\\mathrm{ClF}_{3}$ and $\\mathrm{XeF}_{4}$.", "MCQ(multiple)", LONE_PAIRS, "BC"),
        ("Final Answer: the compound is $\\mathrm{XeF}_{4}$.", "MCQ", LONE_PAIRS, "C"),
        ("Final Answer: $\\mathrm{ClF}_{3}$ and $\\mathrm{XeF}_{4}$", "MCQ", LONE_PAIRS, None),  # MCQ: one option
        ("It is $\\mathrm{XeF}_{4}$, I think.", "MCQ", LONE_PAIRS, None),  # no final-answer line: not read
        ("\\[ -(1+\\sqrt{3})\\frac{3\\pi}{4} \\approx -\\boxed{5.44} \\]", "Numeric", None, -5.44),  # sign outside
        ("so $x = 3 - \\boxed{2}$", "Numeric", None, 2.0),  # a subtraction, not a sign
        ("$$\\alpha = \\boxed{\\ln 2}$$", "Numeric", None, pytest.approx(0.6931, abs=1e-4)),
        ("The value is $\\boxed{2 \\ln 2}$.", "Numeric", None, pytest.approx(1.3863, abs=1e-4)),
    ],
)  # fmt: skip
def test_rules_for_gpt4_0613_text(text: str, qtype: str, question: str | None, want: object) -> None:
    """Rules added on the dev half of a GPT-4-0613 set (somethingdevs/cs678-jeebench); its held-out half
    is measured, never read (suites/jeebench/README.md: extraction agreement)."""
    assert extract(text, qtype, question) == want


@pytest.mark.parametrize(
    "text,qtype,question,want",
    [
        # letters stated true, in any case, with the false ones named after them
        ("We check each statement.\n\nB, C and D are TRUE.", "MCQ(multiple)", None, "BCD"),
        ("Steps.\n\nA, B, and D are true, but C is false.", "MCQ(multiple)", None, "ABD"),
        ("Steps.\n\nB and C are correct. A and D are incorrect.", "MCQ(multiple)", None, "BC"),
        ("Steps.\n\nA and C are true.", "MCQ", None, None),  # two letters are no single-correct answer
        ("Steps.\n\nA and B are false.", "MCQ(multiple)", None, None),  # false, not chosen
        # a solution that ends on the one option it chooses, quoted with its label
        ("The ring is brown because of the nitrosyl complex:\n\n(C) $[Fe(NO)(H_2O)_5]^{2+}$", "MCQ", None, "C"),
        ("So the energy is lowest in\n[B] the second orbit", "MCQ", None, "B"),
        ("Thus\nD) the wavelength is halved", "MCQ", None, "D"),
        ("(C) is wrong.\n(D) the wavelength is halved", "MCQ", None, None),  # a walk through the options
        ("So finally:\n(B) is not correct", "MCQ", None, None),  # a verdict against it
        ("Solving, x = 2 (Option B)", "MCQ", None, "B"),
        ("Steps.\n\nB, C and D are correct.\nA is incorrect.", "MCQ(multiple)", None, "BCD"),  # the false after
        ("Steps.\n\nOption (C) is the correct option.", "MCQ", None, "C"),
        ("The time comes to 3.1 s, closest to option (A) 3 s. The exact value is 3.1 s.", "MCQ", None, "A"),
        ("Hence the range that holds the value is (C) $(2,3)$.", "MCQ", None, "C"),
        ("So the molecules with one lone pair are (A) $NH_3$ and (D) $PCl_3$.", "MCQ(multiple)", None, "AD"),
        ("Heat in equals heat out.\nThe final temperature will be 42.5 K.", "Numeric", None, 42.5),
        ("In conclusion, the true statements are \\boxed{\\text{A, C, and D}}.", "MCQ(multiple)", None, "ACD"),
        ("So the answer is $\\boxed{\\text{B and C}}$", "MCQ(multiple)", None, "BC"),
        ("Checking them, the correct options are:\n\n(B) The area is 12.\n\n(D) The line meets the axis at 3.",
         "MCQ(multiple)", None, "BD"),  # list items apart by blank lines
        ("We cannot tell more. Therefore, the final answer is:\n\nEither (B) or (C).", "MCQ(multiple)", None, None),
        ("So the final answer is \\boxed{\\text{(A) or (D)}}.", "MCQ(multiple)", None, None),  # undecided
        ("Checking each one, only (D) is a possible value of $|z|$.", "MCQ", None, "D"),
        # numbers: a thousands separator, a display block closing the last line, "approximately"
        ("12,480.50", "Numeric", None, 12480.5),
        ("So the value is\n$$\n|\\vec{p}|^2 = 71\n$$", "Integer", None, 71.0),
        ("We get 4.2 J per kelvin.\nThe rise in temperature will be approximately 6.25 °C.", "Numeric", None, 6.25),
    ],
)  # fmt: skip
def test_rules_for_final_lines(text: str, qtype: str, question: str | None, want: object) -> None:
    """Rules added on the authors' extractor CSVs' second half (hgaurav2k/JEEBench history), read once the
    half had been measured once as held out, so it is a tuned set now (suites/jeebench/README.md)."""
    assert extract(text, qtype, question) == want


PI_OPTIONS = "The sum is\n\n(A) $-\\frac{7 \\pi}{9}$\n\n(B) $-\\frac{2 \\pi}{9}$\n\n(C) 0\n\n(D) $\\frac{5 \\pi}{9}$"


@pytest.mark.parametrize(
    "text,qtype,question,want",
    [
        # juxtaposition multiplies: options such as 7π/9 have values, so a value answer finds its option
        ("Therefore, the sum of all distinct solutions is $\\pi + (-\\pi) = \\boxed{0}$.", "MCQ", PI_OPTIONS, "C"),
        ("So the sum is $\\boxed{-\\frac{2\\pi}{9}}$.", "MCQ", PI_OPTIONS, "B"),
        ("The answer is $\\boxed{3\\sqrt{2}}$.", "Numeric", None, pytest.approx(4.2426407)),
        ("Thus $x = \\boxed{2\\pi}$.", "Numeric", None, pytest.approx(6.2831853)),
        # "... is (B) <its text>" as the last line, of either MCQ type; never two labels or a verdict against it
        ("The interval that contains the value of $4\\alpha$ is (B) $(1,2)$.", "MCQ(multiple)", None, "B"),
        ("So the correct choice is (D).", "MCQ", None, "D"),
        ("The interval is (B) $(1,2)$ or (C) $(2,3)$.", "MCQ(multiple)", None, None),
        ("The interval is (B) $(1,2)$, which is not right.", "MCQ", None, None),
    ],
)  # fmt: skip
def test_rules_added_on_dev_halves(text: str, qtype: str, question: str | None, want: object) -> None:
    """Rules added on the dev halves of the GPT-4 sets and on the authors' two sets (suites/jeebench/README.md);
    the held-out halves were measured after, never read."""
    assert extract(text, qtype, question) == want
