"""#40: a pass whose model sends only calls of n samples (a self-consistency run) is ranked on a concurrency-bound
lane by those calls' own latencies (runner.calls.estimates.Spend.seconds -> runner.budgets.local.LocalBudget's
lease order). Taken from one-sample calls it had none, its figure stayed unseen for good: every such kind tied, and
the lane handed its leases in arrival order, a long model's calls as late as any. In process, no timing: the order
the waiting calls are granted their lease in."""

from __future__ import annotations

import math

from runner.calls.estimates import UNSEEN_S, Spend
from tests.helpers import lease_order


def _n_only(*latencies: float, n: int = 8) -> Spend:
    sp = Spend()
    for x in latencies:
        sp.observe("answer", n, None, x)
    return sp


def test_models_of_n_calls_only_go_longest_first():
    quick, slow = _n_only(2.0, 2.5, 3.0), _n_only(8.0, 9.0, 10.0)
    got = lease_order([("q", quick.work("answer", 8)), ("s", slow.work("answer", 8)),
                    ("q", quick.work("answer", 8)), ("s", slow.work("answer", 8))])
    assert got == "ssqq", got  # both unseen for good: in arrival order, "qsqs"


def test_an_n_call_is_ranked_by_its_own_answers_until_its_model_has_one_sample_answers():
    sp = _n_only(4.0, 5.0, 9.0)
    assert sp.seconds("answer", 8) == 5.0 and sp.rank("answer", 8)[:2] == (5.0, 3)
    assert sp.seconds("answer", 1) == UNSEEN_S  # a one-sample call of it: still unseen
    assert Spend().seconds("answer", 8) == UNSEEN_S  # no answer at all: unseen
    sp.observe("answer", 1, None, 3.0)  # then at least a one-sample call's x (1 + ln n), as before
    assert sp.seconds("answer", 8) == 3.0 * (1 + math.log(8))
