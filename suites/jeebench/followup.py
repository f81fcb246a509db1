"""JEEBench's follow-up passes, asked as each row lands: the critique pass (cot-critique), the judge pass
on a response the rules cannot read (--judge), the next tool round (cot-tools). A row whose call failed asks
nothing further: its error row ends the chain, and scoring (answers.py) never reads it as a wrong answer."""

from __future__ import annotations

from core.types import Request, Row
from suites.base import RunSpec, judge_request
from suites.jeebench import options
from suites.jeebench.critique import CRITIQUE_JUDGE, critique_request
from suites.jeebench.critique import VARIANT as CRITIQUE
from suites.jeebench.data import items_by_id
from suites.jeebench.extract import CUT, extract
from suites.jeebench.prompts import JUDGE
from suites.jeebench.sim import judge_sim
from suites.jeebench.tools import PASSES, next_round


def follow_up(req: Request, row: Row, spec: RunSpec) -> list[Request]:
    """cot-critique: the critique pass after each answer. --judge: a judge pass on any answer or critique
    the rules cannot read. Judge rows need nothing further. cot-tools: a row that called tools leads to the
    next tool round (tools.next_round); the judge reads only a chain's last row."""
    if row.get("error") or row.get("pass") not in ("answer", "critique", *PASSES):
        return []
    if row.get("tool_calls"):
        return next_round(req, row)
    it = items_by_id().get(req.item)
    if it is None:
        return []
    out: list[Request] = []
    if row["pass"] == "answer" and options.variant(spec) == CRITIQUE:
        out.append(critique_request(req, row, it))
    judge = spec.opt("judge")
    cut = row["pass"] == "critique" and row.get("finish_reason") in CUT  # no new answer to read
    if judge and not cut and extract(row.get("text"), it.type, it.question) is None:
        j = judge_request(req, row, judge, JUDGE[it.type], sim=judge_sim(it, row.get("text")))
        out.append(j.model_copy(update={"pass_": CRITIQUE_JUDGE}) if row["pass"] == "critique" else j)
    return out
