"""TPM charged by what a model's answers really used (runner.estimates), and what a lane does with the
provider's remaining-* headers: echoes of its own pacing pause nothing, a 429 for tokens defers the
token slots by the key's reset without cutting the rate."""

from __future__ import annotations

import math
import time

from core.types import Decoding, Message, Request
from runner.config import Endpoint
from runner.estimates import UNSEEN_S, Spend
from runner.lanes import Lane


def _req(pass_: str = "answer", max_tokens: int = 1024) -> Request:
    return Request(model="m", item="q1", suite="s", pass_=pass_, messages=[Message(role="user", content="x" * 400)],
                   decoding=Decoding(max_tokens=max_tokens))


def _lane(**kw) -> Lane:
    return Lane(Endpoint(name="e", kind="sim", **kw), None, None, provider=None)


def test_spend_charges_max_tokens_until_answers_then_their_mean_per_pass():
    sp = Spend()
    assert sp.tokens(_req()) == 100 + 1024  # no answer yet: the suite's budget
    sp.observe("answer", 1, 3000, 4.0)  # a reasoning model: thoughts far above the answer budget
    sp.observe("answer", 8, 8 * 2000, 9.0)  # an n=8 call: 8 samples of 2,000
    assert sp.tokens(_req()) == 100 + round((3000 + 16000) / 9)
    assert sp.tokens(_req("critique")) == 100 + 1024  # another pass: its own account
    assert sp.seconds("answer", 8) == 4.0 * (1 + math.log(8)) and sp.seconds("answer", 1) == 4.0
    sp.observe("answer", 8, 8 * 2000, 50.0)  # n calls seen slower than that: their own mean
    assert sp.seconds("answer", 8) == (9.0 + 50.0) / 2
    assert sp.seconds("answer", 4) == 4.0 * (1 + math.log(4))  # not seen yet: from one-sample calls
    assert sp.seconds("judge", 1) == UNSEEN_S


def test_an_echo_of_the_lanes_own_pacing_pauses_nothing():
    lane = _lane(rpm=600, tpm=60_000)
    stale = {"limit_requests": 600, "remaining_requests": 0, "reset_requests": 30.0,
             "limit_tokens": 60_000, "remaining_tokens": 0, "reset_tokens": 0.5}
    tat = lane.budget._tok_tat
    lane._on_answer(stale, False, own=(True, True))  # admitted while the lane used its whole rate
    assert lane.budget.paused_until == 0.0 and lane.budget._tok_tat == tat and lane.factor == 1.0
    lane._on_answer(stale, False, own=(False, False))  # the lane was not using it: someone else is
    now = time.monotonic()
    assert 0.05 < lane.budget.paused_until - now <= 0.1  # the next request after 60/rpm
    assert 0.4 < lane.budget._tok_tat - now <= 0.5  # tokens after the reset


def test_a_429_for_tokens_defers_token_slots_by_the_reset_and_keeps_the_rate():
    lane = _lane(rpm=6000, tpm=60_000)
    lane.budget.reserve(100)  # the call that was refused
    refused = {"limit_tokens": 60_000, "remaining_tokens": 0, "reset_tokens": 0.8, "remaining_requests": 90}
    for _ in range(10):  # a whole second of them: not a storm to halve the rate for
        lane._on_answer(refused, True, 0.8)
    lane._bucket = (time.monotonic() - 2.0, *lane._bucket[1:])
    lane._on_answer(None, False)
    assert lane.factor == 1.0 and lane.budget.paused_until == 0.0  # requests are not paused
    assert 0.7 < lane.budget._tok_tat - time.monotonic() <= 0.8
    assert lane.rate_limited == 10
    wait = lane.budget.reserve(100)  # the next call's tokens come after the reset
    assert 0.8 < wait <= 0.95  # (plus its own 100 tokens of refill)


async def test_a_free_lease_goes_to_the_longest_expected_work_as_known_when_it_frees():
    import asyncio

    from runner.budgets.local import LocalBudget

    b = LocalBudget(None, None, 1)
    await b.acquire()
    expect = {"short": 1.0, "long": 5.0}
    order: list[str] = []

    async def one(kind: str) -> None:
        await b.acquire((kind, lambda: expect[kind]))
        order.append(kind)
        b.release()

    tasks = [asyncio.create_task(one(k)) for k in ("short", "long", "short", "long")]
    await asyncio.sleep(0)
    expect["short"] = 9.0  # learnt while they waited: read when the lease frees, not when they queued
    b.release()
    await asyncio.gather(*tasks)
    assert order == ["short", "short", "long", "long"]  # each kind in arrival order


async def test_a_kind_not_yet_seen_goes_right_after_the_longest_seen_not_after_every_seen_kind():
    import asyncio

    from runner.budgets.local import LocalBudget

    b = LocalBudget(None, None, 1)
    await b.acquire()
    expect = {"long": 5.0, "short": 3.0, "critique": math.inf}  # a pass with no answer yet
    order: list[str] = []

    async def one(kind: str) -> None:
        await b.acquire((kind, lambda: expect[kind]))
        order.append(kind)
        b.release()

    tasks = [asyncio.create_task(one(k)) for k in ("short", "critique", "long", "long")]
    await asyncio.sleep(0)
    b.release()
    await asyncio.gather(*tasks)
    assert order == ["long", "long", "critique", "short"]


def test_debts_move_waiting_calls_back_and_a_refused_call_goes_first():
    from runner.budgets.local import LocalBudget

    b = LocalBudget(None, 60_000, 8)  # 1,000 tokens a second (paced at 0.97 of it)
    per = 60.0 / (60_000 * 0.97)
    waits = [b.reserve(1000) for _ in range(3)]  # a fresh key: a second's worth at once, then queued
    assert waits[0] <= 0.1 and waits[2] > waits[1] > 0.5
    shift = b.tok_shift
    b.reconcile(1000, 3000)  # an answer used 2,000 more than charged: calls queued before it wait too
    assert abs(b.tok_shift - shift - 2000 * per) < 1e-9
    b.reconcile(1000, 500)  # a credit: the net is what they wait
    assert abs(b.tok_shift - shift - 1500 * per) < 1e-9
    tat = b._tok_tat
    assert b.reserve(800, first=True) <= 0  # refused for tokens, its reset passed: it goes now ...
    assert abs(b._tok_tat - tat - 800 * per) < 1e-9  # ... and the queue moves back by its tokens
