"""Runs over different data are never merged silently (#37): one jsonl path edited between two runs
(8 items, then 9) makes two leaderboards, each labelled by its data, not one."""

from __future__ import annotations

import json
from pathlib import Path

from cli.main import main
from tests.helpers import run_args, write_dataset


def test_two_runs_of_one_path_over_other_data_are_two_experiments(tmp_path: Path):
    data = write_dataset(tmp_path / "d.jsonl", 8)
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(run_args(data, "sim/strong", None, a, "--no-cache")) == 0
    write_dataset(data, 9)  # the file grew by one item, same path
    assert main(run_args(data, "sim/weak", None, b, "--no-cache")) == 0
    for d in (a, b):
        assert main(["score", str(d)]) == 0
    out = tmp_path / "report"
    assert main(["report", str(a), str(b), "--out", str(out)]) == 0
    page = (out / "index.html").read_text()
    ids = [json.loads((d / "manifest.json").read_text())["data_identity"]["suite"].split(":")[-1][:8] for d in (a, b)]
    assert ids[0] != ids[1]
    assert f"data {ids[0]}" in page and f"data {ids[1]}" in page  # two leaderboards, told apart by their data


def test_one_data_file_stays_one_experiment(tmp_path: Path):
    data = write_dataset(tmp_path / "d.jsonl", 8)
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(run_args(data, "sim/strong", None, a, "--no-cache")) == 0
    assert main(run_args(data, "sim/weak", None, b, "--no-cache")) == 0
    for d in (a, b):
        assert main(["score", str(d)]) == 0
    out = tmp_path / "report"
    assert main(["report", str(a), str(b), "--out", str(out)]) == 0
    assert "data " not in (out / "index.html").read_text().split("<h3>", 1)[1].split("</h3>", 1)[0]
