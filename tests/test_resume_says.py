"""Resume says what it does (done, cached, to call; resumed apart from cached), and a Ctrl-C (a real
SIGINT to a subprocess) that lands when every row is in leaves a complete, scored run with exit 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from cli.main import main
from tests.helpers import REPO, run_args, write_config, write_dataset
from tests.mock_openai import MockServer

SIM_FAST = '[[endpoints]]\nname = "sim"\nkind = "sim"\nlatency_ms = 0\n'


def _args(t: Path, out: str, limit: int, *extra: str) -> list[str]:
    return [
        "run",
        f"jsonl:{t / 'd.jsonl'}",
        "--models",
        "sim/strong",
        "--config",
        str(t / "c.toml"),
        "--out",
        str(t / out),
        "--cache-dir",
        str(t / "cache"),
        "--no-live",
        "--no-score",
        "--limit",
        str(limit),
        *extra,
    ]


def test_resume_says_done_cached_and_to_call(tmp_path: Path, capfd: pytest.CaptureFixture[str]):
    write_dataset(tmp_path / "d.jsonl", 10)
    (tmp_path / "c.toml").write_text(SIM_FAST)
    assert main(_args(tmp_path, "a", 10)) == 0  # fills the cache with all 10 answers
    err = capfd.readouterr().err
    assert "resuming" not in err and "10 new rows in" in err
    assert main(_args(tmp_path, "b", 4, "--no-cache")) == 0
    capfd.readouterr()
    assert main(_args(tmp_path, "b", 10, "--no-cache")) == 0
    err = capfd.readouterr().err
    assert "resuming: 4 of 10 rows already done, cache not read, 6 to call" in err, err
    assert "6 new rows (4 resumed)" in err  # with --no-cache nothing is "cached"
    counts = orjson.loads((tmp_path / "b" / "manifest.json").read_bytes())["counts"]["sim/strong"]
    assert (counts["resumed"], counts["cached"]) == (4, 0)
    assert main(_args(tmp_path, "c", 4, "--no-cache")) == 0
    capfd.readouterr()
    assert main(_args(tmp_path, "c", 10)) == 0
    err = capfd.readouterr().err
    assert "resuming: 4 of 10 rows already done, 6 cached, 0 to call" in err, err
    assert "6 new rows (4 resumed, 6 from the cache)" in err


def _sigint_run(
    tmp: Path, n_items: int, concurrency: int
) -> tuple[subprocess.CompletedProcess[str], MockServer]:
    srv = MockServer(latency_s=1.5).start()
    try:
        cfg = write_config(
            tmp / "c.toml", srv.base_url, ["m"], extra_endpoint=f"max_concurrency = {concurrency}\n"
        )
        data = write_dataset(tmp / "d.jsonl", n_items)
        args = [a for a in run_args(data, "m", cfg, tmp / "run") if a != "--no-score"]
        env = os.environ | {"PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli", *args, "--cache-dir", str(tmp / "cache")],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while srv.total < min(n_items, concurrency) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)  # the calls are at the server, answers ~1.2 s away
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), srv
    finally:
        srv.stop()


def test_ctrl_c_when_every_row_is_in_flight_is_a_complete_scored_run(tmp_path: Path):
    p, srv = _sigint_run(tmp_path, 3, 8)
    assert p.returncode == 0, p.stderr
    assert "the run is complete" in p.stderr and srv.total == 3
    man = orjson.loads((tmp_path / "run" / "manifest.json").read_bytes())
    assert man["status"] == "complete"
    assert (tmp_path / "run" / "scores.json").exists()  # scored, as any finished run


def test_ctrl_c_with_items_not_yet_sent_is_interrupted(tmp_path: Path):
    p, srv = _sigint_run(tmp_path, 6, 2)
    assert p.returncode == 130, p.stderr
    assert "Resume with" in p.stderr and srv.total < 6
    man = orjson.loads((tmp_path / "run" / "manifest.json").read_bytes())
    assert man["status"] == "interrupted" and not (tmp_path / "run" / "scores.json").exists()
