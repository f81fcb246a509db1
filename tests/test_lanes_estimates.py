"""TPM charged by what a model's answers really used (runner.calls.estimates), and what a lane does with the
provider's remaining-* headers: echoes of its own pacing pause nothing, a 429 for tokens defers the
token slots by the key's reset without cutting the rate."""

from __future__ import annotations

import math
import time

from core.types import Decoding, Message, Request
from runner.calls.estimates import UNSEEN_S, Spend
from runner.config import Endpoint
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
    tat = lane.budget.tokens.tat
    lane._on_answer(stale, False, own=(True, True))  # admitted while the lane used its whole rate
    assert lane.budget.paused_until == 0.0 and lane.budget.tokens.tat == tat and lane.factor == 1.0
    lane._on_answer(stale, False, own=(False, False))  # the lane was not using it: someone else is
    now = time.monotonic()
    assert 0.05 < lane.budget.paused_until - now <= 0.1  # the next request after 60/rpm
    assert 0.4 < lane.budget.tokens.tat - now <= 0.5  # tokens after the reset


def test_a_429_for_tokens_defers_token_slots_by_the_reset_and_keeps_the_rate():
    lane = _lane(rpm=6000, tpm=60_000)
    lane.budget.reserve(100)  # the call that was refused
    refused = {"limit_tokens": 60_000, "remaining_tokens": 0, "reset_tokens": 0.8, "remaining_requests": 90}
    for _ in range(10):  # a whole second of them: not a storm to halve the rate for
        lane._on_answer(refused, True, 0.8)
    lane._bucket = (time.monotonic() - 2.0, *lane._bucket[1:])
    lane._on_answer(None, False)
    assert lane.factor == 1.0 and lane.budget.paused_until == 0.0  # requests are not paused
    assert 0.7 < lane.budget.tokens.tat - time.monotonic() <= 0.8
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


async def test_a_follow_up_goes_before_every_first_call_on_a_lane_paced_by_tokens():
    """#40: a critique released by its answer is a chain already begun; ranked among the first calls by its
    length it waited for every longer kind, and the chains' ends made a TPM lane's tail. A lane bound by
    concurrency alone keeps ranking it by length (the order packs its slots)."""
    import asyncio

    from runner.budgets.local import LocalBudget

    sp = Spend()
    sp.observe("answer", 1, 100, 5.0)
    sp.observe("critique", 1, 100, 0.5)  # a chain's next step, expected shorter than the answers
    for tpm, want in ((600_000, ["critique", "critique", "answer", "answer", "answer"]),
                      (None, ["answer", "answer", "answer", "critique", "critique"])):
        b = LocalBudget(None, tpm, 1)
        await b.acquire()
        order: list[str] = []

        async def one(pass_: str, b: LocalBudget = b, order: list[str] = order) -> None:
            await b.acquire(sp.work(pass_, 1))
            order.append(pass_)
            b.release()

        tasks = [asyncio.create_task(one(p)) for p in ("answer", "answer", "critique", "answer", "critique")]
        await asyncio.sleep(0)
        b.release()
        await asyncio.gather(*tasks)
        assert order == want, tpm
    assert [sp.work(p, n)[2:] for p, n in (("answer", 1), ("answer", 8), ("critique", 1), ("judge", 1))] == [
        (False,), (False,), (True,), (True,)]  # fmt: skip  (every pass after the first is a follow-up)


async def test_a_follow_up_waiting_for_tokens_goes_before_the_first_calls_queued_ahead_of_it():
    """#40: on a TPM-bound lane most leases are held by calls waiting for tokens, in the order they came; a
    critique given a lease first still waited behind all of them (bench tpm-a: ~6 s of tokens)."""
    import asyncio

    lane = _lane(tpm=600_000, max_concurrency=8)  # 10,000 tokens a second
    sent: list[str] = []

    async def one(name: str, follow: bool) -> None:
        async def fn() -> None:
            sent.append(name)

        await lane.call(fn, 400, (name, lambda: 1.0, follow) if follow else (name, lambda: 1.0))

    first = asyncio.create_task(one("full", False))
    await asyncio.sleep(0)
    lane.budget.reconcile(400, 10_000)  # its answer spent a second of tokens: the next ones wait
    await first
    tasks = [asyncio.create_task(one(n, f)) for n, f in
             (("a1", False), ("a2", False), ("c1", True), ("a3", False), ("c2", True))]
    await asyncio.gather(*tasks)
    assert sent == ["full", "c1", "c2", "a1", "a2", "a3"]


async def test_a_call_arriving_as_a_lease_frees_queues_behind_those_waiting():
    """A freed lease is handed to a waiting call, not taken by one that arrives meanwhile."""
    import asyncio

    from runner.budgets.local import LocalBudget

    b = LocalBudget(None, None, 1)
    await b.acquire()
    order: list[str] = []

    async def one(kind: str) -> None:
        await b.acquire((kind, lambda: 1.0))
        order.append(kind)
        await asyncio.sleep(0)
        b.release()

    waiting = asyncio.create_task(one("waiting"))
    await asyncio.sleep(0)
    b.release()
    await b.acquire(("late", lambda: 1.0))  # arrives in the same step of the loop
    order.append("late")
    b.release()
    await waiting
    assert order == ["waiting", "late"] and b._used == 0


async def test_debts_move_waiting_calls_back_and_a_refused_call_goes_first():
    import asyncio

    from runner.budgets.local import LocalBudget

    b = LocalBudget(None, 60_000, 8)  # 1,000 tokens a second (paced at 0.97 of it)
    per = b.tokens.per_token
    b.reserve(0)
    await b.take(1000)  # a fresh key: a second's worth at once
    queued = asyncio.create_task(b.take(300))
    await asyncio.sleep(0)
    before = b.tokens.wait(300 * per)
    b.reconcile(1000, 3000)  # an answer used 2,000 more than charged: the call queued waits them too
    assert abs(b.tokens.wait(300 * per) - before - 2000 * per) < 0.01
    tat = b.tokens.tat
    await b.take(800, first=True)  # refused for tokens, its reset passed: it goes now ...
    assert abs(b.tokens.tat - tat - 800 * per) < 1e-3  # ... and the queue moves back by its tokens
    assert not queued.done()
    queued.cancel()


def test_an_early_heavy_tail_answer_does_not_set_the_charge_of_the_next_minute():
    sp = Spend()
    assert sp.cost(_req()) == (100 + 1024, 100 + 1024)  # (expected, what the key counts at admission)
    sp.observe("answer", 1, 30_000, 20.0)  # the first answer: a 30x-the-median thought
    assert sp.cost(_req()) == (100 + 4 * 1024, 100 + 1024)  # counted at most 4x the budget
    for _ in range(15):
        sp.observe("answer", 1, 2000, 2.0)
    expected = (4 * 1024 + 15 * 2000) / 16
    assert sp.tokens(_req()) == 100 + round(expected)
    sp.observe("answer", 1, 30_000, 20.0)  # after the first 16 samples every answer counts in full
    assert sp.tokens(_req()) == 100 + round((4 * 1024 + 15 * 2000 + 30_000) / 17)


async def test_what_a_call_in_flight_will_settle_is_not_forgotten_while_the_bucket_sits_full():
    """The key counts prompt + max_tokens when it admits a call and the rest (reasoning) when the
    answer settles; the account holds that rest meanwhile, outside its one-second clamp. Charged the
    whole estimate at admission instead, an account idle for a while forgets it (its bucket "refills"
    past it) and sends into the key's debt the moment the answer settles: a 429 for tokens."""
    from runner.budgets.local import LocalBudget

    now = [100.0]
    b = LocalBudget(None, 60_000, 8, clock=lambda: now[0])  # 1,000 tokens a second (paced at 0.97)
    b.reserve(0)
    await b.take(3000, charge=1000)  # a full bucket: it goes; 2,000 expected beyond its charge
    assert b.tokens.wait(100 * b.tokens.per_token) >= 1.0 - 100 * b.tokens.per_token  # held: the next call needs a full bucket
    now[0] += 10.0  # a long thought: the bucket sits full
    b.reconcile(3000, 3000, 1000)  # it settles as expected: the key now takes the other 2,000
    assert b.tokens.wait(100 * b.tokens.per_token) > 2000 * b.tokens.per_token - 1.0  # the next call waits for them to refill


async def test_a_credit_lets_the_calls_waiting_for_tokens_go_at_once():
    import asyncio

    from runner.budgets.local import LocalBudget

    b = LocalBudget(None, 60_000, 8)  # 1,000 tokens a second
    b.reserve(0)
    await b.take(1000)  # a fresh key: a full bucket, spent
    waiting = [asyncio.create_task(b.take(300)) for _ in range(2)]  # ~0.3 and ~0.6 s of refill
    await asyncio.sleep(0)
    assert not any(t.done() for t in waiting)
    b.reconcile(1000, 100)  # the first answer used 100: 900 tokens back, now
    for _ in range(5):
        await asyncio.sleep(0)
    assert all(t.done() for t in waiting)  # both went on the credit, before any timer fired


async def test_a_key_whose_bucket_holds_more_than_a_second_keeps_the_credit_of_calls_charged_max_tokens():
    """Charged prompt + max_tokens at admission (as the key counts it) and settled at the answer, a call
    that spends less gives the rest back. An account one second deep forgot that credit whenever it came
    to a fuller bucket, and a call charged more than a second of tokens waited for a full one: held to a
    second while the key's bucket holds ten, the lane used ~0.9 of its TPM. An answer's remaining-tokens
    shows how deep the bucket is; the waiting call goes on the credit the moment the answer settles."""
    import asyncio

    now = [100.0]
    lane = _lane(tpm=60_000)  # 1,000 tokens a second (paced at 0.97 of it)
    b = lane.budget
    b.clock = b.tokens.clock = lambda: now[0]
    b.reserve(0)
    lane._on_answer({"limit_tokens": 60_000, "remaining_tokens": 9_000}, False)  # a deep bucket: 9 s of tokens
    now[0] += 20.0  # idle: the bucket fills
    first = [asyncio.create_task(b.take(4000)) for _ in range(2)]  # 2 x (prompt + max_tokens) go at once
    waiting = asyncio.create_task(b.take(4000))
    for _ in range(5):
        await asyncio.sleep(0)
    assert all(t.done() for t in first) and not waiting.done()
    b.reconcile(4000, 1000)  # the first answer spent 1,000 of its 4,000: 3,000 back, now
    for _ in range(5):
        await asyncio.sleep(0)
    assert waiting.done()  # admitted on the credit, on no timer (the fake clock never moved)


async def test_each_429_for_tokens_halves_the_depth_believed_down_to_a_second():
    """The bucket's depth read from remaining-tokens is believed until the key refuses for tokens (its
    TPM enforced over shorter windows than the headers count): each refusal halves it for good, down
    to a second's worth, as before."""
    now = [100.0]
    lane = _lane(tpm=60_000)
    b = lane.budget
    b.clock = b.tokens.clock = lambda: now[0]
    b.reserve(0)
    lane._on_answer({"limit_tokens": 60_000, "remaining_tokens": 9_000}, False)
    now[0] += 20.0
    await b.take(800)
    assert b.tokens.wait(800 * b.tokens.per_token) <= 0  # 8,200 tokens left in the bucket
    refused = {"limit_tokens": 60_000, "remaining_tokens": 0, "reset_tokens": 0.5, "remaining_requests": 90}
    lane._on_answer(refused, True, 0.5)
    lane._on_answer({"limit_tokens": 60_000, "remaining_tokens": 9_000}, False)  # no longer believed
    assert b.tokens.depth == 4_500
    for _ in range(3):
        lane._on_answer(refused, True, 0.5)
    now[0] += 20.0
    await b.take(800)
    assert abs(b.tokens.wait(800 * b.tokens.per_token) - (800 - 170) * b.tokens.per_token) < 1e-6  # a full bucket is a second's 970 again


async def test_a_call_that_empties_the_bucket_itself_is_not_deferred_by_its_own_echo():
    """A call charged more than the bucket holds (8 samples of max_tokens) goes when it is full and
    empties it: its answer says remaining-tokens 0, stamped at its own admission. That is the lane's own
    pacing, as after any call that spends the rest: no extra wait (the lane deferred its token slots a
    second after every such answer, and a key's big calls went ~0.8 of its TPM)."""
    now = [100.0]
    lane = _lane(tpm=60_000)
    b = lane.budget
    b.clock = b.tokens.clock = lambda: now[0]
    b.reserve(0)
    now[0] += 5.0  # the bucket is full
    await b.take(1500)  # over a full bucket: goes now, the account ~0.5 s in debt
    tat = b.tokens.tat
    echo = {"limit_tokens": 60_000, "remaining_tokens": 0, "reset_tokens": 3.0, "remaining_requests": 50}
    lane._on_answer(echo, False, own=b.near)
    assert b.tokens.tat == tat


async def test_the_depth_is_read_from_a_real_answers_remaining_tokens():
    """Against the mock on 127.0.0.1 reporting OpenAI's x-ratelimit-* headers (a minute's bucket, nearly
    full): after one answer the account holds what the key's bucket holds, so two calls of 3 s of tokens
    each (8 samples of max_tokens) go together after a quiet 10 s, not one per refill of a second."""
    from providers.openai import OpenAIProvider
    from tests.mock_openai import MockServer

    srv = MockServer(report_limits=(6000, 600_000)).start()  # 10,000 tokens a second
    prov = OpenAIProvider(srv.base_url)
    now = [100.0]
    lane = Lane(Endpoint(name="e", base_url=srv.base_url, rpm=6000, tpm=600_000), None, "k", provider=prov)
    b = lane.budget
    b.clock = b.tokens.clock = lambda: now[0]
    try:
        await lane.call(lambda: prov.complete(_req(max_tokens=8), "ok-a", 1, 0, "k", {}), 102, charge=102)
    finally:
        await prov.close()
        srv.stop()
    now[0] += 10.0  # quiet: the key's bucket refills
    await b.take(30_000)
    assert b.tokens.wait(30_000 * b.tokens.per_token) <= 0  # the second goes too
