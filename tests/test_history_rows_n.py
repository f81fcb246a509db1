"""#40: each row of an answered call says the samples that call answered (`n`), and the latency history is
kept by it. Before, runner.history inferred an `n` call's rows from consecutive samples of equal latency, so two
one-sample calls of an item back to back with the same latency were tallied as one 2-sample call. Rows written
before the field (an older run directory) are still read by that inference. The run is against the real local
mock (tests/mock_openai.py); the totals are checked, not timings."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson

from cli.main import main
from runner import history
from runner.remaining import finished_rows
from tests.helpers import rows, run_args, write_config, write_dataset
from tests.mock_openai import MockServer


def _row(item: str, sample: int, lat: float, n: int | None) -> dict[str, Any]:
    r = {"model": "m", "item": item, "sample": sample, "pass": "answer", "latency_s": lat, "cached": False,
         "error": None, "usage": {"output_tokens": 3}}
    if n is not None:
        r["n"] = n
    return r


def test_a_run_s_rows_say_their_call_s_samples_and_its_history_is_kept_by_them(tmp_path: Path):
    data = write_dataset(tmp_path / "d.jsonl", 3)
    srv = MockServer(latency_s=0.01).start()
    try:  # `ok-m` answers an `n` call with n choices; `no-n-m` ignores `n` (one choice: the rest sent one by one)
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["ok-m", "no-n-m"])
        args = ["--samples", "4", "--temperature", "0.7", "--cache-dir", str(tmp_path / "cache")]
        assert main(run_args(data, "ok-m,no-n-m", cfg, tmp_path / "run", *args)) == 0
    finally:
        srv.stop()
    got = rows(tmp_path / "run")
    assert len(got) == 24 and all(r["error"] is None for r in got)
    assert sorted(n for _t, m, _p, n in srv.arrivals if m == "ok-m") == [4] * 3  # (as `n` calls)
    assert {r["n"] for r in got if r["model"] == "ok-m"} == {4}
    assert {r["n"] for r in got if r["model"] == "no-n-m"} == {1}  # what came back of each call: one choice
    _done, seen = finished_rows(tmp_path / "run")  # the run directory read back (the dry run's path)
    for model, n in (("ok-m", 4), ("no-n-m", 1)):
        lats = [r["latency_s"] for r in got if r["model"] == model]
        total, count = seen[model][f"n{n}/latency:answer"]
        assert count == 12 and math.isclose(total, sum(lats), rel_tol=1e-9)
        assert not [k for k in seen[model] if k.startswith("n") and k != f"n{n}/latency:answer"
                    and "/latency:" in k]  # every row under its own call's samples, none elsewhere


def test_two_one_sample_calls_of_equal_latency_back_to_back_are_two_calls(tmp_path: Path):
    by: dict[str, list[Any]] = {}
    for r in (_row("a", 0, 1.5, 1), _row("a", 1, 1.5, 1), _row("b", 0, 2.0, 2), _row("b", 1, 2.0, 2)):
        history.tally(by, r)
    assert by["n1/latency:answer"] == [3.0, 2]  # (inferred: one 2-sample call, [7.0, 4] under n2)
    assert by["n2/latency:answer"] == [4.0, 2]
    assert by["latency:answer"] == [7.0, 4]
    (tmp_path / "results.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in
                                                      (_row("a", 0, 1.5, 1), _row("a", 1, 1.5, 1))))
    _done, seen = finished_rows(tmp_path)  # the same rows read from a run directory
    assert seen["m"]["n1/latency:answer"] == [3.0, 2] and "n2/latency:answer" not in seen["m"]


def test_an_old_run_directory_s_rows_without_n_are_read_as_before(tmp_path: Path):
    old = [_row("a", s, 2.0, None) for s in range(8)]  # an 8-sample call's rows, written before rows had `n`
    old += [_row("c", 0, 1.0, None), _row("d", 0, 1.25, None), _row("e", 0, 3.0, None), _row("e", 1, 3.0, None)]
    (tmp_path / "results.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in old))
    _done, seen = finished_rows(tmp_path)
    s = seen["m"]
    assert s["n8/latency:answer"] == [16.0, 8] and s["n1/latency:answer"] == [2.25, 2]
    assert s["n2/latency:answer"] == [6.0, 2]  # (the inference: equal latencies, consecutive samples)
    assert s["latency:answer"] == [24.25, 12] and s["answer"] == [36, 12]
    assert {k for k in s if "/latency:" in k} == {"n8/latency:answer", "n1/latency:answer", "n2/latency:answer"}
