"""Crash-resume with a real process: SIGKILL mid-sweep, rerun, same scores, nothing finished paid twice.
Also Ctrl-C (SIGINT): stops launching, flushes, prints the resume command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson

from suites.jsonl import prompt_of
from tests.helpers import REPO, cli, rows, run_args, write_config, write_dataset
from tests.mock_openai import MockServer


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "EVALSWEEP_CACHE_DIR": str(cache), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _wait_rows(path: Path, n: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        time.sleep(0.02)
    raise AssertionError(f"{path} never reached {n} rows")


def _scores(run_dir: Path) -> dict:
    r = cli("score", str(run_dir))
    assert r.returncode == 0, r.stderr
    return json.loads((run_dir / "scores.json").read_text())["models"]


def test_sigkill_mid_sweep_then_resume(tmp_path: Path):
    data = write_dataset(tmp_path / "d.jsonl", 240)
    prompts = {d["id"]: prompt_of(d) for d in map(orjson.loads, data.read_bytes().splitlines())}
    models = "ok-a,ok-b"

    ref_srv = MockServer(latency_s=0.01).start()  # an uninterrupted run, for the reference scores
    try:
        cfg = write_config(
            tmp_path / "ref.toml", ref_srv.base_url, ["ok-a", "ok-b"], extra_endpoint="max_concurrency = 8\n"
        )
        r = cli(
            *run_args(data, models, cfg, str(tmp_path / "ref")),
            env=_env(tmp_path / "cache-ref"),
        )
        assert r.returncode == 0, r.stderr
    finally:
        ref_srv.stop()

    srv = MockServer(latency_s=0.03).start()
    try:
        cfg = write_config(
            tmp_path / "c.toml", srv.base_url, ["ok-a", "ok-b"], extra_endpoint="max_concurrency = 8\n"
        )
        out = tmp_path / "run"
        args = run_args(data, models, cfg, str(out))
        env = _env(tmp_path / "cache")
        proc = _start(args, env)
        _wait_rows(out / "results.jsonl", 150, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert proc.returncode == -signal.SIGKILL
        finished = [(r["model"], r["item"]) for r in rows(out) if r["error"] is None]
        assert 150 <= len(finished) < 480  # really killed mid-run
        received_before = srv.total

        r = cli(*args, env=env)  # the same command resumes
        assert r.returncode == 0, r.stderr
        final = rows(out)
        assert len({(x["model"], x["item"]) for x in final}) == 480
        for model, item in finished:  # no second request for anything that had finished
            assert srv._seen[(model, prompts[item])] == 1, (model, item)
        assert (
            srv.total - received_before <= 480 - len(finished) + 16
        )  # only the unfinished (+ in-flight at kill)
    finally:
        srv.stop()
    assert _scores(out) == _scores(tmp_path / "ref")


def test_ctrl_c_stops_flushes_and_prints_resume_command(tmp_path: Path):
    srv = MockServer(latency_s=0.05).start()
    try:
        data = write_dataset(tmp_path / "d.jsonl", 200)
        cfg = write_config(
            tmp_path / "c.toml", srv.base_url, ["ok-a"], extra_endpoint="max_concurrency = 4\n"
        )
        out = tmp_path / "run"
        args = run_args(data, "ok-a", cfg, str(out), "--grace", "10")
        env = _env(tmp_path / "cache")
        proc = _start(args, env)
        _wait_rows(out / "results.jsonl", 20, proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130
        assert "Resume with" in err.decode() and f"--out {out}" in err.decode()
        man = json.loads((out / "manifest.json").read_text())
        assert man["status"] == "interrupted"
        n = len(rows(out))
        assert 20 <= n < 200
        assert all(r["error"] is None for r in rows(out))  # in-flight calls finished, none were torn
        sent = srv.total
        assert sent == n  # every call that was sent got its row: nothing in flight was lost
        r = cli(*args, env=env)
        assert r.returncode == 0 and len(rows(out)) == 200 and srv.total == 200
    finally:
        srv.stop()
