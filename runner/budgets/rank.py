"""Which waiting kind of call a lane's freed concurrency lease goes to (`longest`, for `runner.budgets.local`).

A kind is a model's pass and n; the longest expected kind goes first, so a lane bound by concurrency does
not end on long calls sent last. Its expected duration comes from `runner.calls.estimates.Spend.rank`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from typing import Any

Rank = float | tuple[float, int, Hashable]
"""A kind of call's expected duration as a lane ranks it: seconds (known), or (seconds, the answers they rest
on, the group whose figure a kind of few answers is shrunk toward: runner.calls.estimates.Spend.rank)."""
Work = tuple[Hashable, Callable[[], Rank]] | tuple[Hashable, Callable[[], Rank], bool]
"""A kind of call (e.g. a model's pass and n), its expected duration as known now, and
optionally whether it is a follow-up (a chain's next step, released by an answer: it goes first)."""
_NO_WORK: Work = (None, lambda: 0.0)
_TINY_S = 1e-3  # (a latency's floor for its log: an instant answer)

SHRINK_N = 10
"""A kind's expected duration resting on k answers is ranked at least at its group's figure on the lane (the
answer-weighted geometric mean over the lane's kinds of that pass and n) weighted SHRINK_N against its own
weighted k, in log space (latencies are multiplicative: a chat model's 0.3 s and a thinker's 3 s are as far
from 1 s). Ranked on its own few answers, a slow model whose first draws were quick went last with its whole
backlog: ranked last, it got no answer more to correct it (bench no-n, seed 0: nn02, the 3rd quickest law,
sent its backlog at 51-54 s of 68, its long thinkers the lane's tail). Only upward: a kind ranked too high
goes, and its answers correct it; pulled down from one long answer, a slow model waited behind quicker ones
(bench tpm-b, seed 4: rb01's one-sample calls, after one answer of 4.7 s, sent at 55-58 s instead of 35-43,
a draw of 33 s the lane's end: 1.09 -> 1.31x). Replays of our ranking on seed 0 / 1's draws (main's sweeps;
lane_replay.learned's rule, 20 orders), no shrink -> this: no-n 1.163/1.121 -> 1.130/1.126, conc
1.085/1.073 -> 1.077/1.072, shared 1.111/1.055 -> 1.116/1.055, tpm-a 0.868/0.907 -> 0.873/0.905, tpm-b
1.041/1.018 -> 1.046/1.013; 60 synthetic draws: no-n 1.150 -> 1.143, conc 1.105 -> 1.102, tpm-b 1.108 ->
1.104, shared 1.120 -> 1.122, tpm-a 0.934 -> 0.935."""


def blend(own: float, answers: int, group: float) -> float:
    """`own` (seconds, resting on `answers`) raised toward `group`, the log of its group's figure (`SHRINK_N`)."""
    return max(own, math.exp((answers * math.log(max(own, _TINY_S)) + SHRINK_N * group) / (answers + SHRINK_N)))


def expected(ranks: Mapping[Hashable, Rank], figures: dict[Hashable, tuple[float, int, Hashable]]) -> dict[Hashable, float]:
    """The waiting kinds' expected durations (`ranks`: each one's as known now), a figure of few answers raised
    toward its group's: the answer-weighted geometric mean of the latest figures of the lane's kinds in that
    group (`figures`, each kind's latest, waiting or not, updated here: a model ranked last is compared with
    those that went)."""
    got: dict[Hashable, float] = {}
    for k, r in ranks.items():
        if isinstance(r, tuple):
            figures[k] = r
        else:
            got[k] = r
    groups: dict[Hashable, tuple[float, int]] = {}
    for v, c, g in figures.values():
        if c and v != math.inf:
            s, n = groups.get(g, (0.0, 0))
            groups[g] = (s + math.log(max(v, _TINY_S)) * c, n + c)
    for k in ranks:
        if k not in got:
            v, c, g = figures[k]
            pool = groups.get(g)
            got[k] = v if v == math.inf or pool is None else blend(v, c, pool[0] / pool[1])
    return got


def longest(waiters: Mapping[Hashable, tuple[Callable[[], Rank], Any, bool]], top: float, figures: dict[Hashable, Any],
            tokens: bool) -> tuple[Hashable, float]:
    """The kind a freed lease goes to, and the longest expected duration seen so far (the new `top`).
    `waiters`: each waiting kind's (rank, its queue of (seq, future), a follow-up). Compared with the longest
    seen so far, not only among those waiting: else an unseen kind (a critique pass before its first answer)
    would wait for every seen kind to drain, one top after another. `tokens`: a lane paced by tokens, where a
    follow-up goes first (runner.budgets.local.LocalBudget.acquire)."""
    expect = expected({k: q[0]() for k, q in waiters.items()}, figures)
    top = max(top, max((v for v in expect.values() if v != math.inf), default=0.0))
    key = max(waiters, key=lambda k: (tokens and waiters[k][2], min(expect[k], top), expect[k] <= top,
                                      -waiters[k][1][0][0]))
    return key, top
