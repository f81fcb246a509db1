"""#40: bench/lane_replay's `item` order: within the kind our rule picks, the call of the hardest item seen so far
(its ended calls' latency over their kind's median, an unseen item in the middle) goes first, so a call hard for
every model is not left for the lane's tail once another model has shown it hard."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from lane_replay import hardest, lane_items, lane_jobs, learned  # noqa: E402


def _call(model: str, latency: float, item: str) -> list[object]:
    return [0.0, "k-x", model, 1, latency, 100, "answer", "", item]


def test_hardest_takes_the_hardest_seen_item_an_unseen_one_in_the_middle():
    items = ["easy", "new", "hard", "new2"]
    hard = {"easy": (-1.0, 1), "hard": (1.4, 2)}
    queue = [(0.1, 0), (0.2, 1), (0.3, 2), (0.05, 3)]
    assert hardest(queue, items, hard) == 2  # mean 0.7
    assert hardest(queue, items, hard) == 3  # unseen (0), the earlier in order of the two unseen
    assert hardest(queue, items, hard) == 1
    assert hardest(queue, items, hard) == 0 and queue == []


def test_lane_items_reads_the_servers_subject_else_a_chains_item():
    assert lane_items([_call("a", 1.0, "q1"), [0.0, "k-x", "a", 1, 1.0, 1, "follow", "c3"]]) == ["q1", "c3"]


def test_a_call_hard_for_another_model_goes_before_the_kinds_easy_ones():
    # two slots. Model a: items x, y, z (z twice a's median); model b: x, y, z, u, v, w, its z 8 s, the rest 1 s,
    # and z last in b's order. Both probes (a-x, b-x) run 0-1; then a-y 1-2, a-z 1-3, b-y 2-3. At 3 a-z has shown z
    # hard: with items b-z goes at 3 (ends 11) beside u, v, w on the other slot; without, b-z goes last, at 4: 12.
    entries = [_call("a", 1.0, "x"), _call("a", 1.0, "y"), _call("a", 2.0, "z")]
    entries += [_call("b", 8.0 if i == "z" else 1.0, i) for i in "xyzuvw"]
    jobs, held = lane_jobs(entries)
    order = [0.0, 1.0, 2.0, 3.0, 4.0, 100.0, 6.0, 7.0, 8.0]
    assert learned(jobs, held, 2, [], order) == 12.0
    assert learned(jobs, held, 2, [], order, items=lane_items(entries)) == 11.0


def test_without_a_shared_item_nothing_changes():
    # every call its own item: nothing seen is ever waiting, so the order is the kind's own
    entries = [_call("a", 1.0 + (i % 3), f"a{i}") for i in range(6)] + [_call("b", 2.0 + i % 2, f"b{i}") for i in range(7)]
    jobs, held = lane_jobs(entries)
    order = [float((7 * i) % 13) for i in range(13)]
    for conc in (1, 2, 3):
        assert learned(jobs, held, conc, [], order, items=lane_items(entries)) == learned(jobs, held, conc, [], order)


def test_width_sees_only_the_next_calls_of_the_models_window():
    # the same lane: at 3 b has nothing in flight, so a window of 2 shows b's next two in order (u, v), not z: z goes
    # last as without items; a window of 4 shows z
    entries = [_call("a", 1.0, "x"), _call("a", 1.0, "y"), _call("a", 2.0, "z")]
    entries += [_call("b", 8.0 if i == "z" else 1.0, i) for i in "xyzuvw"]
    jobs, held = lane_jobs(entries)
    order = [0.0, 1.0, 2.0, 3.0, 4.0, 100.0, 6.0, 7.0, 8.0]
    assert learned(jobs, held, 2, [], order, items=lane_items(entries), width=2) == 12.0
    assert learned(jobs, held, 2, [], order, items=lane_items(entries), width=4) == 11.0


def test_a_fitted_lift_without_evidence_is_our_order():
    # lift < 0 fits its gain from pairs (an ended call, its item's mean before it): under 20 pairs it is 0 and the
    # kind's calls go in order, as ours; the lane above has 3 such pairs, so b's z goes last (12), as without items
    entries = [_call("a", 1.0, "x"), _call("a", 1.0, "y"), _call("a", 2.0, "z")]
    entries += [_call("b", 8.0 if i == "z" else 1.0, i) for i in "xyzuvw"]
    jobs, held = lane_jobs(entries)
    order = [0.0, 1.0, 2.0, 3.0, 4.0, 100.0, 6.0, 7.0, 8.0]
    assert learned(jobs, held, 2, [], order, items=lane_items(entries), lift=-1.0) == 12.0
    assert learned(jobs, held, 2, [], order, items=lane_items(entries), lift=0.5) == 11.0
