"""One runner per run directory: a second launch exits 2 at once naming the first's PID, sends nothing;
the kernel releases the lock of a killed runner, so a SIGKILL never leaves a stale lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, cli, rows, run_args, write_config, write_dataset
from tests.mock_openai import MockServer


@pytest.fixture
def slow_mock():
    srv = MockServer(latency_s=0.2).start()
    yield srv
    srv.stop()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli", *args],
        cwd=REPO,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_rows(out: Path, n: int, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if (out / "results.jsonl").exists() and len(rows(out)) >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the first run wrote no rows")


def test_second_launch_exits_2_naming_the_pid(tmp_path: Path, slow_mock: MockServer):
    slow_mock.latency_s = 0.5  # the first run takes ~8 s: long enough to start a second beside it
    cfg = write_config(
        tmp_path / "c.toml", slow_mock.base_url, ["ok-a"], extra_endpoint="max_concurrency = 1\n"
    )
    data = write_dataset(tmp_path / "d.jsonl", 16)
    args = run_args(data, "ok-a", cfg, tmp_path / "run")
    first = _start(args)
    try:
        _wait_for_rows(tmp_path / "run", 1, first)
        second = cli(*args, env=_env(), timeout=60)
        assert first.poll() is None, "the first run ended before the second started"
        assert second.returncode == 2
        assert f"PID {first.pid}" in second.stderr and "Traceback" not in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1, second.stderr
        assert first.wait(60) == 0
    finally:
        if first.poll() is None:
            first.kill()
    assert slow_mock.total == 16  # the second runner sent nothing
    assert max(slow_mock.prompts.values()) == 1 and len(slow_mock.prompts) == 16  # each prompt once
    got = rows(tmp_path / "run")
    assert len(got) == 16 and len({r["item"] for r in got}) == 16


def test_second_launch_sends_not_even_the_preflight(tmp_path: Path, slow_mock: MockServer):
    """The lock is taken before the pre-flight: a second launch on a running directory reaches the
    provider not once (here the listing 404s, so the pre-flight would also post to the calls' path)."""
    slow_mock.latency_s = 0.5
    slow_mock.models_status = 404
    cfg = write_config(
        tmp_path / "c.toml", slow_mock.base_url, ["ok-a"], extra_endpoint="max_concurrency = 1\n"
    )
    data = write_dataset(tmp_path / "d.jsonl", 16)
    args = run_args(data, "ok-a", cfg, tmp_path / "run")
    first = _start(args)
    try:
        _wait_for_rows(tmp_path / "run", 1, first)
        listings = slow_mock.models_requests
        second = cli(*args, env=_env(), timeout=60)
        assert second.returncode == 2 and f"PID {first.pid}" in second.stderr, second.stderr
        assert slow_mock.models_requests == listings  # no pre-flight listing
        assert first.poll() is None
        assert first.wait(60) == 0
    finally:
        if first.poll() is None:
            first.kill()
    assert slow_mock.total == 16 + 1  # the first run's 16 calls and its own pre-flight post on the 404


def test_sigkill_leaves_no_stale_lock(tmp_path: Path, slow_mock: MockServer):
    cfg = write_config(
        tmp_path / "c.toml", slow_mock.base_url, ["ok-a"], extra_endpoint="max_concurrency = 2\n"
    )
    data = write_dataset(tmp_path / "d.jsonl", 20)
    args = run_args(data, "ok-a", cfg, tmp_path / "run")
    first = _start(args)
    _wait_for_rows(tmp_path / "run", 2, first)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(10)
    assert (tmp_path / "run" / ".lock").exists()
    again = cli(*args, env=_env(), timeout=120)
    assert again.returncode == 0, again.stderr
    got = rows(tmp_path / "run")
    assert len({r["item"] for r in got if r["error"] is None}) == 20
