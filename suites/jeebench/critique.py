"""JEEBench §4.4, self-critique (`--variant cot-critique`): after each CoT answer, one critique pass on
the authors' released critique prompt (prompts.critique_prompt); the critique's answer replaces the
original, even when it gives none (answers.question). Its judge pass, when the rules cannot read it, is
CRITIQUE_JUDGE."""

from __future__ import annotations

from core.types import Request, Row, user
from suites.jeebench.data import Item
from suites.jeebench.prompts import SYSTEM, critique_prompt
from suites.jeebench.sim import critique_sim

VARIANT = "cot-critique"
CRITIQUE_MAX_TOKENS = 512
"""The authors' 200 released critiques (cs678-jeebench GPT4_CoT_self_refine_responses/responses_old.json,
gpt-4-0314): completion_tokens never above 512, 25 stopped with finish_reason "length" at exactly 512."""
CRITIQUE_JUDGE = "critique-judge"
"""The judge pass on a critique, apart from the answer's own `judge` pass of the same sample."""


def critique_request(req: Request, row: Row, it: Item) -> Request:
    """The critique pass on the answer `row`, the same sample, at T=0 (the authors' is not released)."""
    return Request(
        suite=req.suite,
        item=req.item,
        model=req.model,
        sample=row["sample"],
        pass_="critique",
        messages=[SYSTEM, user(critique_prompt(it, row.get("text") or ""))],
        decoding={"temperature": 0.0, "max_tokens": CRITIQUE_MAX_TOKENS},
        sim=critique_sim(it),
        meta=req.meta,
    )


DEVIATION = (
    "the critique prompt is the authors' released one (200 prompts of 2016-2019: the problem, the CoT "
    "answer, a '-----------' line, 'Find any problems(if any) with the given solution...'), whose "
    "wording differs from §4.4's quote ('Find problems(if any) with the given solutions...'); the critique "
    f"is capped at {CRITIQUE_MAX_TOKENS} tokens as those released critiques were (none longer, 25 of 200 "
    "stopped for length at 512); their temperature and the prompts of the other 315 questions are not "
    "released (T=0 and the same framing assumed); a critique stopped at that cap states no new answer (read "
    "as none, scored 0)"
)
"""Recorded with every cot-critique run (README.md: Protocol, self-critique)."""
