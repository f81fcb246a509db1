"""M3GIA: every suite option, and which values record which deviation from the paper's protocol."""

from __future__ import annotations

import pytest

from suites.base import RunSpec
from suites.m3gia import deviations

NO_JUDGE = "no --judge: stage 2 (the authors' choice_extraction LLM judge) is skipped"
JUDGE = {"judge": "gpt-4-turbo-2024-04-09"}
"""The paper's judge, so that only the option under test can record anything."""

# tests/test_protocol_options.py checks these cover every option.
# option dest -> [(value, substring of the deviation it records, or None for the paper's setting)]
CASES: dict[str, list[tuple[object, str | None]]] = {
    "data_dir": [(None, None), ("/somewhere/m3gia", None)],
    "languages": [(None, None), ("en,zh,fr,es,pt,ko", None), ("en", "--languages en: Overall and GIA over 1 of the paper's 6"),
                  ("en,zh", "--languages en,zh: Overall and GIA over 2")],
    "judge_parse": [(None, None), ("exact", None), ("lenient", "judge replies read leniently ('B.' counts")],
    "prompt": [(None, None), ("prefix", None), ("suffix", "suffix prompt (the paper's ablation")],
    "no_images": [(None, None), (False, None), (True, "images removed (the paper's text-only ablation)")],
    "judge": [(None, NO_JUDGE), ("gpt-4-turbo", None), ("gpt-4-turbo-2024-04-09", None), ("gpt-4-0125-preview", None),
              ("gpt-4o-mini", "judge gpt-4o-mini (the paper: GPT-4-turbo"), ("sim/judge", "judge sim/judge (the paper")],
}  # fmt: skip


@pytest.mark.parametrize("dest,value,want", [(d, v, w) for d, cs in CASES.items() for v, w in cs])
def test_option_value_records_its_deviation(dest: str, value: object, want: str | None) -> None:
    opts = {**JUDGE, dest: value} if dest != "judge" else {dest: value}
    devs = deviations(RunSpec("m3gia", opts))
    if want is None:
        assert devs == []
    else:
        assert len(devs) == 1 and want in devs[0], devs


def test_lenient_parse_without_judge_reads_nothing() -> None:
    assert deviations(RunSpec("m3gia", {"judge_parse": "lenient"})) == [deviations(RunSpec("m3gia", {}))[0]]


def test_iterations_temperature_limit() -> None:
    assert deviations(RunSpec("m3gia", JUDGE, samples=5, temperature=0.0)) == []
    d = deviations(RunSpec("m3gia", JUDGE, samples=2, temperature=0.7, limit=10))
    assert d == ["2 iteration(s) instead of the paper's 5 (App. F)", "temperature 0.7 instead of greedy decoding",
                 "--limit 10: a subset of each language's 300 questions (no GIA)"]  # fmt: skip


def test_a_judge_alias_is_checked_by_its_model_id(tmp_path) -> None:
    """`--judge gpt-4-turbo` where the config's gpt-4-turbo is another model: the name reads as the paper's
    judge, the model id does not, so the run records it (said before the run, with the model deviations)."""
    from runner.config import load_config
    from runner.pool import build_models
    from runner.protocol import protocol_deviations
    from suites.base import get_suite

    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[[endpoints]]\nname = "sim"\nkind = "sim"\n'
        '[[models]]\nname = "gpt-4-turbo"\nendpoint = "sim"\nmodel = "sim/judge"\n'
        '[[models]]\nname = "judge-b"\nendpoint = "sim"\nmodel = "gpt-4-turbo-2024-04-09"\n'
    )
    models = build_models(load_config(cfg), ["gpt-4-turbo", "judge-b", "sim/weak"])
    for suite, name, said in (
        ("m3gia", "gpt-4-turbo", ["judge gpt-4-turbo is the model sim/judge (the paper's judge: GPT-4-turbo, "
                                  "gpt-4-turbo-2024-04-09)"]),
        ("marvel", "gpt-4-turbo", ["judge gpt-4-turbo is the model sim/judge (the paper's judge: GPT-4)"]),
        ("m3gia", "judge-b", []),  # its name says nothing, its model is the paper's: the suite's own line
    ):  # fmt: skip
        spec = RunSpec(suite, {"judge": name})
        devs, per_model = protocol_deviations(get_suite(suite), spec, models, ["sim/weak"])
        assert per_model == said
        assert any(d.startswith(f"judge {name} (the paper") for d in devs) == (name == "judge-b")
