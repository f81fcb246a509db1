"""`--dry-run` plans the remaining work: finished rows and cache hits are skipped, cost comes as expected
and max, and a missing price shows as "+ unknown for models X" instead of hiding the total."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cli.main import main
from tests.helpers import write_dataset

SIM_FAST = '[[endpoints]]\nname = "sim"\nkind = "sim"\nlatency_ms = 0\n'


def _plan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, dict[str, int]]:
    assert main([*argv, "--dry-run"]) == 0
    text = capsys.readouterr().out
    m = re.search(
        r"remaining: ([\d,]+) calls \(([\d,]+) finished rows and ([\d,]+) cache hits skipped\)", text
    )
    assert m, text
    calls, finished, cached = (int(g.replace(",", "")) for g in m.groups())
    return text, {"calls": calls, "finished": finished, "cached": cached}


def _dollars(text: str, label: str) -> float:
    return float(re.search(rf"^{label}: \$([\d,.e-]+)", text, re.M).group(1).replace(",", ""))


def test_finished_rows_and_cache_hits_are_not_planned(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 10)
    (tmp_path / "c.toml").write_text(SIM_FAST)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    run = [
        "run",
        f"jsonl:{data}",
        "--models",
        "sim/strong",
        "--samples",
        "2",
        "--config",
        str(tmp_path / "c.toml"),
    ]
    a = ["--out", str(tmp_path / "a"), *cache]

    text, n = _plan(capsys, *run, *a)
    assert n == {"calls": 20, "finished": 0, "cached": 0}
    full_max = _dollars(text, "total max")
    assert 0 < _dollars(text, "total expected") < full_max
    assert not (tmp_path / "a").exists() and not (tmp_path / "cache").exists()  # nothing made

    assert main([*run, "--limit", "4", *a, "--no-live", "--no-score"]) == 0
    capsys.readouterr()
    text, n = _plan(capsys, *run, *a)
    assert n == {"calls": 12, "finished": 8, "cached": 0}  # 6 items x 2 samples left
    assert _dollars(text, "total max") == pytest.approx(full_max * 12 / 20, rel=0.05)
    # the expected output comes from the run's own rows: sim answers are far below max_tokens
    assert _dollars(text, "total expected") < 0.5 * _dollars(text, "total max")

    assert main([*run, *a, "--no-live", "--no-score"]) == 0
    capsys.readouterr()
    text, n = _plan(capsys, *run, *a)  # a finished run: nothing left to pay for
    assert n == {"calls": 0, "finished": 20, "cached": 0}
    assert _dollars(text, "total max") == 0 and _dollars(text, "total expected") == 0

    b = ["--out", str(tmp_path / "b"), *cache]  # a new directory over the same cache: all replayed
    text, n = _plan(capsys, *run, *b)
    assert n == {"calls": 0, "finished": 0, "cached": 20} and _dollars(text, "total max") == 0
    text, n = _plan(capsys, *run, *b, "--refresh")  # --refresh and --no-cache call again
    assert n == {"calls": 20, "finished": 0, "cached": 0}
    text, n = _plan(capsys, *run, *b, "--no-cache")
    assert n == {"calls": 20, "finished": 0, "cached": 0}


def test_unknown_price_keeps_the_total_and_names_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    data = write_dataset(tmp_path / "d.jsonl", 100)
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[[endpoints]]\nname = "e"\nbase_url = "http://127.0.0.1:9/v1"\n'
        '[[models]]\nname = "priced"\nendpoint = "e"\nprice_in = 1.0\nprice_out = 2.0\n'
        '[[models]]\nname = "mystery-1"\nendpoint = "e"\n'
    )
    args = ["run", f"jsonl:{data}", "--models", "priced,mystery-1", "--config", str(cfg), "--keep-going"]
    text, n = _plan(capsys, *args)  # --keep-going: a placeholder URL, no server there
    assert n["calls"] == 200
    # 100 calls x 1024 max output tokens at $2/M (+ ~12 input tokens each at $1/M): $0.206
    assert "total max: $0.21 + unknown for models mystery-1" in text
    assert "total expected: $0.10 + unknown for models mystery-1" in text


def test_sweep_dry_run_plans_each_run_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 3)
    (tmp_path / "c.toml").write_text(SIM_FAST)
    (tmp_path / "sweep.toml").write_text(
        f'config = "c.toml"\nout = "{tmp_path / "runs"}"\n'
        f'[[runs]]\nsuite = "jsonl:{data}"\nmodels = ["sim/strong"]\n'
        f'[[runs]]\nsuite = "jsonl:{data}"\nmodels = ["sim/weak"]\nout = "{tmp_path / "w"}"\n'
    )
    sweep = ["sweep", str(tmp_path / "sweep.toml"), "--cache-dir", str(tmp_path / "cache")]
    assert main([*sweep, "--no-live", "--no-score"]) == 0
    capsys.readouterr()
    _, n = _plan(capsys, *sweep)
    assert n == {"calls": 0, "finished": 6, "cached": 0}
    _, n = _plan(capsys, *sweep[:2], "--cache-dir", str(tmp_path / "other-cache"))
    assert n == {"calls": 0, "finished": 6, "cached": 0}  # finished rows count before the cache


def test_join_workers_files_count_as_finished(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    data = write_dataset(tmp_path / "d.jsonl", 4)
    (tmp_path / "c.toml").write_text(SIM_FAST)
    run = ["run", f"jsonl:{data}", "--models", "sim/weak", "--config", str(tmp_path / "c.toml")]
    run += ["--out", str(tmp_path / "a"), "--no-cache"]
    assert main([*run, "--no-live", "--no-score"]) == 0
    (tmp_path / "a" / "results.jsonl").rename(tmp_path / "a" / "results.host-1234.jsonl")  # a worker's
    capsys.readouterr()
    _, n = _plan(capsys, *run)
    assert n == {"calls": 0, "finished": 4, "cached": 0}


def test_dry_run_says_the_runs_deviations(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """What a run would say before its first call (and record), the dry run says too: the suite's departures
    for these options and each model's."""
    (tmp_path / "c.toml").write_text(SIM_FAST)
    run = ["run", "jeebench", "--models", "sim/weak", "--config", str(tmp_path / "c.toml"), "--no-cache"]
    text, _ = _plan(capsys, *run, "--out", str(tmp_path / "a"), "--limit", "5", "--tau-single", "0.5")
    said = [ln for ln in text.splitlines() if ln.startswith("  [jeebench")]
    assert any(ln.endswith("--limit 5: a subset of the 515 questions") for ln in said), text
    assert any("--tau-single 0.5" in ln for ln in said)
    assert main([*run, "--out", str(tmp_path / "b"), "--limit", "5", "--tau-single", "0.5", "--no-live"]) == 0
    err = capsys.readouterr().err
    assert [ln for ln in err.splitlines() if ln.startswith("  [jeebench")] == said
    assert all(len(ln) <= 80 for ln in said)  # one line each at 80 columns; every word in deviations.txt
    full = (tmp_path / "b" / "deviations.txt").read_text()
    assert "--limit 5: a subset of the 515 questions" in full and "--tau-single 0.5" in full
