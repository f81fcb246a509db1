"""#40: a lane's end past its binding work is its last calls'. On the bench (seeds 0-20, night 2) the concurrency
lanes ended 1.09-1.17x their call-seconds over their slots and were forecast at exactly that (`no-n` 0.86 of its
wall, its 80% range held it 0 times in 21), and a TPM lane's end was its tokens' time plus a typical call where one
long call sent late ends it. The forecast now takes the calls in progress when the last one is sent (renewal
theory: picked by their length) and the longest of what they have left (runner.forecast.last_residual). The
expected figures are worked by hand (the exponential's in closed form) or with scipy's lognormal and quad, not by
the code under test."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest

from runner.forecast import wall
from runner.remaining import Plan


def _lane(tpm: float | None = None, conc: int = 1000) -> dict[str, Any]:
    ep = SimpleNamespace(rpm=None, tpm=tpm, max_concurrency=conc)
    return {"m": SimpleNamespace(lanes=[SimpleNamespace(name="k", endpoint=ep)])}


def test_a_law_s_work_past_x_and_its_variance_cut_at_the_longest_seen():
    """Lognormal of mean 1, sigma 0.5 (mu = -0.125): E[(L - 1)+] = Phi(0.25) - Phi(-0.25) = 0.197413, its variance
    e^0.25 - 1 = 0.284025. Exponential of mean 2 cut at 5: E[min(L, 5)] = 2 (1 - e^-2.5) = 1.835830, E[min(L, 5)^2]
    = 2 x 2 (2 - 7 e^-2.5) = 5.701620, variance 2.331348; past 5: nothing."""
    from runner.forecast import Law

    assert Law(1.0, 0.5).excess(1.0) == pytest.approx(0.197413, abs=1e-6)
    assert Law(1.0, 0.5).var() == pytest.approx(0.284025, abs=1e-6)
    cut = Law(2.0, None, cap=5.0)
    assert cut.excess(0.0) == pytest.approx(1.835830, abs=1e-6)
    assert cut.var() == pytest.approx(2.331348, abs=1e-6)
    assert cut.excess(5.0) == 0.0


def test_the_longest_residual_of_memoryless_calls_is_the_harmonic_number():
    """Exponential latencies of mean 2 on 4 busy slots: what each call in progress has left is exponential of mean
    2 (memoryless), the longest of 4 has mean 2 x H_4 = 4.1667, so the lane ends 2 x (H_4 - 1) = 2.1667 s past its
    work / slots; the longest's 10th and 90th percentiles -2 ln(1 - q^(1/4)): 1.6526 and 7.2996 s, less the mean
    left (2): -0.3474 and 5.2996. Fewer than 2 calls at once: no tail (the longest call bounds that lane)."""
    from runner.forecast import Law, tail_past

    got = tail_past([(Law(2.0), 100.0)], 4)
    assert got == (pytest.approx(2.16667, abs=2e-3), pytest.approx(-0.34737, abs=1e-4), pytest.approx(5.29961, abs=1e-4))
    assert tail_past([(Law(2.0), 100.0)], 1) == (0.0, 0.0, 0.0)
    assert tail_past([(Law(2.0), 1.0)], 4) == (0.0, 0.0, 0.0)


def test_a_concurrency_lane_ends_its_longest_residual_past_its_work_over_its_slots():
    """100 calls of mean 2 s, lognormal sigma 0.5, on 4 slots: 200 call-seconds / 4 = 50 s (main said 50), plus the
    longest of 4 calls in progress when the queue empties less their mean left: scipy (quad of P(R > x) =
    E[(L - x)+] / E[L] over 1 - (1 - P(R > x))^4) 2.453648 - E[L^2] / 2E[L] = 2 e^0.25 / 2 = 1.284025: 51.1696 s.
    Its 80% range: that longest's 10th and 90th percentiles (1.181360, 4.005614 s, scipy) and the call-seconds'
    spread (sd sqrt(100 x 4 (e^0.25 - 1) x (1 + 100 / 100)) / 4 = 3.76845 s, times 1.28155), in quadrature:
    46.1753-56.2424 s. (The longest latency seen far out: the law as fitted, uncut.)"""
    plan = Plan("r", "m", calls=100, requests=100, max_output_tokens=25_600, out_tokens_seen=[100_000, 100],
                latency_seen={"answer": [200.0, 100]}, latency_sigma={"answer": 0.5}, latency_cap={"answer": 1e6})
    f = wall([plan], _lane(conc=4))
    assert f is not None and f.bound == "concurrency"
    assert f.expected_s == pytest.approx(51.16962, abs=2e-3)
    sd = math.sqrt(100 * 4 * math.expm1(0.25) * 2) / 4 * 1.2815515655446004
    down = math.hypot(2.453648 - 1.181360, sd)
    up = math.hypot(4.005614 - 2.453648, sd)
    e, low, high, bound = f.lanes["k"]
    assert (low, high) == (pytest.approx(e - down, abs=2e-3), pytest.approx(e + up, abs=2e-3))
    assert (f.least_s, f.high_s) == (pytest.approx(e - down, abs=2e-3), pytest.approx(e + up, abs=2e-3))


def test_a_tpm_lane_ends_with_the_longest_call_in_progress_at_its_last_send():
    """100 calls of 1,000 tokens, latencies of mean 1 s (lognormal sigma 0.5) on a 600k TPM key paced at 0.97:
    100,000 / 9,700 = 10.3093 s of tokens, 100 call-seconds in them: 9.7 calls in flight (Little's law). At the
    last send those are picked by their length: the longest of what they have left is 1.641944 s on average (scipy),
    and their tokens past a typical call's (var / mean = e^0.25 - 1 = 0.284025 s of the lane) let that send come as
    much earlier: 10.3093 + 1.641944 - 0.284025 = 11.6672 s (main: + the typical call's 1 s, 11.3093). Its range:
    that longest's 10th and 90th percentiles, 0.966474 and 2.465954 s (scipy); no token spread known."""
    plan = Plan("r", "m", calls=100, requests=100, max_output_tokens=25_600, out_tokens_seen=[100_000, 100],
                latency_seen={"answer": [100.0, 100]}, latency_sigma={"answer": 0.5}, latency_cap={"answer": 1e6})
    f = wall([plan], _lane(tpm=600_000))
    assert f is not None and f.bound == "TPM"
    point = 100_000 / 9_700 + 1.641944 - 0.284025
    assert f.expected_s == pytest.approx(point, abs=2e-3)
    assert (f.least_s, f.high_s) == (pytest.approx(point - (1.641944 - 0.966474), abs=2e-3),
                                     pytest.approx(point + (2.465954 - 1.641944), abs=2e-3))


def test_a_fit_without_a_longest_seen_is_cut_where_its_calls_would_end():
    """A law whose longest latency is not known (the live ETA's on a first night: runner.eta._law fits this run's
    rows) was not cut, and a lognormal fit's E[L^2] = mean^2 e^(sigma^2) ran the last calls' tail off (bench seed 9,
    --eta: 5x the real time left at mid-run). A law fitted on 9 calls, mean 1, sigma 0.5 (mu = -0.125), is cut at its
    1 - 1/10 quantile: exp(-0.125 + 0.5 x 1.281552) = 1.674937 s; a longest seen is kept; fewer than 2 calls or no sigma: as it was."""
    from runner.forecast import Law, cut

    assert cut(Law(1.0, 0.5, 9)).cap == pytest.approx(1.674937, abs=1e-6)
    assert cut(Law(1.0, 0.5, 9, cap=3.0)).cap == 3.0
    assert cut(Law(1.0, 0.5, 1)).cap is None and cut(Law(1.0, None, 9)).cap is None
