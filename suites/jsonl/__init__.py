"""Generic suite: `evalsweep run jsonl:PATH` over lines {"id", "prompt", "images", "choices", "answer"}.

A line without a gold `answer` is refused with file:line (a missing gold would score every answer
wrong); with `--allow-missing-gold` such items are run and scored None.

Multiple choice when `choices` is given (scored by the extracted letter), else free text scored by
normalised exact match. Accuracy over answered rows (a failed call is scored None, not wrong) with a
95% bootstrap CI over items.
"""

from __future__ import annotations

import argparse
import re
import string
from array import array
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from core.types import Decoding, Request, Row, user
from suites.base import RunSpec, ScoreReport, Sink, Suite, SuiteError, Table, ranked, scored_row
from suites.stats import ci_list, ci_method, mean

LETTERS = string.ascii_uppercase
_SCALARS = frozenset((str, int, float, bool))


def _path(spec: RunSpec) -> Path:
    _, _, p = spec.suite.partition(":")
    if not p:
        raise SuiteError("the jsonl suite needs a file: `evalsweep run jsonl:PATH`")
    return Path(p)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-missing-gold",
        action="store_true",
        help='run lines without an "answer" and score them None (default: refused with file:line)',
    )


def _has_gold(d: dict[str, Any]) -> bool:
    a = d.get("answer")
    return a is not None and str(a).strip() != ""


def _first_line(path: Path, key: str) -> int:
    """The first line of `path` whose id is `key` (for a duplicate's error)."""
    with path.open("rb") as f:
        for lineno, line in enumerate(f, 1):
            try:
                d = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(d, dict) and str(d.get("id")) == key:
                return lineno
    return 0


def load(path: Path, allow_missing_gold: bool = False) -> Iterator[dict[str, Any]]:
    """Validate each line as we go; errors name the file and line (both lines for a duplicate id)."""
    if not path.is_file():
        raise SuiteError(f"{path}: no such file (jsonl suite data)")
    seen: set[str] = set()  # ids only (a million-item file holds no line numbers): a duplicate's first
    with path.open("rb") as f:  # line is found by reading the file again, once, for its error
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise SuiteError(f"{path}:{lineno}: not valid JSON ({e})") from None
            if not isinstance(d, dict) or "id" not in d or "prompt" not in d:
                raise SuiteError(f'{path}:{lineno}: each line needs at least "id" and "prompt"')
            item = d["id"]
            key = item if type(item) is str else str(item)
            if type(item) not in (str, int) or key == "":
                raise SuiteError(
                    f'{path}:{lineno}: "id" must be a non-empty string or an integer, got {item!r}'
                )
            if key in seen:
                raise SuiteError(
                    f"{path}:{lineno}: duplicate id {item!r} (also on line {_first_line(path, key)}); ids must "
                    "be unique"
                )
            seen.add(key)
            prompt = d["prompt"]
            if not isinstance(prompt, str) or not prompt.strip():
                raise SuiteError(f'{path}:{lineno}: "prompt" must be a non-empty string')
            choices = d.get("choices") or []
            if not isinstance(choices, list) or len(choices) > len(LETTERS) or not _SCALARS.issuperset(
                map(type, choices)
            ):
                raise SuiteError(f'{path}:{lineno}: "choices" must be a list of at most 26 strings')
            imgs = d.get("images") or []
            if not isinstance(imgs, list) or not all(isinstance(i, str) for i in imgs):
                raise SuiteError(f'{path}:{lineno}: "images" must be a list of file paths')
            d["_images"] = [(path.parent / i) if not Path(i).is_absolute() else Path(i) for i in imgs]
            for img in d["_images"]:
                if not img.is_file():
                    raise SuiteError(f"{path}:{lineno}: image file not found: {img}")
            if not allow_missing_gold and not _has_gold(d):
                kind = "multiple-choice" if choices else "exact-match"
                raise SuiteError(
                    f'{path}:{lineno}: no gold "answer" for {kind} item {item!r}; add it, or run with '
                    "--allow-missing-gold to score such items None"
                )
            if choices and _has_gold(d) and _gold(d) not in LETTERS[: len(choices)]:
                raise SuiteError(
                    f'{path}:{lineno}: item {item!r}: gold "answer" {d["answer"]!r} is none of its '
                    f"{len(choices)} choices; give a letter {LETTERS[0]}-{LETTERS[len(choices) - 1]} or "
                    "one of the choices' texts exactly"
                )
            d["_line"] = lineno
            yield d
    if not seen:
        raise SuiteError(f"{path}: no items (the file is empty)")


def _gold(d: dict[str, Any]) -> str | None:
    if not _has_gold(d):
        return None
    ans = str(d["answer"])
    choices = d.get("choices") or []
    if choices and ans not in LETTERS[: len(choices)] and ans in choices:
        return LETTERS[choices.index(ans)]  # answer given as the option text
    return ans


def _load(spec: RunSpec) -> Iterator[dict[str, Any]]:
    return load(_path(spec), bool(spec.opt("allow_missing_gold", False)))


def prompt_of(d: dict[str, Any]) -> str:
    choices = d.get("choices") or []
    if not choices:
        return d["prompt"]
    opts = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))
    return f"{d['prompt']}\n\n{opts}\n\nAnswer with the option's letter from the given choices."


def _sim(d: dict[str, Any]) -> dict[str, Any]:
    return _sim_for(_gold(d) or "", len(d.get("choices") or []))


@lru_cache(maxsize=4096)
def _sim_for(gold: str, n_choices: int) -> dict[str, Any]:
    """Hints for the simulated provider (read, never changed: items with one gold share them)."""
    if n_choices:
        wrong = [c for c in LETTERS[:n_choices] if c != gold]
        fmt = "Looking at the options one by one, the best fit is {x}.\nThe answer is {x}."
        return {
            "correct": fmt.format(x=gold),
            "wrong": [fmt.format(x=w) for w in wrong] or ["I am not sure."],
        }
    return {"correct": f"The answer is {gold}.", "wrong": ["I am not sure.", "The answer is unknown."]}


def build(spec: RunSpec) -> Iterator[Request]:
    n = spec.samples or 1
    temp = spec.temperature if spec.temperature is not None else 0.0
    decoding = Decoding(temperature=temp, n=n, max_tokens=1024)  # one, shared: requests are frozen
    for k, d in enumerate(_load(spec)):
        if spec.limit is not None and k >= spec.limit:
            return
        yield Request(
            suite=spec.suite,
            item=str(d["id"]),
            messages=[user(*d["_images"], prompt_of(d))],
            decoding=decoding,
            sim=_sim(d),
        )


_ANSWER_RE = re.compile(r"answer\s*(?:is|:)?\s*[:\-]?\s*\(?\**([A-Z])\b", re.I)


def extract(text: str | None, n_choices: int) -> str | None:
    """The chosen letter: the last `answer is X`, else the last standalone valid capital letter."""
    if not text:
        return None
    valid = LETTERS[:n_choices]
    hits = [m.group(1).upper() for m in _ANSWER_RE.finditer(text) if m.group(1).upper() in valid]
    if hits:
        return hits[-1]
    lone = re.findall(rf"\b([{valid}])\b", text)
    return lone[-1] if lone else None


def normalize(s: str | None) -> str:
    s = (s or "").lower().strip()
    s = re.sub(r"^(the answer is|answer:)\s*", "", s)
    s = "".join(ch for ch in s if ch not in string.punctuation)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def score(rows: Iterable[Row], spec: RunSpec, run_dir: Path, sink: Sink | None = None) -> ScoreReport:
    """Accuracy over answered (model, item, sample) rows; a failed call is scored None, not wrong.
    Keeps per model one float per answered row (8 bytes), nothing else."""
    sink = sink if sink is not None else Sink()
    gold_of: dict[str, tuple[str | None, int]] = {
        str(d["id"]): (_gold(d), len(d.get("choices") or [])) for d in _load(spec)
    }
    per_model: dict[str, array[float]] = {}
    for r in rows:
        if r.get("pass") != "answer":
            continue
        g = gold_of.get(r["item"])
        if g is None:
            continue
        gold, n_choices = g
        vals = per_model.setdefault(r["model"], array("d"))
        if r.get("error"):
            sink(scored_row(r, extracted=None, gold=gold))
            continue
        ext = extract(r.get("text"), n_choices) if n_choices else normalize(r.get("text")) or None
        if gold is None:  # --allow-missing-gold: answered, but nothing to score it against
            sink(scored_row(r, extracted=ext, gold=None, score=None))
            continue
        ok = float(ext == gold) if n_choices else float(ext is not None and ext == normalize(gold))
        vals.append(ok)
        sink(scored_row(r, extracted=ext, gold=gold, score=ok))
    models = {}
    for m, vals in per_model.items():
        x = np.frombuffer(vals, dtype=float) if len(vals) else np.empty(0)
        models[m] = {"accuracy": mean(x), "ci95": ci_list(x), "n": len(x)}
    table = Table(
        title=f"{spec.suite}: accuracy",
        columns=["model", "n", "accuracy", "95% CI"],
        rows=[
            [m, models[m]["n"], models[m]["accuracy"], models[m]["ci95"]] for m in ranked(models, "accuracy")
        ],
        note=ci_method(max((v["n"] for v in models.values()), default=0)),
        key=("accuracy", "95% CI"),
    )
    return ScoreReport(models=models, scored=sink.rows, tables=[table])


def check(spec: RunSpec) -> None:
    """Every line validated before anything is sent or any run directory is made."""
    for _ in _load(spec):
        pass


def count(spec: RunSpec) -> int:
    """Calls per model without building requests: non-blank lines (validated later, by build)."""
    path = _path(spec)
    if not path.is_file():
        raise SuiteError(f"{path}: no such file (jsonl suite data)")
    with path.open("rb") as f:
        n = sum(1 for line in f if line.strip())
    if spec.limit is not None:
        n = min(n, spec.limit)
    return n * (spec.samples or 1)


SUITE = Suite(
    name="jsonl",
    build=build,
    score=score,
    run_name=lambda s: "jsonl-" + _path(s).stem,
    count=count,
    check=check,
    add_arguments=add_arguments,
)
