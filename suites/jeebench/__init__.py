"""JEEBench (Arora, Singh, Mausam, EMNLP 2023): 515 JEE-Advanced problems with the paper's protocol.
arXiv:2305.15074; 2016-2023, physics, chemistry, mathematics; MCQ, MCQ(multiple), Integer, Numeric; bundled.

load (data.py) → prompt (prompts.py: the authors' prompts verbatim; options.py: the run's variant) →
follow-up passes (followup.py: the critique of critique.py, the judge, the tool rounds of tools.py) →
read (answers.py; extract.py, rules.py, fallbacks.py, mathexpr.py: rules, then the judge) → score
(scoring.py; metrics.py: the paper's rules, marks, the votes of selfconsistency.py) → the paper's tables
beside ours (report.py, baselines.py, exam.py, paper.py; across a sweep's runs: sweep.py). protocol.py
says every departure from the paper. sim.py writes realistic responses for the `sim/...` models;
devtools.py checks the rules on the authors' released responses.

    evalsweep run jeebench --variant normal|cot|cot-1shot|cot-sc|cot-critique|cot-exam|cot-tools [--judge MODEL]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from core.types import Request, user
from suites.base import RunSpec, Suite, SuiteError
from suites.jeebench import options
from suites.jeebench.data import load_few_shot, load_items
from suites.jeebench.followup import follow_up
from suites.jeebench.metrics import EXTRACTORS, Marks
from suites.jeebench.prompts import SYSTEM, VARIANTS, prompt
from suites.jeebench.protocol import deviations
from suites.jeebench.scoring import score
from suites.jeebench.selfconsistency import SC_SAMPLES, SC_TEMPERATURE, taus
from suites.jeebench.selfconsistency import VARIANT as SC
from suites.jeebench.sim import answer_sim
from suites.jeebench.tools import CALCULATOR
from suites.jeebench.tools import VARIANT as TOOLS

MAX_TOKENS = 2048
"""inference.py's limit on every answer pass (the critique's: critique.CRITIQUE_MAX_TOKENS)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variant", choices=VARIANTS, default=None, help="prompting protocol (default: cot)")
    p.add_argument(
        "--judge", default=None, metavar="MODEL", help="LLM judge for answers the rules cannot read"
    )
    p.add_argument(
        "--tau-single",
        type=float,
        default=None,
        help="cot-sc: keep an MCQ vote winner only at this vote share (default 0; the paper's tuned 0.125 is "
        "its own too)",
    )
    p.add_argument(
        "--tau-multiple",
        type=float,
        default=None,
        help="cot-sc: select MCQ(multiple) letters at this vote share (default 0.5; the paper's tuned 0.75 "
        "is its own too)",
    )
    p.add_argument(
        "--marks", default=None, metavar="KEY=V,...", help="exam marks, e.g. mcq_wrong=-1,multi_wrong=-2"
    )
    p.add_argument(
        "--extractor",
        choices=EXTRACTORS,
        default=None,
        help="numbers and SC votes: reference (the authors' compute_metrics.py, default) or rules (ours: "
        "0.01 tolerance with slack, votes by value; a recorded deviation)",
    )


def check(spec: RunSpec) -> None:
    """Every flag and the bundled data, read before the first call (a bad one stops the run there)."""
    options.variant(spec)
    options.extractor(spec)
    taus(spec)
    Marks.parse(spec.opt("marks"))
    if spec.samples is not None and spec.samples < 1:
        raise SuiteError("--samples must be at least 1")
    load_items()
    load_few_shot()


def build(spec: RunSpec) -> Iterator[Request]:
    variant = options.variant(spec)
    sc = variant == SC
    n = spec.samples or (SC_SAMPLES if sc else 1)
    temp = spec.temperature if spec.temperature is not None else (SC_TEMPERATURE if sc else 0.0)
    few_shot = load_few_shot() if variant == "cot-1shot" else None
    for k, it in enumerate(options.items(variant)):
        if spec.limit is not None and k >= spec.limit:
            return
        yield Request(
            suite="jeebench",
            item=it.id,
            messages=[SYSTEM, user(prompt(it, variant, few_shot))],
            decoding={"temperature": temp, "max_tokens": MAX_TOKENS, "n": n},
            sim=answer_sim(it),
            meta={"type": it.type, "subject": it.subject},
            tools=CALCULATOR if variant == TOOLS else None,
        )


SUITE = Suite(
    name="jeebench",
    build=build,
    score=score,
    follow_up=follow_up,
    add_arguments=add_arguments,
    headline="overall",
    run_name=lambda spec: f"jeebench-{spec.opt('variant', 'cot')}",
    check=check,
    deviations=deviations,
    answer_tokens=738,  # mean completion_tokens of the authors' released gpt-3.5-turbo-0301 responses
)
