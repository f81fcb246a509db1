"""MARVEL (Jiang et al., NeurIPS 2024 D&B): hierarchical evaluation of abstract visual reasoning.

770 puzzles (an image: context panels on top, choices 1-4 below), five questions each: the AVR
question, a binary fine-grained perception question and three coarse-grained counting questions.

    evalsweep run marvel [--questions avr,fine,coarse] [--shots 0|1|2] [--demos same|ood|mix]
                         [--task puzzles|pattern] [--judge MODEL] [--data-dir DIR]
                         [--coarse-images index-free|numbered] [--panels whole|one-by-one]

- Item ids: "{id}/avr", "{id}/fine", "{id}/coarse-context", "{id}/coarse-choices", "{id}/coarse-whole";
  with `--task pattern` (pattern classification instead of the five questions): "{id}/pattern".
- `--limit K` takes the first K puzzles (file order) with all their selected questions.
- `--shots 1|2`: few-shot CoT for the AVR question only (see prompts.pick_demos); fine and coarse
  stay zero-shot. Temperature 0 and one sample unless --temperature / --samples say otherwise.
- `--demos mix` (with `--shots 2`, Table 10): one Sequence and one Two-row demo of the puzzle's pattern.
- `--panels one-by-one` (Table 11): the AVR question with each panel sent separately (Appendix I's
  strings), from the authors' DIR/Panel_data/; fine and coarse questions keep the whole image.
- `--judge MODEL`: responses the rules cannot read are re-read by MODEL (pass "judge").
- Images come from --data-dir, $EVALSWEEP_MARVEL_DATA or ./data/marvel (DIR/images/<id>.png); the
  label file is bundled (data/NOTICE). Coarse questions are shown the puzzle without choice indices,
  DIR/coarse/<id>.png, built from the authors' DIR/Panel_data/ (panels.py) as the paper does.

Files: data.py (load; panels.py: index-free images, the panels) → prompts.py (prompt, demos) → extract.py →
score.py (+ categories.py: Table 6's question categories; tables.py, paper_tables.py: the paper's layouts,
its numbers from paper.py beside ours); sim.py holds the simulated provider's response texts.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from core.types import ImagePart, Message, Request, Row
from suites.base import (
    RunSpec,
    ScoreReport,
    Sink,
    Suite,
    SuiteError,
    Truncation,
    judge_request,
    with_protocol,
)
from suites.marvel import panels, sim
from suites.marvel.data import KINDS, Puzzle, by_id, check_images, data_dir, load
from suites.marvel.extract import extract, judge_instruction
from suites.marvel.prompts import one_by_one_message, pick_demos, question_message
from suites.marvel.score import score as score_rows

QUESTIONS = {
    "avr": ("avr",),
    "fine": ("fine",),
    "coarse": ("coarse-context", "coarse-choices", "coarse-whole"),
}
MAX_TOKENS = 1024


@dataclass(frozen=True)
class Options:
    kinds: tuple[str, ...]
    shots: int
    demos: str
    task: str
    coarse_images: str = "index-free"
    panels: str = "whole"


def options(spec: RunSpec) -> Options:
    """The suite's flags, validated (they may also come from a config file, so never trust argparse)."""
    task = str(spec.opt("task", "puzzles"))
    if task not in ("puzzles", "pattern"):
        raise SuiteError(f"--task must be 'puzzles' or 'pattern', got {task!r}")
    raw = spec.opt("questions", "avr,fine,coarse")
    names = [q.strip() for q in (raw.split(",") if isinstance(raw, str) else raw) if q.strip()]
    bad = [q for q in names if q not in QUESTIONS]
    if bad or not names:
        raise SuiteError(
            f"--questions: unknown {', '.join(bad) or '(empty)'}; use a subset of avr,fine,coarse"
        )
    try:
        shots = int(spec.opt("shots", 0))
    except (TypeError, ValueError):
        raise SuiteError(f"--shots must be 0, 1 or 2, got {spec.opt('shots')!r}") from None
    if shots not in (0, 1, 2):
        raise SuiteError(f"--shots must be 0, 1 or 2, got {shots}")
    coarse_images = str(spec.opt("coarse_images") or "index-free")
    if coarse_images not in ("index-free", "numbered"):
        raise SuiteError(f"--coarse-images must be 'index-free' or 'numbered', got {coarse_images!r}")
    demos = str(spec.opt("demos", "same"))
    if demos not in ("same", "ood", "mix"):
        raise SuiteError(f"--demos must be 'same', 'ood' or 'mix', got {demos!r}")
    if demos == "mix" and shots == 1:
        raise SuiteError("--demos mix takes one Sequence and one Two-row demo (Table 10): use --shots 2")
    panels = str(spec.opt("panels") or "whole")
    if panels not in ("whole", "one-by-one"):
        raise SuiteError(f"--panels must be 'whole' or 'one-by-one', got {panels!r}")
    if task == "pattern":
        if shots or panels != "whole":
            raise SuiteError("--shots and --panels change the AVR question: neither combines with --task pattern")
        return Options(("pattern",), 0, demos, task)
    kinds = tuple(k for k in KINDS if any(k in QUESTIONS[q] for q in names))
    if (shots or panels != "whole") and "avr" not in kinds:
        raise SuiteError("--shots and --panels one-by-one change the AVR question: include avr in --questions")
    if shots and panels != "whole":
        raise SuiteError("--panels one-by-one is zero-shot (Table 11): it cannot be combined with --shots")
    return Options(kinds, shots, demos, task, coarse_images, panels)


def _selected(spec: RunSpec) -> tuple[Puzzle, ...]:
    puzzles = load()
    return puzzles if spec.limit is None else puzzles[: max(spec.limit, 0)]


def _plan(spec: RunSpec) -> tuple[Options, Path, list[tuple[Puzzle, list[Puzzle]]]]:
    """Options, data directory and (puzzle, demos) for every selected puzzle; all images checked."""
    opts = options(spec)
    root = data_dir(spec)
    puzzles = load()
    plan = [(p, pick_demos(p, puzzles, opts.shots, opts.demos)) for p in _selected(spec)]
    check_images(root, sorted({p.id for p, _ in plan} | {d.id for _, ds in plan for d in ds}))
    if any(k.startswith("coarse") for k in opts.kinds) and opts.coarse_images == "index-free":
        panels.ensure(root, [p for p, _ in plan])
    if opts.panels == "one-by-one":
        panels.check_panels(root, [p for p, _ in plan])
    return opts, root, plan


def check(spec: RunSpec) -> None:
    _plan(spec)


def build(spec: RunSpec) -> Iterator[Request]:
    opts, root, plan = _plan(spec)
    decoding = {
        "temperature": spec.temperature if spec.temperature is not None else 0.0,
        "n": spec.samples or 1,
        "max_tokens": MAX_TOKENS,
    }
    for p, demos in plan:
        msgs = {
            kind: question_message(p, kind, root, demos if kind == "avr" else [], opts.coarse_images == "index-free")
            for kind in opts.kinds
        }
        for kind in opts.kinds:
            shots = demos if kind == "avr" else []
            separate = kind == "avr" and opts.panels == "one-by-one"
            message = (
                one_by_one_message(p, root)
                if separate
                else question_message(p, kind, root, shots, opts.coarse_images == "index-free")
            )
            meta = {"puzzle": p.id, "question": kind, "demos": [d.id for d in shots]}
            yield Request(
                suite="marvel",
                item=f"{p.id}/{kind}",
                messages=[message],
                decoding=decoding,
                sim=sim.hints(p, kind),
                meta={**meta, "panels": "one-by-one"} if separate else meta,
                prefix=shared_image(message, msgs.values()),
            )


def shared_image(msg: Message, siblings: Iterable[Message]) -> tuple[int, int] | None:
    """(0, 0) when the puzzle image opening this question opens another of its questions too (the
    provider can cache it for the rest), else None: a prefix asked about once is not worth a cache write."""
    def opening(m: Message) -> tuple[str | None, bytes | None, str | None] | None:
        p = m.content[0] if isinstance(m.content, list) and m.content else None
        return (p.path, p.data, p.detail) if isinstance(p, ImagePart) else None

    first = opening(msg)
    return (0, 0) if first is not None and sum(opening(m) == first for m in siblings) > 1 else None


def follow_up(req: Request, row: Row, spec: RunSpec) -> list[Request]:
    """With --judge: one judge pass for an answer the rules cannot read (refusals included)."""
    judge = spec.opt("judge")
    if not judge or req.pass_ != "answer" or row.get("error") or not (row.get("text") or "").strip():
        return []
    pid, _, kind = req.item.partition("/")
    p = by_id()[int(pid)]
    if extract(kind, row["text"], p) is not None:
        return []
    hints = sim.judge_hints(p, kind, row["text"])
    return [judge_request(req, row, judge, judge_instruction(kind, p), sim=hints)]


def deviations(spec: RunSpec) -> list[str]:
    """Departures from the paper's protocol (README.md: Protocol)."""
    opts, out = options(spec), []
    judge = spec.opt("judge")
    if opts.task == "pattern":  # Appendix G: "We use regex mapping to extract MLLMs output" (no GPT-4 stage)
        out.append(
            f"--judge {judge}: pattern answers the rules cannot read are re-read by {judge} (Appendix G extracts "
            "pattern answers by regex mapping only)"
            if judge
            else "pattern answers are read by our rules and those they cannot read count as wrong (Appendix G: "
            "regex mapping only; its regexes and how it counts unread answers are not given)"
        )
    elif not judge:
        out.append("no --judge: responses the rules cannot read count as wrong (the paper re-extracts them with GPT-4)")
    elif not is_paper_judge(str(judge)):
        out.append(f"judge {judge} (the paper re-extracts with {PAPER_JUDGE_NAME})")
    if opts.task == "puzzles":
        out.append(
            "the headline figures count refusals (provider blocks included) as wrong; the paper's left-set "
            "figures (refusals excluded) are in `left_set` and their own table"
        )
    if "coarse-context" in opts.kinds and opts.coarse_images == "numbered":
        out.append(
            "--coarse-images numbered: coarse perception questions show the numbered puzzle image (the paper "
            "removes the choice indices, §4)"
        )
    if opts.shots:
        out.append(
            "few-shot CoT rationales are built from the one-line explanations (the paper's demonstrations are "
            "not released; demos whose explanation names choices by letter are left out)"
        )
    if opts.panels == "one-by-one":
        out.append(
            "--panels one-by-one: {index} is sent as an ordinal word (\"first\") and each string after its panel "
            "(Appendix I gives neither)"
        )
    return out + run_deviations(spec)


def run_deviations(spec: RunSpec) -> list[str]:
    """Samples or temperature other than the suite's default, and --limit. The paper states no temperature
    and no sample count; it reports one accuracy per model, so one answer per question is ours to assume."""
    out = []
    if spec.samples not in (None, 1) or spec.temperature not in (None, 0.0):
        out.append(
            f"samples {spec.samples or 1} at temperature {spec.temperature or 0} (this suite's default: one answer "
            "at temperature 0; the paper states neither)"
        )
    if spec.limit is not None:
        out.append(f"--limit {spec.limit}: a subset of the 770 puzzles")
    return out


PAPER_JUDGE = re.compile(r"gpt-4(?![o.\d])")
"""Judge names and model ids read as the paper's GPT-4 (gpt-4, gpt-4-turbo and dated ids; not gpt-4o or gpt-4.1)."""
PAPER_JUDGE_NAME = "GPT-4"


def is_paper_judge(name: str) -> bool:
    return PAPER_JUDGE.search(name.lower()) is not None


def score(rows: Iterable[Row], spec: RunSpec, run_dir: Path, sink: Sink | None = None) -> ScoreReport:
    trunc = Truncation()
    opts = options(spec)
    prompting = (opts.shots, opts.demos, opts.panels)
    report = score_rows(trunc.watch(rows), spec, run_dir, opts.kinds, sink=sink, prompting=prompting)
    return with_protocol(report, deviations(spec), trunc)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--questions", default=None, help="comma-separated subset of avr,fine,coarse (default: all)"
    )
    parser.add_argument(
        "--shots", type=int, choices=(0, 1, 2), default=None, help="few-shot CoT demos for AVR"
    )
    parser.add_argument(
        "--demos",
        choices=("same", "ood", "mix"),
        default=None,
        help="demos from the same pattern (Sequence), another pattern (Table 9) or, with --shots 2, one Sequence "
        "and one Two-row puzzle of the same pattern (Table 10)",
    )
    parser.add_argument(
        "--panels",
        choices=("whole", "one-by-one"),
        default=None,
        help="one-by-one: the AVR question with each panel sent separately (Table 11; needs DIR/Panel_data/)",
    )
    parser.add_argument(
        "--task",
        choices=("puzzles", "pattern"),
        default=None,
        help="pattern = classify each puzzle's pattern",
    )
    parser.add_argument(
        "--coarse-images",
        dest="coarse_images",
        choices=("index-free", "numbered"),
        default=None,
        help="coarse questions on the puzzle without choice indices, built from the authors' Panel_data "
        "(default, as the paper) or on the numbered image (recorded as a deviation)",
    )
    parser.add_argument(
        "--judge", metavar="MODEL", default=None, help="LLM judge for answers the rules cannot read"
    )
    parser.add_argument(
        "--data-dir", dest="data_dir", default=None, help="MARVEL data dir with images/<id>.png "
        "(default: $EVALSWEEP_MARVEL_DATA, else ./data/marvel)",
    )  # fmt: skip


def run_name(spec: RunSpec) -> str:
    """marvel[-pattern][-<k>shot-<demos>][-<questions>]: one directory per distinct set of requests."""
    opts = options(spec)
    name = "marvel-pattern" if opts.task == "pattern" else "marvel"
    if opts.shots:
        name += f"-{opts.shots}shot-{opts.demos}"
    if opts.task == "puzzles" and opts.kinds != KINDS:
        name += "-" + "+".join(q for q, ks in QUESTIONS.items() if ks[0] in opts.kinds)
    if "coarse-context" in opts.kinds and opts.coarse_images == "numbered":
        name += "-numbered"
    if opts.panels == "one-by-one":
        name += "-onebyone"
    return name


SUITE = Suite(
    name="marvel",
    build=build,
    score=score,
    follow_up=follow_up,
    add_arguments=add_arguments,
    headline="avr",
    run_name=run_name,
    check=check,
    deviations=deviations,
    paper_judge=(is_paper_judge, PAPER_JUDGE_NAME),
    revision=2,
    revision_note="pattern classification sends Table 13's prompt (revision 1: coarse questions on the index-free "
    "puzzle image, as the paper)",
)
