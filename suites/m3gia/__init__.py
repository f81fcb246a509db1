"""M3GIA (Song et al., 2024): 1,800 multilingual multimodal cognitive-test questions, 18 types, GIA scores.

load (data.py: parquet from --data-dir, bundled keys) -> prompt (prompts.py, verbatim) -> extract
(extract.py: rules, `--judge` pass, seeded random letter) -> score (score.py: accuracy by type, cluster,
CHC factor and language, mean over `--samples` iterations) -> GIA (gia.py: the authors' lavaan CFA
factor scores, ported to numpy).

`--limit K` takes the first K questions of each selected language; GIA is only reported for languages
whose 300 questions were all run. The paper's numbers are printed beside ours (paper.py: `paper:` rows);
`deviations(spec)` says before a run what its options change, departures.py adds at scoring what only the
answers show (stage-1 edge cases, random letters, failed calls) and what holds for every run.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from core.types import ImagePart, Message, Request, Row, user
from suites.base import RunSpec, ScoreReport, Sink, Suite, SuiteError, Truncation, with_protocol
from suites.m3gia import extract, score
from suites.m3gia.data import LANGS, Question, load, parse_languages
from suites.m3gia.departures import JUDGE_CODE, after_scoring
from suites.m3gia.factors import factor_correlation, table3
from suites.m3gia.figures import fig4_right_png, fig5_png
from suites.m3gia.prompts import (
    JUDGE_MAX_TOKENS,
    JUDGE_SYSTEM,
    judge_prompt,
    judge_sim,
    prompt_text,
    sim_hints,
)

NAME = "m3gia"
MAX_TOKENS = 2048
"""The authors' inference_only.py default (--max-new-tokens 2048)."""
ITERATIONS = 5
"""The paper averages every metric over 5 iterations (App. F)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data-dir",
        help="directory with the M3GIA parquet files (english_v1.parquet, ...) "
        "from https://huggingface.co/datasets/Songweii/M3GIA",
    )
    p.add_argument("--languages", help=f"comma-separated subset of {','.join(LANGS)} (default: all)")
    p.add_argument(
        "--judge-parse", choices=["exact", "lenient"], default=None,
        help="the judge's reply: exactly one letter, as the authors read it (default), or ours, which also "
        "reads 'B.' (recorded as a deviation)",
    )
    p.add_argument("--prompt", choices=["prefix", "suffix"], help="instruction before (default) or after")
    p.add_argument(
        "--no-images", action="store_true", default=None, help="drop every image (the paper's ablation)"
    )
    p.add_argument(
        "--judge", metavar="MODEL", help="LLM that maps answers the rules cannot parse to a letter"
    )


def iterations(spec: RunSpec) -> int:
    return spec.samples or ITERATIONS


def _langs(spec: RunSpec) -> list[str]:
    return parse_languages(spec.opt("languages"))


def _mode(spec: RunSpec) -> str:
    mode = spec.opt("prompt", "prefix")
    if mode not in ("prefix", "suffix"):
        raise SuiteError(f"--prompt {mode!r}: use prefix or suffix")
    return mode


def check(spec: RunSpec) -> None:
    """Before anything is sent: options valid and every selected language's parquet present and readable."""
    _mode(spec)
    if spec.samples is not None and spec.samples < 1:
        raise SuiteError("--samples must be at least 1 (the number of iterations)")
    for lang in _langs(spec):
        for _ in load(spec.opt("data_dir"), lang, limit=spec.limit, images=False):
            pass  # every selected row validated (text columns only: cheap), so build cannot fail mid-run


def _meta(q: Question) -> dict[str, Any]:
    return {
        "lang": q.lang,
        "qid": q.qid,
        "type": q.qtype,
        "question": q.question,
        "hint": q.hint,
        "options": list(q.options),
        "answer": q.answer,
    }


def _from_meta(m: dict[str, Any]) -> Question:
    return Question(
        lang=m["lang"],
        qid=m["qid"],
        qtype=m["type"],
        question=m["question"],
        hint=m["hint"],
        options=tuple(m["options"]),
        answer=m["answer"],
    )


def build(spec: RunSpec) -> Iterator[Request]:
    mode, images = _mode(spec), not spec.opt("no_images", False)
    temp = spec.temperature if spec.temperature is not None else 0.0  # greedy, as in the paper
    for lang in _langs(spec):
        for q in load(spec.opt("data_dir"), lang, limit=spec.limit, images=images):
            parts: list[Any] = [ImagePart(data=q.image)] if q.image else []  # image first
            yield Request(
                suite=spec.suite,
                item=q.item,
                messages=[user(*parts, prompt_text(q, mode))],
                decoding={"temperature": temp, "n": iterations(spec), "max_tokens": MAX_TOKENS},
                sim=sim_hints(q),
                meta=_meta(q),
            )


def count(spec: RunSpec) -> int:
    """First-pass calls per model from the text columns only: no image bytes read for progress."""
    n = sum(
        1 for lang in _langs(spec) for _ in load(spec.opt("data_dir"), lang, limit=spec.limit, images=False)
    )
    return n * iterations(spec)


def follow_up(req: Request, row: Row, spec: RunSpec) -> list[Request]:
    """The judge pass (stage 2), only for answers the rules cannot parse, and only with --judge."""
    judge = spec.opt("judge")
    if not judge or req.pass_ != "answer" or row.get("error") or not req.meta:
        return []
    q = _from_meta(req.meta)
    text = row.get("text") or ""
    if extract.by_rules(text, q.letters, q.options) is not None:
        return []
    return [
        Request(
            suite=req.suite,
            item=req.item,
            model=req.model,
            sample=row["sample"],
            pass_="judge",
            via=judge,
            messages=[Message(role="system", content=JUDGE_SYSTEM), user(judge_prompt(q, text))],
            decoding={"temperature": 0.0, "max_tokens": JUDGE_MAX_TOKENS},
            sim=judge_sim(q, text),
            meta=req.meta,
        )
    ]


def deviations(spec: RunSpec) -> list[str]:
    """Departures from the paper's protocol (README.md: Protocol)."""
    out = []
    if not spec.opt("judge"):
        out.append(
            "no --judge: stage 2 (the authors' choice_extraction LLM judge) is skipped, so answers the rules "
            "cannot read get a random letter (stage 3, seeded per model, question and iteration)"
        )
    if iterations(spec) != ITERATIONS:
        out.append(f"{iterations(spec)} iteration(s) instead of the paper's {ITERATIONS} (App. F)")
    if spec.temperature not in (None, 0.0):
        out.append(f"temperature {spec.temperature} instead of greedy decoding")
    if _mode(spec) == "suffix":
        out.append("suffix prompt (the paper's ablation; its main results use the prefix prompt)")
    if spec.opt("no_images", False):
        out.append("images removed (the paper's text-only ablation)")
    if spec.limit is not None:
        out.append(f"--limit {spec.limit}: a subset of each language's 300 questions (no GIA)")
    langs = _langs(spec)
    if len(langs) < len(LANGS):
        out.append(f"--languages {','.join(langs)}: Overall and GIA over {len(langs)} of the paper's "
                   f"{len(LANGS)} languages")
    judge = spec.opt("judge")
    if judge and not is_paper_judge(str(judge)):
        out.append(f"judge {judge} (the paper: {PAPER_JUDGE_NAME}; the authors' released code calls \"gpt-3.5\")")
    if judge and spec.opt("judge_parse") == "lenient":
        out.append("judge replies read leniently ('B.' counts; the authors take only an exact letter)")
    return out


PAPER_JUDGE = ("gpt-4-turbo", "gpt-4-1106", "gpt-4-0125")
"""Judge names and model ids read as the paper's judge (GPT-4-turbo and its dated ids)."""
PAPER_JUDGE_NAME = "GPT-4-turbo, gpt-4-turbo-2024-04-09"


def is_paper_judge(name: str) -> bool:
    return any(t in name.lower() for t in PAPER_JUDGE)


def score_run(rows: Iterable[Row], spec: RunSpec, run_dir: Path, sink: Sink | None = None) -> ScoreReport:
    qs = [
        q for lang in _langs(spec) for q in load(spec.opt("data_dir"), lang, limit=spec.limit, images=False)
    ]
    trunc = Truncation()
    lenient = spec.opt("judge_parse") == "lenient"
    models, scored, unmatched = score.score_rows(trunc.watch(rows), qs, iterations(spec), sink, lenient)
    asked = question_set(qs)
    for s in models.values():
        s["questions"] = asked  # Table 4's side by side pairs only runs over the same questions (sweep.py)
    corr = score.pearson(models)
    judge = spec.opt("judge")
    note = f"{unmatched} result rows matched no selected question and were ignored." if unmatched else ""
    note = "; ".join(x for x in (note, f"Judge: {judge or 'none'}; {JUDGE_CODE}.") if x)
    fcorr, ftable = factor_correlation(models)
    images = not spec.opt("no_images", False)
    extra: dict[str, Any] = {
        "gia_accuracy_pearson": corr,
        "factor_correlation": fcorr,
        "unmatched_rows": unmatched,
        "prompt": _mode(spec),
        "images": images,
        "judge": judge,
        "judge_sources": {"paper": "GPT-4-turbo (App. F)", "authors_code": "gpt-3.5 (utils/eval_utils.py)"},
    }
    for key, png in (("fig4_right_png", fig4_right_png(models, corr, run_dir / "m3gia_fig4_right.png")),
                     ("fig5_png", fig5_png(models, run_dir / "m3gia_fig5.png"))):  # fmt: skip
        if png is not None:
            extra[key] = png.name
    report = ScoreReport(
        models=models,
        scored=scored,
        tables=score.tables(models, corr, note, images) + ([ftable] if ftable else []) + [table3(qs)],
        extra=extra,
    )
    return with_protocol(report, deviations(spec) + after_scoring(models), trunc)


def question_set(qs: Iterable[Question]) -> dict[str, Any]:
    """The questions a run asked (after --languages and --limit): the languages, the count per language,
    and a digest of the item ids, so two runs can be told to cover the same questions or not."""
    items = sorted(q.item for q in qs)
    per_lang = {lang: sum(i.startswith(f"{lang}/") for i in items) for lang in LANGS}
    return {
        "languages": [lang for lang, n in per_lang.items() if n],
        "per_language": {lang: n for lang, n in per_lang.items() if n},
        "digest": hashlib.sha256("\n".join(items).encode()).hexdigest()[:16],
    }


def run_name(spec: RunSpec) -> str:
    parts = [NAME]
    if _mode(spec) == "suffix":
        parts.append("suffix")
    if spec.opt("no_images", False):
        parts.append("noimg")
    langs = _langs(spec)
    if langs != list(LANGS):
        parts.append("-".join(langs))
    return "-".join(parts)


SUITE = Suite(
    name=NAME,
    build=build,
    score=score_run,
    follow_up=follow_up,
    add_arguments=add_arguments,
    headline="accuracy",
    run_name=run_name,
    check=check,
    count=count,
    deviations=deviations,
    paper_judge=(is_paper_judge, PAPER_JUDGE_NAME),
)
