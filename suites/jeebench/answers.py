"""One model's answer to one JEEBench question from all its rows: each sample's answer (the last row of a
tool chain), read by the rules, else by its judge pass; a critique's answer in place of the original (a
failed critique call keeps it). A sample whose call failed, or whose needed judge call failed, is left out:
never a vote, never a wrong answer."""

from __future__ import annotations

from typing import Any

from core.types import Row
from suites.jeebench.critique import CRITIQUE_JUDGE
from suites.jeebench.data import Item
from suites.jeebench.extract import CUT, Answer, extract, parse_judge
from suites.jeebench.tools import final

JUDGE_ERROR = "judge-error"


def read(row: Row | None, judge_row: Row | None, it: Item) -> tuple[Answer, str | None]:
    """(answer, stage) of one response: the rules, else the judge's extraction. Stage `judge-error`: the
    rules could not read it and the judge call failed, so it was never read (not a wrong answer). A critique
    cut at its token limit states no new answer (extract_critique): no judge is asked."""
    if row is None or row.get("error") or row.get("tool_calls"):  # a chain ended still calling: no answer
        return None, None
    if row.get("pass") == "critique" and row.get("finish_reason") in CUT:
        return None, None
    ans = extract(row.get("text"), it.type, it.question)
    if ans is not None:
        return ans, "rules"
    if judge_row is not None:
        if judge_row.get("error"):
            return None, JUDGE_ERROR
        ans = parse_judge(judge_row.get("text"), it.type)
        if ans is not None:
            return ans, "judge"
    return None, None


def question(model_rows: list[Row], it: Item) -> dict[str, Any]:
    """One model's answer to one question from all its rows (samples, critique and judge passes). A
    sample whose call failed (or whose needed judge pass failed) is left out: it is not a vote. A critique
    call that failed keeps the answer it would have replaced, counted (`critique_failed`) and recorded."""
    by: dict[tuple[int, str], Row] = {(r["sample"], r["pass"]): r for r in model_rows}
    samples = sorted({s for s, p in by if p == "answer"})
    for s in samples:  # cot-tools: a sample's answer is the last row of its tool chain
        by[(s, "answer")] = final(by, s)
    answers: list[Answer] = []
    stages, sources, errors, failed, crit_failed = [], [], 0, None, 0
    for s in samples:
        ans, stage = read(by.get((s, "answer")), by.get((s, "judge")), it)
        if by[(s, "answer")].get("error") or stage == JUDGE_ERROR:
            errors += 1
            failed = by[(s, "answer")] if by[(s, "answer")].get("error") else by[(s, "judge")]
            continue
        source = "original"
        if (s, "critique") in by:
            crow = by[(s, "critique")]
            if not crow.get("error"):  # the paper re-evaluates the new answer, even when it gives none
                ans, stage = read(crow, by.get((s, CRITIQUE_JUDGE)), it)
                source = "critique"
                if stage == JUDGE_ERROR:  # the critique's answer needed the judge, whose call failed
                    errors += 1
                    failed = by[(s, CRITIQUE_JUDGE)]
                    continue
            else:
                crit_failed += 1
            sources.append(source)
        answers.append(ans)
        stages.append(stage)
    return {
        "answers": answers,
        "stages": stages,
        "sources": sources,
        "errors": errors,
        "failed": failed,
        "critique_failed": crit_failed,
        "planned": len(samples),
        "year": it.year,
        "type": it.type,
        "gold": it.gold,
    }
