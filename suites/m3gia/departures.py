"""Departures recorded when a run is scored, from what its answers show (README.md: Protocol).

`deviations(spec)` in __init__.py says before a run what its options change; these lines need the answers
or hold for every run: where our stage-1 rules read an answer otherwise than the authors' function, the
stage-3 random letters (seeded per item here, one global stream there), calls left unscored (the authors
give a failed judge call a random letter), the text-only prompt without the authors' local chat wrapper,
and the factor labels (the released ones, which Table 1 was computed with, against Table 3).
"""

from __future__ import annotations

from typing import Any

from suites.m3gia.data import TYPES, answer_key, factor_labels
from suites.m3gia.paper import TABLE3

JUDGE_CODE = (
    "the paper's judge is GPT-4-turbo (App. F); the authors' released code calls \"gpt-3.5\" "
    "(utils/eval_utils.py, parse_multi_choice_response; its \"gpt-4\" line is commented out)"
)
TEXT_ONLY = (
    "text-only questions are sent as the prompt alone: the authors' inference_only.py wraps them in its CogVLM2 "
    "example's chat text ('A chat between a curious user and an artificial intelligence assistant. ... USER: {} "
    "ASSISTANT:'), a local model's template that a chat API replaces with its own"
)


def label_differences(lang: str = "en") -> dict[str, dict[str, int]]:
    """Per factor, question types (and counts) the released labels add to or drop from Table 3's."""
    key, labels = answer_key(lang), factor_labels(lang)
    out: dict[str, dict[str, int]] = {}
    for f, ids in labels.items():
        released = {t: sum(1 for q in ids if key[q][0] == t) for t in TYPES}
        table3 = {t: sum(1 for _, (ty, _) in key.items() if ty == t) if f in TABLE3[t] else 0 for t in TYPES}
        diff = {t: released[t] - table3[t] for t in TYPES if released[t] != table3[t]}
        if diff:
            out[f] = diff
    return out


def labels_line() -> str:
    d = label_differences()
    parts = [", ".join(f"{'+' if n > 0 else ''}{n} {t}" for t, n in ts.items()) + f" in {f}" for f, ts in d.items()]
    return (
        "CHC factor accuracies use the authors' released labels (ability_label_dict.json, which their code uses "
        "and Table 1's Gc column fits better), which differ from the paper's Table 3 in every language: "
        + "; ".join(parts)
        + " (Math Facts 176-185, its geometric-knowledge items)"
    )


def _per(models: dict[str, Any], fmt: Any) -> str:
    return ", ".join(s for m, v in sorted(models.items()) if (s := fmt(m, v)))


def after_scoring(models: dict[str, Any]) -> list[str]:
    """The scoring-time deviations of these scored models (scores.json entries)."""
    out = []
    differ = {m: v.get("rules_vs_authors") or {} for m, v in models.items()}
    if any(d.get("differ") for d in differ.values()):
        per = _per(differ, lambda m, d: f"{m} {d['differ']}/{d['answers']}" if d.get("differ") else "")
        out.append(
            f"stage-1 rules read some answers otherwise than the authors' parse_multi_choice_response ({per}; "
            "their letter is kept as `authors_rule` in scored.jsonl): ours takes the last of several X)/X./X: "
            "candidates, never matches the printed absent option ('None', 'nan': theirs can pick a letter that "
            "is not an option from 'none of the options' or 'financial'), and strips whitespace, then every end "
            "punctuation mark at once (theirs strips one mark after another: 'B,.' keeps its comma, unread)"
        )
    stages = {m: v.get("stages") or {} for m, v in models.items()}
    if any(s.get("random") for s in stages.values()):
        per = _per(stages, lambda m, s: f"{m} {s['random']}" if s.get("random") else "")
        out.append(
            f"stage-3 random letters ({per}) are seeded per (model, question, iteration); the authors draw "
            "random.choice from one stream seeded 42, so theirs depend on the order of the calls"
        )

    def failed(m: str, v: dict[str, Any]) -> str:
        f, miss = v.get("failed_calls") or {}, (v.get("stages") or {}).get("missing", 0)
        n = {"answer call(s)": f.get("answer", 0), "judge call(s)": f.get("judge", 0), "missing": miss}
        return f"{m}: " + ", ".join(f"{k} {c}" for k, c in n.items() if c) if any(n.values()) else ""

    if any(failed(m, v) for m, v in models.items()):
        out.append(
            "failed calls are left unscored and every metric is over the answered questions ("
            + _per(models, failed)
            + "); the authors give a judge call that failed 10 times a random letter (App. F: 'randomly generate "
            "an option'); their released inference_only.py runs a local model and has no failure path for answers"
        )
    return out + [TEXT_ONLY, labels_line()]
