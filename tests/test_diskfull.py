"""A full disk stops the run: no new calls after the first failed write, one clear error, exit 4,
manifest `aborted`; the resume on a bigger disk pays for nothing that was answered.

As root the run directory sits on a small tmpfs (really full); otherwise the write error comes from
RLIMIT_FSIZE (the kernel refuses to grow any file past the limit: EFBIG)."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from runner.results import final_rows
from tests.helpers import REPO, run_args, write_config, write_dataset
from tests.mock_openai import MockServer

N = 400


@pytest.fixture
def mock():
    srv = MockServer(latency_s=0.01).start()
    yield srv
    srv.stop()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path | None]:
    """A 48 KiB tmpfs (None when mounting is not permitted: the test then uses RLIMIT_FSIZE)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or os.environ.get("EVALSWEEP_TEST_NO_MOUNT"):
        yield None
        return
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        yield None
        return
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fsize_limit() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (48 * 1024, 48 * 1024))


def _run(args: list[str], limit: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_fsize_limit if limit else None,
    )


def test_disk_full_stops_the_run_and_resume_pays_nothing_twice(
    tmp_path: Path, mock: MockServer, small_disk: Path | None
):
    out = (small_disk or tmp_path) / "run"
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint="max_concurrency = 4\n")
    data = write_dataset(tmp_path / "d.jsonl", N)
    # RLIMIT_FSIZE limits every file, the cache's too: that fallback runs without one.
    args = run_args(data, "ok-a", cfg, out, *([] if small_disk else ["--no-cache"]))
    p = _run(args, limit=small_disk is None)
    assert p.returncode == 4, p.stderr[-2000:]
    err = p.stderr
    assert "Traceback" not in err and "Logging error" not in err, err[-3000:]
    assert "stopped: cannot write" in err and "free of" in err and "Free space" in err
    assert len(err.splitlines()) < 30, err
    sent = mock.total
    assert sent < N / 2, "the run kept calling the API after the disk was full"
    saved = list(final_rows(out / "results.jsonl"))
    assert sent - len(saved) <= 16  # only the calls in flight at the first failed write
    man = orjson.loads((out / "manifest.json").read_bytes())
    assert man["status"] == "aborted" and "cannot write" in man["abort_reason"]

    if small_disk is not None:  # a bigger disk: the same mount, grown
        subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)
    p = _run(args, limit=False)
    assert p.returncode == 0, p.stderr[-2000:]
    final = list(final_rows(out / "results.jsonl"))
    assert len(final) == N and all(r["error"] is None for r in final)
    # Nothing answered was paid twice: in-flight answers kept in memory reached the cache.
    if small_disk is not None:
        assert mock.total == N and max(mock.prompts.values()) == 1
    else:
        assert mock.total <= N + 16
    man = orjson.loads((out / "manifest.json").read_bytes())
    assert man["status"] == "complete" and "abort_reason" not in man


def test_cache_on_the_full_disk_too_the_stop_message_counts_exactly_what_is_paid_again(
    tmp_path: Path, mock: MockServer, small_disk: Path | None
):
    """The cache on the same full disk: answers received in flight may reach neither results.jsonl nor
    the cache. The stop message gives their exact count (it used to say those "that reached the cache"
    are not paid again while 15 were), and the resume pays exactly that many calls twice."""
    if small_disk is None:
        pytest.skip("needs a tmpfs (root): the cache must fill up with the run directory")
    import re

    out, cache_dir = small_disk / "run", small_disk / "cache"
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint="max_concurrency = 8\n")
    cfg.write_text("disk_full_wait_s = 0\n" + cfg.read_text())  # (not held: the count is the way out)
    data = write_dataset(tmp_path / "d.jsonl", N)
    args = run_args(data, "ok-a", cfg, out, "--cache-dir", str(cache_dir))
    p = _run(args, limit=False)
    assert p.returncode == 4, p.stderr[-2000:]
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    m = re.search(r"(\d+) of them are answers that reached no cache either", p.stderr)
    repaid = int(m.group(1)) if m else 0
    assert m or "none is paid again" in p.stderr or "could not be saved" not in p.stderr, p.stderr[-2000:]
    subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)
    p = _run(args, limit=False)
    assert p.returncode == 0, p.stderr[-2000:]
    assert len(list(final_rows(out / "results.jsonl"))) == N
    assert mock.total == N + repaid  # exactly the answers the message said would be paid again


def test_answers_held_while_the_disk_is_full_are_written_when_space_comes_back(
    tmp_path: Path, mock: MockServer, small_disk: Path | None
):
    """The cache on the same full disk (#39 item 5): the answers received in flight are held, the stop
    says so once; space freed while it waits, they are written and the resume pays for none of them
    twice (before: the run ended at once, and the resume paid those answers again)."""
    if small_disk is None:
        pytest.skip("needs a tmpfs (root): the cache must fill up with the run directory")
    import time

    out, cache_dir = small_disk / "run", small_disk / "cache"
    cfg = write_config(tmp_path / "c.toml", mock.base_url, ["ok-a"], extra_endpoint="max_concurrency = 8\n")
    cfg.write_text("disk_full_wait_s = 120\n" + cfg.read_text())
    data = write_dataset(tmp_path / "d.jsonl", N)
    args = run_args(data, "ok-a", cfg, out, "--cache-dir", str(cache_dir))
    err = tmp_path / "err.txt"
    with err.open("w") as f:
        p = subprocess.Popen([sys.executable, "-m", "cli", *args], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                             stdout=subprocess.DEVNULL, stderr=f, text=True)
        deadline = time.monotonic() + 120
        while p.poll() is None and "could not be written" not in err.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        held = "could not be written" in err.read_text()
        subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)  # space comes back
        assert p.wait(timeout=120) == 4
    said = err.read_text()
    assert "Traceback" not in said, said[-3000:]
    if held:  # (a run whose in-flight answers all fitted holds none: nothing to wait for)
        assert "none is paid again" in said, said[-2000:]
    sent = mock.total
    p2 = _run(args, limit=False)
    assert p2.returncode == 0, p2.stderr[-2000:]
    assert len(list(final_rows(out / "results.jsonl"))) == N
    assert mock.total == N and max(mock.prompts.values()) == 1, (sent, mock.total)  # 0 paid twice
