"""#40 item 6: a model's latency history is kept per samples a request, and a run is forecast from its own
n's: an `n` call lasts the longest of its samples, so pooling a model's 8-sample calls with its 1-sample ones
made its 1-sample run forecast slow (night 2: a lane 68.6 s forecast, 43.1 s its limit). Runs against the real
local mock, their latencies set per prompt; the forecast's inputs are checked, not timings."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson

from cli.main import main
from runner import history
from runner.config import load_config
from runner.forecast import call_latency
from runner.pool import build_models
from runner.remaining import remaining
from runner.rundir import RunPlan
from suites.base import RunSpec
from tests.helpers import run_args, write_config, write_dataset
from tests.mock_openai import MockServer


def _latencies(out: Path) -> list[float]:
    rows = [orjson.loads(x) for x in (out / "results.jsonl").read_bytes().splitlines()]
    return [r["latency_s"] for r in rows if r["error"] is None and not r["cached"]]


def test_a_run_is_forecast_from_the_model_s_calls_of_its_own_samples_a_request(tmp_path: Path):
    slow = write_dataset(tmp_path / "slow.jsonl", 4, prefix="Slow")  # 8 samples a request: the longest of 8
    quick = write_dataset(tmp_path / "quick.jsonl", 12, prefix="Quick")
    srv = MockServer()
    srv.latency_of = lambda _m, prompt, _before: 0.12 if prompt.startswith("Slow") else 0.02
    srv.start()
    cache = tmp_path / "cache"
    try:
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["m"])
        common = ["--cache-dir", str(cache), "--temperature", "0.7"]
        assert main(run_args(slow, "m", cfg, tmp_path / "eight", "--samples", "8", *common)) == 0
        assert main(run_args(quick, "m", cfg, tmp_path / "one", *common)) == 0
    finally:
        srv.stop()
    eight, one = _latencies(tmp_path / "eight"), _latencies(tmp_path / "one")
    assert len(eight) == 32 and len(one) == 12
    assert sorted(n for _t, _m, prompt, n in srv.arrivals if prompt.startswith("Slow")) == [8] * 4  # (as `n` calls)
    models = build_models(load_config(cfg), ["m"])
    cid = models["m"].cache_id
    seen = history.prior(cache, cid)
    assert seen["latency:answer"][1] == 44  # the pooled totals kept as before (a history main reads)

    def plan(data: Path, samples: int) -> Any:
        spec = RunSpec(suite=f"jsonl:{data}", samples=samples, temperature=0.7)
        (t,) = remaining([RunPlan(spec=spec, models=["m"], out=tmp_path / f"next{samples}")], models,
                         lambda _k: False, prior=lambda m, out: history.prior(cache, models[m].cache_id, out))
        return t

    t1, t8 = plan(write_dataset(tmp_path / "new1.jsonl", 5, prefix="New"), 1), \
        plan(write_dataset(tmp_path / "new8.jsonl", 5, prefix="New"), 8)
    assert (t1.requests, t8.calls, t8.requests) == (5, 40, 5)
    for t, lats in ((t1, one), (t8, eight)):  # the 1-sample calls' mean, not the pooled 44 rows'; the 8-sample's
        total, rows = t.latency_seen["answer"]
        assert rows == len(lats) and math.isclose(total, sum(lats), rel_tol=1e-9)
        assert math.isclose(call_latency(t, "answer", 0.0), sum(lats) / len(lats), rel_tol=1e-9)  # the wall's call


def test_rows_are_tallied_by_their_call_s_samples_and_old_histories_still_load(tmp_path: Path):
    by: dict[str, list[Any]] = {}
    for item, lat, samples in (("a", 2.0, 8), ("b", 3.0, 8), ("c", 1.0, 1), ("d", 1.0, 1), ("e", 2.0, 2)):
        for s in range(samples):  # an `n` call's rows: one after the other, its latency, consecutive samples
            history.tally(by, {"pass": "answer", "item": item, "sample": s, "latency_s": lat,
                               "usage": {"output_tokens": 3}})
    assert by["n8/latency:answer"] == [40.0, 16] and by["n1/latency:answer"] == [2.0, 2]
    assert by["n2/latency:answer"] == [4.0, 2] and by["latency:answer"] == [46.0, 20]
    assert "n3/latency:answer" not in by  # (a call's rows moved on as it grew: no total left behind)
    assert history.at_n(by, 1)["latency:answer"] == [2.0, 2]
    assert history.at_n(by, 4)["latency:answer"] == [46.0, 20]  # an n never seen: the pooled figure
    history.record(tmp_path, tmp_path / "run", {"a": by}, {"a": "m@x"})
    doc = orjson.loads(history.path_for(tmp_path, "m@x").read_bytes())
    (entry,) = doc["runs"].values()
    assert not any(k.startswith(history.OPEN) for k in entry["seen"])  # the call in progress is not history
    old = {"runs": {"r#1": {"at": 1.0, "seen": {"answer": [9, 3], "latency:answer": [6.0, 3],
                                                "lnlat:answer": [1.0, 3], "lnlat2:answer": [1.0, 3]}}}}
    history.path_for(tmp_path, "old@x").write_bytes(orjson.dumps(old))  # written before the per-n totals
    prior = history.prior(tmp_path, "old@x")
    assert history.at_n(prior, 8) == prior and prior["latency:answer"] == [6.0, 3]
