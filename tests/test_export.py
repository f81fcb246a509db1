"""`evalsweep export`: a scored sim run written in other tools' formats, read back with their own readers."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from runner.cli import main
from tests.helpers import rows, run_args, write_dataset


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("export")
    data = write_dataset(d / "data.jsonl", 12)
    out = d / "run"
    assert main(run_args(data, "sim/strong,sim/weak", None, out)) == 0
    assert main(["score", str(out)]) == 0
    return out


def scored(run: Path) -> dict[tuple[str, str], dict]:
    lines = (run / "scored.jsonl").read_bytes().splitlines()
    return {(s["model"], s["item"]): s for s in map(orjson.loads, lines)}


def test_inspect_logs_round_trip(run_dir: Path, tmp_path: Path) -> None:
    log_mod = pytest.importorskip("inspect_ai.log")
    out = tmp_path / "logs"
    assert main(["export", str(run_dir), "--format", "inspect", "--out", str(out)]) == 0
    files = sorted(out.glob("*.eval"))
    assert len(files) == 2, files
    want = scored(run_dir)
    results = {(r["model"], r["item"]): r for r in rows(run_dir)}
    scores = json.loads((run_dir / "scores.json").read_text())["models"]
    seen = set()
    for f in files:
        log = log_mod.read_eval_log(str(f))
        model = log.eval.model
        assert log.status == "success" and model in scores
        assert log.eval.task == json.loads((run_dir / "scores.json").read_text())["suite"]
        metrics = log.results.scores[0].metrics
        assert metrics["accuracy"].value == pytest.approx(scores[model]["accuracy"])
        assert metrics["ci95_low"].value == pytest.approx(scores[model]["ci95"][0])
        assert len(log.samples) == 12
        in_tok = out_tok = 0
        for s in log.samples:
            ref = want[(model, s.id)]
            seen.add((model, s.id))
            assert s.epoch == 1
            assert s.scores["evalsweep"].value == ref["score"]
            assert s.scores["evalsweep"].answer == ref["extracted"]
            assert s.target == ref["gold"]
            call = results[(model, s.id)]
            assert s.output.completion == call["text"]
            assert s.messages[-1].text == call["text"] and s.messages[-1].role == "assistant"
            assert "which letter?" in s.messages[0].text  # the prompt, rebuilt from the suite
            assert s.model_usage[model].total_cost == pytest.approx(call["cost_usd"])
            in_tok += call["usage"]["input_tokens"]
            out_tok += call["usage"]["output_tokens"]
        assert log.stats.model_usage[model].input_tokens == in_tok
        assert log.stats.model_usage[model].output_tokens == out_tok
    assert seen == set(want)


def test_export_needs_a_scored_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_dataset(tmp_path / "data.jsonl", 2)
    out = tmp_path / "run"
    assert main(run_args(data, "sim/strong", None, out)) == 0
    assert main(["export", str(out), "--format", "inspect"]) == 2
    assert "evalsweep score" in capsys.readouterr().err
