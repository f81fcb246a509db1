"""A model whose answers no extraction rule could read is named (#37): 744 of 744 unreadable answers
used to score 0 with no word. scores.json `unreadable_models` and the last screen say it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from tests.helpers import run_args, write_dataset


def test_unreadable_answers_are_named_on_the_last_screen(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 8)
    out = tmp_path / "run"
    args = run_args(data, "sim/strong,sim/weak", None, out, "--answer-regex", r"(?i)final choice: ([A-D])")
    args.remove("--no-score")
    assert main(args) == 0
    said = capsys.readouterr()
    scores = json.loads((out / "scores.json").read_text())
    assert scores["unreadable_models"] == {"sim/strong": 1.0, "sim/weak": 1.0}
    assert scores["models"]["sim/strong"]["unreadable"] == 1.0
    text = said.out + said.err
    assert "answers no rule could read: sim/strong 100%, sim/weak 100%" in " ".join(text.split())
    page = (out / "report" / "index.html").read_text()
    assert "Answers no rule could read: sim/strong (100%); sim/weak (100%)" in page


def test_readable_answers_are_not_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 8)
    out = tmp_path / "run"
    args = run_args(data, "sim/strong", None, out)
    args.remove("--no-score")
    assert main(args) == 0
    said = capsys.readouterr()
    scores = json.loads((out / "scores.json").read_text())
    assert "unreadable_models" not in scores and scores["models"]["sim/strong"]["unreadable"] == 0.0
    assert "no rule could read" not in said.out + said.err
    assert "no rule could read" not in (out / "report" / "index.html").read_text()
