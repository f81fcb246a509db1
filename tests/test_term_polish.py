"""Small things a person reads in the terminal: one number format per column, no advice the run then
makes moot, settings mismatches in words, plurals, and configured sim models that keep their ability."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from rich.console import Console

from cli.main import main
from core.term import column_cells, plural, render
from suites.base import Table
from tests.helpers import write_dataset

SIM_FAST = '[[endpoints]]\nname = "sim"\nkind = "sim"\nlatency_ms = 0\n'


def _run(tmp: Path, models: str, *extra: str) -> list[str]:
    data = tmp / "d.jsonl"
    if not data.exists():
        write_dataset(data, 40)
    cfg = tmp / "c.toml"
    if not cfg.exists():
        cfg.write_text(SIM_FAST)
    return [
        "run",
        f"jsonl:{data}",
        "--models",
        models,
        "--config",
        str(cfg),
        "--out",
        str(tmp / "run"),
        "--no-live",
        "--cache-dir",
        str(tmp / "cache"),
        *extra,
    ]


def test_negative_marks_print_alike_in_a_column():
    assert column_cells([-1.0, -35.0, 12.0, None]) == ["-1", "-35", "12", "-"]
    assert column_cells([1.0, 0.875, 0.0]) == ["1.000", "0.875", "0.000"]  # accuracies keep decimals
    assert column_cells([1.0, 0.0]) == ["1.000", "0.000"]
    t = Table(title="marks", columns=["model", "total", "acc"], rows=[["a", -1.0, 0.5], ["b", -35.0, 1.0]])
    con = Console(width=80, record=True)
    for part in render(t, 80):
        con.print(part)
    text = con.export_text()
    assert "-1.000" not in text and " -1 " in text and "-35" in text and "1.000" in text


def test_plural():
    assert plural(1, "model") == "1 model" and plural(2, "model") == "2 models"
    assert plural(1, "batch", "batches") == "1 batch" and plural(0, "batch", "batches") == "0 batches"


def test_run_that_scores_does_not_say_score_with(tmp_path: Path, capfd: pytest.CaptureFixture[str]):
    assert main(_run(tmp_path, "sim/strong")) == 0
    out, err = capfd.readouterr()
    assert "score with" not in err, err
    assert "report: 1 model, 1 suite" in out, out  # "1 model", not "1 models"
    assert main(_run(tmp_path, "sim/strong", "--no-score", "--out", str(tmp_path / "r2"))) == 0
    assert f"score with: evalsweep score {tmp_path / 'r2'}" in capfd.readouterr().err


@pytest.mark.parametrize("dry", [False, True])
def test_settings_mismatch_is_readable_and_dry_run_refuses_it_too(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], dry: bool
):
    assert main(_run(tmp_path, "sim/strong", "--samples", "1", "--no-score")) == 0
    capfd.readouterr()
    assert main(_run(tmp_path, "sim/strong", "--samples", "2", *(["--dry-run"] if dry else []))) == 2
    err = capfd.readouterr().err
    assert "holds a run made with other settings:" in err
    assert "  samples: 1 (this command: 2)" in err.splitlines(), err
    assert "{" not in err and "pick another --out" in err


def test_configured_sim_model_gets_its_builtin_ability(tmp_path: Path):
    (tmp_path / "c.toml").write_text(
        SIM_FAST + '[[models]]\nname = "fast"\nendpoint = "sim"\nmodel = "sim/strong"\n'
    )
    assert main(_run(tmp_path, "fast,sim/strong,sim/weak", "--no-cache")) == 0
    acc = {
        m: s["accuracy"]
        for m, s in orjson.loads((tmp_path / "run" / "scores.json").read_bytes())["models"].items()
    }
    assert acc["fast"] == acc["sim/strong"] != acc["sim/weak"], acc


def test_models_and_dry_run_tables_fit_80_columns(tmp_path: Path):
    """Through the real CLI without a TTY at COLUMNS=80: no line wider, no cell cut."""
    import os
    import subprocess
    import sys

    from tests.helpers import REPO

    write_dataset(tmp_path / "d.jsonl", 5)
    long = ["sim/claude-3-5-sonnet-20241022-extended-thinking", "sim/gpt-4o-2024-08-06-with-a-long-suffix"]
    (tmp_path / "c.toml").write_text(
        SIM_FAST + "".join(f'[[models]]\nname = "{n}-cfg"\nendpoint = "sim"\nmodel = "{n}"\n' for n in long)
    )
    (tmp_path / "s.toml").write_text(
        f'config = "c.toml"\n[[runs]]\nsuite = "jsonl:{tmp_path / "d.jsonl"}"\nout = "{tmp_path / "a"}"\n'
        f"models = {long + ['sim/strong']!r}\n".replace("'", '"')
        + f'[[runs]]\nsuite = "jsonl:{tmp_path / "d.jsonl"}"\nout = "{tmp_path / "b"}"\nmodels = ["sim/weak"]\n'
    )
    env = os.environ | {"COLUMNS": "80", "PYTHONPATH": str(REPO)}
    for args in (
        ["models", "--config", str(tmp_path / "c.toml")],
        ["sweep", str(tmp_path / "s.toml"), "--dry-run"],
    ):
        p = subprocess.run(
            [sys.executable, "-m", "cli", *args], capture_output=True, text=True, env=env
        )
        assert p.returncode == 0, p.stderr
        table = [ln for ln in p.stdout.splitlines() if ln[:1] in "┃│┏┡└"]
        assert table and all(len(ln) <= 80 for ln in table), p.stdout
        for n in long:  # `models`: every name whole (folded); other tables: shortened by the live view's rule
            assert n.replace("sim/", "")[:10] in p.stdout.replace("\n", "")
        if args[0] == "models":
            assert "…" not in p.stdout, p.stdout
        else:  # no name folded onto a second line: a row's label is on its one line, whole or shortened
            labels = [ln.split("│")[1].strip() for ln in table if ln.startswith("│")]
            assert all(x for x in labels), p.stdout  # a folded label leaves a row with an empty label
    assert "jsonl-d (a)" in p.stdout and "jsonl-d (b)" in p.stdout  # two runs of one name told apart
