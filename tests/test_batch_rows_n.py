"""#40: rows answered by a batch say the samples of their call (`n`: the batch line's samples), as the live
path's rows do (runner.calls.call.rows_from), so runner.history counts their tokens' spread by the call's
samples; their latency, a batch's turnaround, it does not keep. Against the real mock batch server (tests/mock_batch.py)."""

from __future__ import annotations

from pathlib import Path

from cli.main import main
from runner.remaining import finished_rows
from tests.helpers import rows, run_args, write_config, write_dataset
from tests.mock_batch import MockBatchServer

FAST = "batch_poll_s = 0.05\nbatch_idle_s = 0.05\nretry_initial_s = 0.01\nretry_max_s = 0.05\nbatch_api = true\n"


def test_batch_rows_say_their_call_s_samples_and_history_keeps_them_by_it(tmp_path: Path):
    data = write_dataset(tmp_path / "d.jsonl", 5)
    srv = MockBatchServer(delay_s=0.2).start()
    try:
        cfg = write_config(tmp_path / "b.toml", srv.base_url, ["ok-a"], extra_endpoint=FAST)
        args = ["--samples", "3", "--temperature", "0.7", "--batch", "on", "--cache-dir", str(tmp_path / "cache")]
        assert main(run_args(data, "ok-a", cfg, str(tmp_path / "run"), *args)) == 0
        assert [u["lines"] for u in srv.uploads] == [5] and srv.total == 0  # one n=3 line per item, no live call
    finally:
        srv.stop()
    got = rows(tmp_path / "run")
    assert len(got) == 15 and all(r["error"] is None and r["batch_id"] for r in got)
    assert [r.get("n") for r in got] == [3] * 15
    _done, seen = finished_rows(tmp_path / "run")  # the run directory read back (the dry run's path)
    assert seen["ok-a"]["answer"] == [sum(r["usage"]["output_tokens"] for r in got), 15]  # their tokens count
    assert seen["ok-a"]["tokn:answer"] == [45, 15]  # their spread, by their call's samples
    # a batch row's latency is its batch's turnaround, no call's: it would make the live forecast hours long
    assert not [k for k in seen["ok-a"] if "latency:" in k or "lnlat" in k or "latmax" in k]
