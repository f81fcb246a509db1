"""Rule-extraction agreement with a labelled corpus of final-answer phrasings (tests/data/extraction/).

Each corpus line is a response text, the answer a person reads in it (`expected`, null for none) and
what the suite's rules need (question type and text, option words, labels). The rule stage alone is
measured: what it gets wrong is what the judge stage (where the paper has one) must catch.

    python -m suites.agreement tests/data/extraction/*/heldout.jsonl [--show]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any


def read(suite: str, case: dict[str, Any]) -> Any:
    """The suite's rule-stage answer for one corpus case, normalised like `expected`."""
    text = case["text"]
    if suite == "jeebench":
        from suites.jeebench.extract import extract

        return extract(text, case["type"], case.get("question"))
    if suite == "marvel":
        from suites.marvel.extract import extract_binary, extract_choice, extract_count

        if case["kind"] == "avr":
            return extract_choice(text)
        if case["kind"] == "fine":
            return extract_binary(text, case["answer"], case["distractor"])
        return extract_count(text)
    if suite == "m3gia":
        from suites.m3gia.extract import by_rules

        return by_rules(text, tuple(case["letters"]), tuple(case["options"]))
    if suite == "vrb":
        from suites.vrb.extract import extract

        return extract(text, case["labels"])
    raise ValueError(f"no corpus reader for suite {suite!r}")


def same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 0.01 + 1e-9  # the scoring tolerance
    return a == b


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in Path(path).read_text(encoding="utf-8").splitlines() if ln.strip()]


def agreement(suite: str, cases: list[dict[str, Any]]) -> tuple[int, int, list[dict[str, Any]]]:
    """(agreeing, total, misses): a miss carries the case and what the rules read."""
    misses = []
    for c in cases:
        got = read(suite, c)
        if not same(got, c["expected"]):
            misses.append({**c, "got": got})
    return len(cases) - len(misses), len(cases), misses


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m suites.agreement")
    p.add_argument("files", nargs="+", type=Path, help="corpus files: .../<suite>/<part>.jsonl")
    p.add_argument("--show", action="store_true", help="print each miss")
    args = p.parse_args(argv)
    for f in args.files:
        suite = f.parent.name
        ok, n, misses = agreement(suite, load(f))
        by_cat = Counter(m["category"] for m in misses)
        deferred = sum(m["got"] is None and m["expected"] is not None for m in misses)
        print(
            f"{suite}/{f.name}: {ok}/{n} = {ok / max(n, 1):.3f} (misses: {deferred} unread, "
            f"{len(misses) - deferred} read wrong)" + (f"  by category: {dict(by_cat)}" if misses else "")
        )
        for m in misses if args.show else []:
            print(f"--- {m['id']} {m['family']} {m['category']} expected={m['expected']!r} got={m['got']!r}\n{m['text'][-240:]}")


if __name__ == "__main__":
    main()
