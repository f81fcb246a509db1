"""List scheduling replayed on a lane's logged calls (bench/reasoning_sweep.py's `blind`, `by model` and
`clairvoyant` columns): what an order of the same draws reaches on the lane's slots and token bucket with no
overhead, so a lane's ratio can be read against what any scheduler could do.

Run alone, it says why a kept sweep's lanes ended where they did (`decompose`: the runner's own cost, the luck of
its order, what blind orders reach and their spread), or how single orders spread on synthetic draws:

    python bench/lane_replay.py DIR... [--lane shared]     # DIR: a sweep kept with reasoning_sweep.py --keep
    python bench/lane_replay.py --synthetic 200 --lane shared [--item-corr 0.7]   # `item`: hardest item seen first
"""

from __future__ import annotations

import bisect
import heapq
import json
import math
import random
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # (the runner's own rule: `learned`)
from runner.budgets.hedge import HEDGE_X  # noqa: E402
from runner.budgets.rank import blend  # noqa: E402

Job = tuple[float, int, str, int, int]
"""A logged call for the replays: (latency s, tokens, model, n, index of its chain's critique or -1)."""


def lane_jobs(entries: list[list[Any]]) -> tuple[list[Job], set[int]]:
    """The lane's admitted calls as jobs, each chain's answer pointing at its critique (which cannot start
    before the answer ends), and the set of critiques (released by their answer, not at the start)."""
    follows: dict[tuple[str, str], list[int]] = {}
    for i, e in enumerate(entries):
        if e[7] and e[6] == "follow":
            follows.setdefault((e[2], e[7]), []).append(i)
    jobs: list[Job] = []
    for e in entries:
        nxt = follows.get((e[2], e[7]), []) if e[7] and e[6] != "follow" else []
        jobs.append((e[4], e[5], e[2], e[3], nxt.pop(0) if nxt else -1))
    return jobs, {i for j in jobs if j[4] >= 0 for i in [j[4]]}


def lane_items(entries: list[list[Any]]) -> list[str]:
    """Each logged call's item, whose difficulty every model's draw shares (the server's `subject` column, else a
    chain's item; "" where the log says none: an old log's one-sample calls)."""
    return [e[8] if len(e) > 8 else e[7] for e in entries]


ADMIT = 77 + 1024
"""What the server's TPM bucket is charged when it admits a choice, for the replays: the one-sample and 8-sample
runs' prompts (~77 tokens) and the jsonl suite's max_tokens; JEEBench's (the chains) differ, the log lacks it."""


class _Tokens:
    """The server's TPM bucket for a replay: starts full (`cap`), refills at `rate`, charged ADMIT a choice at
    admission (a call waits until it holds that, at most a full bucket) and settled to the call's real tokens
    when it ends (a long thought's reasoning: a debt the next calls wait for)."""

    def __init__(self, rate: float, cap: float) -> None:
        self.rate, self.cap, self.level, self.t = rate, cap, cap, 0.0
        self.settle: list[tuple[float, float]] = []  # (when, tokens beyond the charge)

    def _to(self, t: float) -> None:
        while self.settle and self.settle[0][0] <= t:
            when, extra = heapq.heappop(self.settle)
            self.level = min(self.cap, self.level + (when - self.t) * self.rate) - extra
            self.t = when
        self.level = min(self.cap, self.level + (t - self.t) * self.rate)
        self.t = t

    def admit(self, t: float, charge: float) -> float:
        """The earliest time from `t` the bucket holds `charge` (it is then charged)."""
        need = min(charge, self.cap)
        self._to(t)
        while self.level < need:
            at = self.t + (need - self.level) / self.rate
            if self.settle and self.settle[0][0] < at:
                self._to(self.settle[0][0])
            else:
                self._to(at)
                self.level = max(self.level, need)  # (rounding)
        self.level -= charge
        return self.t


def _admit(start: float, spent: float, job: Job, rates: list[Any], buckets: list[Any]) -> tuple[float, float]:
    """When a job admitted no sooner than `start` may go: the lane's request rates (`spent` requests so
    far) and token buckets (charged its admission, settled at its end); returns (start, spent)."""
    lat, tok, _, n, _ = job
    for (rate, cap, _), bucket in zip(rates, buckets, strict=True):
        if bucket is None:
            spent += 1
            start = max(start, (spent - cap) / rate)
    for bucket in buckets:
        if bucket is not None:
            start = bucket.admit(start, ADMIT * n)
            heapq.heappush(bucket.settle, (start + lat, tok - ADMIT * n))
    return start, spent


def replay(
    jobs: list[Job], held: set[int], conc: int, rates: list[tuple[float, float, int]], rank: list[Any],
    sends: list[float] | None = None,
) -> float:
    """Makespan of list scheduling `jobs` on `conc` slots with zero overhead: whenever a slot frees, the
    ready call of lowest `rank` starts (a critique is ready once its answer ended), in that order (a call
    waiting for its tokens holds its slot, as a lane's lease does). `rates`: (per s, bucket capacity, 0
    requests / 1 tokens): RPM as a fluid bucket starting full, charged a request at admission; TPM as the
    server's bucket (`_Tokens`), with ADMIT a choice as the admission charge. `sends`: each call's start, in order.
    """
    slots = [0.0] * conc
    ready = [(rank[i], i) for i in range(len(jobs)) if i not in held]
    heapq.heapify(ready)
    later: list[tuple[float, int]] = []  # critiques: (release, index)
    spent = 0.0
    buckets = [_Tokens(rate, cap) if what else None for rate, cap, what in rates]
    end = last = 0.0
    for _ in range(len(jobs)):
        t = heapq.heappop(slots)
        if not ready:  # every call left waits for an answer: the slot idles until the first ends
            t = max(t, later[0][0])
        while later and later[0][0] <= t:
            i = heapq.heappop(later)[1]
            heapq.heappush(ready, (rank[i], i))
        i = heapq.heappop(ready)[1]
        lat, _, _, _, nxt = jobs[i]
        start, spent = _admit(max(t, last), spent, jobs[i], rates, buckets)  # admitted in order
        last = start
        if sends is not None:
            sends.append(start)
        done = start + lat
        heapq.heappush(slots, done)
        if nxt >= 0:
            heapq.heappush(later, (done, nxt))
        end = max(end, done)
    return end


def hedged(
    jobs: list[Job], held: set[int], conc: int, rank: list[Any], redraw: Callable[[int], float],
    after: float = HEDGE_X,
) -> tuple[float, int, float]:
    """Makespan of list scheduling `jobs` in `rank` order on `conc` slots (as `replay`, for a lane bound by
    concurrency: its rates are not replayed) where a slot freed with nothing ready to send re-sends a call in
    flight that has run over `after` x its kind's median (the longest-running such call, each once): the call
    ends at the earlier of its two copies, the other cancelled and its slot freed. `redraw(i)`: the copy's
    latency, a new draw of job i's law (a reasoning model's thought is a draw: the server's next sample of
    that prompt). Why: a lane bound by concurrency ends on the long thinkers sent last, which no order that
    does not know latencies avoids, while its slots idle at the drain. The kind's median is its logged calls'
    (the runner's own median settles on it within a kind's first answers). Returns (makespan, copies sent,
    their seconds)."""
    kinds: dict[tuple[str, int], list[float]] = {}
    for j in jobs:
        kinds.setdefault((j[2], j[3]), []).append(j[0])
    typical = {k: sorted(v)[len(v) // 2] for k, v in kinds.items()}
    ready = [(rank[i], i) for i in range(len(jobs)) if i not in held]
    heapq.heapify(ready)
    later: list[tuple[float, int]] = []  # critiques: (release, index)
    ends: list[tuple[float, int]] = []  # (end of a copy, index)
    flight: dict[int, list[Any]] = {}  # index -> [due to be re-sent at, its end (the earlier copy's), re-sent]
    free, t, left, end, copies, copy_s = conc, 0.0, len(jobs), 0.0, 0, 0.0
    while left:
        while later and later[0][0] <= t:
            heapq.heappush(ready, (rank[later[0][1]], heapq.heappop(later)[1]))
        while free and ready:
            i = heapq.heappop(ready)[1]
            j = jobs[i]
            flight[i] = [t + after * typical[j[2], j[3]], t + j[0], False]
            heapq.heappush(ends, (t + j[0], i))
            free -= 1
        due = [(f[0], i) for i, f in flight.items() if not f[2]] if free else []
        for _, i in sorted(d for d in due if d[0] <= t)[:free]:  # (the longest running first)
            lat = redraw(i)
            f = flight[i]
            f[1], f[2] = min(f[1], t + lat), True
            heapq.heappush(ends, (t + lat, i))
            copies, copy_s, free = copies + 1, copy_s + lat, free - 1
        nxt = ends[0][0] if ends else math.inf
        if free:
            nxt = min([nxt, *(d[0] for d in due if d[0] > t), *(later[:1] and [later[0][0]])])
        t = nxt
        while ends and ends[0][0] <= t:
            when, i = heapq.heappop(ends)
            f = flight.get(i)
            if f is None or when > f[1]:  # (the other copy's end, already counted)
                continue
            del flight[i]
            free += 2 if f[2] else 1
            left -= 1
            end = max(end, when)
            if jobs[i][4] >= 0:
                heapq.heappush(later, (when, jobs[i][4]))
    return end, copies, copy_s


def learned(
    jobs: list[Job], held: set[int], conc: int, rates: list[tuple[float, float, int]], order: list[float],
    min_n: int = 1, explore: int = 0, pool: bool = False, items: list[str] | None = None, width: int = 0,
    lift: float = 0.0, sent: list[int] | None = None,
) -> float:
    """Makespan of our own ranking replayed (runner.budgets.local's lease queue, runner.calls.estimates'
    latencies): whenever a slot frees, the kind (model, n, answer or critique) of longest expected latency
    goes, that expectation being the median of the kind's calls ended by then, raised toward its group's
    (n, answer or critique: the answer-weighted geometric mean of the kinds' medians: runner.budgets.rank.blend); a kind
    with fewer than `min_n` ended ranks right after the longest seen (an unseen kind's rule); equals, and a kind's calls, in
    `order`; on a lane paced by tokens a critique (a follow-up) before any answer. As the runner sends them: a model's
    first call alone (a one-sample answer: a sweep's first run), its others once it ended (runner.calls.gate's probe:
    its one answer is then all its kinds know); a call of n > 1 ranked at least its model's one-sample figure x (1 + ln n),
    by its own alone while its model has no one-sample answer (runner.calls.estimates.Spend.seconds). Candidates: `explore`, a kind granted fewer leases ranks as unseen; `pool`,
    an n call's latency / (1 + ln n) counts as a one-sample answer of its model; `items` (each call's item), within the
    chosen kind the call of the hardest item seen so far goes (`hardest`), not the next in `order`; `width` > 0, among
    only the kind's next `width` less its model's calls in flight in `order` (the runner's scheduler streams a model's
    items through a window of its lanes' concurrency: a lane's queue holds no more of them); `lift` G > 0, across kinds
    too: a kind's expectation x exp(G x the difficulty of its hardest item in view, if > 0), G < 0 fitted as it goes (the
    regression of each ended call's log-ratio on its item's mean before it, in [0, 1], 0 before 20 such pairs, and no
    item order while 0: on independent draws it stays near 0). Given the live lane's order within
    each kind (its items' order), it gives the live ratio (conc, seed 20: 1.239 vs 1.242 live; 1.259 vs 1.265). Without a
    night before: a run's history (runner.calls.estimates.Spend.prime) is not replayed. What a latency-blind scheduler
    learning as it goes reaches, beside `by model`'s laws. `sent`: the calls' indices appended in the order sent."""
    kinds = [(j[2], j[3], i in held) for i, j in enumerate(jobs)]
    paced = any(what for _, _, what in rates)  # a TPM bucket
    waiting: dict[Any, list[tuple[float, int]]] = {}
    for i in range(len(jobs)):
        if i not in held:
            heapq.heappush(waiting.setdefault(kinds[i], []), (order[i], i))
    seen: dict[Any, list[float]] = {}
    granted: dict[Any, int] = {}
    probing: set[str] = set()  # models whose first call is out (the gate: none of their others goes meanwhile)
    opened: set[str] = set()  # models whose first call ended
    ended: list[tuple[float, Any, float, int]] = []  # (when, kind, latency, index) of calls started
    hard: dict[str, tuple[float, int]] = {}  # item: (sum, count) of its ended calls' log(latency / their kind's median)
    flying: dict[str, int] = {}  # a model's calls in flight (`width`)
    fit = [0.0, 0.0, 0]  # sum x m, sum m^2, pairs: an ended call's log-ratio x on its item's mean m before it
    later: list[tuple[float, int]] = []
    slots = [0.0] * conc
    spent, last, end, top = 0.0, 0.0, 0.0, 0.0
    buckets = [_Tokens(rate, cap) if what else None for rate, cap, what in rates]

    def expect(k: Any, groups: dict[Any, tuple[float, int]]) -> float:
        v = seen.get(k, [])
        one = seen.get((k[0], 1, k[2]), []) if k[1] > 1 else []
        if granted.get(k, 0) < explore or max(len(v), len(one)) < min_n:
            return math.inf
        own = v[len(v) // 2] if v else 0.0
        if k[1] > 1:  # an n call: at least the model's one-sample figure x (1 + ln n) (Spend.seconds)
            own = max(own, one[len(one) // 2] * (1.0 + math.log(k[1]))) if one else own if v else math.inf
        if own == math.inf:
            return own
        g = groups.get(k[1:])
        return own if g is None else blend(own, max(len(v), len(one)), g[0] / g[1])

    def end_by(t: float) -> None:
        """The calls ended by `t` counted (`pool`: an n call's also as its model's one-sample calls', / (1 + ln n))."""
        while ended and ended[0][0] <= t:
            _, k, lat, j = heapq.heappop(ended)
            v = seen.setdefault(k, [])
            bisect.insort(v, lat)
            flying[k[0]] -= 1
            if items is not None and items[j]:
                s, c = hard.get(items[j], (0.0, 0))
                x = math.log(max(lat, 1e-3) / max(v[len(v) // 2], 1e-3))
                if c:  # (the regression of an answer's log-ratio on its item's mean so far: `lift` < 0)
                    fit[0] += x * s / c
                    fit[1] += (s / c) ** 2
                    fit[2] += 1
                hard[items[j]] = (s + x, c + 1)
            if pool and k[1] > 1:
                bisect.insort(seen.setdefault((k[0], 1, k[2]), []), lat / (1.0 + math.log(k[1])))
            opened.add(k[0])

    for _ in range(len(jobs)):
        t = heapq.heappop(slots)
        if not any(waiting.values()):
            t = max(t, later[0][0])
        while later and later[0][0] <= t:
            i = heapq.heappop(later)[1]
            heapq.heappush(waiting.setdefault(kinds[i], []), (order[i], i))
        end_by(t)
        while not any(q for k, q in waiting.items() if k[0] in opened or k[0] not in probing):  # all wait for probes
            t = max(t, ended[0][0])
            end_by(t)
            while later and later[0][0] <= t:
                i = heapq.heappop(later)[1]
                heapq.heappush(waiting.setdefault(kinds[i], []), (order[i], i))

        groups: dict[Any, tuple[float, int]] = {}
        for k, v in seen.items():
            s, c = groups.get(k[1:], (0.0, 0))
            groups[k[1:]] = (s + math.log(max(v[len(v) // 2], 1e-3)) * len(v), c + len(v))

        ex = {k: expect(k, groups) for k, q in waiting.items() if q and (k[0] in opened or k[0] not in probing
                                                                         and (k[1] == 1 or not waiting.get((k[0], 1, False))))}
        gain = lift if lift >= 0 else min(1.0, max(0.0, fit[0] / fit[1])) if fit[2] >= 20 and fit[1] > 0 else 0.0
        if gain and items is not None:  # a kind's expectation x exp(gain x its hardest visible item's difficulty)
            for kk in ex:
                if ex[kk] != math.inf:
                    vis = heapq.nsmallest(max(1, width - flying.get(kk[0], 0)), waiting[kk]) if width else waiting[kk]
                    best = max((hard[items[x[1]]][0] / hard[items[x[1]]][1] for x in vis if items[x[1]] in hard),
                               default=0.0)
                    ex[kk] *= math.exp(gain * max(best, 0.0))
        top = max(top, max((e for e in ex.values() if e != math.inf), default=0.0))
        k = max(ex, key=lambda k: (paced and k[2], min(ex[k], top), ex[k] <= top, -waiting[k][0][0]))
        probing.add(k[0])
        granted[k] = granted.get(k, 0) + 1
        if items is None or lift < 0 and not gain:  # (adaptive: items no sign of sharing difficulty yet)
            i = heapq.heappop(waiting[k])[1]
        else:
            i = hardest(waiting[k], items, hard, max(1, width - flying.get(k[0], 0)) if width else 0)
        flying[k[0]] = flying.get(k[0], 0) + 1
        if sent is not None:
            sent.append(i)
        lat, _, _, _, nxt = jobs[i]
        start, spent = _admit(max(t, last), spent, jobs[i], rates, buckets)
        last = start
        done = start + lat
        heapq.heappush(slots, done)
        heapq.heappush(ended, (done, kinds[i], lat, i))
        if nxt >= 0:
            heapq.heappush(later, (done, nxt))
        end = max(end, done)
    return end


def hardest(
    queue: list[tuple[float, int]], items: list[str], hard: dict[str, tuple[float, int]], width: int = 0
) -> int:
    """Take from a kind's waiting `queue` (a heap of (order, index)) the call of the hardest item seen so far: the
    mean of its ended calls' log-ratio to their kind's median, an unseen item 0 (the middle); equals in order.
    `width` > 0: among the first `width` in order only."""
    def score(x: tuple[float, int]) -> tuple[float, float]:
        s, c = hard.get(items[x[1]], (0.0, 0))
        return (s / c if c else 0.0, -x[0])

    got = max(heapq.nsmallest(width, queue) if width else queue, key=score)
    j = queue.index(got)
    queue[j] = queue[-1]
    queue.pop()
    heapq.heapify(queue)
    return got[1]


def schedules(
    entries: list[list[Any]], conc: int, rates: list[tuple[float, float, int]], expect: Callable[[str, int], float],
    shuffles: int = 50, redraw: Callable[[str, int, int], float] | None = None,
) -> dict[str, float]:
    """What list scheduling reaches on the lane's own draws (`replay`): `blind`, a random order; `by model`,
    chains' answers first, then the longest expected call (its model's law and n), a model's calls in a random
    order (which of its draws comes last moves the lane's end by a tenth: both are means over `shuffles`);
    `clairvoyant`, longest path first knowing every latency (LPT: no real scheduler knows them); `ours`, our
    ranking learning as it goes (`learned`, a mean over `shuffles` / 5 orders of each kind's calls); `item`, the same
    with a kind's calls taken hardest item seen first (`learned`'s `items`: the log names each call's item), `item@w`
    among the kind's next calls its model's window holds only (`learned`'s `width`: the lane's concurrency); `item+`,
    `item+@w` the same with the item's difficulty also lifting its kind's rank, by a gain fitted as it goes (`lift` -1); with
    `redraw(model, n, i)` (a new draw of a call's law), `hedged`: `ours`'s order re-sending a long call at the
    lane's drain (`hedged`: runner.budgets.hedge), for a lane bound by concurrency only."""
    jobs, held = lane_jobs(entries)
    if not jobs:
        return {"blind": 0.0, "by model": 0.0, "clairvoyant": 0.0}
    rng = random.Random(0)
    blind = by_model = 0.0
    expected = [(j[4] < 0, -expect(j[2], j[3])) for j in jobs]
    for _ in range(shuffles):
        blind += replay(jobs, held, conc, rates, [rng.random() for _ in jobs]) / shuffles
        by_model += replay(jobs, held, conc, rates, [(*e, rng.random()) for e in expected]) / shuffles
    got = dict.fromkeys(("ours", "item", "item@w", "item+", "item+@w"), 0.0)
    items = lane_items(entries)
    k = shuffles // 5
    hedges = 0.0
    for _ in range(k):  # (the same orders for all)
        o = [rng.random() for _ in jobs]
        sent: list[int] = []
        got["ours"] += learned(jobs, held, conc, rates, o, sent=sent) / k
        got["item"] += learned(jobs, held, conc, rates, o, items=items) / k
        got["item@w"] += learned(jobs, held, conc, rates, o, items=items, width=conc) / k
        got["item+"] += learned(jobs, held, conc, rates, o, items=items, lift=-1.0) / k
        got["item+@w"] += learned(jobs, held, conc, rates, o, items=items, width=conc, lift=-1.0) / k
        if redraw is not None:  # our order, each call ranked at its place in it
            at = {i: p for p, i in enumerate(sent)}
            hedges += hedged(jobs, held, conc, [at[i] for i in range(len(jobs))],
                             lambda i: redraw(jobs[i][2], jobs[i][3], i))[0] / k
    lpt = [-(j[0] + (jobs[j[4]][0] if j[4] >= 0 else 0.0)) for j in jobs]
    out = {"blind": blind, "by model": by_model, **got, "clairvoyant": replay(jobs, held, conc, rates, lpt)}
    if redraw is not None:
        out["hedged"] = hedges
    return out


def spread(xs: list[float]) -> dict[str, float]:
    """A ratio's spread over orders: mean, p10, p90 and the share above 1.15x (a live lane is one order: the
    `blind` column, a mean over orders, hides that one random order is itself a draw)."""
    s = sorted(xs)
    return {"mean": sum(s) / len(s), "p10": s[len(s) // 10], "p90": s[min(len(s) - 1, len(s) * 9 // 10)],
            "over": sum(x > 1.15 for x in s) / len(s)}


def paired(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Mean of xs - ys (the same draws and orders) and its standard error."""
    d = [x - y for x, y in zip(xs, ys, strict=True)]
    m = sum(d) / len(d)
    return m, math.sqrt(sum((x - m) ** 2 for x in d) / max(1, len(d) - 1) / len(d))


def lost_tpm(entries: list[list[Any]], rate: float, cap: float, per_choice: float = ADMIT) -> tuple[float, float]:
    """Seconds of TPM the server's bucket lost full (refill beyond its cap) between the lane's first and last
    request, and how much of it with the lane's concurrency all in flight (the slots, not the tokens, binding):
    replayed from the log as the server charges (`_Tokens`: ADMIT a choice at admission, settled at the end)."""
    events = sorted([(e[0], 0, -per_choice * e[3]) for e in entries]
                    + [(e[0] + e[4], 1, per_choice * e[3] - e[5]) for e in entries])
    last = max(e[0] for e in entries)
    level, t, flying, lost, peak = cap, events[0][0], 0, 0.0, 0.0
    top = max_flying(entries)
    for when, end, delta in events:
        if when > last:
            break
        level += (when - t) * rate
        if level > cap:
            lost += level - cap
            peak += level - cap if flying >= top else 0.0
            level = cap
        level, t = level + delta, when
        flying += -1 if end else 1
    return lost / rate, peak / rate


def max_flying(entries: list[list[Any]]) -> int:
    """The most calls the lane had in flight at once (its concurrency, as the server saw it)."""
    events = sorted([(e[0], 1) for e in entries] + [(e[0] + e[4], -1) for e in entries], key=lambda x: (x[0], x[1]))
    now = top = 0
    for _, d in events:
        now += d
        top = max(top, now)
    return top


def decompose(
    entries: list[list[Any]], t_launch: float, conc: int, rates: list[tuple[float, float, int]], limit_s: float,
    expect: Callable[[str, int], float], orders: int = 50,
) -> dict[str, Any]:
    """Why a live lane ended where it did, each figure over its limit: `live`; `order`, the live order of sends
    replayed with no overhead (live - order: the runner's own cost, its start and pacing share); `ours`, our rule
    (`learned`) over random orders within each kind (order - ours: the luck of the items' order, e.g. which
    heavy draw came last); `blind`, `by model` and `clairvoyant` as in `schedules`, `blind` and `ours` with their
    spread over orders (`spread`). Also: the call that ended last, when the last request went (live and in
    `order`) and the TPM the server's bucket lost full (`lost_tpm`)."""
    entries = sorted(entries, key=lambda e: e[0])
    jobs, held = lane_jobs(entries)
    rng = random.Random(0)
    blind = [replay(jobs, held, conc, rates, [rng.random() for _ in jobs]) / limit_s for _ in range(orders)]
    ours = [learned(jobs, held, conc, rates, [rng.random() for _ in jobs]) / limit_s for _ in range(orders)]
    expected = [(j[4] < 0, -expect(j[2], j[3])) for j in jobs]
    by_model = sum(replay(jobs, held, conc, rates, [(*e, rng.random()) for e in expected])
                   for _ in range(orders)) / orders / limit_s
    lpt = [-(j[0] + (jobs[j[4]][0] if j[4] >= 0 else 0.0)) for j in jobs]
    sends: list[float] = []
    order = replay(jobs, held, conc, rates, [e[0] for e in entries], sends)
    tail = max(entries, key=lambda e: e[0] + e[4])
    first = entries[0][0]
    tpm = [(rate, cap) for rate, cap, what in rates if what]
    lost = lost_tpm(entries, *tpm[0]) if tpm else (0.0, 0.0)
    return {
        "live": (max(e[0] + e[4] for e in entries) - t_launch) / limit_s,
        "order": (order + first - t_launch) / limit_s,  # (from the live first send: the start is not replayed)
        "order_0": order / limit_s,
        "ours": spread(ours), "blind": spread(blind), "by model": by_model,
        "clairvoyant": replay(jobs, held, conc, rates, lpt) / limit_s,
        "first_s": first - t_launch, "last_send_s": entries[-1][0] - first, "order_last_send_s": max(sends),
        "tail": (tail[2], tail[4], tail[0] - first), "lost_tpm_s": lost[0], "lost_tpm_full_s": lost[1],
    }



def main() -> None:
    """Per lane of kept sweeps (bench/reasoning_sweep.py --keep DIR), why it ended where it did (`decompose`); or,
    with --synthetic N, the spread over single orders on N synthetic draws of the laws (no sweep is run)."""
    import argparse

    import reasoning_sweep as rs

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("dirs", nargs="*", type=Path, help="kept sweeps (their server_logs.json and server0.json)")
    ap.add_argument("--lane", action="append", help="these lanes only (default: every lane)")
    ap.add_argument("--orders", type=int, default=50, help="random orders per replay")
    ap.add_argument("--synthetic", type=int, metavar="N", help="N synthetic draws (seeds 10000+), quick scale")
    ap.add_argument("--lift", type=float, default=0.0, metavar="G",
                    help="--synthetic: also `lift` and `lift@w` (learned's lift: G < 0 fitted as it goes)")
    ap.add_argument("--item-corr", type=float, default=0.0, metavar="RHO",
                    help="--synthetic: the items' difficulty shared across models (reasoning_server's item_corr)")
    a = ap.parse_args()
    lanes = a.lane or list(rs.KEYS)

    def setup(key: str) -> tuple[int, list[tuple[float, float, int]]]:
        _srv, rpm, tpm, conc, window = rs.KEYS[key]
        rates = [(rpm / 60, rpm / 60, 0)] if rpm else []  # (as reasoning_sweep.lane_table: RPM holds 1 s)
        return conc, rates + ([(tpm / 60, tpm / 60 * window, 1)] if tpm else [])

    if a.synthetic:
        ms, got = rs.lineup(), {}
        for seed in range(a.synthetic):
            logs = rs.synthetic_logs(ms, 10_000 + seed, 0.5, (30, 5, 10), a.item_corr)
            limits = {r["lane"]: r["limit_s"] for r in rs.lane_table(logs, 0.0)[0]}
            rng = random.Random(seed)
            for key in lanes:
                conc, rates = setup(key)
                entries = [e for e in logs[rs.KEYS[key][0]]["log"] if e[1] == f"k-{key}"]
                jobs, held = lane_jobs(entries)
                items = lane_items(entries)
                by = got.setdefault(key, {})
                for _ in range(max(1, a.orders // 10)):
                    o = [rng.random() for _ in jobs]
                    by.setdefault("blind", []).append(replay(jobs, held, conc, rates, o) / limits[key])
                    by.setdefault("ours", []).append(learned(jobs, held, conc, rates, o) / limits[key])
                    by.setdefault("item", []).append(learned(jobs, held, conc, rates, o, items=items) / limits[key])
                    by.setdefault("item@w", []).append(
                        learned(jobs, held, conc, rates, o, items=items, width=conc) / limits[key])
                    if a.lift:
                        by.setdefault("lift", []).append(
                            learned(jobs, held, conc, rates, o, items=items, lift=a.lift) / limits[key])
                        by.setdefault("lift@w", []).append(
                            learned(jobs, held, conc, rates, o, items=items, lift=a.lift, width=conc) / limits[key])
                lpt = [-(j[0] + (jobs[j[4]][0] if j[4] >= 0 else 0.0)) for j in jobs]
                by.setdefault("clairvoyant", []).append(replay(jobs, held, conc, rates, lpt) / limits[key])
        print(f"single orders on {a.synthetic} synthetic draws (x {max(1, a.orders // 10)} orders; clairvoyant: one), "
              f"item_corr {a.item_corr}: mean  p10-p90  share > 1.15x")
        for key, by in got.items():
            print(f"{key:<6} " + "  ".join(f"{k} {s['mean']:.3f} {s['p10']:.2f}-{s['p90']:.2f} {s['over']:.0%}"
                                           for k, v in by.items() for s in [spread(v)]))
        print("paired on the same draws and orders, vs ours: mean difference +- 2 standard errors")
        for key, by in got.items():
            print(f"{key:<6} " + "  ".join(f"{k} {m:+.3f} +- {2 * se:.3f}" for k in ("item", "item@w", "lift", "lift@w")[:2 + 2 * bool(a.lift)]
                                           for m, se in [paired(by[k], by["ours"])]))
        return
    print(f"{'run':<28} {'lane':<6} {'live':>5} {'order':>5} {'ours':>5} {'p90':>5} {'blind':>5} {'p90':>5} "
          f"{'bymod':>5} {'clair':>5} {'1st s':>5} {'last':>5} {'o.last':>6} {'lost':>5} {'@cap':>5}  tail")
    for d in a.dirs:
        kept = json.loads((d / "server_logs.json").read_text())
        spec = json.loads((d / "server0.json").read_text())
        ms = spec["models"]
        limits = {r["lane"]: r["limit_s"] for r in rs.lane_table(kept["logs"], kept["t_launch"])[0] if not r.get("empty")}
        for key in lanes:
            if key not in limits:
                continue
            conc, rates = setup(key)
            entries = [e for e in kept["logs"][rs.KEYS[key][0]]["log"] if e[1] == f"k-{key}"]
            r = decompose(entries, kept["t_launch"], conc, rates, limits[key],
                          partial(rs.expected_s, ms, spec["scale"]), a.orders)
            model, lat, sent = r["tail"]
            run = f"{d.name} s{spec['seed']}"
            print(f"{run:<28} {key:<6} {r['live']:>5.2f} {r['order']:>5.2f} "
                  f"{r['ours']['mean']:>5.2f} {r['ours']['p90']:>5.2f} {r['blind']['mean']:>5.2f} {r['blind']['p90']:>5.2f} "
                  f"{r['by model']:>5.2f} {r['clairvoyant']:>5.2f} {r['first_s']:>5.2f} {r['last_send_s']:>5.1f} "
                  f"{r['order_last_send_s']:>6.1f} {r['lost_tpm_s']:>5.1f} {r['lost_tpm_full_s']:>5.1f}  "
                  f"{model} {lat:.1f} s sent at {sent:.1f}")
    print("(live: the lane's last answer / its limit; order: the live order of sends replayed with no overhead, from "
          "the live first send; ours / blind: mean and p90 over random orders; last / o.last: the last request, s "
          "after the first, live / in `order`; lost: s of TPM the server's bucket lost full before the last request, "
          "@cap: of it with the lane's concurrency all in flight; tail: the call that ended last)")


if __name__ == "__main__":
    main()
