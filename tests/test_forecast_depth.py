"""#40: a fresh run spends its TPM key's bucket at once (runner.budgets.tokens.TokenAccount learns its depth from the
answers' remaining-tokens), and the dry run's wall did not know it: the bench's tpm-a, 10 s of its TPM deep, ended
0.95x its tokens' time and was forecast at 1.17x its wall (seeds 0-20, night 2). A run now records the depth it saw
in the history (runner.history.DEPTH) and the dry run (not the live ETA: the bucket was spent at the start) counts
the tokens past it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cli.dryrun import FORECAST, estimate
from cli.main import main
from runner import history
from runner.config import load_config
from runner.forecast import wall
from runner.pool import build_models
from runner.remaining import Plan
from runner.rundir import RunPlan
from suites.base import RunSpec
from tests.helpers import run_args, write_config, write_dataset
from tests.mock_openai import MockServer


def _lane(tpm: float = 600_000) -> dict[str, Any]:
    ep = SimpleNamespace(rpm=None, tpm=tpm, max_concurrency=1000)
    return {"m": SimpleNamespace(lanes=[SimpleNamespace(name="k", endpoint=ep)])}


def test_a_fresh_run_s_tpm_lane_counts_its_tokens_past_the_key_s_bucket():
    """100 calls of 1,000 tokens on a 600k TPM key paced at 0.97 (9,700 tokens/s), the key's bucket seen 19,400
    deep, latencies 1 s (no spread known: the last call a typical one): (100,000 - 19,400) / 9,700 + 1 = 9.3093 s;
    the live ETA (not fresh: the bucket went at the start) 100,000 / 9,700 + 1 = 11.3093 s. A bucket deeper than a
    minute's tokens counts as a minute's (the account's own span): (100,000 - 600,000)+ = 0 s of tokens."""
    plan = Plan("r", "m", calls=100, requests=100, max_output_tokens=25_600, out_tokens_seen=[100_000, 100],
                latency_seen={"answer": [100.0, 100]}, tpm_depth=19_400)
    fresh, live = wall([plan], _lane(), fresh=True), wall([plan], _lane())
    assert fresh is not None and live is not None
    assert fresh.expected_s == pytest.approx(80_600 / 9_700 + 1, abs=1e-6)
    assert live.expected_s == pytest.approx(100_000 / 9_700 + 1, abs=1e-6)
    deep = Plan("r", "m", calls=100, requests=100, max_output_tokens=25_600, out_tokens_seen=[100_000, 100],
                latency_seen={"answer": [100.0, 100]}, tpm_depth=10**9)
    got = wall([deep], _lane(), fresh=True)
    assert got is not None and got.lanes["k"][0] < 80_600 / 9_700  # (its tokens inside the bucket)


def test_the_history_keeps_the_deepest_bucket_seen(tmp_path: Path):
    cache = tmp_path / "cache"
    history.record(cache, tmp_path / "a", {"m": {"answer": [10, 1]}}, {"m": "m@x"}, {"m": 3_000.0})
    history.record(cache, tmp_path / "b", {"m": {"answer": [10, 1]}}, {"m": "m@x"}, {"m": 1_000.0})
    history.record(cache, tmp_path / "c", {"m": {"answer": [10, 1]}}, {"m": "m@x"})  # (none seen: none kept)
    got = history.prior(cache, "m@x")
    assert got[history.DEPTH] == [3_000.0, 2] and got["answer"] == [30, 3]


def test_a_run_records_the_bucket_its_answers_showed_and_the_next_dry_run_spends_it(
        tmp_path: Path, request: pytest.FixtureRequest):
    """The mock's answers say remaining-tokens = its TPM - 100 (600,000: 599,900) on a key configured at that TPM:
    the run's history says so, and night 2's dry run forecasts its TPM lane's tokens past that bucket (all of them
    inside it: sooner than with the record's depth taken out)."""
    srv = MockServer(report_limits=(10_000, 600_000)).start()
    request.addfinalizer(srv.stop)
    cfg_path = write_config(tmp_path / "c.toml", srv.base_url, ["m"],
                            extra_endpoint="tpm = 600000\nmax_concurrency = 4\n")
    cache = tmp_path / "cache"
    assert main(run_args(write_dataset(tmp_path / "d1.jsonl", 12), "m", cfg_path, tmp_path / "night1",
                         "--cache-dir", str(cache))) == 0
    cfg = load_config(cfg_path)
    cid = build_models(cfg, ["m"])["m"].cache_id
    assert history.prior(cache, cid)[history.DEPTH] == [599_900, 1]
    plan = RunPlan(spec=RunSpec(suite=f"jsonl:{write_dataset(tmp_path / 'd2.jsonl', 200, prefix='New')}", options={}),
                   models=["m"], out=tmp_path / "night2")
    estimate([plan], cfg, cache_dir=cache)
    with_depth = FORECAST[0].lanes["mock"][0]
    for path in (cache / history.DIR).glob("*.json"):  # the same history, its depth taken out
        path.write_text(path.read_text().replace(f'"{history.DEPTH}"', '"depth:other"'))
    estimate([plan], cfg, cache_dir=cache)
    assert with_depth < FORECAST[0].lanes["mock"][0]
