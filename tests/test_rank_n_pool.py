"""#40: a model's n calls inform the rank of its one-sample calls on a concurrency-bound lane
(runner.calls.estimates.Spend.observe -> runner.budgets.local.LocalBudget's lease order). An n call lasts the
longest of its n draws of the model's law: its latency / (1 + ln n) counts as one more one-sample answer. Else
a slow model whose one-sample figure rests on its probe alone (one quick draw) sends its one-sample backlog
after every model known to be quicker, however long its n calls took. In process, no timing: the order the
waiting calls are granted their lease in."""

from __future__ import annotations

import asyncio
import math

from runner.budgets.local import LocalBudget
from runner.budgets.rank import Work
from runner.calls.estimates import Spend


def _granted(works: list[tuple[str, Work]]) -> str:
    """The names of `works`' calls in the order a one-slot lane grants them its lease (all queued while the
    slot is held, then freed one call at a time)."""

    async def go() -> str:
        lane = LocalBudget(None, None, 1)
        await lane.acquire()  # the slot is busy: every call below waits
        order: list[str] = []

        async def call(name: str, work: Work) -> None:
            await lane.acquire(work)
            order.append(name)
            lane.release()

        tasks = [asyncio.create_task(call(name, w)) for name, w in works]
        await asyncio.sleep(0)  # (each queued)
        lane.release()
        await asyncio.gather(*tasks)
        return "".join(order)

    return asyncio.run(go())


def test_a_slow_models_n_calls_send_its_one_sample_calls_before_a_quicker_models():
    slow, quick = Spend(), Spend()
    slow.observe("answer", 1, None, 0.5)  # its probe: one quick draw
    for x in (4.2, 4.9, 5.5, 6.0, 7.1):  # its five 8-sample calls: ~1.6-2.3 s a draw
        slow.observe("answer", 8, None, x)
    quick.observe("answer", 1, None, 1.0)
    for x in (2.4, 2.8, 3.0, 3.3, 3.6):  # ~0.8-1.2 s a draw
        quick.observe("answer", 8, None, x)
    got = _granted([("q", quick.work("answer", 1)), ("s", slow.work("answer", 1)),
                    ("q", quick.work("answer", 1)), ("s", slow.work("answer", 1))])
    # On the probes alone `q` (1.0 s) went before `s` (0.5 s), though `s`'s draws are twice as long.
    assert got == "ssqq", got


def test_the_n_calls_count_as_answers_of_a_one_sample_call_at_their_share_of_the_longest():
    sp = Spend()
    sp.observe("answer", 1, None, 0.5)
    for x in (4.0, 5.0, 6.0):
        sp.observe("answer", 8, None, x)
    secs, answers, group = sp.rank("answer", 1)
    assert (answers, group) == (4, ("answer", 1))
    assert math.isclose(secs, (4.0 / (1 + math.log(8)) + 5.0 / (1 + math.log(8))) / 2)
    # A pass's n calls inform only its own one-sample figure: a critique's rests on critiques.
    assert sp.rank("critique", 1)[1] == 0
    assert sp.seconds("answer", 8) == max(secs * (1 + math.log(8)), 5.0)
