"""Earlier runs price and forecast a new one (#40 item 6): a run records what each model spent per pass
(runner.history, in the cache folder); the next run's dry run, which has no rows of its own yet, uses
it instead of the suite's guess; a resumed run replaces its own record instead of adding to it."""

from __future__ import annotations

from pathlib import Path

import orjson

from cli.dryrun import FORECAST, estimate
from cli.main import main
from runner import history
from runner.config import load_config
from runner.pool import build_models
from runner.rundir import RunPlan
from suites.base import RunSpec


def _rows(out: Path) -> list[dict]:
    return [orjson.loads(x) for x in (out / "results.jsonl").read_bytes().splitlines()]


def test_a_new_run_is_priced_from_what_the_model_spent_before(tmp_path: Path):
    cache, first = tmp_path / "cache", tmp_path / "first"
    argv = ["run", "jeebench", "--models", "sim/strong", "--limit", "6", "--out", str(first),
            "--cache-dir", str(cache), "--no-live", "--no-score"]
    assert main(argv) == 0
    done = [r for r in _rows(first) if r["error"] is None]
    mean_out = sum(r["usage"]["output_tokens"] for r in done) / len(done)
    mean_lat = sum(r["latency_s"] for r in done) / len(done)
    cfg = load_config(None)
    plan = RunPlan(spec=RunSpec(suite="jeebench", options={}, limit=12), models=["sim/strong"], out=tmp_path / "next")
    (d,), _, _ = estimate([plan], cfg, cache_dir=cache)
    m = build_models(cfg, ["sim/strong"])["sim/strong"]
    assert d["calls"] == 6 and d["cached"] == 6  # the first six are answered in the cache
    assert d["est_cost_usd"] == m.cost(d["input_tokens"], round(6 * mean_out))  # the model's own mean, not a guess
    (blind,), _, _ = estimate([plan], cfg, cache_dir=None)  # without the cache folder: the suite's guess
    assert blind["est_cost_usd"] != d["est_cost_usd"]
    assert FORECAST  # the wall forecast used the seen latency
    assert history.prior(cache, m.cache_id)["latency:answer"][0] == sum(r["latency_s"] for r in done)
    assert abs(history.prior(cache, m.cache_id)["latency:answer"][0] / 6 - mean_lat) < 1e-9


def test_each_session_adds_what_its_own_answers_spent(tmp_path: Path):
    cache, run = tmp_path / "cache", tmp_path / "run"
    history.record(cache, run, {"a": {"answer": [100, 2]}}, {"a": "m@x"})
    history.record(cache, run, {"a": {"answer": [200, 3]}}, {"a": "m@x"})  # the same run, resumed: its new rows
    history.record(cache, tmp_path / "other", {"a": {"answer": [40, 1]}}, {"a": "m@x"})
    assert history.prior(cache, "m@x") == {"answer": [340, 6]}
    assert history.prior(cache, "m@x", skip=run) == {"answer": [40, 1]}  # a run's own rows count from its folder


def test_a_resumed_run_records_only_its_new_answers(tmp_path: Path):
    cache = tmp_path / "cache"
    argv = ["run", "jeebench", "--models", "sim/strong", "--out", str(tmp_path / "r"), "--cache-dir", str(cache),
            "--no-live", "--no-score"]
    assert main([*argv, "--limit", "4"]) == 0
    assert main([*argv, "--limit", "6"]) == 0  # resumed: 2 new answers
    m = build_models(load_config(None), ["sim/strong"])["sim/strong"]
    assert history.prior(cache, m.cache_id)["answer"][1] == 6  # 4 + 2, the first four never counted twice
    history.path_for(cache, "m@x").write_text("{not json")
    assert history.prior(cache, "m@x") == {}  # a damaged record is no prior, and no crash


def test_the_wall_forecast_counts_requests_and_the_last_call(tmp_path: Path):
    """80 samples of 10 items go out as 10 requests where the model takes `n`: a 60 RPM key needs ~10 s,
    plus the last request's own latency (it was counted as 80 s: every sample a request)."""
    from types import SimpleNamespace

    from runner.forecast import wall
    from runner.remaining import Plan

    ep = SimpleNamespace(rpm=60, tpm=None, max_concurrency=100)
    models = {"m": SimpleNamespace(lanes=[SimpleNamespace(name="k", endpoint=ep)])}
    plan = Plan("r", "m", calls=80, requests=10, input_tokens=8000, max_output_tokens=80_000,
                out_tokens_seen=[1000, 10], latency_seen={"answer": [30.0, 10]})
    f = wall([plan], models)
    assert f is not None and f.bound == "RPM" and f.expected_s == 10 / 1.0 + 3.0
