"""#40: the order a concurrency-bound lane hands its leases to, for given histories of its models' latencies
(runner.calls.estimates.Spend.rank -> runner.budgets.local.LocalBudget). A kind known from few answers is
ranked no lower than a blend of its own figure and its group's over the lane's models (SHRINK_N), so a slow model whose
first answer happened to be quick is not sent after every model known to be quicker. In process, no timing: the
order the waiting calls are granted their lease in."""

from __future__ import annotations

from runner.budgets.rank import Work
from runner.calls.estimates import Spend
from tests.helpers import lease_order


def _spend(*latencies: float, pass_: str = "answer", n: int = 1) -> Spend:
    sp = Spend()
    for x in latencies:
        sp.observe(pass_, n, None, x)
    return sp


def test_a_model_ranked_on_one_quick_answer_goes_before_the_models_known_quicker():
    slow = _spend(0.5)  # a long thinker whose first answer was quick
    quick = _spend(*[0.5] * 101)  # the same figure on a whole window of answers: its own
    high = _spend(3.0)  # one long answer: ranked on it (too high, its next answers correct it)
    long_, short = _spend(*[2.0] * 101), _spend(*[0.8] * 60)
    got = lease_order([(name, sp.work("answer", 1)) for name, sp in
                    (("s", slow), ("x", quick), ("h", high), ("L", long_), ("q", short))])
    # By its own median (0.5 s) `s` went last with `x`, behind 60 answers' evidence that `q` takes 0.8 s.
    assert got == "hLsqx", got


def test_a_kind_is_pooled_only_with_its_own_pass_and_n():
    one = _spend(0.5)
    for _ in range(20):
        one.observe("critique", 1, None, 9.0)  # its critiques: long
    long_, short = _spend(*[2.0] * 20), _spend(*[1.0] * 20)
    works: list[tuple[str, Work]] = [
        ("a", one.work("answer", 1)), ("c", one.work("critique", 1)), ("L", long_.work("answer", 1)),
        ("q", short.work("answer", 1)), ("u", Spend().work("answer", 1)), ("f", ("fixed", lambda: 3.0)),
    ]
    # The critiques first (9 s), the unseen kind right after the longest seen, a plain figure as it is (3 s);
    # `a` among the answers only (pooled with the critiques it would have gone before `L`), not after `q`.
    got = lease_order(works)
    assert got == "cufLaq", got
