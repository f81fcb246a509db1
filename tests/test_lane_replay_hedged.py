"""#40: bench/lane_replay.hedged, the replay of re-sending a long call at a concurrency-bound lane's drain (a new
draw of its law), on hand-made calls: a copy goes only on a slot freed with nothing to send, once a call has run
`after` x its kind's median; the call ends at its earlier copy, both copies' slots freed then, and a chain's
critique is released at that end."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from lane_replay import hedged, replay  # noqa: E402

# (latency s, tokens, model, n, index of its chain's critique or -1)
LONG, QUICK = (10.0, 0, "m", 1, -1), (1.0, 0, "m", 1, -1)


def test_a_long_call_is_resent_once_slots_idle_and_ends_at_its_copy() -> None:
    jobs = [LONG, QUICK, QUICK]  # kind m's median: 1 s; re-sent at 3 s, the copy a 1 s draw
    assert replay(jobs, set(), 2, [], [0, 1, 2]) == 10.0
    end, copies, copy_s = hedged(jobs, set(), 2, [0, 1, 2], lambda i: 1.0, after=3.0)
    assert (end, copies, copy_s) == (4.0, 1, 1.0)


def test_no_copy_while_calls_wait_for_a_slot() -> None:
    jobs = [LONG, QUICK, QUICK, QUICK, QUICK, QUICK]  # one slot: never free with nothing to send
    assert hedged(jobs, set(), 1, list(range(6)), lambda i: 0.5, after=2.0) == (15.0, 0, 0.0)


def test_the_earlier_copy_wins_and_a_slower_copy_changes_nothing() -> None:
    jobs = [(5.0, 0, "m", 1, -1), QUICK, QUICK]
    assert hedged(jobs, set(), 2, [0, 1, 2], lambda i: 20.0, after=3.0) == (5.0, 1, 20.0)


def test_a_critique_is_released_when_the_earlier_copy_of_its_answer_ends() -> None:
    jobs = [(10.0, 0, "m", 1, 3), QUICK, QUICK, QUICK]  # job 3: job 0's critique
    end, copies, _ = hedged(jobs, {3}, 2, [0, 1, 2, 3], lambda i: 1.0, after=3.0)
    assert (end, copies) == (5.0, 1)  # the answer's copy 3-4 s, its critique 4-5 s
    assert replay(jobs, {3}, 2, [], [0, 1, 2, 3]) == 11.0
