"""SIGTERM (a scheduler, `kill`, a container stop) ends a run as Ctrl-C does, with the shell's exit code
for it: 143, not 130."""

from __future__ import annotations

import os
import re
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


def test_ctrl_c_sends_nothing_that_was_not_on_the_wire(tmp_path: Path):
    """A real SIGINT to a CLI process: calls waiting for a pacing slot or a lease are never sent (the
    mock's own log), they end as skipped rows saying so, the message counts what was sent, and
    rerunning the command sends exactly the calls left."""
    from tests.helpers import rows, write_config
    from tests.mock_openai import MockServer

    srv = MockServer().start()
    srv.held = True  # no answer before the message: a request the mock gets was on the wire, or is new
    data = write_dataset(tmp_path / "d.jsonl", 40)
    lines = data.read_text().splitlines()  # but each model's first call: answered at once, it opens the
    data.write_text("\n".join([lines[0].replace("Question 0", "[[now]] Question 0"), *lines[1:]]) + "\n")
    first = 2  # first-call gate (runner.calls.gate), and the rest fan out to queue for pacing slots and leases
    out = tmp_path / "run"
    args = ["run", f"jsonl:{data}", "--models", "ok-a,ok-b", "--out", str(out), "--no-live", "--no-score",
            "--grace", "60", "--cache-dir", str(tmp_path / "cache")]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        # Two models on one key, 4 calls a second on 8 slots: calls queue for pacing slots and leases
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-a", "ok-b"],
                           extra_endpoint="rpm = 240\ntpm = 10000000\nmax_concurrency = 8\n")
        p = spawn([*args, "--config", str(cfg)], env)
        t0 = time.monotonic()
        while srv.total < 6 + first:
            assert p.poll() is None and time.monotonic() - t0 < 60, p.stderr.read() if p.stderr else ""
            time.sleep(0.02)
        p.send_signal(signal.SIGINT)
        assert p.stderr is not None
        said = ""
        while "interrupted: no new calls" not in said:
            said = p.stderr.readline()
            assert said, "the process ended without the message"
        on_wire = int(said.split(" for ")[1].split()[0])
        seen_at_message = srv.total
        srv.held = False
        rest = p.stderr.read()
        assert p.wait(timeout=60) == 130, rest
        got = rows(out)
        ok = [r for r in got if r["error"] is None]
        skipped = [r for r in got if r.get("error_kind") == "skipped"]
        assert on_wire + first == seen_at_message == srv.total == len(ok)  # nothing started after the message
        assert skipped and len(ok) + len(skipped) == len(got)  # the queued calls: one skipped row each
        assert all("interrupted before it was sent" in r["error"] for r in skipped)
        # a quiet stop: the unsent calls are counted in one line, not listed one by one, and not as errors
        assert "interrupted before it was sent" not in rest, rest
        assert f"{len(skipped)} calls not sent (skipped rows, not errors)" in rest, rest
        sent = {("ok-a" if "ok-a" in m else "ok-b", "q" + q) for (m, pr) in srv.answered
                for q in re.findall(r"Question (\d+):", pr)}
        assert len(sent) == len(ok) and not sent & {(r["model"], r["item"]) for r in skipped}
        fast = write_config(tmp_path / "f.toml", srv.base_url, ["ok-a", "ok-b"],
                            extra_endpoint="rpm = 60000\ntpm = 10000000\n")
        again = spawn([*args, "--config", str(fast)], env)
        _, err = again.communicate(timeout=120)
        assert again.returncode == 0, err
    finally:
        srv.held = False
        srv.stop()
    assert srv.total == 80  # resume sent exactly the calls left: none twice
    final = {(r["model"], r["item"]): r for r in rows(out)}
    assert len(final) == 80 and all(r["error"] is None for r in final.values())


def test_the_live_line_counts_unsent_calls_apart_from_errors():
    """After Ctrl-C, the calls never sent are work left for the resume: `not sent N`, never under `err`."""
    from cli.live import summary_parts

    row = {"done": 10, "total": 40, "cost": 0.0, "errors": 1, "skipped": 0, "halted": 29, "rps": 0.0,
           "retries": 0, "resumed": 0, "cached": 0}
    texts = [t for _, t in summary_parts([row], None)]
    assert "err 1" in texts and "not sent 29" in texts


def test_the_per_model_log_line_counts_unsent_calls_too():
    """Without the live view each model's line said `skip 0` beside the sweep's `not sent 62`."""
    from cli.progress import _line

    row = {"run": "r", "model": "m", "done": 10, "total": 40, "rps": 0.0, "tokens": 0, "cost": 0.0, "errors": 1,
           "skipped": 0, "halted": 29, "retries": 0, "resumed": 0, "cached": 0, "eta": "?", "state": "",
           "batches": "", "cached_in": 0.0}
    line = _line(row)
    assert "err 1 skip 0" in line and "not sent 29" in line
