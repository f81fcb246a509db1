"""LocalBudget's window guard on a fake clock (deterministic): requests count from when they left,
slots are spaced so the guard rarely binds, and no window of sends ever holds more than its share.
Plus the send hook of the aiohttp providers, against the mock server."""

from __future__ import annotations

import random

import pytest

from core.types import Decoding, Message, Request
from providers import http
from providers.openai import OpenAIProvider
from runner.budgets.local import MARGIN_S, SLACK_S, WINDOW_S, LocalBudget
from runner.config import Endpoint
from runner.lanes import Lane
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
