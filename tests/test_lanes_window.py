"""LocalBudget's window guard on a fake clock (deterministic): requests count from when they left,
slots are spaced so the guard rarely binds, and no window of sends ever holds more than its share.
Plus the send hook of the aiohttp providers, against the mock server."""

from __future__ import annotations

import math
import os
import random
from pathlib import Path

import pytest

from core.types import Decoding, Message, Request
from providers import http
from providers.openai import OpenAIProvider
from runner.budgets.local import MARGIN_S, SLACK_S, WINDOW_S, LocalBudget
from runner.config import Endpoint
from runner.lanes import Lane
from tests.helpers import cli, rows, run_args, write_config, write_dataset
from tests.mock_openai import MockServer


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _admit(b: LocalBudget, clock: Clock) -> None:
    """The lane's loop: reserve a slot, sleep (jump the clock), confirm until admitted."""
    wait = b.reserve(0)
    while True:
        clock.t += max(wait, 0.0)
        wait = b.confirm()
        if wait <= 0:
            return


def _max_in_window(stamps: list[float], span: float) -> int:
    ts, best, lo = sorted(stamps), 0, 0
    for hi, t in enumerate(ts):
        while t - ts[lo] >= span:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def test_a_request_counts_from_when_it_left_not_from_its_admission():
    clock = Clock()
    b = LocalBudget(600, None, 64, clock=clock)  # 10 a second
    t0 = clock.t
    marks = []
    for _ in range(10):
        _admit(b, clock)
        marks.append(b.on_sent())
    clock.t = t0 + 0.5  # the loop stalled: all ten leave half a second after their admission
    for mark in marks:
        mark()
    clock.t = t0 + WINDOW_S + MARGIN_S + 0.01  # a window after the admissions, not after the sends
    assert b.confirm() > 0.4  # still full: they left at t0 + 0.5
    _admit(b, clock)
    assert clock.t >= t0 + 0.5 + WINDOW_S + MARGIN_S


def test_a_request_not_sent_yet_keeps_counting_and_counts_from_its_send():
    clock = Clock()
    b = LocalBudget(60, None, 4, clock=clock)  # 1 a second
    _admit(b, clock)
    mark = b.on_sent()
    assert mark is not None
    clock.t += 1.5  # still not sent (e.g. a new connection's handshake to a slow server)
    assert b.confirm() > 0  # it still holds the window's one place
    mark()
    t_sent = clock.t
    clock.t += WINDOW_S
    assert b.confirm() > 0  # ... from its send on
    _admit(b, clock)
    assert clock.t >= t_sent + WINDOW_S + MARGIN_S


def test_an_attempt_that_never_reported_a_send_counts_from_its_end():
    clock = Clock()
    b = LocalBudget(60, None, 4, clock=clock)
    _admit(b, clock)
    mark = b.on_sent()
    clock.t += 0.3  # the connection was refused, or the provider does not report sends
    mark(final=True)
    t_end = clock.t
    mark(final=True)  # idempotent
    _admit(b, clock)
    assert clock.t == pytest.approx(t_end + WINDOW_S + MARGIN_S)
    # a reported send is not moved by the attempt's end
    mark2 = b.on_sent()
    mark2()
    t_sent = clock.t
    clock.t += 0.5
    mark2(final=True)
    _admit(b, clock)
    assert clock.t == pytest.approx(t_sent + WINDOW_S + MARGIN_S)


def test_slots_leave_room_for_lateness_so_the_guard_rarely_binds():
    """Saturated, on time: after a fresh lane's burst, slots come every (1 + margin + slack)/rate, so
    a second's share spans more than the guard's window and the guard never adds a wait of its own."""
    clock = Clock()
    b = LocalBudget(60_000, None, 64, clock=clock)
    stamps = []
    for _ in range(3000):
        wait = b.reserve(0)
        clock.t += max(wait, 0.0)
        assert b.confirm() <= 0  # admitted at its slot
        stamps.append(clock.t)
    per_s = 1000
    assert stamps[per_s - 1] == stamps[0] < stamps[per_s]  # a fresh lane: a second's share at once
    assert _max_in_window(stamps, WINDOW_S + MARGIN_S) <= per_s
    spent = stamps[-1] - stamps[0]
    assert spent == pytest.approx((len(stamps) - 1) / per_s * (1 + MARGIN_S + SLACK_S), rel=1e-6)


def test_a_fresh_lanes_burst_allowance_lasts_its_first_window_only():
    clock = Clock()
    b = LocalBudget(1200, None, 64, clock=clock)  # 20 a second
    t0 = clock.t
    for _ in range(5):  # a lane with little work: five calls in its first second
        _admit(b, clock)
    clock.t = t0 + 3.0  # the unused allowance does not wait for a later bunch
    stamps = []
    for _ in range(20):
        _admit(b, clock)
        stamps.append(clock.t)
    assert stamps[0] == t0 + 3.0 and stamps[-1] - stamps[0] > 0.9  # paced, not 15 at once


@pytest.mark.parametrize("seed", range(5))
def test_no_window_of_sends_holds_more_than_its_share_whatever_the_send_delays(seed: int):
    """Random send delays (most tiny, some long enough to reorder sends, some past the window),
    random timer lateness and a few stalls: the final send stamps never put more than a second's
    share into any window of 1 s + margin."""
    rnd = random.Random(seed)
    clock = Clock()
    b = LocalBudget(6000, None, 64, clock=clock)  # 100 a second
    pending: list[tuple[float, object]] = []  # (send time, mark)
    sends: list[float] = []

    def flush(until: float) -> None:
        pending.sort(key=lambda p: p[0])
        while pending and pending[0][0] <= until:
            t, mark = pending.pop(0)
            clock.t = max(clock.t, t)
            mark()  # type: ignore[operator]
            sends.append(clock.t)

    for _ in range(1500):
        wait = b.reserve(0)
        while True:
            late = rnd.choice((0.0, 0.0, 0.001, 0.004)) + (0.2 if rnd.random() < 0.005 else 0.0)
            target = clock.t + max(wait, 0.0) + late
            flush(target)
            clock.t = target
            wait = b.confirm()
            if wait <= 0:
                break
        mark = b.on_sent()
        r = rnd.random()
        delay = 0.0002 if r < 0.9 else 0.03 if r < 0.99 else 1.5
        pending.append((clock.t + delay, mark))
    flush(float("inf"))
    assert len(sends) == 1500
    assert _max_in_window(sends, WINDOW_S + MARGIN_S) <= 100


async def test_aiohttp_providers_report_each_send_to_the_caller():
    srv = MockServer().start()
    prov = OpenAIProvider(srv.base_url)
    req = Request(suite="s", item="q", messages=[Message(role="user", content="hi")], decoding=Decoding(max_tokens=8))
    calls: list[int] = []
    try:
        for i in range(3):
            token = http.SENT.set(lambda i=i: calls.append(i))
            try:
                await prov.complete(req, "ok-a", 1, 0, "k", {})
            finally:
                http.SENT.reset(token)
        await prov.complete(req, "ok-a", 1, 0, "k", {})  # no hook set: nothing is called
    finally:
        await prov.close()
        srv.stop()
    assert calls == [0, 1, 2] and srv.total == 4
    assert OpenAIProvider.reports_send


def test_a_bunch_of_429s_widens_the_window_once():
    """One stall at the server refuses the whole bunch it delayed: one episode, one widening."""
    lane = Lane(Endpoint(name="e", kind="sim", rpm=60_000), None, None, provider=None)
    for _ in range(20):
        lane._on_answer(None, True)
    assert lane.budget.margin == pytest.approx(MARGIN_S + 0.004)
    assert lane.rate_limited == 20


@pytest.mark.parametrize("rpm", [100, 150, 400, 500])
def test_a_rate_that_is_not_whole_requests_a_second_is_reached(rpm: int):
    """#40: 100 RPM is 1.67 a second: a one-second guard of floor(1.67) = 1 held such a key to 0.60 of
    its limit (150: 0.80, 400: 0.90). A lane alone reaches its rate, never above ceil(rate) in a second
    nor above the rate over longer windows (the fresh key's burst aside)."""
    clock = Clock()
    b = LocalBudget(rpm, None, 64, clock=clock)
    t0, stamps = clock.t, []
    while clock.t < t0 + 120.0:
        _admit(b, clock)
        stamps.append(clock.t)
    minutes = (stamps[-1] - t0) / 60.0
    assert len(stamps) >= 0.99 * rpm * minutes, (len(stamps), rpm * minutes)
    rate = rpm / 60.0
    assert _max_in_window(stamps, 1.0) <= math.ceil(rate)
    for k in (2, 3, 5, 10):
        assert _max_in_window([t for t in stamps if t > t0 + 1.0], float(k)) <= math.floor(rate * k) + 1


@pytest.mark.parametrize(("rpm", "n"), [(1200, 3), (400, 3), (150, 2), (500, 7)])
def test_processes_pacing_shares_of_a_key_stay_within_its_second_together(rpm: int, n: int):
    """#40: a shared budget's fallback paces 1/n of the key in each of n processes, on clocks with no
    phase between them: each second of theirs must add up within the key's (the longer guard a lane
    alone gets would let each send ceil(rate/n) in one second: 3 x 7 = 21 > 20 at 1200 RPM, the reason
    17b99e9 reverted it). The worst case: every process's sends fall in the same second."""
    clock = Clock()
    b = LocalBudget(rpm / n, None, 64, clock=clock)
    b.split(n)
    t0, stamps = clock.t, []
    while clock.t < t0 + 60.0:
        _admit(b, clock)
        stamps.append(clock.t)
    assert n * _max_in_window(stamps, 1.0) <= max(n, math.floor(rpm / 60.0 + 1e-9))


@pytest.mark.parametrize("rpm", [100, 150, 400])
def test_a_rate_that_is_not_whole_stays_within_a_bucket_holding_a_seconds_share(rpm: int):
    """#40: providers refill a token bucket holding a second of the rate (the bench's server; OpenAI's
    limits are described as such): at 100 RPM it holds 1.67, so two requests closer than 0.2 s are
    refused even when the second is within ceil(rate) a second. Sends bunched by a stalled loop (their
    stamps move to when they left) must still conform: any window of w seconds holds at most
    rate x (1 + w) requests."""
    clock = Clock()
    b = LocalBudget(rpm, None, 64, clock=clock)
    rnd = random.Random(7)
    t0, stamps = clock.t, []
    while clock.t < t0 + 60.0:
        _admit(b, clock)
        mark = b.on_sent()
        if rnd.random() < 0.3:  # this send leaves late (a loop stall): it may meet the next one
            clock.t += rnd.random() * 0.5
        mark()
        stamps.append(clock.t)
        if rnd.random() < 0.1:
            clock.t += rnd.random() * 3  # no work for a while: the lane catches up afterwards
    rate, level, last = rpm / 60.0, rpm / 60.0, stamps[0]
    for t in sorted(stamps):
        level = min(rate, level + (t - last) * rate)
        last = t
        assert level >= 1.0 - 1e-9, (t - t0, level)
        level -= 1.0


@pytest.mark.parametrize(("rpm", "factor"), [(3000, 0.25), (3000, 0.35), (100, 0.9), (400, 0.8)])
def test_a_rate_the_factor_reduced_is_held_to_its_whole_share(rpm: int, factor: float):
    """#40: after 429s the AIMD factor cuts the rate below the key's real, unknown limit: a fractional
    share of it must not round up to ceil a second (12.5/s would send 13 where the key took 10). With
    7345ff3 a lane configured at 3000 RPM against a key of 600 kept 44% of its requests refused."""
    clock = Clock()
    b = LocalBudget(rpm, None, 64, clock=clock)
    b.set_factor(factor)
    t0, stamps = clock.t, []
    while clock.t < t0 + 30.0:
        _admit(b, clock)
        stamps.append(clock.t)
    assert _max_in_window(stamps, WINDOW_S) <= math.floor(rpm * factor / 60.0)


def test_a_cut_factor_does_not_hold_the_lane_on_the_faster_rates_sends():
    """#40: a lane whose factor was just cut goes on at its new rate once the last second's sends allow
    it. A guard longer than a second would count the sends of the faster rate just refused and hold
    the lane a whole second: a quiet second, which the AIMD reads as room and answers by raising the
    factor again (7345ff3: 1 send in the second after the cut from 25/s to 12.5/s, then 17.5/s)."""
    clock = Clock()
    b = LocalBudget(3000, None, 64, clock=clock)
    b.set_factor(0.5)  # 25/s: whole
    t0 = clock.t
    while clock.t < t0 + 2.0:
        _admit(b, clock)
    b.set_factor(0.25)  # 12.5/s
    cut, stamps = clock.t, []
    while clock.t < cut + 2 * WINDOW_S:
        _admit(b, clock)
        stamps.append(clock.t)
    first = [t for t in stamps if t < cut + WINDOW_S]
    assert len(first) >= 12 // 2  # the faster second's last half leaves the window within ~0.5 s
    assert _max_in_window(stamps, WINDOW_S) <= 12


def test_a_100_rpm_key_is_used_at_its_rate_against_a_server_enforcing_it(tmp_path: Path):
    """#40: 100 RPM (1.67/s) against the mock enforcing it over sliding seconds: no 429, and the rate
    the server saw is the key's, not floor(1.67) = 1 a second (0.60 of it before)."""
    srv = MockServer(rpm_per_key=100).start()
    try:
        cfg = write_config(
            tmp_path / "c.toml", srv.base_url, ["ok-a"], key_env="MOCK_KEY_F", extra_endpoint="rpm = 100\n"
        )
        data = write_dataset(tmp_path / "d.jsonl", 16)
        out = tmp_path / "run"
        # In a subprocess, so the runner and the mock (a thread here) do not share a GIL.
        r = cli(*run_args(data, "ok-a", cfg, str(out)), env={**os.environ, "MOCK_KEY_F": "f-key"})
    finally:
        srv.stop()
    assert r.returncode == 0 and len(rows(out)) == 16, r.stderr
    assert srv.rejected_429 == 0
    ts = sorted(srv.times["f-key"])
    rpm = (len(ts) - 1) / (ts[-1] - ts[0]) * 60.0
    assert rpm >= 0.9 * 100, rpm  # before: 59.6
