"""`jsonl:` without Python (#37): the prompt template and choice layout, the extraction regex, the token
limit and the vote over samples from flags; the CI over items, never rows; samples at temperature 0 said.

The reference protocol is simple-evals' GPQA (openai/simple-evals `common.py`: QUERY_TEMPLATE_MULTICHOICE
and ANSWER_PATTERN_MULTICHOICE; `gpqa_eval.py` scores `re.search(...)` group 1, the first match)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import orjson

from cli.main import main
from suites.base import RunSpec
from suites.jsonl import SUITE, extract
from suites.stats import ci_list
from tests.helpers import run_args, write_dataset

# openai/simple-evals common.py, verbatim but for the question's placeholder ({Question} -> {prompt})
SIMPLE_EVALS_MC = """Answer the following multiple choice question. The last line of your response should be \
of the following format: 'Answer: $LETTER' (without quotes) where LETTER is one of ABCD. Think step by step \
before answering.

{prompt}

A) {A}
B) {B}
C) {C}
D) {D}"""
SIMPLE_EVALS_RE = r"(?i)Answer[ \t]*:[ \t]*\$?([A-D])\$?"


def _spec(data: Path, **opts: object) -> RunSpec:
    return RunSpec(suite=f"jsonl:{data}", options=opts, samples=opts.pop("samples", None),  # type: ignore[arg-type]
                   temperature=opts.pop("temperature", None))  # type: ignore[arg-type]


def test_the_simple_evals_gpqa_prompt_from_flags_alone(tmp_path: Path):
    data = write_dataset(tmp_path / "d.jsonl", 2)
    tpl = tmp_path / "mc.txt"
    tpl.write_text(SIMPLE_EVALS_MC)
    req = next(iter(SUITE.build(_spec(data, prompt_template_path=str(tpl), max_tokens=32768))))
    text = req.messages[0].content if isinstance(req.messages[0].content, str) else req.messages[0].content[-1].text
    want = SIMPLE_EVALS_MC.replace("{prompt}", "Question 0: which letter?").format(A="w", B="x", C="y", D="z")
    assert text == want
    assert req.decoding.max_tokens == 32768
    # the same layout with --choice-format and a {choices} template
    req = next(iter(SUITE.build(_spec(data, prompt_template="Q: {prompt}\n{choices}", choice_format="({letter}) {choice}"))))
    text = req.messages[0].content if isinstance(req.messages[0].content, str) else req.messages[0].content[-1].text
    assert text == "Q: Question 0: which letter?\n(A) w\n(B) x\n(C) y\n(D) z"


def test_extraction_regex_and_the_fallback_never_reads_an_article():
    assert extract("Let me think. Answer: $B$", 4, SIMPLE_EVALS_RE) == "B"
    assert extract("answer: c ... Answer: D", 4, SIMPLE_EVALS_RE) == "C"  # the first match, as re.search
    assert extract("The answer is B", 4, SIMPLE_EVALS_RE) is None  # no fallback with a regex
    # default rules: "A quick estimate" is an article, not answer A (#37)
    assert extract("A quick estimate gives 12, so I pick the third option: C", 4) == "C"
    assert extract("A quick estimate gives 12.", 4) is None
    assert extract("I think so.", 9) is None
    assert extract("Between the two, A is right.", 4) == "A"
    assert extract("(B)", 4) == "B"


def _rows(answers: dict[str, list[str | None]]) -> list[dict]:
    return [{"model": "m", "item": item, "sample": s, "pass": "answer", "error": None,
             "text": None if a is None else f"Answer: {a}"}
            for item, got in answers.items() for s, a in enumerate(got)]


def test_vote_and_the_ci_are_over_items_not_rows(tmp_path: Path):
    data = write_dataset(tmp_path / "d.jsonl", 4)  # gold A, B, C, D
    answers = {"q0": ["A", "A", "B", None], "q1": ["C", "B", "B", "C"], "q2": ["C", "C", "C", "C"],
               "q3": ["A", "B", "C", None]}
    per_item = [0.5, 0.5, 1.0, 0.0]  # each item's answered samples are one unit
    rep = SUITE.score(_rows(answers), _spec(data, samples=4, answer_regex=SIMPLE_EVALS_RE), tmp_path)
    m = rep.models["m"]
    assert m["n"] == 4 and abs(m["accuracy"] - np.mean(per_item)) < 1e-12
    assert m["ci95"] == ci_list(np.array(per_item))  # bootstrapped over the 4 items
    rows_ci = ci_list(np.array([float(a == g) for (item, got), g in zip(answers.items(), "ABCD", strict=True)
                                for a in got]))
    assert m["ci95"] != rows_ci  # (over the 16 rows it would be narrower: the mislabelled CI of #37)
    assert m["unreadable"] == 2 / 16
    voted = SUITE.score(_rows(answers), _spec(data, samples=4, answer_regex=SIMPLE_EVALS_RE, vote="majority"),
                        tmp_path).models["m"]
    # majorities: q0 A (right), q1 C (tie C/B: the first given), q2 C (right), q3 A (tie: first; wrong)
    assert voted["accuracy"] == 0.5 and voted["ci95"] == ci_list(np.array([1.0, 0.0, 1.0, 0.0]))


def test_a_run_with_flags_end_to_end_and_samples_at_temperature_0_said(tmp_path: Path, caplog):
    data = write_dataset(tmp_path / "d.jsonl", 6)
    out = tmp_path / "run"
    args = run_args(data, "sim/strong", None, out, "--samples", "3", "--vote", "majority",
                    "--answer-regex", r"(?i)answer is ([A-D])", "--max-tokens", "256")
    args.remove("--no-score")
    assert main(args) == 0
    assert "--samples 3 at temperature 0" in caplog.text
    caplog.clear()
    scores = json.loads((out / "scores.json").read_text())
    assert "SC@3, majority vote" in json.dumps(scores) and scores["models"]["sim/strong"]["n"] == 6
    rows = [orjson.loads(x) for x in (out / "results.jsonl").read_bytes().splitlines()]
    assert len(rows) == 18
    out2 = tmp_path / "run2"
    assert main(run_args(data, "sim/strong", None, out2, "--samples", "3", "--temperature", "0.7")) == 0
    assert "at temperature 0" not in caplog.text


def test_bad_flags_are_clear_errors_before_any_call(tmp_path: Path, capsys):
    data = write_dataset(tmp_path / "d.jsonl", 2)
    assert main(run_args(data, "sim/strong", None, tmp_path / "r", "--answer-regex", "Answer: [A-D]")) == 2
    assert "needs a group" in capsys.readouterr().err
    assert main(run_args(data, "sim/strong", None, tmp_path / "r2", "--prompt-template", "{prompt} {E}")) == 2
    err = capsys.readouterr().err
    assert "{E} is not a placeholder" in err and "Traceback" not in err


def test_shuffled_choices_follow_simple_evals_draws(tmp_path: Path):
    """simple-evals gpqa_eval.py: `rng = random.Random(0)`, then per example in order
    `permutation = rng.sample(range(4), 4)`, `choices = [choices[i] for i in permutation]`, the correct
    answer first in the data. Our --shuffle-choices 0 draws the same orders; the gold follows its option."""
    import random

    data = tmp_path / "g.jsonl"
    data.write_bytes(b"".join(orjson.dumps({"id": f"g{i}", "prompt": f"Q{i}", "choices": [f"right{i}", f"w{i}a",
                                            f"w{i}b", f"w{i}c"], "answer": "A"}) + b"\n" for i in range(5)))
    rng = random.Random(0)
    for req in SUITE.build(_spec(data, shuffle_choices=0)):
        perm = rng.sample(range(4), 4)
        i = int(req.item[1:])
        opts = [[f"right{i}", f"w{i}a", f"w{i}b", f"w{i}c"][k] for k in perm]
        text = req.messages[0].content if isinstance(req.messages[0].content, str) else req.messages[0].content[-1].text
        assert "\n".join(f"{'ABCD'[j]}. {o}" for j, o in enumerate(opts)) in text
    again = random.Random(0)
    perms = [again.sample(range(4), 4) for _ in range(5)]
    rows = [{"model": "m", "item": f"g{i}", "sample": 0, "pass": "answer", "error": None,
             "text": f"Answer: {'ABCD'[p.index(0)]}"} for i, p in enumerate(perms)]  # the right option
    assert SUITE.score(rows, _spec(data, shuffle_choices=0, answer_regex=SIMPLE_EVALS_RE), tmp_path).models["m"][
        "accuracy"] == 1.0
