"""End to end through the real CLI: a `sim` sweep over a synthetic VRB dataset, then scoring."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from cli.main import main
from suites.vrb.synthetic import write_dataset

MODELS = ["sim/strong", "sim/medium", "sim/weak"]


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    cfg = tmp_path / "evalsweep.toml"
    cfg.write_text('[[endpoints]]\nname = "sim"\nkind = "sim"\nlatency_ms = 0\n')
    return write_dataset(tmp_path / "vrb", {"zambia": 24, "india": 16}), cfg


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_sim_sweep_then_score(setup: tuple[Path, Path], tmp_path: Path) -> None:
    data, cfg = setup
    out = tmp_path / "run"
    args = ["run", "vrb", "--models", ",".join(MODELS), "--out", str(out), "--data-dir", str(data)]
    assert main([*args, "--config", str(cfg), "--no-live"]) == 0
    assert main(["score", str(out)]) == 0

    scores = json.loads((out / "scores.json").read_text())
    assert scores["suite"] == "vrb" and scores["headline"] == "accuracy" and scores["chance"] == 0.25
    assert set(scores["models"]) == set(MODELS)
    for s in scores["models"].values():
        assert {
            "accuracy",
            "ci95",
            "by_dataset",
            "by_category",
            "by_skill",
            "by_severity",
            "skill_effects",
        } <= set(s)
        assert s["n"] == 40 and s["ci95"][0] <= s["accuracy"] <= s["ci95"][1]
        assert set(s["by_dataset"]) == {"zambia", "india"}
        combined = (
            24 * s["by_dataset"]["zambia"]["accuracy"] + 16 * s["by_dataset"]["india"]["accuracy"]
        ) / 40
        assert s["accuracy"] == pytest.approx(combined)
        assert set(s["by_severity"]) == {"no_error", "minor", "medium"}
        assert sum(c["n"] for c in s["by_category"].values()) == 40  # every item, as the reference's Figs 8, 12
    acc = {m: scores["models"][m]["accuracy"] for m in MODELS}
    assert acc["sim/strong"] > acc["sim/weak"]
    pooled = scores["skill_effects"]
    assert pooled["models"] == sorted(MODELS) and pooled["n_items"] <= 40
    assert all("ame_pp" in e for e in pooled["effects"].values())
    # the reference's item set by default: every item with an image-error annotation left out
    clean = sum(bool(r["severity"] in (None, "no_error") and r["category"]) for r in _rows(out / "scored.jsonl")) // 3
    assert pooled["items"] == "reference" and pooled["n_items"] == clean
    cats = scores["category_effects"]  # Fig. 11
    assert cats["items"] == "reference" and cats["categories"]
    assert all(0 <= c["accuracy"] <= 1 and c["ci95"][0] <= c["accuracy"] + 1e-9 for c in cats["categories"].values())

    scored = _rows(out / "scored.jsonl")
    assert len(scored) == 3 * 40
    assert all(r["extracted"] is None or r["extracted"] in "ABCDabcd1234" for r in scored)
    assert len(Counter(r["extract_step"] for r in scored)) >= 5  # realistic sim answers hit many steps

    # rescoring is deterministic (seeded bootstraps)
    assert main(["score", str(out)]) == 0
    assert json.loads((out / "scores.json").read_text()) == scores


def test_dataset_subset_limit_and_bad_data_dir(
    setup: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    data, cfg = setup
    out = tmp_path / "india"
    common = ["--config", str(cfg), "--no-live"]
    assert main(["run", "vrb", "--models", "sim/weak", "--out", str(out), "--data-dir", str(data),
                 "--datasets", "india", "--limit", "5", *common]) == 0  # fmt: skip
    assert main(["score", str(out)]) == 0
    assert {r["item"] for r in _rows(out / "scored.jsonl")} == {f"india/Q00{i}" for i in range(1, 6)}

    capsys.readouterr()
    bad = tmp_path / "bad"
    code = main(
        [
            "run",
            "vrb",
            "--models",
            "sim/weak",
            "--out",
            str(bad),
            "--data-dir",
            str(tmp_path / "nope"),
            *common,
        ]
    )
    assert code == 2 and "does not exist: pass --data-dir DIR" in capsys.readouterr().err
    assert not (bad / "results.jsonl").exists()
