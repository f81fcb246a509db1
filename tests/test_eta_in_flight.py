"""#40: the live ETA from a given state (fixed ages and tallies, no timing): calls already on the wire hold
their lane for what they have still to go given their age (a heavy tail's grows with it), the range holds
the expected, and no `done` is said before a run's plan is counted."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cli.progress import snapshot, sweep_line
from runner.eta import Live
from runner.remaining import Plan
from runner.state import Stats

MEAN, SIGMA, ROWS = 10.0, 1.5, 40
"""The model's answers so far: ROWS calls, lognormal latencies of this mean and sigma (a heavy tail)."""


def _spent(sigma: float | None) -> dict[str, list[Any]]:
    """A runner.history tally of ROWS answers whose latencies have this mean and log-spread (None: no
    log-spread kept, as earlier tallies)."""
    out: dict[str, list[Any]] = {"answer": [100 * ROWS, ROWS], "latency:answer": [MEAN * ROWS, ROWS]}
    if sigma is not None:
        mu = math.log(MEAN) - sigma ** 2 / 2
        out["lnlat:answer"] = [mu * ROWS, ROWS]
        out["lnlat2:answer"] = [ROWS * mu * mu + (ROWS - 1) * sigma ** 2, ROWS]
    return out


def _live(ages: list[float], sigma: float | None = SIGMA, stats: bool = True) -> tuple[Live, Any]:
    """One run, model `m` on one lane of 4 slots: 2 answers left, each on the wire for `ages[i]` s."""
    now = time.monotonic()
    run = SimpleNamespace(stats={"m": Stats(total=ROWS + 2, done=ROWS, ok=ROWS)} if stats else {},
                          spent={"m": _spent(sigma)}, done={}, loaded=None, join=False)
    lane = SimpleNamespace(name="k", endpoint=SimpleNamespace(rpm=None, tpm=None, max_concurrency=4),
                           wire={i: (now - a, (id(run), "m", "answer", 1)) for i, a in enumerate(ages)})
    live = Live([run], {"m": SimpleNamespace(lanes=[lane], batch=False, cache_id="m")})
    live.base = {0: [Plan("0", "m", calls=ROWS + 2, requests=ROWS + 2, input_tokens=100 * (ROWS + 2),
                          max_output_tokens=1000 * (ROWS + 2))]}
    live.resumed = {0: {}}
    return live, now


def test_calls_on_the_wire_are_no_fresh_calls_and_a_heavy_tail_has_longer_to_go_the_older_they_are():
    live, now = _live([60.0, 60.0])
    fc = live.refresh(now)
    (t,) = live.todo
    assert t.calls == 0  # nothing left to send: both calls are on the wire
    fresh = MEAN * (1 + math.log(2))  # what two fresh calls would take together (the forecast before)
    assert fc is not None and fc.expected_s > 60.0 > fresh
    young, _ = _live([1.0, 1.0])
    assert young.refresh(now).expected_s < fc.expected_s  # the older, the longer still to go
    assert fc.least_s < fc.expected_s < fc.most_s  # the range around it
    e, most, least = fc.models[("0", "m")]
    assert least < e < most


def test_with_no_spread_known_a_call_on_the_wire_has_the_mean_to_go_whatever_its_age():
    """Memoryless (no `lnlat` tally: an earlier run's history): each call on the wire has the mean left, the
    mean counting them at their age plus that (the calls ended so far are the short ones); the latest of two
    ends at its median when (1 - e^(-t/mean))^2 = 1/2."""
    for age in (1.0, 60.0):
        live, now = _live([age, age], sigma=None)
        fc = live.refresh(now)
        mean = (MEAN * ROWS + 2 * (age + MEAN)) / (ROWS + 2)
        assert fc is not None and fc.bound == "calls in flight"
        assert fc.expected_s == pytest.approx(-mean * math.log(1 - math.sqrt(0.5)), rel=1e-6)


def test_no_done_before_the_plan_is_counted():
    """A run being loaded has totals of 0 and no forecast: its ETA is `?`, the sweep's never `done`."""
    run = SimpleNamespace(name="r", run_dir=Path("r"), models=["m"], stats={"m": Stats(total=0)}, batcher=None,
                          loaded=asyncio.Event())
    (row,) = snapshot([run])
    assert row["eta"] == "?" and "ETA done" not in sweep_line([row])
    run.loaded.set()  # counted: a total of 0 is nothing to do
    (row,) = snapshot([run])
    assert row["eta"] == "done"


def test_a_model_not_counted_yet_is_no_done_in_the_forecast():
    """Two models planned, one of them with no counters yet: its ETA is unknown, not 0."""
    live, now = _live([5.0, 5.0])
    live.base[0].append(Plan("0", "n", calls=3, requests=3, input_tokens=300, max_output_tokens=3000))
    live.models["n"] = live.models["m"]
    live.refresh(now)
    assert live.eta(0, "m") is not None and live.eta(0, "n") is None


def test_the_range_is_said_beside_the_eta():
    from cli.live import summary_parts

    row = {"done": 1, "total": 2, "rps": 1.0, "cost": 0.0, "errors": 0, "skipped": 0, "resumed": 0, "cached": 0,
           "retries": 0}
    said = " ".join(t for _, t in summary_parts([row], 30.0, most_s=75.0, low_s=20.0))
    assert "ETA 30s (20s-1.2m)" in said


def test_a_sweep_with_models_not_forecast_yet_ends_no_sooner_than_those_forecast():
    """One model's pace not seen yet (the rate's ETA, 10 s of rows left), another forecast at 100 s: 100 s."""
    from cli.live import sweep_eta

    rows = [{"total": 20, "done": 10, "rps": 1.0, "eta_s": 10.0, "eta_most_s": None},
            {"total": 20, "done": 20, "rps": 0.0, "eta_s": 100.0, "eta_low_s": 80.0, "eta_most_s": 120.0}]
    assert sweep_eta(rows) == 100.0 and sweep_eta(rows, most=True) is None


def test_calls_long_on_the_wire_are_writing_long():
    """Output tokens are written at a pace: the mean output a call will write is scaled as its mean latency
    once the calls on the wire are counted (TPM lanes' work), and a refresh never compounds it."""
    live, now = _live([60.0, 60.0], sigma=None)
    mean = (MEAN * ROWS + 2 * (60.0 + MEAN)) / (ROWS + 2)
    for _ in range(2):
        live.refresh(now)
        (t,) = live.todo
        assert t.out_tokens_seen[0] / t.out_tokens_seen[1] == pytest.approx(100 * mean / MEAN)
