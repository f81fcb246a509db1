"""A lazy sweep of 200,000 simulated calls stays in bounded memory (no task, future or row per call kept)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers import REPO, write_dataset


def _peak_rss(args: list[str], env: dict[str, str]) -> tuple[int, int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    ps = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            peak = max(peak, ps.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    assert proc.returncode == 0, proc.stderr.read().decode() if proc.stderr else ""
    return peak, proc.returncode


@pytest.mark.slow
def test_200k_sim_calls_bounded_memory(tmp_path: Path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[endpoints]]\nname = "sim"\nkind = "sim"\nlatency_ms = 0\nmax_concurrency = 256\n')
    env = {**os.environ, "EVALSWEEP_CACHE_DIR": str(tmp_path / "cache")}
    peaks = {}
    for n in (20_000, 200_000):
        data = write_dataset(tmp_path / f"d{n}.jsonl", n)
        out = tmp_path / f"run{n}"
        peaks[n], _ = _peak_rss(
            [
                "run",
                f"jsonl:{data}",
                "--models",
                "sim/medium",
                "--config",
                str(cfg),
                "--out",
                str(out),
                "--no-cache",
                "--no-live",
                "--no-score",  # the run's memory; scoring's is measured by bench/scale.py
            ],
            env,
        )
        with (out / "results.jsonl").open("rb") as f:
            assert sum(1 for _ in f) == n
    # Ten times the calls may not cost more than a few MB more: nothing per call is retained.
    assert peaks[200_000] - peaks[20_000] < 40 * 2**20, peaks


def test_jsonl_ids_held_compactly(tmp_path: Path):
    """Each pass over a jsonl file (the run's requests, the live ETA's plan, the check) keeps every id
    read for the duplicate check: ~20 bytes an id (its hash), not a set of strings (~106 measured)."""
    import tracemalloc

    from suites.jsonl import load

    n = 100_000
    data = write_dataset(tmp_path / "d.jsonl", n)
    tracemalloc.start()
    try:
        assert sum(1 for _ in load(data)) == n
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak / n < 48, peak / n  # bytes an id at the pass's peak (a table that grows: old and new)


def test_jsonl_ids_sharing_a_hash_are_told_apart(tmp_path: Path):
    """Two ids whose hashes collide are checked against the file: a duplicate only if the id is there."""
    from suites.jsonl import _first_line, _Ids

    ids = _Ids(hash_=lambda _k: 7)
    assert ids.add("a") and not ids.add("b") and not ids.add("a")
    data = write_dataset(tmp_path / "d.jsonl", 3)  # ids q0, q1, q2
    assert _first_line(data, "q1", before=2) == 0  # q1 colliding with q0 on line 2: not a duplicate
    assert _first_line(data, "q0", before=3) == 1  # q0 again on line 3: the first is line 1


def test_jsonl_file_checked_for_duplicates_once(tmp_path: Path):
    """Once a pass (the pre-flight check's) read the file whole, the passes beside the calls (each model's
    stream, the live ETA's plan) keep no ids at all; a file changed since is checked again."""
    import tracemalloc

    from suites.base import SuiteError
    from suites.jsonl import load

    n = 50_000
    data = write_dataset(tmp_path / "d.jsonl", n)
    assert sum(1 for _ in load(data)) == n
    tracemalloc.start()
    try:
        streams = [load(data) for _ in range(8)]  # eight models' streams over the run, side by side
        assert sum(1 for _ in zip(*streams, strict=True)) == n
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak / n < 4, peak / n  # bytes an item for all eight (a set of ids each: ~850)
    with data.open("ab") as f:
        f.write(b'{"id": "q0", "prompt": "again", "answer": "A"}\n')
    with pytest.raises(SuiteError, match=rf":{n + 1}: duplicate id 'q0' \(also on line 1\)"):
        for _ in load(data):
            pass
