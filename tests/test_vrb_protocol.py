"""VRB: every suite option and the deviation each value records; the reference's extraction exactly
(`--extractor reference`, every step and quirk) against ours (`rules`); the reference's count of failed
calls; the reference's model exclusions in the pooled effects."""

from __future__ import annotations

from pathlib import Path

import pytest

from suites.base import RunSpec
from suites.vrb import SUITE, deviations
from suites.vrb.extract import extract_step
from suites.vrb.reference import reference_step
from suites.vrb.score import REFERENCE_EXCLUDED
from tests.test_vrb_score import make_data, row

FIXED = "skill and category effects: a fixed-effects logit"
FAILED = "failed calls left out of accuracy"
CAP = "max_tokens left to each model's maximum output (the reference: min(33,000, that maximum)"

# tests/test_protocol_options.py checks these cover every option.
# option dest -> [(value, substring of the deviation it records, or None for the reference's setting)]
CASES: dict[str, list[tuple[object, str | None]]] = {
    "data_dir": [(None, None), ("/data/vrb", None)],
    "effects_items": [(None, None), ("reference", None), ("nonfatal", "effects over all items but the fatal ones")],
    "extractor": [(None, None), ("reference", None), ("rules", "--extractor rules: answers read with our four fixes")],
    "exclude_models": [(None, None), (",".join(sorted(REFERENCE_EXCLUDED)), None),
                       ("none", "per-model tables and views, pooled skill and category effects, severity mean and "
                                "analyses, and frontier over every model in the run"),
                       ("gpt-4o", "over the run's models but gpt-4o (the reference excludes its own list of 12 from "
                                  "all of them, its per-model figures included")],  # #38: the per-model views too
    "category_covariates": [(None, None), ("skills", None), ("none", "(Fig. 11) without the skill covariates")],
    "category_estimand": [(None, None), ("reference", None), ("standardised", "(Fig. 11) by marginal standardisation")],
    "datasets": [(None, None), ("zambia,india", None)],
}  # fmt: skip


@pytest.mark.parametrize("dest,value,want", [(d, v, w) for d, cs in CASES.items() for v, w in cs])
def test_option_value_records_its_deviation(dest: str, value: object, want: str | None) -> None:
    devs = deviations(RunSpec("vrb", {dest: value}))
    assert devs[0].startswith(FIXED) and devs[1].startswith(FAILED)  # always: see suites/vrb/README.md
    assert devs[2].startswith(CAP)  # always: one request for every model cannot carry a per-model cap
    if want is None:
        assert devs[3:] == []
    else:
        assert len(devs) == 4 and want in devs[3], devs


def test_temperature_samples_limit() -> None:
    assert deviations(RunSpec("vrb", {}, temperature=0.0))[3] == (
        "temperature 0 sent (the reference sends none: each provider's default)"
    )
    assert deviations(RunSpec("vrb", {}, samples=3, limit=5))[3:] == ["3 samples (the reference: 1)", "--limit 5: a subset of the items"]


UP, LOW, NUM = ("A", "B", "C", "D"), ("a", "b", "c", "d"), ("1", "2", "3", "4")

# text, labels, the reference's (answer, step), ours (answer, step)
STEPS = [
    ("Reasoning...\n**B**", UP, ("B", 1), ("B", 1)),  # 1: bare last line, * _ $ stripped
    ("<|begin_of_box|>b<|end_of_box|> shown", UP, ("B", 2), ("B", 2)),  # 2: GLM box, cased per option set
    ("so \\boxed{C}.", UP, ("C", 3), ("C", 3)),  # 3
    ("\\boxed{\\text{C}} is it", UP, ("C", 7), ("C", 3)),  # 3: ours reads \text{}; the reference's last resort
    ("<answer>d</answer> then more", LOW, ("d", 4), ("d", 4)),  # 4
    ("Long reasoning. The final answer: c", UP, ("C", 5), ("C", 5)),  # 5a at the end, upper-cased
    ("I think the answer is B because", UP, ("B", 5), ("B", 5)),  # 5b
    ("the answer is a circle, so 4", NUM, ("4", 7), ("4", 7)),
    ("It is round, the answer is a circle so I pick D", UP, ("A", 5), ("D", 7)),  # quirk: the article 'a'
    ("Clearly the answer is: C and nothing else", UP, ("C", 7), ("C", 5)),  # 'answer is: C': ours step 5
    ("The answer is Clearly option 2.", NUM, ("2", 6), ("2", 6)),
    ("Hmm. The answer is Clearly wrong; choose D", UP, ("C", 5), ("D", 6)),  # quirk: C out of "Clearly"
    ("Option B is correct, I think.", UP, ("B", 6), ("B", 6)),  # 6
    ("I select **C** here", UP, ("C", 7), ("C", 6)),  # markdown: ours step 6, ref last resort
    ("Definitely the larger one", UP, ("D", 7), (None, 8)),  # quirk: any capital A-D anywhere
    ("| shape | count |\n| x | y |\nno idea", UP, ("|", 7), (None, 8)),  # quirk: '|' is in the class
    ("$A$ is not it; I am unsure", UP, (None, 8), (None, 8)),  # $...$ removed first
    ("", UP, (None, 8), (None, 8)),  # 8
]  # fmt: skip


@pytest.mark.parametrize("text,labels,ref,ours", STEPS)
def test_reference_steps_and_our_fixes(text: str, labels: tuple, ref: tuple, ours: tuple) -> None:
    assert reference_step(text, labels) == ref
    assert extract_step(text, labels) == ours


def test_failures_counted_wrong_as_the_reference(tmp_path: Path) -> None:
    root = make_data(tmp_path / "vrb")
    rows = [row("m", "x/Q1", "A"), row("m", "x/Q2", "B"), row("m", "y/Q1", "1"),
            row("m", "y/Q2", None, error="HTTP 500 after 6 attempts")]  # fmt: skip
    m = SUITE.score(rows, RunSpec("vrb", {"data_dir": str(root)}), tmp_path).models["m"]
    assert m["accuracy"] == pytest.approx(2 / 3) and m["accuracy_failures_wrong"] == pytest.approx(2 / 4)


def test_reference_exclusions_leave_the_pool(tmp_path: Path) -> None:
    root = make_data(tmp_path / "vrb")
    models = ["openai/gpt-5-2025-08-07-high", "a", "b"]
    rows = [row(m, k, t) for m in models for k, t in (("x/Q1", "A"), ("x/Q2", "C"), ("y/Q1", "4"), ("y/Q2", "D"))]
    ext = SUITE.score(rows, RunSpec("vrb", {"data_dir": str(root)}), tmp_path).extra
    assert ext["skill_effects"]["excluded_models"] == ["openai/gpt-5-2025-08-07-high"]
    assert ext["skill_effects"]["models"] == ["a", "b"]
    assert ext["category_effects"]["excluded_models"] == ["openai/gpt-5-2025-08-07-high"]
    assert "has_" in ext["category_effects"]["formula"]  # the skill covariates, as the reference
    every = SUITE.score(rows, RunSpec("vrb", {"data_dir": str(root), "exclude_models": "none"}), tmp_path).extra
    assert every["skill_effects"]["models"] == sorted(models) and every["skill_effects"]["excluded_models"] == []


def test_a_run_made_with_the_old_requests_is_not_resumed_into(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The default requests changed (revision 2: the reference's resized PNGs and its prompt's leading newline):
    a directory from before is refused, not mixed."""
    import json

    from cli.main import main
    from suites.vrb.synthetic import write_dataset

    data = write_dataset(tmp_path / "vrb", {"zambia": 3})
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[endpoints]]\nname = "sim"\nkind = "sim"\nlatency_ms = 0\n')
    out = tmp_path / "run"
    argv = ["run", "vrb", "--models", "sim/weak", "--data-dir", str(data), "--out", str(out), "--config", str(cfg),
            "--no-live", "--no-score"]  # fmt: skip
    assert main(argv) == 0
    man = json.loads((out / "manifest.json").read_text())
    assert man["suite_revision"] == 2
    assert main(argv) == 0  # the same revision resumes
    man["suite_revision"] = 1  # as the previous version wrote it
    (out / "manifest.json").write_text(json.dumps(man))
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "made by revision 1 of the vrb suite's requests; this version builds revision 2 (images resized" in err


def test_interval_line_says_the_references_averaged_hdi_bounds() -> None:
    """#38: the reference's bands are per-answer 94% HDI bounds averaged (bambi `average_by`), not 94% HDIs
    of the average: the recorded line says so."""
    line = deviations(RunSpec("vrb", {}))[0]
    assert "94% HDI bounds averaged over the answers" in line and "average_by" in line
    assert "94% HDIs;" not in line


def test_reference_exclusions_leave_the_per_model_tables(tmp_path: Path) -> None:
    """#38: the paper's per-model views never show EXCLUDE_MODELS: our tables leave them out (the note names
    them); --exclude-models none shows them."""
    root = make_data(tmp_path / "vrb")
    models = ["openai/gpt-5-2025-08-07-high", "a", "b"]
    rows = [row(m, k, t) for m in models for k, t in (("x/Q1", "A"), ("x/Q2", "C"), ("y/Q1", "4"), ("y/Q2", "D"))]

    def shown(opts: dict) -> list[set]:
        tabs = SUITE.score(rows, RunSpec("vrb", {"data_dir": str(root), **opts}), tmp_path).tables
        return [({r[0] for r in t.rows} & set(models), t.note) for t in tabs if t.columns[0] == "model"]

    got = shown({})
    assert len(got) == 5 and all(names == {"a", "b"} for names, _ in got)  # + Fig. 8's task spread (#38)
    assert all("openai/gpt-5-2025-08-07-high" in note and "--exclude-models none" in note for _, note in got)
    assert all(names == set(models) for names, _ in shown({"exclude_models": "none"}))
