"""End to end through the CLI: a `sim` sweep of the generic jsonl suite → score → report."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from cli.main import main as cli


@pytest.fixture
def questions(tmp_path: Path) -> Path:
    q = tmp_path / "q.jsonl"
    with q.open("w") as f:
        for i in range(24):
            choices = [str(i + 1), str(i + 2), str(i), str(i + 3)]
            f.write(
                json.dumps({"id": f"q{i}", "prompt": f"What is {i} + 1?", "choices": choices, "answer": "A"})
            )
            f.write("\n")
    return q


def test_sim_sweep_score_report(questions: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a, b = tmp_path / "runs" / "a", tmp_path / "runs" / "b"
    suite = f"jsonl:{questions}"
    unscored = ["--no-live", "--no-score"]
    assert cli(["run", suite, "--models", "sim/strong,sim/weak,sim/random", "--out", str(a), *unscored]) == 0
    assert cli(["run", suite, "--models", "sim/medium,sim/frontier", "--out", str(b), *unscored]) == 0

    # not scored yet: a clear error and a non-zero exit, nothing written
    capsys.readouterr()
    assert cli(["report", str(a), "--out", str(tmp_path / "early")]) == 2
    assert "scores.json: missing; score the run first: `evalsweep score" in capsys.readouterr().err
    assert not (tmp_path / "early").exists()

    assert cli(["score", str(a), str(b)]) == 0
    table = tmp_path / "models.csv"
    table.write_text(
        "model_id,provider,open,url,release_date,size,input_cost,output_cost,display_name,is_reasoning,is_vision\n"
        "sim/weak,Sim,True,,06/2024,,0.1,0.4,Weak Sim,False,False\n"
    )
    out = tmp_path / "report"
    assert cli(["report", str(a), str(b), "--out", str(out), "--models-table", str(table)]) == 0

    # frontier.csv against the run directories, read independently of the report's code
    scores = {
        **json.loads((a / "scores.json").read_text())["models"],
        **json.loads((b / "scores.json").read_text())["models"],
    }
    prices = {
        m["name"]: m["price_in"]
        for d in (a, b)
        for m in json.loads((d / "config.json").read_text())["models"]
    }
    spent: dict[str, float] = {}
    for d in (a, b):
        for line in (d / "results.jsonl").read_text().splitlines():
            r = json.loads(line)
            spent[r["model"]] = spent.get(r["model"], 0.0) + r["cost_usd"]
    with (out / "frontier.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["model", "suite", "accuracy", "price_in", "run_cost_usd", "on_frontier"]
    assert {r["model"] for r in rows} == {
        "sim/strong",
        "sim/weak",
        "sim/random",
        "sim/medium",
        "sim/frontier",
    }
    for r in rows:
        m = r["model"]
        assert r["suite"] == "jsonl:q.jsonl"
        assert float(r["accuracy"]) == scores[m]["accuracy"]
        assert float(r["price_in"]) == prices[m]
        assert float(r["run_cost_usd"]) == pytest.approx(spent[m], rel=1e-9)
        dominated = any(
            float(o["price_in"]) <= float(r["price_in"])
            and float(o["accuracy"]) >= float(r["accuracy"])
            and (float(o["price_in"]) < float(r["price_in"]) or float(o["accuracy"]) > float(r["accuracy"]))
            for o in rows
        )
        assert r["on_frontier"] == str(not dominated)
    assert sum(r["on_frontier"] == "True" for r in rows) >= 2

    page = (out / "index.html").read_text()
    assert "Weak Sim" in page  # display name from the models table (the sim config leaves it unset)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//|<script[^>]*\bsrc|<link\b""", page, re.I)
    assert len(re.findall(r'src="data:image/png;base64,', page)) == 3  # frontier, over time, leaderboard
    assert (out / "frontier.png").read_bytes()[:4] == b"\x89PNG"
