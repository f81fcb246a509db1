"""A suite without a paper (`jsonl:`, a user's suite) gets wording without one (#37): its departures are
from the suite's protocol, its tables the suite's, never "the paper's"."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main
from tests.helpers import run_args, write_dataset


def test_a_jsonl_run_never_speaks_of_a_paper(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 4)
    out = tmp_path / "run"
    args = run_args(data, "sim/strong", None, out, "--samples", "2", "--temperature", "0.7", "--limit", "3")
    args.remove("--no-score")
    assert main(args) == 0
    said = capsys.readouterr()
    text = said.out + said.err + (out / "deviations.txt").read_text() + (out / "report" / "index.html").read_text()
    assert "paper" not in text.lower(), [ln for ln in text.splitlines() if "paper" in ln.lower()][:5]
    assert "deviations from the suite's protocol" in (out / "deviations.txt").read_text()


def test_a_paper_suite_still_names_its_paper(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    out = tmp_path / "run"
    assert main(["run", "jeebench", "--models", "sim/strong", "--limit", "3", "--out", str(out), "--no-live",
                 "--no-score"]) == 0
    assert "deviations from the paper's protocol" in (out / "deviations.txt").read_text()
