"""`evalsweep export`: a scored sim run written in other tools' formats, read back with their own readers."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from cli.main import main
from tests.helpers import rows, run_args, write_dataset


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("data") / "data.jsonl", 12)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, data: Path) -> Path:
    out = tmp_path_factory.mktemp("export") / "run"
    assert main(run_args(data, "sim/strong,sim/weak", None, out)) == 0
    assert main(["score", str(out)]) == 0
    return out


def scored(run: Path) -> dict[tuple[str, str], dict]:
    lines = (run / "scored.jsonl").read_bytes().splitlines()
    return {(s["model"], s["item"]): s for s in map(orjson.loads, lines)}


def test_inspect_logs_round_trip(run_dir: Path, tmp_path: Path) -> None:
    log_mod = pytest.importorskip("inspect_ai.log", reason="inspect-ai is not installed (pip install -e '.[inspect]'; .ci/run does)")
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


def replay_run(tmp_path: Path, data: Path, path: Path, name: str = "replayed") -> dict:
    cfg = tmp_path / "replay.toml"
    cfg.write_text(f'[[models]]\nname = "{name}"\nprovider = "replay"\npath = "{path}"\n')
    out = tmp_path / f"run-{name}"
    code = main(run_args(data, name, cfg, out))
    assert main(["score", str(out)]) in (0, 3)
    return {"code": code, "scores": json.loads((out / "scores.json").read_text())["models"][name], "dir": out}


def test_replay_of_an_exported_inspect_log_rescores_the_same(
    run_dir: Path, data: Path, tmp_path: Path
) -> None:
    pytest.importorskip("inspect_ai", reason="inspect-ai is not installed (pip install -e '.[inspect]'; .ci/run does)")
    out = tmp_path / "logs"
    assert main(["export", str(run_dir), "--format", "inspect", "--out", str(out)]) == 0
    scores = json.loads((run_dir / "scores.json").read_text())["models"]
    for model, f in (
        ("sim/strong", next(out.glob("*sim-strong_*.eval"))),
        ("sim/weak", next(out.glob("*sim-weak_*.eval"))),
    ):
        got = replay_run(tmp_path, data, f, name=model.replace("/", "-"))
        assert got["code"] == 0
        for k in ("accuracy", "n", "n_scored", "ci95"):
            assert got["scores"][k] == scores[model][k], k
        want = {(s["item"], s["extracted"]) for s in scored(run_dir).values() if s["model"] == model}
        assert {(s["item"], s["extracted"]) for s in scored(got["dir"]).values()} == want


def test_replay_of_a_foreign_inspect_log(data: Path, tmp_path: Path) -> None:
    """A log inspect itself wrote (no evalsweep metadata): id = item, output's completion = the answer."""
    log_mod = pytest.importorskip("inspect_ai.log", reason="inspect-ai is not installed (pip install -e '.[inspect]'; .ci/run does)")
    from inspect_ai.model import ModelOutput

    samples = [
        log_mod.EvalSample(id=f"q{i}", epoch=1, input="x", target="", output=ModelOutput.from_content("m", t))
        for i, t in enumerate(["The answer is A.", "B", "nothing", "(D)"] * 3)
    ]
    log = log_mod.EvalLog(
        eval=log_mod.EvalSpec(
            created="2026-01-01T00:00:00+00:00",
            task="t",
            dataset=log_mod.EvalDataset(),
            model="m",
            config=log_mod.EvalConfig(),
        ),
        samples=samples,
    )
    path = tmp_path / "foreign.json"  # inspect's JSON format, told apart by content
    log_mod.write_eval_log(log, str(path))
    got = replay_run(tmp_path, data, path)
    assert got["code"] == 0
    assert got["scores"]["accuracy"] == pytest.approx(9 / 12)  # the gold cycles A-D: "nothing" is the miss


def test_replay_of_openai_evals_recorder_log(data: Path, tmp_path: Path) -> None:
    path = tmp_path / "oaieval.jsonl"
    lines = [{"spec": {"completion_fns": ["gpt-4"], "eval_name": "x.dev.v0", "run_id": "r1"}}]
    for i in range(12):
        lines.append(
            {
                "run_id": "r1",
                "event_id": 2 * i,
                "sample_id": f"q{i}",
                "type": "sampling",
                "data": {"prompt": "...", "sampled": ["The answer is " + "ABCD"[i % 4]]},
                "created_by": "",
                "created_at": "2026-01-01 00:00:00",
            }
        )
        lines.append(
            {
                "run_id": "r1",
                "event_id": 2 * i + 1,
                "sample_id": f"q{i}",
                "type": "match",
                "data": {"correct": True},
                "created_by": "",
                "created_at": "2026-01-01 00:00:00",
            }
        )
    lines.append({"final_report": {"accuracy": 1.0}})
    path.write_bytes(b"\n".join(map(orjson.dumps, lines)) + b"\n")
    got = replay_run(tmp_path, data, path)
    assert got["code"] == 0 and got["scores"]["accuracy"] == 1.0


def test_replay_of_openai_evals_api_output_items(data: Path, tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    items = [
        {
            "object": "eval.run.output_item",
            "datasource_item_id": i,
            "datasource_item": {"id": f"q{i}"},
            "sample": {"output": [{"role": "assistant", "content": "ABCD"[i % 4] if i < 6 else "Z"}]},
        }
        for i in range(12)
    ]
    path.write_bytes(orjson.dumps({"object": "list", "data": items}) + b"\n")
    got = replay_run(tmp_path, data, path)
    assert got["scores"]["accuracy"] == pytest.approx(0.5)


def test_replay_errors_name_file_and_line(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(
        orjson.dumps({"spec": {}})
        + b"\n"
        + orjson.dumps({"sample_id": "q0", "type": "sampling", "data": {"sampled": [3]}})
        + b"\n"
    )
    cfg = tmp_path / "replay.toml"
    cfg.write_text(f'[[models]]\nname = "r"\nprovider = "replay"\npath = "{path}"\n')
    assert main(run_args(data, "r", cfg, tmp_path / "out")) == 2
    assert f"{path}:2: field data.sampled" in capsys.readouterr().err


def test_every_eval_ever_validates_against_the_published_schema(run_dir: Path, tmp_path: Path) -> None:
    import jsonschema

    schemas = Path(__file__).resolve().parents[1] / "report" / "export" / "schemas"
    agg_v = jsonschema.Draft7Validator(json.loads((schemas / "eval.schema.json").read_text()))
    inst_v = jsonschema.Draft7Validator(json.loads((schemas / "instance_level_eval.schema.json").read_text()))
    out = tmp_path / "eee"
    assert main(["export", str(run_dir), "--format", "every-eval-ever", "--out", str(out)]) == 0
    aggs = sorted(out.glob("data/*/*/*/*.json"))
    assert len(aggs) == 2
    scores = json.loads((run_dir / "scores.json").read_text())["models"]
    want = scored(run_dir)
    for agg_path in aggs:
        agg = json.loads(agg_path.read_text())
        agg_v.validate(agg)
        model = agg["model_info"]["name"]
        head = agg["evaluation_results"][0]
        assert head["metric_config"]["metric_id"] == "accuracy"
        assert head["score_details"]["score"] == scores[model]["accuracy"]
        ci = head["score_details"]["uncertainty"]["confidence_interval"]
        assert [ci["lower"], ci["upper"]] == scores[model]["ci95"]
        rel = agg["detailed_evaluation_results"]["file_path"]
        assert agg_path.with_name(agg_path.stem + "_samples.jsonl") == out / rel
        lines = [json.loads(x) for x in (out / rel).read_text().splitlines()]
        assert len(lines) == agg["detailed_evaluation_results"]["total_rows"] == 12
        for x in lines:
            inst_v.validate(x)
            ref = want[(model, x["sample_id"])]
            assert x["evaluation_id"] == agg["evaluation_id"]
            assert x["evaluation"]["score"] == ref["score"]
            assert x["answer_attribution"][0]["extracted_value"] == ref["extracted"]
            assert x["input"]["reference"] == [ref["gold"]] and "which letter?" in x["input"]["raw"]
    # a record that breaks the schema is caught (the validator is not vacuous)
    agg["evaluation_results"][0]["score_details"].pop("score")
    assert not agg_v.is_valid(agg)


def test_hf_eval_results_and_samples_parquet(run_dir: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq
    import yaml

    out = tmp_path / "hf"
    args = ["export", str(run_dir), "--format", "hf", "--out", str(out), "--dataset-id", "me/bench"]
    assert main(args) == 0
    scores = json.loads((run_dir / "scores.json").read_text())["models"]
    for model, folder in (("sim/strong", "sim-strong"), ("sim/weak", "sim-weak")):
        (f,) = (out / folder / ".eval_results").glob("*.yaml")
        items = yaml.safe_load(f.read_text())
        assert isinstance(items, list) and len(items) == 1
        assert (
            items[0]["dataset"]["id"] == "me/bench" and items[0]["dataset"]["task_id"] == "jsonl:data.jsonl"
        )
        assert items[0]["value"] == scores[model]["accuracy"]
        assert str(items[0]["date"]) == json.loads((run_dir / "manifest.json").read_text())["created"][:10]
    (pq_file,) = (out / "samples").glob("*.parquet")
    t = pq.read_table(pq_file).to_pylist()
    want = scored(run_dir)
    results = {(r["model"], r["item"]): r for r in rows(run_dir)}
    assert {(r["model"], r["item"]) for r in t} == set(want)
    for r in t:
        ref = want[(r["model"], r["item"])]
        assert (r["score"], r["extracted"], r["gold"]) == (ref["score"], ref["extracted"], ref["gold"])
        assert r["responses"] == [results[(r["model"], r["item"])]["text"]]
        assert r["cost_usd"] == pytest.approx(results[(r["model"], r["item"])]["cost_usd"])
        assert "which letter?" in r["prompt"]


def test_failed_calls_are_exported_as_errors_never_as_wrong(data: Path, tmp_path: Path) -> None:
    """Replay lines for 10 of 12 items: two error rows, which every format keeps apart from scores."""
    import jsonschema

    src = tmp_path / "partial.jsonl"
    src.write_bytes(
        b"".join(orjson.dumps({"item": f"q{i}", "text": "The answer is A"}) + b"\n" for i in range(10))
    )
    got = replay_run(tmp_path, data, src, name="partial")
    assert got["code"] == 3 and got["scores"]["n_errors"] == 2
    run = got["dir"]
    out = tmp_path / "eee"
    assert main(["export", str(run), "--format", "every-eval-ever", "--out", str(out)]) == 0
    (agg_path,) = out.glob("data/*/*/*/*.json")
    agg = json.loads(agg_path.read_text())
    assert agg["detailed_evaluation_results"]["total_rows"] == 10
    assert agg["detailed_evaluation_results"]["additional_details"]["n_errors"] == "2"
    schema = Path(__file__).resolve().parents[1] / "report" / "export" / "schemas" / "eval.schema.json"
    jsonschema.validate(agg, json.loads(schema.read_text()))
    log_mod = pytest.importorskip("inspect_ai.log", reason="inspect-ai is not installed (pip install -e '.[inspect]'; .ci/run does)")
    logs = tmp_path / "logs"
    assert main(["export", str(run), "--format", "inspect", "--out", str(logs)]) == 0
    (f,) = logs.glob("*.eval")
    samples = {s.id: s for s in log_mod.read_eval_log(str(f)).samples}
    assert len(samples) == 12
    for i in (10, 11):
        s = samples[f"q{i}"]
        assert s.scores == {} and s.error is not None and "no line" in s.error.message
    assert samples["q0"].scores["evalsweep"].value == 1.0
    # replaying the export keeps the failures failures (error rows), not wrong answers
    again = replay_run(tmp_path, data, f, name="again")
    assert again["code"] == 3 and again["scores"]["n_errors"] == 2
    assert again["scores"]["accuracy"] == got["scores"]["accuracy"]
