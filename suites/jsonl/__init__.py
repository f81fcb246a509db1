r"""Generic suite: `evalsweep run jsonl:PATH` over lines {"id", "prompt", "images", "choices", "answer"}.

A line without a gold `answer` is refused with file:line (a missing gold would score every answer
wrong); with `--allow-missing-gold` such items are run and scored None.

Multiple choice when `choices` is given (scored by the extracted letter), else free text scored by
normalised exact match. Accuracy over answered items (a failed call is scored None, not wrong) with a
95% bootstrap CI over items (an item's samples are one unit: averaged, or voted with `--vote majority`).

Without Python, flags shape the protocol: `--prompt-template` (or `--prompt-template-path`) with
`{prompt}`, `{choices}` and `{A}`..`{Z}`; `--choice-format` for each option line; `--answer-regex`
(group 1 is the answer; the first match, as `re.search`; no fallback); `--max-tokens`; `--vote
majority` (SC@k over `--samples`). simple-evals' GPQA prompt and extraction, for example:

    evalsweep run jsonl:gpqa.jsonl --choice-format '{letter}) {choice}' --answer-regex \
      '(?i)Answer[ \t]*:[ \t]*\$?([A-D])\$?' --prompt-template-path simple_evals_mc.txt ...
"""

from __future__ import annotations

import argparse
import logging
import random
import re
import string
from collections import Counter
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from core.types import Decoding, Request, Row, replaced, user
from suites.base import RunSpec, ScoreReport, Sink, Suite, SuiteError, Table, ranked, scored_row
from suites.jsonl.ids import _ITEMS, _UNIQUE, _VALID, _first_line, _Ids, _version
from suites.stats import ci_list, ci_method, mean

log = logging.getLogger("evalsweep")

LETTERS = string.ascii_uppercase
_SCALARS = frozenset((str, int, float, bool))


def _path(spec: RunSpec) -> Path:
    _, _, p = spec.suite.partition(":")
    if not p:
        raise SuiteError("the jsonl suite needs a file: `evalsweep run jsonl:PATH`")
    return Path(p)


DEFAULT_TEMPLATE = "{prompt}\n\n{choices}\n\nAnswer with the option's letter from the given choices."
DEFAULT_CHOICE = "{letter}. {choice}"
DEFAULT_MAX_TOKENS = 1024


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-missing-gold",
        action="store_true",
        help='run lines without an "answer" and score them None (default: refused with file:line)',
    )
    p.add_argument("--prompt-template", help="the prompt of a multiple-choice item: {prompt}, {choices} (the "
                   "option lines), {A}..{Z} (one option's text); default: the question, 'A. x' lines and "
                   "\"Answer with the option's letter from the given choices.\"")
    p.add_argument("--prompt-template-path", help="--prompt-template read from a file")
    p.add_argument("--choice-format", help="one option line: {letter} and {choice} (default '{letter}. {choice}')")
    p.add_argument("--answer-regex", help="extraction: group 1 of the first match is the answer (no fallback; "
                   "default: the last 'answer is X', else the last standalone letter)")
    p.add_argument("--max-tokens", type=int, help=f"the answer's token limit (default {DEFAULT_MAX_TOKENS})")
    p.add_argument("--shuffle-choices", type=int, metavar="SEED", help="each item's choices in an order drawn "
                   "from random.Random(SEED) in file order (simple-evals' GPQA: seed 0); the gold follows")
    p.add_argument("--vote", choices=["majority"], help="score each item by the majority answer of its "
                   "--samples (self-consistency, SC@k); default: each sample scored, averaged per item")


def _template(spec: RunSpec) -> str:
    path = spec.opt("prompt_template_path")
    if path:
        try:
            return Path(path).read_text()
        except OSError as e:
            raise SuiteError(f"--prompt-template-path {path}: cannot read it ({e.strerror})") from None
    return spec.opt("prompt_template") or DEFAULT_TEMPLATE


@lru_cache(maxsize=16)
def _answer_re(pattern: str) -> re.Pattern[str]:
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise SuiteError(f"--answer-regex {pattern!r}: not a regular expression ({e})") from None
    if rx.groups < 1:
        raise SuiteError(f"--answer-regex {pattern!r}: needs a group, ( ), around the answer")
    return rx


def _has_gold(d: dict[str, Any]) -> bool:
    a = d.get("answer")
    return a is not None and str(a).strip() != ""


def load(path: Path, allow_missing_gold: bool = False) -> Iterator[dict[str, Any]]:
    """Validate each line as we go; errors name the file and line (both lines for a duplicate id)."""
    if not path.is_file():
        raise SuiteError(f"{path}: no such file (jsonl suite data)")
    n = 0
    with path.open("rb") as f:
        version = _version(f)
        # Ids are checked for duplicates once per version of the file: the pre-flight check's pass, not
        # again by each model's stream of requests and the live ETA's plan (in a sweep of 45 models, 45
        # tables of every id at once). The first pass holds 64-bit hashes of the ids, ~20 bytes an id; a
        # repeated hash is checked by reading the file again up to that line (which also finds a duplicate's
        # first line for its error).
        seen = None if version in _UNIQUE else _Ids()
        # A version read whole and found valid (the pre-flight check's pass) is read again, by each model's
        # stream of requests and the scorer, parsed but not checked again (2.25 -> 1.2 us a line).
        trusted = (version, False) in _VALID or (version, allow_missing_gold) in _VALID
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise SuiteError(f"{path}:{lineno}: not valid JSON ({e})") from None
            if trusted:
                imgs = d.get("images")
                d["_images"] = _images(path, lineno, imgs) if imgs else []
                d["_line"], d["_gold"] = lineno, _gold(d)
            else:
                _check_line(path, lineno, d, allow_missing_gold, seen)
            n += 1
            yield d
        if n and not trusted and _version(f) == version:  # read whole, unchanged while read: valid
            _VALID.add((version, allow_missing_gold))
            _ITEMS[version] = n
            if seen is not None:  # (and no duplicate id)
                _UNIQUE.add(version)
    if not n:
        raise SuiteError(f"{path}: no items (the file is empty)")


def _check_line(path: Path, lineno: int, d: Any, allow_missing_gold: bool, seen: _Ids | None) -> None:
    """One parsed line's checks (its id against `seen`, when given); sets d's `_images`, `_line`, `_gold`."""
    if not isinstance(d, dict) or "id" not in d or "prompt" not in d:
        raise SuiteError(f'{path}:{lineno}: each line needs at least "id" and "prompt"')
    item = d["id"]
    key = item if type(item) is str else str(item)
    if type(item) not in (str, int) or key == "":
        raise SuiteError(
            f'{path}:{lineno}: "id" must be a non-empty string or an integer, got {item!r}'
        )
    if seen is not None and not seen.add(key) and (first := _first_line(path, key, lineno)):
        raise SuiteError(
            f"{path}:{lineno}: duplicate id {item!r} (also on line {first}); ids must be unique"
        )
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
    d["_images"] = _images(path, lineno, imgs)
    gold = _gold(d)  # once a line: the checks, the simulated hints and the scorer read d["_gold"]
    if gold is None and not allow_missing_gold:
        kind = "multiple-choice" if choices else "exact-match"
        raise SuiteError(
            f'{path}:{lineno}: no gold "answer" for {kind} item {item!r}; add it, or run with '
            "--allow-missing-gold to score such items None"
        )
    if choices and gold is not None and gold not in LETTERS[: len(choices)]:
        raise SuiteError(
            f'{path}:{lineno}: item {item!r}: gold "answer" {d["answer"]!r} is none of its '
            f"{len(choices)} choices; give a letter {LETTERS[0]}-{LETTERS[len(choices) - 1]} or "
            "one of the choices' texts exactly"
        )
    d["_line"], d["_gold"] = lineno, gold


def _images(path: Path, lineno: int, imgs: list[str]) -> list[Path]:
    """A line's images as paths (relative to the data file's folder), each there still: looked for on every
    pass, as a file can go between the check and a model's request."""
    out = [(path.parent / i) if not Path(i).is_absolute() else Path(i) for i in imgs]
    for img in out:
        if not img.is_file():
            raise SuiteError(f"{path}:{lineno}: image file not found: {img}")
    return out


def _gold(d: dict[str, Any]) -> str | None:
    """The gold as a letter for a multiple-choice line (given as a letter or an option's text), else as
    written; None without one. Read once a line, by `load` (d["_gold"])."""
    if not _has_gold(d):
        return None
    ans = str(d["answer"])
    choices = d.get("choices") or []
    if choices and ans not in LETTERS[: len(choices)] and ans in choices:
        return LETTERS[choices.index(ans)]  # answer given as the option text
    return ans


def _load(spec: RunSpec) -> Iterator[dict[str, Any]]:
    items = load(_path(spec), bool(spec.opt("allow_missing_gold", False)))
    seed = spec.opt("shuffle_choices")
    return items if seed is None else _shuffled(items, int(seed))


def _shuffled(items: Iterable[dict[str, Any]], seed: int) -> Iterator[dict[str, Any]]:
    """Each item's choices in an order drawn from one `random.Random(seed)` in file order, as
    simple-evals' GPQA draws `rng.sample(range(4), 4)` per example; the gold follows its option."""
    rng = random.Random(seed)
    for d in items:
        choices = d.get("choices") or []
        if choices:
            perm = rng.sample(range(len(choices)), len(choices))
            gold = d["_gold"]
            d = {**d, "choices": [choices[i] for i in perm]}
            if gold is not None:
                d["answer"] = d["_gold"] = LETTERS[perm.index(LETTERS.index(gold))]
        yield d


def prompt_of(d: dict[str, Any], template: str = DEFAULT_TEMPLATE, choice: str = DEFAULT_CHOICE) -> str:
    choices = d.get("choices") or []
    if not choices:
        return d["prompt"]
    opts = "\n".join(choice.format(letter=LETTERS[i], choice=c) for i, c in enumerate(choices))
    each = {LETTERS[i]: c for i, c in enumerate(choices)}
    try:
        return template.format(prompt=d["prompt"], choices=opts, **each)
    except (KeyError, IndexError) as e:
        raise SuiteError(f"--prompt-template: {{{e.args[0]}}} is not a placeholder of item {d['id']!r} "
                         "(use {prompt}, {choices}, or a letter of its options)") from None


def _sim(d: dict[str, Any]) -> dict[str, Any]:
    return _sim_for(d["_gold"] or "", len(d.get("choices") or []))


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
    limit = spec.opt("max_tokens") or DEFAULT_MAX_TOKENS
    decoding = Decoding(temperature=temp, n=n, max_tokens=limit)  # one, shared: requests are frozen
    template, choice = _template(spec), spec.opt("choice_format") or DEFAULT_CHOICE
    # Validated once: each line's request is this one with its own fields, of their types already (~1 us
    # a line instead of ~4 for a validated `Request`). The hints dict is shared, read only (`_sim_for`).
    proto = Request(suite=spec.suite, item="", messages=[], decoding=decoding, sim={})
    for k, d in enumerate(_load(spec)):
        if spec.limit is not None and k >= spec.limit:
            return
        yield replaced(
            proto,
            item=str(d["id"]),
            messages=[user(*d["_images"], prompt_of(d, template, choice))],
            sim=_sim(d),
            meta={},
        )


_ANSWER_RE = re.compile(r"answer\s*(?:is|:)?\s*[:\-]?\s*\(?\**([A-Z])\b", re.I)


def extract(text: str | None, n_choices: int, pattern: str | None = None) -> str | None:
    """The chosen letter: with `pattern`, group 1 of its first match (simple-evals' `re.search`);
    else the last `answer is X`, else the last standalone valid capital letter that is not the
    article or pronoun starting a phrase ("A quick estimate...", "I think...")."""
    if not text:
        return None
    if pattern:
        m = _answer_re(pattern).search(text)
        return m.group(1).strip().upper() if m and m.group(1) else None
    valid = LETTERS[:n_choices]
    hits = [m.group(1).upper() for m in _ANSWER_RE.finditer(text) if m.group(1).upper() in valid]
    if hits:
        return hits[-1]
    lone = [m.group(1) for m in re.finditer(rf"\b([{valid}])\b", text) if not _a_word(m.group(1), text, m.end())]
    return lone[-1] if lone else None


_WORD_AFTER = re.compile(r"\s+([a-z]+)")


def _a_word(letter: str, text: str, end: int) -> bool:
    """`A`/`I` used as a word ("A quick estimate", "I think"), not as the option's letter."""
    if letter not in "AI":
        return False
    m = _WORD_AFTER.match(text, end)
    return m is not None and m.group(1) not in ("is", "was", "and", "or")


def normalize(s: str | None) -> str:
    s = (s or "").lower().strip()
    s = re.sub(r"^(the answer is|answer:)\s*", "", s)
    s = "".join(ch for ch in s if ch not in string.punctuation)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def score(rows: Iterable[Row], spec: RunSpec, run_dir: Path, sink: Sink | None = None) -> ScoreReport:
    """Accuracy over answered items; a failed call is scored None, not wrong. An item's answered
    samples are one unit: their mean, or with `--vote majority` the majority answer (unreadable
    answers do not vote; an item with none is wrong). The CI resamples items, never rows."""
    sink = sink if sink is not None else Sink()
    gold_of: dict[str, tuple[str | None, int]] = {
        str(d["id"]): (d["_gold"], len(d.get("choices") or [])) for d in _load(spec)
    }
    pattern, vote = spec.opt("answer_regex"), spec.opt("vote") == "majority"
    per_model: dict[str, dict[str, list[Any]]] = {}  # model -> item -> [sum of scores, n, votes]
    unread: dict[str, list[int]] = {}  # model -> [answers no rule could read, answers]
    for r in rows:
        if r.get("pass") != "answer":
            continue
        g = gold_of.get(r["item"])
        if g is None:
            continue
        gold, n_choices = g
        items = per_model.setdefault(r["model"], {})
        if r.get("error"):
            sink(scored_row(r, extracted=None, gold=gold))
            continue
        if n_choices:
            ext = extract(r.get("text"), n_choices, pattern)
        else:
            ext = _free_text(r.get("text"), pattern)
        u = unread.setdefault(r["model"], [0, 0])
        u[0] += ext is None
        u[1] += 1
        if gold is None:  # --allow-missing-gold: answered, but nothing to score it against
            sink(scored_row(r, extracted=ext, gold=None, score=None))
            continue
        ok = float(ext == gold) if n_choices else float(ext is not None and ext == normalize(gold))
        acc = items.setdefault(r["item"], [0.0, 0, Counter()])
        acc[0] += ok
        acc[1] += 1
        if ext is not None:
            acc[2][ext] += 1
        sink(scored_row(r, extracted=ext, gold=gold, score=ok))
    models = {}
    for m, items in per_model.items():
        if vote:
            x = np.array([float(_majority(acc[2]) == _norm_gold(gold_of[i])) for i, acc in items.items()])
        else:
            x = np.array([acc[0] / acc[1] for acc in items.values()])
        bad, answered = unread.get(m, [0, 0])
        models[m] = {"accuracy": mean(x), "ci95": ci_list(x), "n": len(x),
                     "unreadable": bad / answered if answered else None}
    unit = "items, the majority answer of each item's samples" if vote else "items"
    table = Table(
        title=f"{spec.suite}: accuracy" + (f" (SC@{spec.samples or 1}, majority vote)" if vote else ""),
        columns=["model", "n", "accuracy", "95% CI"],
        rows=[
            [m, models[m]["n"], models[m]["accuracy"], models[m]["ci95"]] for m in ranked(models, "accuracy")
        ],
        note=ci_method(max((v["n"] for v in models.values()), default=0)) + f"; n counts {unit}",
        key=("accuracy", "95% CI"),
    )
    return ScoreReport(models=models, scored=sink.rows, tables=[table])


def _free_text(text: str | None, pattern: str | None) -> str | None:
    if pattern:
        m = _answer_re(pattern).search(text or "")
        return normalize(m.group(1)) or None if m and m.group(1) else None
    return normalize(text) or None


def _norm_gold(g: tuple[str | None, int]) -> str | None:
    gold, n_choices = g
    return gold if n_choices or gold is None else normalize(gold)


def _majority(votes: Counter[str]) -> str | None:
    """The most frequent answer (ties: the one given first), None when no answer could be read."""
    return votes.most_common(1)[0][0] if votes else None


def check(spec: RunSpec) -> None:
    """Every line validated before anything is sent or any run directory is made; samples that can
    only repeat one another (temperature 0) are said once."""
    own = spec.opt("prompt_template") or spec.opt("prompt_template_path")
    template, choice = _template(spec), spec.opt("choice_format") or DEFAULT_CHOICE
    for d in _load(spec):  # one pass: each line checked, then its prompt made when the template is the user's
        if own:
            prompt_of(d, template, choice)  # a bad placeholder: now
    if (spec.samples or 1) > 1 and not spec.temperature:
        log.warning("jsonl: --samples %d at temperature 0: most providers answer each sample the same, so "
                    "%s little; set --temperature (self-consistency papers use 0.5-0.7)", spec.samples,
                    "a majority vote over them adds" if spec.opt("vote") else "their spread says")
    if spec.opt("answer_regex"):
        _answer_re(spec.opt("answer_regex"))


def count(spec: RunSpec) -> int:
    """Calls per model without building requests: non-blank lines (validated later, by build). A version
    of the file read whole already (the pre-flight check's pass) is not read again: its count was kept."""
    path = _path(spec)
    if not path.is_file():
        raise SuiteError(f"{path}: no such file (jsonl suite data)")
    n = _ITEMS.get(_version(path))
    if n is None:
        with path.open("rb") as f:
            version = _version(f)
            n = sum(1 for line in f if line.strip())
            if _version(f) == version:  # (unchanged while read)
                _ITEMS[version] = n
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
