"""Lane pacing (GCRA on absolute slots), storms of 429s, limits learned from headers, error meanings."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest

from providers.base import ProviderError, error_for_status, parse_duration, retry_after_of
from providers.http import parse_limits
from runner.config import Endpoint
from runner.lanes import FLOOR, Lane


def _lane(**kw) -> Lane:
    return Lane(Endpoint(name="e", kind="sim", **kw), None, None, provider=None)


def _max_in_window(times: list[float], window: float = 1.0) -> int:
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while t - times[lo] >= window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


async def _drive(lane: Lane, seconds: float, block_at: float | None = None) -> list[float]:
    """Keep the lane saturated for `seconds`; return admission times. Optionally freeze the event
    loop for 0.2 s once (a GC pause, a slow callback) to see whether the lane catches up."""
    times: list[float] = []
    t0 = time.monotonic()
    blocked = block_at is None

    async def fn() -> None:
        nonlocal blocked
        times.append(time.monotonic())
        if not blocked and time.monotonic() - t0 > block_at:
            blocked = True
            time.sleep(0.2)

    async def worker() -> None:
        while time.monotonic() - t0 < seconds:
            await lane.call(fn, 0)

    await asyncio.gather(*(worker() for _ in range(lane.max_concurrency)))
    return times


@pytest.mark.parametrize("rpm", [1200, 12_000])
async def test_gcra_never_exceeds_a_seconds_share_and_reaches_the_limit(rpm: int):
    lane = _lane(rpm=rpm, max_concurrency=32)
    times = await _drive(lane, 2.5)
    per_s = rpm / 60
    assert _max_in_window(times) <= per_s
    # Absolute slots: 2.5 s of a saturated lane admit ~2.5 s worth, not 97.5% minus accumulated
    # timer lateness.
    assert len(times) >= 0.97 * 2.5 * per_s, len(times)


async def test_lateness_is_caught_up_not_lost():
    lane = _lane(rpm=6000, max_concurrency=16)  # 100 a second
    times = await _drive(lane, 3.0, block_at=1.2)
    assert _max_in_window(times) <= 100
    # After the 0.2 s freeze the missed slots (up to BURST_S of them) are spent at once, within the
    # window's share: 3 s still admit ~300.
    assert len(times) >= 0.97 * 300, len(times)


async def _noop() -> str:
    return "ok"


async def test_tpm_budget_paces_calls_and_reconciles_actual_usage():
    lane = _lane(tpm=60_000)  # 1,000 tokens a second
    t0 = time.monotonic()

    async def one() -> None:
        await lane.call(_noop, 100)
        lane.reconcile(100, 150)  # each call really used 150: the debt delays the next ones

    await asyncio.gather(*(one() for _ in range(20)))
    # 2,000 tokens at 1,000/s: a fresh key's bucket is full, so a second of them goes at once; each
    # call goes when its tokens have refilled (the last at ~1 s)
    assert time.monotonic() - t0 >= 0.95
    await lane.call(_noop, 0)  # a call estimated at 0 tokens still waits out the 20 x 50 owed
    assert time.monotonic() - t0 >= 1.9


async def test_tpm_credit_from_overestimates_is_used():
    lane = _lane(tpm=60_000)
    await lane.call(_noop, 1000)  # charged a second's worth of tokens
    lane.reconcile(1000, 100)  # but used only 100: 900 tokens of credit
    t0 = time.monotonic()
    for _ in range(8):
        await lane.call(_noop, 100)  # 800 of them paid from the credit
    assert time.monotonic() - t0 < 0.95  # without the credit: >= 1.7 s


def _answers(lane: Lane, n: int, n429: int) -> None:
    """n answers in the current one-second bucket, n429 of them 429s; then roll the bucket."""
    for i in range(n):
        lane._on_answer(None, i < n429)
    lane._bucket = (time.monotonic() - 2.0, *lane._bucket[1:])


def test_aimd_slows_on_a_storm_never_below_the_floor_and_recovers():
    lane = _lane(rpm=6000)
    _answers(lane, 10, 1)
    lane._on_answer(None, False)
    assert lane.factor == 1.0  # a stray 429 changes nothing (its request waits its Retry-After)
    for _ in range(10):  # 30% 429s, second after second
        _answers(lane, 10, 3)
        lane._on_answer(None, True)
    assert lane.factor == FLOOR  # slowed, but a storm never costs more than 1/FLOOR
    assert lane.budget.paused_until <= time.monotonic()  # ... and never stops the lane
    for _ in range(6):
        _answers(lane, 10, 0)
        lane._on_answer(None, False)
    assert lane.factor == 1.0
    for _ in range(3):  # most attempts refused: the real limit is far lower, slow down further
        _answers(lane, 10, 7)
        lane._on_answer(None, True)
    assert lane.factor == 0.125


def test_without_a_rate_limit_aimd_narrows_concurrency():
    lane = _lane(max_concurrency=64)
    for _ in range(10):
        _answers(lane, 10, 3)
        lane._on_answer(None, True)
    assert lane.budget._cap == 32


def test_limits_learned_from_headers_config_wins_only_when_lower(caplog: pytest.LogCaptureFixture):
    lane = Lane(Endpoint(name="e", base_url="http://x/v1"), None, None, provider=None)
    assert lane.budget._cap == 1  # no limits known yet: one call at a time until the first answer
    lane._on_answer({"limit_requests": 500, "limit_tokens": 30_000, "remaining_requests": 499}, False)
    assert (lane.rpm, lane.tpm) == (500, 30_000) and lane.source == {"rpm": "provider", "tpm": "provider"}
    assert lane.budget._cap == 64
    high = Lane(Endpoint(name="e", base_url="http://x/v1", rpm=10_000, tpm=10), None, None, provider=None)
    high._on_answer({"limit_requests": 500, "limit_tokens": 30_000}, False)
    assert (high.rpm, high.tpm) == (500, 10) and high.source == {"rpm": "provider", "tpm": "config"}
    assert sum("above the 500 the provider reports" in r.message for r in caplog.records) == 1
    high._on_answer({"limit_requests": 500, "limit_tokens": 30_000}, False)
    assert sum("above" in r.message for r in caplog.records) == 1  # warned once
    d = high.describe()
    assert d["rpm"] == 500 and d["rpm_source"] == "provider" and d["tpm_source"] == "config"


def test_empty_budget_pauses_the_lane_until_reset():
    lane = _lane(rpm=600)
    lane._on_answer({"limit_requests": 600, "remaining_requests": 0, "reset_requests": 30.0}, False)
    # One request comes back every 60/600 s: pause that long, not the 30 s of a full refill.
    assert 0.05 < lane.budget.paused_until - time.monotonic() <= 0.1


def test_header_parsing():
    assert parse_duration("6m0s") == 360 and parse_duration("1s") == 1 and parse_duration("20ms") == 0.02
    assert parse_duration("1h2m3.5s") == 3723.5 and parse_duration("2.5") == 2.5
    assert parse_duration("soon") is None
    h = {
        "x-ratelimit-limit-requests": "5000",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "12ms",
        "x-ratelimit-limit-tokens": "800000",
        "x-ratelimit-remaining-tokens": "799000",
        "x-ratelimit-reset-tokens": "75ms",
    }
    lim = parse_limits(h)
    assert lim == {
        "limit_requests": 5000, "remaining_requests": 0, "reset_requests": 0.012,
        "limit_tokens": 800000, "remaining_tokens": 799000, "reset_tokens": 0.075,
    }
    assert retry_after_of(h, lim) == 0.012  # the exhausted budget's reset
    assert retry_after_of({"retry-after-ms": "250"}, None) == 0.25
    assert retry_after_of({"Retry-After": "2", "retry-after-ms": "250"}, None) == 2.0
    assert parse_limits({}) is None
    soon = (datetime.now(UTC) + timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    anth = parse_limits({
        "anthropic-ratelimit-requests-limit": "4000", "anthropic-ratelimit-requests-remaining": "3999",
        "anthropic-ratelimit-requests-reset": soon, "anthropic-ratelimit-tokens-limit": "400000",
    })
    assert anth is not None and anth["limit_requests"] == 4000 and anth["limit_tokens"] == 400_000
    assert 28 < anth["reset_requests"] <= 30


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (429, '{"error": {"type": "insufficient_quota", "code": "insufficient_quota"}}', "quota"),
        (429, '{"error": {"message": "You exceeded your current quota, please check your plan"}}', "quota"),
        (400, '{"type": "error", "error": {"message": "Your credit balance is too low"}}', "quota"),
        (403, '{"error": {"code": "account_deactivated"}}', "quota"),
        (429, '{"error": {"message": "Rate limit reached", "type": "requests"}}', "rate_limit"),
        (529, '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}', "transient"),
        (400, '{"type": "error", "error": {"type": "overloaded_error"}}', "transient"),
        (503, "upstream unavailable", "transient"),
        (500, "{\"error\": {\"message\": \"1 validation error:\\n {'type': 'int_parsing', 'loc': ('body', "
              "'max_tokens'), 'msg': 'Input should be a valid integer'}\"}}", "fatal"),
        (400, '{"error": {"message": "bad param"}}', "fatal"),
    ],
)
def test_errors_by_meaning(status: int, body: str, kind: str):
    e = error_for_status(status, body)
    assert e.kind == kind
    assert e.retryable == (kind in ("rate_limit", "transient"))


async def test_quota_stops_the_lane_at_once():
    lane = _lane(max_attempts=6)
    calls = 0

    async def dry() -> None:
        nonlocal calls
        calls += 1
        raise error_for_status(429, '{"error": {"code": "insufficient_quota"}}')

    with pytest.raises(ProviderError) as ei:
        await lane.call(dry, 0)
    assert calls == 1 and ei.value.quota and lane.stopped and "out of quota" in lane.stopped
    with pytest.raises(ProviderError):
        await lane.call(dry, 0)
    assert calls == 1  # a stopped lane sends nothing


def test_live_view_shows_each_lanes_limit_source_and_use():
    from rich.console import Console

    from cli.progress import _lanes_table

    lane = Lane(Endpoint(name="e", base_url="http://x/v1", tpm=90_000), "KEY_A", "sk-x", provider=None)
    lane._on_answer({"limit_requests": 500, "limit_tokens": 30_000}, False)
    lane.admitted = 10
    con = Console(width=200, record=True)
    con.print(_lanes_table([lane.describe()]))
    text = con.export_text()
    assert "e/KEY_A" in text and "500 rpm 30000 tpm" in text and "provider" in text and "ok" in text
    lane.stop("insufficient_quota")
    con.print(_lanes_table([lane.describe()]))
    assert "out of quota on e/KEY_A" in con.export_text()
