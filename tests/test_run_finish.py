"""What a finished `run`/`sweep` leaves behind (scores and the report, unless --no-score), progress that
counts each answer once (a resume or a cache replay never shows done > total), and --version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from core import __version__
from tests.helpers import cli, rows, write_dataset

SIM_FAST = '[[endpoints]]\nname = "sim"\nkind = "sim"\nlatency_ms = 0\n'


def _counts(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())["counts"]["sim/medium"]


def test_resume_and_cache_replay_never_exceed_the_total(tmp_path: Path):
    """cot-critique writes two rows per item (answer + critique); the total counts items' answers."""
    (tmp_path / "c.toml").write_text(SIM_FAST)
    base = ["run", "jeebench", "--variant", "cot-critique", "--models", "sim/medium", "--limit", "4"]
    base += ["--config", str(tmp_path / "c.toml"), "--cache-dir", str(tmp_path / "cache"), "--no-live"]
    run = lambda out: main([*base, "--out", str(out), "--no-score"])  # noqa: E731
    a, b = tmp_path / "a", tmp_path / "b"
    assert run(a) == 0
    c = _counts(a)
    assert (c["total"], c["done"], c["resumed"], c["cached"]) == (4, 4, 0, 0)
    assert run(a) == 0  # resume: every row is already there
    c = _counts(a)
    assert (c["total"], c["done"], c["resumed"], c["cached"]) == (4, 0, 4, 0)
    last = (a / "log.txt").read_text().splitlines()[-1]  # the run's closing line
    assert "] 4/4 (100%)" in last.replace("  ", " ") and "resumed 4" in last
    assert run(b) == 0  # a new directory over the same cache: every answer is a hit
    c = _counts(b)
    assert (c["total"], c["done"], c["resumed"], c["cached"]) == (4, 4, 0, 4)


def test_version(capsys: pytest.CaptureFixture[str]):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"evalsweep {__version__}\n"
    p = cli("--version")
    assert p.returncode == 0 and p.stdout.strip() == f"evalsweep {__version__}"


def test_run_and_sweep_score_and_report_by_themselves(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 6)
    (tmp_path / "c.toml").write_text(SIM_FAST)
    common = ["--config", str(tmp_path / "c.toml"), "--cache-dir", str(tmp_path / "cache"), "--no-live"]
    quiet = tmp_path / "quiet"
    assert (
        main(["run", f"jsonl:{data}", "--models", "sim/weak", "--out", str(quiet), "--no-score", *common])
        == 0
    )
    assert len(rows(quiet)) == 6 and not (quiet / "scores.json").exists() and not (quiet / "report").exists()
    capsys.readouterr()

    one = tmp_path / "one"
    assert main(["run", f"jsonl:{data}", "--models", "sim/strong,sim/weak", "--out", str(one), *common]) == 0
    scores = json.loads((one / "scores.json").read_text())
    assert set(scores["models"]) == {"sim/strong", "sim/weak"} and (one / "scored.jsonl").exists()
    assert (one / "report" / "index.html").is_file()
    out, err = capsys.readouterr()
    # two models: the tables go to tables.txt and the report, not the terminal; the outcome comes last
    assert "accuracy" not in out and "accuracy" in (one / "tables.txt").read_text()
    assert err.rstrip().endswith(f"report: {one / 'report' / 'index.html'}"), err
    assert "nothing to retry: every planned row is in" in err and "sim/strong" in err.split("evalsweep: ")[-1]
    assert main(["run", f"jsonl:{data}", "--models", "sim/strong,sim/weak", "--out", str(one), *common,
                 "--tables"]) == 0  # asked for: printed
    assert "accuracy" in capsys.readouterr().out

    (tmp_path / "sweep.toml").write_text(
        f'config = "c.toml"\nout = "{tmp_path / "runs"}"\n'
        f'[[runs]]\nsuite = "jsonl:{data}"\nmodels = ["sim/strong"]\n'
        '[[runs]]\nsuite = "jeebench"\nvariant = "normal"\nmodels = ["sim/medium"]\nlimit = 3\n'
    )
    assert main(["sweep", str(tmp_path / "sweep.toml"), "--no-live"]) == 0
    for run in ("jsonl-d", "jeebench-normal"):
        assert (tmp_path / "runs" / run / "scores.json").is_file()
    index = (tmp_path / "runs" / "report" / "index.html").read_text()
    assert "jeebench" in index.lower() and "sim/strong" in index
