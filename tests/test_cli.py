"""The CLI contract: sweep, dry-run, models, cache, replay, and clear errors with exit code 2."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import orjson
import pytest

from cli.main import main
from tests.helpers import rows, write_dataset

SIM_FAST = '[[endpoints]]\nname = "sim"\nkind = "sim"\nlatency_ms = 0\n'


def test_sweep_runs_many_runs_in_one_scheduler(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 5)
    (tmp_path / "c.toml").write_text(SIM_FAST)
    (tmp_path / "sweep.toml").write_text(f"""
config = "c.toml"
out = "{tmp_path / "runs"}"
[[runs]]
suite = "jsonl:{data}"
models = ["sim/strong", "sim/weak"]
samples = 2
temperature = 0.7
[[runs]]
suite = "jeebench"
variant = "normal"
models = ["sim/medium"]
limit = 4
""")
    assert main(["sweep", str(tmp_path / "sweep.toml"), "--no-live"]) == 0
    r1, r2 = tmp_path / "runs" / "jsonl-d", tmp_path / "runs" / "jeebench-normal"
    assert len(rows(r1)) == 20 and len(rows(r2)) == 4
    man = json.loads((r2 / "manifest.json").read_text())
    assert man["status"] == "complete" and man["spec"]["options"]["variant"] == "normal"
    assert main(["score", str(r1), str(r2)]) == 0
    assert set(json.loads((r1 / "scores.json").read_text())["models"]) == {"sim/strong", "sim/weak"}
    (tmp_path / "bad.toml").write_text(
        f'[[runs]]\nsuite = "jsonl:{data}"\nmodels = ["sim/weak"]\nvariantt = "x"\n'
    )
    assert main(["sweep", str(tmp_path / "bad.toml")]) == 2
    assert "runs[0].variantt: not an option" in capsys.readouterr().err


def test_dry_run_sends_nothing_and_prices(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 10)
    out = tmp_path / "run"
    assert (
        main(
            [
                "run",
                f"jsonl:{data}",
                "--models",
                "sim/strong",
                "--samples",
                "3",
                "--dry-run",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "sim/strong" in text and "30" in text and "$" in text
    assert not out.exists()


def test_models_lists_config_and_sim(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[[endpoints]]\nname = "e"\nbase_url = "http://127.0.0.1:9/v1"\nrpm = 500\n'
        '[[models]]\nname = "my-model"\nendpoint = "e"\nprice_in = 3\nprice_out = 4\n'
    )
    assert main(["models", "--config", str(cfg)]) == 0
    text = capsys.readouterr().out
    assert "my-model" in text and "500" in text and "sim/strong" in text


def test_cache_stats_and_prune(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 4)
    cache = tmp_path / "cache"
    (tmp_path / "c.toml").write_text(SIM_FAST)
    main(
        [
            "run",
            f"jsonl:{data}",
            "--models",
            "sim/strong,sim/weak",
            "--config",
            str(tmp_path / "c.toml"),
            "--out",
            str(tmp_path / "run"),
            "--cache-dir",
            str(cache),
            "--no-live",
        ]
    )
    capsys.readouterr()
    assert main(["cache", "stats", "--cache-dir", str(cache), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["entries"] == 8 and st["per_model"] == {"sim/strong": 4, "sim/weak": 4}
    assert main(["cache", "stats", "--cache-dir", str(cache)]) == 0  # for people: a table with dates
    text = capsys.readouterr().out
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert f"oldest entry {today}" in text and "UTC" in text and "{" not in text, text
    assert re.search(r"sim/strong\s*│\s*4\b", text) and re.search(r"total\s*│\s*8\b", text), text
    assert main(["cache", "prune", "--cache-dir", str(cache), "--model", "sim/weak"]) == 0
    assert "removed 4" in capsys.readouterr().out
    assert main(["cache", "prune", "--cache-dir", str(cache)]) == 2  # says what to drop


def test_replay_answers_from_file_and_missing_line_is_error_row(tmp_path: Path):
    data = write_dataset(tmp_path / "d.jsonl", 3)
    replay = tmp_path / "released.jsonl"
    replay.write_bytes(
        b"".join(
            orjson.dumps({"item": f"q{i}", "sample": 0, "pass": "answer", "text": "The answer is A."}) + b"\n"
            for i in range(2)
        )
    )
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[[models]]\nname = "released"\nprovider = "replay"\npath = "{replay}"\n')
    out = tmp_path / "run"
    assert (
        main(
            [
                "run",
                f"jsonl:{data}",
                "--models",
                "released",
                "--config",
                str(cfg),
                "--out",
                str(out),
                "--no-live",
            ]
        )
        == 3
    )
    by = {r["item"]: r for r in rows(out)}
    assert by["q0"]["text"] == "The answer is A." and by["q0"]["error"] is None
    assert "no line for item 'q2'" in by["q2"]["error"] and by["q2"]["cost_usd"] is None
    assert main(["score", str(out)]) == 0
    scores = json.loads((out / "scores.json").read_text())["models"]["released"]
    # q0 right; q1 wrong; q2 failed: not a wrong answer, so not in n, and the coverage says so
    assert scores["n"] == 2 and scores["accuracy"] == pytest.approx(1 / 2)
    assert {k: scores[k] for k in ("n_planned", "n_scored", "n_errors")} == {
        "n_planned": 3,
        "n_scored": 2,
        "n_errors": 1,
    }
    assert scores["coverage"] == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "nosuchsuite", "--models", "sim/strong"], "unknown suite 'nosuchsuite'"),
        (
            ["run", "jsonl:/nonexistent.jsonl", "--models", "sim/strong", "--no-live"],
            "/nonexistent.jsonl: no such file",
        ),
        (["run", "jeebench", "--models", "gpt-9", "--no-live"], "unknown model 'gpt-9'"),
        (["score", "/nonexistent-run"], "not a run directory"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_missing_key_env_and_bad_config_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("NOT_SET_KEY", raising=False)
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[[endpoints]]\nname = "e"\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = "NOT_SET_KEY"\n'
        '[[models]]\nname = "m"\nendpoint = "e"\n'
    )
    data = write_dataset(tmp_path / "d.jsonl", 2)
    assert main(["run", f"jsonl:{data}", "--models", "m", "--config", str(cfg), "--no-live"]) == 2
    assert "NOT_SET_KEY is not set" in capsys.readouterr().err
    cfg.write_text('[[endpoints]]\nname = "e"\nmax_concurrency = "many"\n')
    assert main(["models", "--config", str(cfg)]) == 2
    assert f"{cfg}:3: endpoints[0].max_concurrency" in capsys.readouterr().err


def test_changed_settings_on_existing_run_dir_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 2)
    (tmp_path / "c.toml").write_text(SIM_FAST)
    base = [
        "run",
        f"jsonl:{data}",
        "--models",
        "sim/weak",
        "--config",
        str(tmp_path / "c.toml"),
        "--out",
        str(tmp_path / "run"),
        "--no-live",
    ]
    assert main(base) == 0
    assert main([*base, "--temperature", "0.9"]) == 2
    assert "Rerun with the same settings" in capsys.readouterr().err
    assert main([*base[:3], "sim/weak,sim/strong", *base[4:]]) == 0  # adding a model is fine
    assert len(rows(tmp_path / "run")) == 4


def test_malformed_dataset_line_is_named_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    data = write_dataset(tmp_path / "d.jsonl", 3)
    data.write_bytes(data.read_bytes() + b'{"id": "q9", "prompt": \n')
    out = tmp_path / "run"
    assert main(["run", f"jsonl:{data}", "--models", "sim/weak", "--out", str(out), "--no-live"]) == 2
    assert f"{data}:4: not valid JSON" in capsys.readouterr().err
    assert not out.exists()
