"""#40: bench/reasoning_server's `item_corr`: an item hard for one model is hard for the next (log-latencies correlate
~rho^2 across models), each model's law unchanged; 0 keeps today's draws."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from statistics import median

from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from reasoning_server import draw  # noqa: E402

LAWS = {
    "lognormal": {"law": "lognormal", "median": 2.0, "shape": 0.9, "tok_s": 500, "answer": 200},
    "lomax": {"law": "lomax", "median": 2.5, "shape": 2.2, "tok_s": 450, "answer": 200},
    "mixture": {"law": "mixture", "median": 1.5, "shape": 0.5, "tok_s": 250, "answer": 150},
}
N = 3000


def _lat(law: str, model: str, rho: float, seed: int = 5) -> list[float]:
    return [draw(LAWS[law], model, f"q{j}", 0, 1.0, seed, "", rho)[0] for j in range(N)]


def test_rho_zero_is_todays_draw_whatever_the_item():
    m = LAWS["mixture"]
    for j in range(50):
        assert draw(m, "a", f"q{j}", j % 3, 0.5, 7) == draw(m, "a", f"q{j}", j % 3, 0.5, 7, f"item {j}", 0.0)


def test_a_hard_item_is_hard_for_every_model_each_law_unchanged():
    for law in LAWS:
        free_a, free_b = _lat(law, "a", 0.0), _lat(law, "b", 0.0)
        tied_a, tied_b = _lat(law, "a", 0.7), _lat(law, "b", 0.7)
        assert abs(spearmanr(free_a, free_b)[0]) < 0.1, law
        assert spearmanr(tied_a, tied_b)[0] > 0.3, law  # (0.49 for the lognormal and Lomax; the mixture's pick: 0.38)
        for q in (0.5, 0.9):  # each model's law: its median and p90 as without
            lo, hi = sorted(free_a)[int(q * N)], sorted(tied_a)[int(q * N)]
            assert abs(math.log(hi / lo)) < 0.15, (law, q, lo, hi)
    assert median(_lat("lognormal", "a", 0.7, seed=6)) != median(_lat("lognormal", "a", 0.7))  # (the seed: other items)


def test_the_items_difficulty_follows_the_item_not_the_prompt():
    # a chain's answer and critique (other prompts) share their item's difficulty: passing the item ties them
    m = LAWS["lognormal"]
    ans = [math.log(draw(m, "a", f"answer {j}", 0, 1.0, 3, f"c{j}", 0.9)[0]) for j in range(1000)]
    crit = [math.log(draw(m, "a", f"critique {j}", 0, 1.0, 3, f"c{j}", 0.9)[0]) for j in range(1000)]
    assert spearmanr(ans, crit)[0] > 0.6
