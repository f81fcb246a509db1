"""A runner killed with SIGKILL while its batches are in flight, then resumed with the same command:
it re-attaches to the journaled batches (still processing, or finished but never downloaded), the
mock sees no second submission of any request and no live call, and every row arrives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.helpers import REPO, cli, rows, write_config, write_dataset
from tests.mock_batch import MockBatchServer
from tests.mock_openai import MockServer

FAST = "batch_poll_s = 0.1\nbatch_idle_s = 0.1\nbatch_max_requests = 15\n"


def _config(path: Path, srv: MockServer, kind: str, batch: bool) -> Path:
    extra = FAST + ("batch = true\n" if batch else "")
    if kind == "openai":
        return write_config(path, srv.base_url, ["ok-a"], extra_endpoint=extra)
    path.write_text(
        f'[[endpoints]]\nname = "claude"\nkind = "anthropic"\nbase_url = "http://127.0.0.1:{srv.port}"\n'
        f'{extra}\n[[models]]\nname = "ok-a"\nendpoint = "claude"\nprice_in = 1.0\nprice_out = 2.0\n'
    )
    return path


def _events(journal: Path, ev: str) -> list[dict]:
    if not journal.exists():
        return []
    return [e for e in map(orjson.loads, journal.read_bytes().splitlines()) if e["ev"] == ev]


def _scores(run_dir: Path, env: dict[str, str]) -> dict:
    r = cli("score", str(run_dir), env=env)
    assert r.returncode == 0, r.stderr
    return json.loads((run_dir / "scores.json").read_text())["models"]


@pytest.mark.parametrize(
    "kind,delay,wait_before_resume",
    [("openai", 5.0, 0.0), ("anthropic", 1.0, 1.2)],  # resumed while processing / after it ended
)
def test_sigkill_between_submission_and_download_then_resume(
    tmp_path: Path, kind: str, delay: float, wait_before_resume: float
):
    data = write_dataset(tmp_path / "d.jsonl", 40)
    env = {**os.environ, "EVALSWEEP_CACHE_DIR": str(tmp_path / "cache")}
    ref_srv = MockBatchServer().start()  # the same answers live, for the reference scores
    try:
        ref = tmp_path / "ref"
        r = cli(
            "run",
            f"jsonl:{data}",
            "--models",
            "ok-a",
            "--config",
            str(_config(tmp_path / "r.toml", ref_srv, kind, False)),
            "--out",
            str(ref),
            "--no-live",
            env={**env, "EVALSWEEP_CACHE_DIR": str(tmp_path / "c0")},
        )
        assert r.returncode == 0 and ref_srv.total == 40, r.stderr
    finally:
        ref_srv.stop()

    srv = MockBatchServer(delay_s=delay).start()
    try:
        out = tmp_path / "run"
        args = [
            "run",
            f"jsonl:{data}",
            "--models",
            "ok-a",
            "--config",
            str(_config(tmp_path / "c.toml", srv, kind, True)),
            "--out",
            str(out),
            "--no-live",
        ]
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli", *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        t0 = time.monotonic()
        while len(_events(out / "batches.jsonl", "created")) < 3:  # 15 + 15 + 10 requests, all submitted
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() - t0 < 30, "the batches were never created"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert proc.returncode == -signal.SIGKILL
        assert not rows(out) if (out / "results.jsonl").exists() else True  # killed before any download
        assert sum(srv.submissions.values()) == 40 and len(srv.batches) == 3
        ids = {e["id"] for e in _events(out / "batches.jsonl", "created")}
        assert ids == set(srv.batches)
        time.sleep(wait_before_resume)

        r = cli(*args, env=env)  # the same command resumes
        assert r.returncode == 0, r.stderr
        assert r.stderr.count("re-attaching to batch") == 3
        final = rows(out)
        assert len(final) == 40 and all(x["error"] is None and x["batch_id"] in ids for x in final)
        assert set(srv.submissions.values()) == {1} and len(srv.submissions) == 40  # nothing sent twice
        assert len(srv.batches) == 3 and srv.total == 0  # no new batch, no live call
        assert len(_events(out / "batches.jsonl", "ended")) == 3
    finally:
        srv.stop()
    assert _scores(out, env) == _scores(ref, env)
