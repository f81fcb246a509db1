"""GPQA-style multiple choice, as simple-evals runs it: four shuffled choices, its prompt and `Answer: X`
pattern, SC@k by majority vote over `--samples`, then a self-critique pass; one item has an image.

    evalsweep run examples/gpqa/gpqa.py --models sim/strong --samples 8 --temperature 0.7
"""

import json
from pathlib import Path

from suites.api import Suite, ask, critique, extract, items_of, score_items, shuffled

HERE = Path(__file__).parent
DATA = [json.loads(line) for line in (HERE / "gpqa.jsonl").read_text().splitlines()]
SEED = 0  # the choices' order: fixed per item, the same on every run

# openai/simple-evals common.py, QUERY_TEMPLATE_MULTICHOICE and ANSWER_PATTERN_MULTICHOICE
PROMPT = """Answer the following multiple choice question. The last line of your response should be \
of the following format: 'Answer: $LETTER' (without quotes) where LETTER is one of ABCD. Think step by \
step before answering.

{question}

A) {A}
B) {B}
C) {C}
D) {D}"""
PATTERN = r"(?i)Answer[ \t]*:[ \t]*\$?([A-D])\$?"
CRITIQUE = """Here is a question and an answer to it.

{question}

{answer}

Check the answer step by step. If it is wrong, correct it. The last line of your response should be of \
the following format: 'Answer: $LETTER'."""


def item(d: dict) -> tuple[list[str], str]:
    return shuffled([d["correct"], *d["incorrect"]], 0, SEED, d["id"])


def build(spec):
    for d in items_of(spec, DATA):
        choices, gold = item(d)
        sim = {"correct": f"Working it out... Answer: {gold}", "wrong": ["Answer: A", "Answer: B", "no idea"]}
        yield ask(spec, d["id"], PROMPT, max_tokens=2048, images=[HERE / d["image"]] if "image" in d else [],
                  sim=sim, question=d["question"], **dict(zip("ABCD", choices, strict=True)))


def follow_up(req, row, spec):
    d = next(x for x in DATA if x["id"] == req.item)
    return critique(req, row, CRITIQUE, max_tokens=1024, question=d["question"],
                    sim={"correct": f"Checked. Answer: {item(d)[1]}", "wrong": ["Answer: C"]})


def score(rows, spec, run_dir, sink=None):
    gold = {d["id"]: item(d)[1] for d in DATA}
    return score_items(rows, gold, lambda text: extract(text, PATTERN), passes=("answer", "critique"),
                       category={d["id"]: d["category"] for d in DATA}, sink=sink, title="GPQA-style accuracy")


SUITE = Suite(name="gpqa", build=build, score=score, follow_up=follow_up, passes=("answer", "critique"))
