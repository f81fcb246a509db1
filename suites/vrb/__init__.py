"""VRB (Huti et al., 2026): 701 minimal-text visual multiple-choice questions from primary-school exams
in Zambia and India, one image each, four options. The items are private; users hold them in the
published format and point `--data-dir` at them (data.py describes the layout).

load (data.py) → prompt (prompt.py; the image as the reference sends it: image.py) → extract (reference.py: the reference's code exactly, the default;
extract.py: ours, `--extractor rules`) → score and aggregate (score.py, effects.py, categories.py,
severity.py; the paper's numbers beside ours: paper.py).
Item ids are "{dataset}/{id}". sim.py writes realistic responses for the `sim/...` models.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator
from pathlib import Path

from core.types import Request, Row
from suites.base import RunSpec, ScoreReport, Sink, Suite, Truncation, with_protocol
from suites.vrb import data, prompt, sim
from suites.vrb.categories import COVARIATES, ESTIMANDS
from suites.vrb.extract import EXTRACTORS
from suites.vrb.image import reference_png
from suites.vrb.score import REFERENCE_EXCLUDED, excluded_models, extractor
from suites.vrb.score import score as score_rows

MAX_TOKENS_DEVIATION = (
    "max_tokens left to each model's maximum output (the reference: min(33,000, that maximum), run.py "
    "DEFAULT_MAX_TOKENS clamped by fdllm; one request serves every model and providers refuse a limit above "
    "their maximum, so a model whose maximum exceeds 33,000 may answer longer: set params = {max_tokens = "
    "33000} for it in the config)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        dest="data_dir",
        default=None,
        type=lambda s: str(Path(s).expanduser().resolve()),
        help=f"folder with options.csv, <dataset>{data.QUESTIONS_SUFFIX} and <dataset>-images/ "
        f"(default: ${data.ENV_DATA_DIR}, else {data.DEFAULT_DATA_DIR})",
    )
    parser.add_argument(
        "--effects-items",
        dest="effects_items",
        choices=("reference", "nonfatal"),
        default=None,
        help="items in the skill and category effects: the reference's (no image error; default) or all "
        "but those with a fatal image error",
    )
    parser.add_argument(
        "--extractor",
        choices=tuple(EXTRACTORS),
        default=None,
        help="answer extraction: the reference's eight steps exactly (default) or our rules with four fixes "
        "(extract.py; recorded as a deviation)",
    )
    parser.add_argument(
        "--exclude-models",
        dest="exclude_models",
        default=None,
        metavar="M1,M2|none",
        help="models left out of the per-model tables and views, the pooled skill and category effects, the "
        "severity mean and analyses and the frontier, as the paper's figures (default: the reference's list, score.py REFERENCE_EXCLUDED, where those models are in the "
        "run; 'none' keeps every model)",
    )
    parser.add_argument(
        "--category-covariates",
        dest="category_covariates",
        choices=COVARIATES,
        default=None,
        help="Fig. 11's category effects with the skill indicators as covariates, as the reference (default), "
        "or without",
    )
    parser.add_argument(
        "--category-estimand",
        dest="category_estimand",
        choices=ESTIMANDS,
        default=None,
        help="Fig. 11's predicted accuracy: the mean of each category's own fitted probabilities, as the "
        "reference (default), or standardised (every answer set to each category in turn)",
    )
    parser.add_argument(
        "--datasets",
        default=None,
        help=f"comma-separated datasets, e.g. zambia,india (default: every *{data.QUESTIONS_SUFFIX} found)",
    )


def check(spec: RunSpec) -> None:
    """Read and validate every file the run needs (CSV fields, option sets, gold labels, images: each decoded
    and resized as it will be sent, so a broken file stops the run before its first call)."""
    items = data.load(spec)
    data.check_images(items)
    for it in items:
        reference_png(it.image)


def build(spec: RunSpec) -> Iterator[Request]:
    n = spec.samples or 1
    temperature = spec.temperature  # None: none sent, the provider's default, as the reference
    for k, item in enumerate(data.load(spec)):
        if spec.limit is not None and k >= spec.limit:
            return
        yield Request(
            suite=spec.suite,
            item=item.key,
            messages=prompt.messages(item),
            decoding={"temperature": temperature, "n": n, "max_tokens": prompt.MAX_TOKENS},
            sim=sim.hints(item),
            meta={"dataset": item.dataset, "option_id": item.option_id},
        )


def deviations(spec: RunSpec) -> list[str]:
    """Departures from the reference protocol (README.md: Protocol); the first three always hold."""
    out = [
        "skill and category effects: a fixed-effects logit (model, dataset, category dummies; the reference: "
        "Bayesian, random model and dataset effects), as is the severity regression (the reference: random "
        "category, model and dataset effects); intervals from an item bootstrap, 95% (the reference's code: "
        "each answer's 94% HDI bounds averaged over the answers (bambi `average_by`, interpret/utils.py::"
        "average_over), a band much wider than an interval for the average; the paper's Fig. 9: 95% bootstrap)",
        "failed calls left out of accuracy, with coverage below 100% (the reference counts them wrong: "
        "`accuracy_failures_wrong`)",
        MAX_TOKENS_DEVIATION,
    ]
    if spec.temperature is not None:
        out.append(f"temperature {spec.temperature:g} sent (the reference sends none: each provider's default)")
    if spec.opt("effects_items") == "nonfatal":
        out.append("effects over all items but the fatal ones (the reference drops every item with an image error)")
    if extractor(spec) != "reference":
        out.append(
            "--extractor rules: answers read with our four fixes to the reference's eight steps (word-bounded "
            "labels, 'answer is: X', markdown emphasis, the article 'a')"
        )
    excluded = excluded_models(spec)
    if excluded != REFERENCE_EXCLUDED:
        which = "every model in the run" if not excluded else "the run's models but " + ", ".join(sorted(excluded))
        out.append(f"per-model tables and views, pooled skill and category effects, severity mean and analyses, "
                   f"and frontier over {which} (the reference excludes its own list of {len(REFERENCE_EXCLUDED)} "
                   "from all of them, its per-model figures included: --exclude-models)")  # fmt: skip
    if spec.opt("category_covariates") == "none":
        out.append("task category effects (Fig. 11) without the skill covariates (the reference: category + "
                   "skill indicators)")  # fmt: skip
    if spec.opt("category_estimand") == "standardised":
        out.append("task category effects (Fig. 11) by marginal standardisation (the reference: the mean of each "
                   "category's own fitted probabilities)")  # fmt: skip
    if spec.samples not in (None, 1):
        out.append(f"{spec.samples} samples (the reference: 1)")
    if spec.limit is not None:
        out.append(f"--limit {spec.limit}: a subset of the items")
    return out


def score(rows: Iterable[Row], spec: RunSpec, run_dir: Path, sink: Sink | None = None) -> ScoreReport:
    trunc = Truncation()
    return with_protocol(score_rows(trunc.watch(rows), spec, run_dir, sink), deviations(spec), trunc)


def run_name(spec: RunSpec) -> str:
    ds = spec.opt("datasets")
    name = "vrb-" + "-".join(n.strip() for n in str(ds).split(",") if n.strip()) if ds else "vrb"
    return name + ("-nonfatal" if spec.opt("effects_items") == "nonfatal" else "")


SUITE = Suite(
    name="vrb",
    build=build,
    score=score,
    add_arguments=add_arguments,
    headline="accuracy",
    run_name=run_name,
    check=check,
    deviations=deviations,
    revision=2,
    revision_note="images resized and re-encoded as PNG and the prompt's leading newline kept, as the reference",
    open_max_tokens=33000,  # the reference's DEFAULT_MAX_TOKENS (run.py)
)
