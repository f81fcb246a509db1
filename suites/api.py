"""The public suite API: what a benchmark of one's own is written with (docs/your-own-benchmark.md).

A suite says what is particular to its benchmark — its items, its prompt, how its answers are read —
and this module does the rest: prompts with (shuffled) choices and images, answer extraction, a
follow-up pass (a self-critique), and scoring that treats each item's samples as one unit (accuracy of
the majority vote, SC@k, or of the samples' mean) with a 95% bootstrap CI over items, per category.
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from core.types import Request, Row, user
from suites.base import RunSpec, ScoreReport, Sink, Suite, Table, ranked, scored_row
from suites.stats import ci_list, ci_method, mean

__all__ = ["Request", "RunSpec", "ScoreReport", "Suite", "ask", "critique", "extract", "items_of", "score_items",
           "shuffled", "user"]

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def shuffled(choices: list[str], correct: int, seed: int, item: str) -> tuple[list[str], str]:
    """The choices in an order drawn from (seed, item), and the correct one's letter: the same order on
    every run and sample."""
    order = list(range(len(choices)))
    random.Random(f"{seed}:{item}").shuffle(order)
    return [choices[i] for i in order], LETTERS[order.index(correct)]


def ask(spec: RunSpec, item: str, template: str, *, max_tokens: int, images: Iterable[str | Path] = (),
        sim: dict[str, Any] | None = None, **fields: Any) -> Request:
    """One question: `template` filled with `fields`, images first, at the run's samples and temperature."""
    temperature = spec.temperature if spec.temperature is not None else 0.0
    return Request(suite=spec.suite, item=item, messages=[user(*images, template.format(**fields))],
                   decoding={"max_tokens": max_tokens, "temperature": temperature, "n": spec.samples or 1},
                   sim=sim)


def critique(req: Request, row: Row, template: str, *, max_tokens: int, sim: dict[str, Any] | None = None,
             **fields: Any) -> list[Request]:
    """The follow-up pass `critique` of one answer (`{answer}` in `template` is it): for a suite's
    `follow_up=`; none for a failed call or a pass that is not the answer."""
    if row.get("error") or row.get("pass") != "answer":
        return []
    prompt = template.format(answer=row.get("text") or "", **fields)
    return [req.model_copy(update={"pass_": "critique", "sample": row["sample"], "messages": [user(prompt)],
                                   "decoding": req.decoding.model_copy(update={"n": 1, "max_tokens": max_tokens}),
                                   "sim": sim})]


def extract(text: str | None, pattern: str) -> str | None:
    """Group 1 of the first match of `pattern` (e.g. simple-evals' `(?i)Answer[ \\t]*:[ \\t]*\\$?([A-D])`),
    upper-cased; None when nothing matches (scored wrong, and counted as unreadable)."""
    m = re.search(pattern, text or "")
    return m.group(1).strip().upper() if m and m.group(1) else None


def score_items(rows: Iterable[Row], gold: dict[str, str], read: Callable[[str | None], str | None], *,
                passes: Iterable[str] = ("answer",), vote: bool = True,
                category: dict[str, str] | None = None, sink: Sink | None = None,
                title: str = "accuracy") -> ScoreReport:
    """Accuracy per model and pass: each item's answered samples are one unit — the majority answer
    (`vote`: SC@k, ties to the first given, unreadable answers not voting) or their mean — with a 95%
    bootstrap CI over items; a failed call is not a wrong answer (scored None). Per category too."""
    sink = sink if sink is not None else Sink()
    got: dict[tuple[str, str], dict[str, list[str | None]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r.get("pass") not in passes or r["item"] not in gold:
            continue
        if r.get("error"):
            sink(scored_row(r, extracted=None, gold=gold[r["item"]], **{"pass": r["pass"]}))
            continue
        ans = read(r.get("text"))
        got[(r["model"], r["pass"])][r["item"]].append(ans)
        sink(scored_row(r, extracted=ans, gold=gold[r["item"]], score=float(ans == gold[r["item"]]),
                        **{"pass": r["pass"]}))
    models: dict[str, dict[str, Any]] = {}
    for (model, pass_), items in got.items():
        def unit(item: str, answers: list[str | None]) -> float:
            if vote:
                votes = Counter(a for a in answers if a is not None)
                return float(bool(votes) and votes.most_common(1)[0][0] == gold[item])
            return sum(a == gold[item] for a in answers) / len(answers)

        x = {item: unit(item, a) for item, a in items.items()}
        arr = np.array(list(x.values()))
        key = "accuracy" if pass_ == "answer" else f"accuracy_{pass_}"
        s = models.setdefault(model, {})
        s.update({key: mean(arr), f"{key}_ci95": ci_list(arr), "n": len(arr)})
        if pass_ == "answer":
            s["ci95"] = s["accuracy_ci95"]
            for cat in sorted(set((category or {}).values())):
                s[f"accuracy[{cat}]"] = mean(np.array([v for i, v in x.items() if category[i] == cat] or [np.nan]))
    cats = sorted(set((category or {}).values()))
    cols = ["model", "n", "accuracy", "95% CI", *[f"after {p}" for p in passes if p != "answer"], *cats]
    rows_ = [[m, s.get("n"), s.get("accuracy"), s.get("ci95"),
              *[s.get(f"accuracy_{p}") for p in passes if p != "answer"], *[s.get(f"accuracy[{c}]") for c in cats]]
             for m, s in ((m, models[m]) for m in ranked(models, "accuracy"))]
    note = ci_method(max((s.get("n", 0) for s in models.values()), default=0)) + (
        "; each item's samples voted (SC@k)" if vote else "; each item's samples averaged")
    return ScoreReport(models=models, scored=sink.rows, tables=[Table(title, cols, rows_, note=note,
                                                                         key=("accuracy", "95% CI"))])


def items_of(spec: RunSpec, data: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The items a run asks: all, or the first `--limit`."""
    yield from data[: spec.limit] if spec.limit is not None else data
