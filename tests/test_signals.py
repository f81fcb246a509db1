"""SIGTERM (a scheduler, `kill`, a container stop) ends a run as Ctrl-C does, with the shell's exit code
for it: 143, not 130."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.helpers import REPO, spawn, write_dataset


def test_sigterm_exits_143_with_rows_saved(tmp_path: Path):
    data = write_dataset(tmp_path / "d.jsonl", 400)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[endpoints]]\nname = "slow"\nkind = "sim"\nlatency_ms = 400\nmax_concurrency = 4\n'
                   '[[models]]\nname = "s"\nendpoint = "slow"\nmodel = "sim/strong"\n')
    out = tmp_path / "run"
    p = spawn(["run", f"jsonl:{data}", "--models", "s", "--config", str(cfg), "--out", str(out), "--no-live",
               "--no-score", "--grace", "5", "--cache-dir", str(tmp_path / "cache")],
              {**os.environ, "PYTHONPATH": str(REPO)})
    t0 = time.monotonic()
    while not (out / "results.jsonl").exists() or (out / "results.jsonl").stat().st_size == 0:
        assert p.poll() is None and time.monotonic() - t0 < 60
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert "interrupted; finished rows are saved" in err


def test_a_killed_scores_leftover_is_removed_by_the_next_run(tmp_path: Path):
    from cli.main import main
    from tests.helpers import run_args

    data = write_dataset(tmp_path / "d.jsonl", 5)
    out = tmp_path / "run"
    assert main(run_args(data, "sim/strong", None, out)) == 0
    (out / "scored.jsonl.tmp").write_bytes(b'{"half": ')  # what a SIGKILLed `evalsweep score` leaves
    assert main(run_args(data, "sim/strong,sim/weak", None, out)) == 0
    assert not (out / "scored.jsonl.tmp").exists()
