"""A disk that fills after the calls (while scoring, or while preparing a run): a clear message naming
the file and the free space, the command to rerun, exit 4, no traceback, no leftovers, and a manifest
that does not say `running`. On a real small tmpfs (root only)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.helpers import REPO, write_dataset


@pytest.fixture
def tiny(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """Mount a tmpfs of the requested size: yields (mount point, size)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounts: list[Path] = []

    def mount(size_k: int) -> Path:
        mnt = tmp_path / f"small{len(mounts)}"
        mnt.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_k}k", "tmpfs", str(mnt)], capture_output=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs: {r.stderr.decode().strip()}")
        mounts.append(mnt)
        return mnt

    yield mount  # type: ignore[misc]
    for m in mounts:
        subprocess.run(["umount", "-l", str(m)], check=False)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)


def test_scoring_on_a_full_disk_says_so_and_exits_4(tmp_path: Path, tiny):
    data = write_dataset(tmp_path / "d.jsonl", 300)
    run = tmp_path / "run"
    r = _cli("run", f"jsonl:{data}", "--models", "sim/strong", "--out", str(run), "--no-live", "--no-score",
             "--cache-dir", str(tmp_path / "cache"))
    assert r.returncode == 0, r.stderr
    used = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
    mnt = tiny(used // 1024 + 24)  # the run fits; its scored.jsonl does not
    shutil.copytree(run, mnt / "run")
    s = _cli("score", str(mnt / "run"))
    assert s.returncode == 4, s.stderr
    assert "Traceback" not in s.stderr and "scored.jsonl" in s.stderr and "free of" in s.stderr
    assert f"evalsweep score {mnt / 'run'}" in s.stderr
    assert not (mnt / "run" / "scored.jsonl.tmp").exists()


def test_the_score_after_a_run_on_a_full_disk_keeps_the_run_and_says_how_to_score(tmp_path: Path, tiny):
    data = write_dataset(tmp_path / "d.jsonl", 300)
    probe = tmp_path / "probe"
    r = _cli("run", f"jsonl:{data}", "--models", "sim/strong", "--out", str(probe), "--no-live", "--no-score",
             "--cache-dir", str(tmp_path / "cache0"))
    used = sum(p.stat().st_size for p in probe.rglob("*") if p.is_file())
    mnt = tiny(used // 1024 + 24)
    r = _cli("run", f"jsonl:{data}", "--models", "sim/strong", "--out", str(mnt / "run"), "--no-live",
             "--cache-dir", str(tmp_path / "cache1"))
    assert r.returncode == 4, r.stderr
    assert "every call is done and its row saved" in r.stderr and f"evalsweep score {mnt / 'run'}" in r.stderr
    assert "Traceback" not in r.stderr
    man = orjson.loads((mnt / "run" / "manifest.json").read_bytes())
    assert man["status"] == "complete"
    assert sum(1 for _ in (mnt / "run" / "results.jsonl").open()) == 300


def test_a_full_disk_while_preparing_leaves_no_running_manifest(tmp_path: Path, tiny):
    mnt = tiny(16)
    (mnt / "filler").write_bytes(b"x" * 1024)
    data = write_dataset(tmp_path / "d.jsonl", 2000)  # a config.json snapshot fits; little else will
    out = mnt / "run"
    for i in range(200):  # fill all but a few bytes
        try:
            (mnt / f"f{i}").write_bytes(b"y" * 1024)
        except OSError:
            break
    r = _cli("run", f"jsonl:{data}", "--models", "sim/strong", "--out", str(out), "--no-live",
             "--cache-dir", str(tmp_path / "cache"))
    assert r.returncode in (4, 2), r.stderr
    assert "Traceback" not in r.stderr and "evalsweep run" in r.stderr
    man = out / "manifest.json"
    if man.exists() and man.stat().st_size:
        assert orjson.loads(man.read_bytes()).get("status") != "running"
