"""#40: `bench/reasoning_sweep.py --keep DIR` into a folder that already holds a sweep resumed its runs as
done and served every answer from its cache, then divided by zero in the lane table (no call was logged).
It now refuses such a folder with a clear message, before any server starts, and leaves it as it was
(starting clean would delete what the user asked to keep)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_a_re_run_into_a_kept_folder_is_refused_and_the_folder_left_alone(tmp_path: Path):
    kept = tmp_path / "kept"
    (kept / "runs" / "one").mkdir(parents=True)  # what a kept sweep leaves (its runs, cache, server logs)
    (kept / "runs" / "one" / "results.jsonl").write_bytes(b'{"model": "m"}\n')
    (kept / "server_logs.json").write_text('{"t_launch": 0.0, "logs": []}')
    before = sorted((p.relative_to(kept), p.read_bytes()) for p in kept.rglob("*") if p.is_file())
    got = subprocess.run(
        [sys.executable, str(REPO / "bench" / "reasoning_sweep.py"), "--quick", "--items", "1", "--sc-items", "1",
         "--chain-items", "1", "--keep", str(kept)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert got.returncode == 2, got.stderr[-2000:]
    assert f"--keep {kept}: not a new or empty folder" in got.stderr and "Traceback" not in got.stderr
    assert sorted((p.relative_to(kept), p.read_bytes()) for p in kept.rglob("*") if p.is_file()) == before
    assert not (kept / "server0.json").exists()  # no server was started
