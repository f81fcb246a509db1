"""#40: a TPM lane's end moves with its token total, a sum of heavy-tailed draws (1.34-1.49x between two nights
on the bench's tpm-b), and the forecast's range said nothing of it: history kept token sums only, and "every call
writes its limit" is below what reasoning models bill. History now keeps a sample's token spread, and the wall's
and the bill's 80% ranges come from it. The expected figures below are worked by hand (scipy's lognormal for the
quantiles), not by the code under test."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cli.dryrun import FORECAST, dry_run, estimate
from runner import history
from runner.config import load_config
from runner.forecast import wall
from runner.remaining import Plan
from runner.rundir import RunPlan
from suites.base import RunSpec
from tests.helpers import write_config, write_dataset
from tests.mock_openai import MockServer


def _rows(by: dict[str, list[Any]], *calls: tuple[int, ...]) -> None:
    """Tally each call's rows: its samples' output tokens, split as runner.rows.billed splits an `n` call's."""
    for i, outs in enumerate(calls):
        for s, out in enumerate(outs):
            history.tally(by, {"pass": "answer", "item": f"q{i}", "sample": s, "n": len(outs),
                               "usage": {"output_tokens": out}, "latency_s": 1.0})


def test_history_keeps_a_sample_s_token_spread_n_calls_and_older_histories_included(tmp_path: Path):
    one: dict[str, list[Any]] = {}
    _rows(one, (100,), (300,))
    assert history.token_var(one, "answer") == pytest.approx(20_000)  # 100, 300: the sample variance
    # two 2-sample calls whose totals are 200 and 600, each row billed half: a sample's variance is half the
    # totals' (80,000 = 2 var), not the rows' (which move together within a call)
    two: dict[str, list[Any]] = {}
    _rows(two, (100, 100), (300, 300))
    assert history.token_var(two, "answer") == pytest.approx(40_000)
    single: dict[str, list[Any]] = {}
    _rows(single, (100, 300))
    assert history.token_var(single, "answer") is None  # one call: no spread between calls seen
    cache = tmp_path / "cache"
    history.record(cache, tmp_path / "old", {"m": {"answer": [2000, 2]}}, {"m": "m@x"})  # written before the spread
    assert history.token_var(history.prior(cache, "m@x"), "answer") is None  # no spread known: no range
    history.record(cache, tmp_path / "new", {"m": one}, {"m": "m@x"})
    seen = history.prior(cache, "m@x")
    assert seen["answer"] == [2400, 4]  # the old run's tokens still count in the mean (600 a sample) ...
    assert history.token_var(seen, "answer") == pytest.approx(20_000)  # ... the spread: the new rows, their mean


def _lane(tpm: float = 600_000) -> dict[str, Any]:
    ep = SimpleNamespace(rpm=None, tpm=tpm, max_concurrency=1000)
    return {"m": SimpleNamespace(lanes=[SimpleNamespace(name="k", endpoint=ep)])}


def test_a_tpm_lane_s_wall_range_is_its_token_total_s_spread():
    """100 calls of 1,000 output tokens each on average, a sample's sd 500, seen over 100 rows: the total's
    variance is 100 x 500^2 (the draws) + 100^2 x 500^2 / 100 (the mean's error) = 5e7 (sd 7,071 around 100,000);
    as a lognormal its 10th and 90th percentiles are 91,119 and 109,200 tokens. At 600k TPM paced at 0.97 (9,700
    tokens/s) plus the last call's 1 s: 11.31 s expected, 10.39-12.26 s. Every call writing its limit (256) is
    fewer tokens than expected: `most` was the point."""
    plan = Plan("r", "m", calls=100, requests=100, max_output_tokens=25_600, out_tokens_seen=[100_000, 100],
                latency_seen={"answer": [100.0, 100]}, token_var={"answer": 250_000.0})
    f = wall([plan], _lane())
    assert f is not None and f.bound == "TPM"
    assert f.expected_s == pytest.approx(11.3093, abs=1e-3)
    assert (f.least_s, f.high_s) == (pytest.approx(10.3937, abs=1e-3), pytest.approx(12.2578, abs=1e-3))
    assert f.most_s == pytest.approx(12.2578, abs=1e-3)  # (no less than the range)
    assert f.lanes["k"] == (pytest.approx(11.3093, abs=1e-3), pytest.approx(10.3937, abs=1e-3),
                            pytest.approx(12.2578, abs=1e-3), "TPM")
    assert f.models[("r", "m")] == (pytest.approx(11.3093, abs=1e-3), pytest.approx(12.2578, abs=1e-3),
                                    pytest.approx(10.3937, abs=1e-3))  # the live ETA's per-model range too
    two = wall([plan], {"m": SimpleNamespace(lanes=_lane()["m"].lanes + _lane()["m"].lanes)})
    # two lanes of the same key split the calls: each 50 draws, variance 50 x 500^2 x (1 + 50 / 100) = 1.875e7
    assert two is not None and two.high_s > two.expected_s
    blind = wall([Plan("r", "m", calls=100, requests=100, max_output_tokens=25_600, out_tokens_seen=[100_000, 100],
                       latency_seen={"answer": [100.0, 100]})], _lane())
    assert blind is not None and blind.least_s == blind.high_s == blind.expected_s  # no spread known: the point


def test_the_dry_run_prints_the_80_range_of_the_wall_and_the_bill_from_history(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest):
    """The same numbers through the history and the dry run: 100 new questions, the model's history 100 rows of
    1,000 output tokens on average with a sample's sd 500 (sum of squares 99 x 500^2 + 100 x 1,000^2). The bill's
    output at $2 / M: sd 7,071 x 2e-6 = $0.01414, an 80% range ~2 x 1.2816 x that = $0.0362 wide (input is counted,
    not drawn); the wall's upper end ~9,200 tokens / 9,700 a second = ~0.95 s above the point."""
    srv = MockServer().start()  # (the dry run's pre-flight reaches the endpoint; nothing is sent)
    request.addfinalizer(srv.stop)
    cfg_path = write_config(tmp_path / "c.toml", srv.base_url, ["m"],
                            extra_endpoint="tpm = 600000\nmax_concurrency = 1000\n")
    data = write_dataset(tmp_path / "d.jsonl", 100)
    cfg = load_config(cfg_path)
    from cli.dryrun import cost_range
    from runner.pool import build_models

    cid = build_models(cfg, ["m"])["m"].cache_id
    cache = tmp_path / "cache"
    history.record(cache, tmp_path / "night1", {"m": {
        "answer": [100_000, 100], "tok1:answer": [100_000, 100], "tok2:answer": [99 * 500**2 + 100 * 1000**2, 100],
        "tokn:answer": [100, 100], "latency:answer": [100.0, 100]}}, {"m": cid})
    plan = RunPlan(spec=RunSpec(suite=f"jsonl:{data}", options={}), models=["m"], out=tmp_path / "night2")
    rows, _, _ = estimate([plan], cfg, cache_dir=cache)
    lo, hi = cost_range(rows) or (0.0, 0.0)
    assert lo < rows[0]["est_cost_usd"] < hi and hi - lo == pytest.approx(2 * 1.2816 * 0.014142, rel=0.02)
    f = FORECAST[0]
    assert f.bound == "TPM" and f.high_s - f.expected_s == pytest.approx(0.95, abs=0.03)
    assert f.expected_s - f.least_s == pytest.approx(0.92, abs=0.03)  # (skewed: the lower side nearer)
    assert dry_run([plan], cfg, cache_dir=cache) == 0
    said = capsys.readouterr().out
    assert "forecast wall: ~12s (80% range 11s-13s, from the lanes' token totals, call-seconds and last calls)" in said, said
    assert f"(80% range ${lo:.2f}-${hi:.2f}, from the output tokens' spread in earlier runs)" in said, said
    assert not math.isclose(lo, hi)


def test_the_live_eta_takes_the_spread_of_this_run_s_rows_before_the_history_s():
    """runner.eta.left: the work left, its spread from the nearest basis that has one: this run's rows (100, 300:
    variance 20,000), else the base plan's (from the history)."""
    from runner.eta import left

    base = Plan("r", "m", calls=10, requests=10, out_tokens_seen=[10_000, 10], token_var={"answer": 1e6})
    assert left(base, 2, {}, {}).token_var == {"answer": 1e6}
    mine: dict[str, list[Any]] = {}
    _rows(mine, (100,), (300,))
    t = left(base, 2, {}, mine)
    assert t.calls == 8 and t.token_var == {"answer": pytest.approx(20_000)}


def test_history_keeps_a_pass_s_longest_latency_merged_by_max(tmp_path: Path):
    from runner.eta import _add

    a: dict[str, list[Any]] = {}
    b: dict[str, list[Any]] = {}
    for by, lats in ((a, (1.0, 3.0, 2.0)), (b, (5.0, 0.5))):
        for i, lat in enumerate(lats):
            history.tally(by, {"pass": "answer", "item": f"q{i}", "sample": 0, "n": 1, "latency_s": lat,
                               "usage": {"output_tokens": 10}})
    assert a["latmax:answer"] == [3.0, 3] and history.latency_cap(a, "answer") == 3.0
    cache = tmp_path / "cache"
    history.record(cache, tmp_path / "r1", {"m": a}, {"m": "m@x"})
    history.record(cache, tmp_path / "r2", {"m": b}, {"m": "m@x"})
    assert history.prior(cache, "m@x")["latmax:answer"] == [5.0, 5]  # the longest, not a sum
    pooled: dict[str, list[Any]] = {}
    _add(pooled, a, True)
    _add(pooled, b, True)
    assert pooled["latmax:answer"] == [5.0, 5] and pooled["latency:answer"] == [11.5, 5]
