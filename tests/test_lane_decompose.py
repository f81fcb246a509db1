"""#40: bench/lane_replay.decompose splits a live lane's end into the runner's own cost (its live order of sends
replayed with no overhead), the luck of that order (our rule over random orders) and what blind orders reach; and
lost_tpm counts the seconds of TPM a key's bucket lost full, and how much of it with every slot in flight."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from lane_replay import ADMIT, decompose, lost_tpm, max_flying  # noqa: E402


def _call(sent: float, model: str, latency: float, tokens: int = 100) -> list[object]:
    return [sent, "k-x", model, 1, latency, tokens, "answer", ""]


def test_order_replays_the_live_sends_and_the_rest_is_overhead():
    # two slots, no RPM or TPM: list scheduling of [4, 1, 1, 1] sends them at 0, 0, 1, 2 and ends at 4
    ideal = [_call(10.0, "a", 4.0), _call(10.0, "b", 1.0), _call(11.0, "b", 1.0), _call(12.0, "b", 1.0)]
    got = decompose(ideal, 10.0, 2, [], 4.0, lambda m, n: 1.0, orders=10)
    assert got["live"] == pytest.approx(1.0) and got["order"] == pytest.approx(1.0)
    assert got["tail"] == ("a", 4.0, 0.0) and got["last_send_s"] == pytest.approx(2.0)
    # the same order, each send 0.5 s late after the first (the runner's cost): the live ends later, its order does not
    late = [_call(10.0, "a", 4.0), _call(10.5, "b", 1.0), _call(12.0, "b", 1.0), _call(13.5, "b", 1.0)]
    got = decompose(late, 10.0, 2, [], 4.0, lambda m, n: 1.0, orders=10)
    assert got["live"] == pytest.approx(14.5 / 4.0 - 10.0 / 4.0 + 0.0) and got["order"] == pytest.approx(1.0)
    assert got["order_last_send_s"] == pytest.approx(2.0) and got["last_send_s"] == pytest.approx(3.5)
    # the long call sent last (an unlucky order): its replay ends late too, unlike LPT
    unlucky = [_call(10.0, "b", 1.0), _call(10.0, "b", 1.0), _call(11.0, "b", 1.0), _call(11.0, "a", 4.0)]
    got = decompose(unlucky, 10.0, 2, [], 4.0, lambda m, n: 1.0, orders=10)
    assert got["order"] == pytest.approx(5.0 / 4.0) and got["clairvoyant"] == pytest.approx(1.0)
    assert got["tail"] == ("a", 4.0, 1.0)
    assert 1.0 <= got["blind"]["p10"] <= got["blind"]["mean"] <= got["blind"]["p90"] <= 5.0 / 4.0


def test_lost_tpm_counts_a_full_bucket_and_the_slots_all_in_flight():
    rate, cap = 1000.0, 2000.0  # tokens a second, the bucket's depth
    # one call at 0 (charged ADMIT, spent exactly that), the next at 5 s: the bucket is full again
    # ADMIT / rate s after the first admission, then refills beyond its cap until 5 s
    entries = [[0.0, "k-x", "a", 1, 10.0, ADMIT, "answer", ""], [5.0, "k-x", "a", 1, 1.0, ADMIT, "answer", ""]]
    lost, at_cap = lost_tpm(entries, rate, cap)
    assert lost == pytest.approx(5.0 - ADMIT / rate)
    assert max_flying(entries) == 2 and at_cap == 0.0  # one call in flight of the two the lane reached
    # the first call ends at 1 s: with nothing in flight the bucket still overflows, never with every slot busy
    entries[0][4] = 1.0
    assert lost_tpm(entries, rate, cap) == (pytest.approx(5.0 - ADMIT / rate), 0.0)
    # the lane's only slot busy (max in flight 1) from 0 to 10 s while a call waits: all of it counted at the cap
    busy = [[0.0, "k-x", "a", 1, 10.0, ADMIT, "answer", ""], [10.0, "k-x", "a", 1, 1.0, ADMIT, "answer", ""]]
    lost, at_cap = lost_tpm(busy, rate, cap)
    assert lost == pytest.approx(10.0 - ADMIT / rate) and at_cap == pytest.approx(lost)
