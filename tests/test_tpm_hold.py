"""What a TPM lane's account holds for the calls in flight beyond their admission charge (issue 40,
bench/reasoning_sweep.py's `shared` lane): the key charges prompt + max_tokens at admission and settles
the rest (reasoning) at the answer, and the account does the same; it holds back only the rest of one
answer (one whose settlement the key counted before our reconcile came), not of every call in flight,
and a call that gets no answer gives its hold back."""

from __future__ import annotations

import asyncio

from core.types import Decoding, Message, Request
from runner.budgets.local import LocalBudget
from runner.config import Endpoint
from runner.lanes import Lane


async def test_a_call_goes_once_the_keys_bucket_holds_it_and_one_answers_rest_not_every_calls():
    """Four calls in flight, each charged 100 and expected to settle 150 more: the key's bucket (a second,
    ~970 tokens paced) holds 570 after them. A fifth expected at 250 goes at once: it and one answer's rest
    fit. Holding the rest of all four (600) it waited for a bucket the key never needed, and the key's
    bucket sat fuller, where quick answers' credits overflowed it (bench `shared`: 6% of its TPM)."""
    now = [100.0]
    b = LocalBudget(None, 60_000, 8, clock=lambda: now[0])  # 1,000 tokens a second, paced at 970
    b.reserve(0)  # a fresh key: its bucket full
    calls = [asyncio.create_task(b.take(250, charge=100)) for _ in range(5)]
    for _ in range(10):
        await asyncio.sleep(0)
    admitted = sum(t.done() for t in calls)
    for t in calls:
        t.cancel()
    assert admitted == 5  # on what the account holds, on no timer (the fake clock never moved)
    assert abs(b.tokens.owed - 150 * b.tokens.per_token) < 1e-9  # one answer's rest held, not five
    for _ in range(5):  # every answer settles as expected: the account is the key's bucket again
        b.reconcile(250, 250, 100)
    assert b.tokens.owed == 0
    assert abs(b.tokens.wait(100 * b.tokens.per_token) - (5 * 250 + 100 - 970) * b.tokens.per_token) < 1e-9


async def test_an_attempt_answered_with_an_error_gives_its_hold_back():
    """Against the mock on 127.0.0.1: `flaky-500` answers 500 twice, then succeeds. Each attempt was charged
    and held its expected rest; the two that failed settle nothing more, so their holds go back (they
    stayed for the rest of the run: each failed attempt slowed the lane for good)."""
    from providers.openai import OpenAIProvider
    from tests.mock_openai import MockServer

    srv = MockServer().start()
    prov = OpenAIProvider(srv.base_url)
    ep = Endpoint(name="e", base_url=srv.base_url, tpm=600_000, max_attempts=3, retry_initial_s=0.0,
                  retry_max_s=0.0)
    lane = Lane(ep, None, "k", provider=prov)
    req = Request(model="m", item="q1", suite="s", pass_="answer", messages=[Message(role="user", content="hi")],
                  decoding=Decoding(max_tokens=8))
    try:
        comp, attempts, _ = await lane.call(lambda: prov.complete(req, "flaky-500", 1, 0, "k", {}), 300, charge=100)
    finally:
        await prov.close()
        srv.stop()
    assert attempts == 3 and srv.per_model["flaky-500"] == 3
    assert lane.budget.tokens.owed == 200 * lane.budget.tokens.per_token  # the answered attempt's rest, until it settles
    lane.reconcile(300, comp.output_tokens, 100)  # as runner.calls.call settles an answer
    assert lane.budget.tokens.owed == 0


async def test_the_first_remaining_tokens_credits_what_the_keys_deeper_bucket_held():
    """A fresh account is a second deep (its first calls spend it); the first answer's remaining-tokens says
    the key held 9,000 at that admission, charged alike since: the account takes the 8,000 it did not count.
    Before, it stayed that far behind the key for the run (bench tpm-a seed 5: 1.27 -> 1.02x)."""
    now = [100.0]
    lane = Lane(Endpoint(name="e", kind="sim", tpm=60_000), None, None, provider=None)  # 1,000 tokens a second
    b = lane.budget
    b.clock = b.tokens.clock = lambda: now[0]
    b.reserve(0)
    await b.take(900)  # the account's second (970 tokens paced) nearly spent
    assert b.tokens.wait(5000 * b.tokens.per_token) > 0.9  # (a call over a full bucket waits for a full one)
    lane._on_answer({"limit_tokens": 60_000, "remaining_tokens": 9_000}, False)
    assert b.tokens.wait(5000 * b.tokens.per_token) <= 0  # the key's bucket holds them: no wait
    lane._on_answer({"limit_tokens": 60_000, "remaining_tokens": 9_500}, False)  # a later one credits nothing
    await b.take(5000)
    assert b.tokens.wait(3300 * b.tokens.per_token) > 0  # 9,000 - 900 - 5,000 left, not 500 more
