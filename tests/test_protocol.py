"""Each suite's defaults are the paper's protocol, and every departure is named (suites' `deviations`);
truncated answers are counted per model."""

from __future__ import annotations

from suites.base import RunSpec, ScoreReport, Table, Truncation, get_suite, with_protocol


def _devs(suite: str, samples: int | None = None, temperature: float | None = None, **opts) -> list[str]:
    spec = RunSpec(suite=suite, options=opts, samples=samples, temperature=temperature)
    return get_suite(suite).deviations(spec)  # type: ignore[misc]


def test_paper_settings_have_no_deviations() -> None:
    # JEEBench: reading by rules (the paper: by hand) is always a deviation (tests/test_jeebench_protocol.py)
    assert [d for d in _devs("jeebench") if not d.startswith("answers read by rules")] == []
    assert _devs("jeebench", variant="cot-sc", samples=8, temperature=0.5) == _devs("jeebench", variant="cot-sc")
    assert _devs("m3gia", judge="gpt-4-turbo") == [] and _devs("m3gia", samples=5, judge="gpt-4-turbo-2024-04-09") == []


def test_missing_judge_and_changed_settings_are_named() -> None:
    m3 = _devs("m3gia", samples=1, temperature=0.7)
    assert m3[0].startswith("no --judge: stage 2 (the authors' choice_extraction LLM judge) is skipped")
    assert "1 iteration(s) instead of the paper's 5 (App. F)" in m3 and "temperature 0.7" in m3[2]
    jee = _devs("jeebench", variant="cot-sc", samples=4)
    assert jee[0] == "4 samples (the paper: 8)" and "Table 6" in jee[1]
    mv = _devs("marvel")
    assert mv[0].startswith("no --judge") and any("left-set" in d for d in mv) and not any("§4" in d for d in mv)
    assert any("§4" in d for d in _devs("marvel", coarse_images="numbered"))  # the paper's images are index-free
    assert not any(d.startswith("no --judge") for d in _devs("marvel", judge="gpt-4"))
    assert any("few-shot" in d for d in _devs("marvel", shots=1))
    assert [d[:8] for d in _devs("marvel", task="pattern", judge="gpt-4")] == ["--judge "]  # App. G: regex only (#38)
    vrb = _devs("vrb")
    assert vrb[0].startswith("skill and category effects: a fixed")
    assert vrb[1] == ("failed calls left out of accuracy, with coverage below 100% (the reference counts them "
                      "wrong: `accuracy_failures_wrong`)")  # no temperature sent by default, as the reference
    assert len(vrb) == 3 and vrb[2].startswith("max_tokens left to each model's maximum output")
    assert _devs("vrb", temperature=1.0)[3].startswith("temperature 1 sent (the reference sends none")
    assert "image error" in _devs("vrb", effects_items="nonfatal")[3]


def test_truncation_rate_and_deviation_notes() -> None:
    rows = [
        {"model": "a", "pass": "answer", "finish_reason": "length"},
        {"model": "a", "pass": "answer", "finish_reason": "stop"},
        {"model": "a", "pass": "answer", "finish_reason": "max_tokens"},  # Anthropic's word for it
        {"model": "a", "pass": "judge", "finish_reason": "length"},  # judge passes are not the model's answers
        {"model": "a", "pass": "answer", "error": "timeout", "finish_reason": None},  # errors are not answers
        {"model": "b", "pass": "answer", "finish_reason": "end_turn"},
    ]
    t = Truncation()
    assert list(t.watch(rows)) == rows  # passes rows through untouched
    rep = ScoreReport(models={"a": {}, "b": {}}, scored=[], tables=[Table("x", ["model"], [], note="n")])
    with_protocol(rep, ["2 samples"], t)
    assert rep.models["a"]["truncated"] == 2 and rep.models["a"]["truncation_rate"] == 2 / 3
    assert rep.models["b"] == {"truncated": 0, "truncation_rate": 0.0}
    assert rep.extra["protocol"] == {"protocol": "custom", "deviations": ["2 samples"]}
    assert rep.tables[0].note == "n\nDeviations from the paper's protocol: 2 samples."
    assert rep.tables[1].rows == [["a", 3, 2, 2 / 3], ["b", 1, 0, 0.0]]
