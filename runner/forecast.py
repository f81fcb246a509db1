"""The night's wall time, forecast from the work left on each lane (one endpoint + key, shared by the
models on it): a lane ends no sooner than its requests at its RPM, its tokens at its TPM, its calls'
latency spread over its concurrency, its longest chain (an answer, then its critique) or its last calls in
flight (they end with the slowest of them); the sweep ends with its slowest lane.

Each model's calls, every pass (runner.remaining), go to its lanes evenly (the pool spreads them), a
judge's to the judge's; a call lasts what the model's calls of that pass lasted in the run so far
(`latency_s`), else in its earlier runs' calls of as many samples a request (runner.history.at_n: an `n`
call lasts the longest of its samples), else a prior (a second plus its output at 50 tokens/s). The range: output at each
model's expected length, and every call writing its whole limit.

The live ETA is this forecast on the work left (runner.eta.Live).

Calls on the wire (`runner.lanes.Lane.wire`: when each was sent) are no longer work to send: each holds its
lane for what it has still to go given how long it has run (`Law.residual`: a heavy tail's grows with age, a
call 30 s into a law with a 60 s tail is not a fresh call), and the last of them ends the lane no sooner than
the median of their latest end. The range (`least`, `most`): their latest end at its 10th and 90th
percentile, the unsent calls' mean latency within two standard errors of its estimate, and (`most`) every
call writing its whole limit.

A TPM lane's end moves with its token total, a sum of heavy-tailed draws (#40: 1.34-1.49x between two nights of
one lane, where `most` said nothing: reasoning models bill past their limit). Its LEVEL range: each pass's output
total as `calls` draws of the spread seen (runner.history.token_var) around a mean known from `rows` of them (the
prediction's variance calls * var * (1 + calls / rows)), the lane's total as a lognormal of that mean and variance
(Fenton-Wilkinson: a sum of few heavy-tailed draws is skewed, its upper side further than a normal's), at its
(1 - LEVEL) / 2 and (1 + LEVEL) / 2 quantiles: `least` and `high` (`most` no less than `high`).

A lane's end past its binding work is its last calls' (#40, bench seeds 0-20: the concurrency lanes ended 1.09-1.17x
their call-seconds over their slots, forecast at 1.00x; a TPM lane's end is one long call sent late, not a typical
one): when it sends its last call, the calls in progress are picked by their length (renewal theory), and the lane
ends with the longest of what they have left (`last_residual`): a concurrency lane at its work / slots plus that
longest less the mean left (`tail_past`), a TPM lane at its tokens' time less what those long calls write beyond
their charge, plus that longest (`LaneWork.tpm_end`); its LEVEL range from the longest's quantiles.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from runner.batch.plan import LATENCY_S, OUT_TOKENS_PER_S
from runner.budgets.tokens import TPM_SHARE

log = logging.getLogger(__name__)

QUANTILES = (0.5, 0.9, 0.1)
"""The latest end of a lane's (a model's) calls in flight said as its median (expected), 90th (most) and 10th
(least) percentile: a mean of the max is dominated by a tail no one call shows."""
Three = list[float]
"""[expected, most, least] of a quantity."""
LEVEL = 0.8
"""The token spread's range: its central 80% (a range a plan can use, not a worst case)."""
Z = 1.2815515655446004
"""The standard normal's (1 + LEVEL) / 2 quantile."""


def around(mean: float, var: float, z: float) -> float:
    """The `z` quantile of a lognormal of this mean and variance (Fenton-Wilkinson's match of a sum of
    positive draws): skewed up as the spread grows, never below 0."""
    if mean <= 0 or var <= 0:
        return mean
    s2 = math.log1p(var / (mean * mean))
    return mean * math.exp(z * math.sqrt(s2) - s2 / 2)


def three() -> Three:
    return [0.0, 0.0, 0.0]


@dataclass
class LaneWork:
    name: str
    rpm: float | None
    tpm: float | None
    concurrency: int
    calls: Three = field(default_factory=three)
    tokens: Three = field(default_factory=three)
    busy_s: Three = field(default_factory=three)
    """[expected, most, least] of each: calls, tokens (in + out), call-seconds of the calls not sent yet."""
    tail_s: Three = field(default_factory=three)
    """The longest typical call among its work: a lane paced by RPM or TPM sends its last request when its
    budget allows, and that request still takes this long."""
    chain_s: Three = field(default_factory=three)
    """Its longest typical chain: an answer still to come, then the critique quoting it (the lane's end
    is no sooner, nor before its last calls in flight end: `spread`)."""
    held_s: Three = field(default_factory=three)
    """Call-seconds its calls on the wire have still to go (each's `residual`)."""
    held_end: Three = field(default_factory=three)
    """When the last of its calls on the wire ends (`latest`), and the passes chained after it."""
    tokens_var: float = 0.0
    """The variance of its expected token total (its passes' output totals: `Plan.output_var`)."""
    _tpm_spread: tuple[float, float] | None = field(default=None, repr=False)
    laws: list[tuple[Law, float]] = field(default_factory=list)
    """Its unsent requests by law (expected): (a pass's latencies, requests), where the law's spread is known: its
    last calls' end (`tail_past`, `tpm_end`)."""
    _tail: tuple[float, float, float] | None = field(default=None, repr=False)
    depth: float = 0.0
    """Tokens its key's bucket holds at the start (a fresh run: runner.history.DEPTH), spent at once (at most a
    minute's, as runner.budgets.tokens.TokenAccount.span): its tokens' time counts those past them."""
    _tpm_end: tuple[float, float, float] | None = field(default=None, repr=False)
    parts: dict[tuple[str, str], list[list[float]]] = field(default_factory=dict)
    """Per (run, model) whose calls it carries, [expected, most, least] of [calls, tokens, call-seconds, its
    longest chain (in flight included), its calls on the wire's seconds left]."""

    def ends(self, k: int) -> dict[tuple[str, str], float]:
        """When each (run, model) on this lane has its work done, the lane taking its models' calls in
        turn (processor sharing on what binds it): a model with w of the binding work, of W in all, ends
        after sum(min(w_i, w)) / W of the lane's time (the model with the most ends with the lane), and
        no sooner than its own longest chain and its last calls (`spread`)."""
        total, bound = self.seconds(k)
        j = {"RPM": 0, "TPM": 1}.get(bound)
        work = {key: p[k][j] if j is not None else p[k][2] + p[k][4] for key, p in self.parts.items()
                if p[k][2] + p[k][4] + p[k][3] > 0}
        whole = sum(work.values()) or 1.0
        return {key: max(p[k][3], spread(p[k][2], p[k][0], self.concurrency),
                         total * sum(min(v, w) for v in work.values()) / whole)
                for key, w in work.items() if (p := self.parts[key])}

    def tpm_seconds(self, k: int, z: float = 0.0) -> float:
        """The TPM bound: its tokens at the key's paced rate, then its last request's call. [expected, most, least]
        (`most` and `least` no nearer than the LEVEL range: `tpm_spread`); `z` > 0 or < 0: the range's ends."""
        t = self.paced(self.tokens[k]) + self.tpm_end()[0]
        if not z and k == 0:
            return t
        return ranged(t, self.paced(self.tokens[0]) + self.tpm_end()[0], *self.tpm_spread(), k, z)

    def paced(self, tokens: float) -> float:
        """Seconds `tokens` take at the key's paced rate, its bucket's depth spent at once."""
        return max(0.0, tokens - min(self.depth, self.tpm or 0.0)) / ((self.tpm or 1.0) * TPM_SHARE / 60.0)

    def tpm_end(self) -> tuple[float, float, float]:
        """A TPM lane's end past its tokens at its rate: (expected, below, above at the LEVEL range). Paced, its
        calls go out at the rate its tokens allow, k of them in flight (its call-seconds over its token time,
        Little's law; at most its slots); its last send finds k calls in progress, picked by their length: their
        tokens beyond what a typical call was charged (a reasoning model writes as long as it runs: per call its
        latency's variance over its mean, in seconds of the lane) let the last send come that much before the
        tokens' time, and the lane ends with the longest of what they have left (`last_residual`). With fewer
        than 2 at once: its longest typical call (`tail_s`)."""
        if self._tpm_end is None:
            k = min(self.concurrency, self.busy_s[0] / max(1e-9, self.paced(self.tokens[0])))
            e_max, _one, low, high = last_residual(self.laws, k)
            if not e_max:
                self._tpm_end = (self.tail_s[0], 0.0, 0.0)
            else:
                work = sum(n * law.excess(0.0) for law, n in self.laws)
                ahead = sum(n * law.var() for law, n in self.laws) / work
                self._tpm_end = (max(0.0, e_max - ahead), e_max - low, high - e_max)
        return self._tpm_end

    def tpm_spread(self) -> tuple[float, float]:
        """How far (below, above) a TPM lane's end may land from its point at the LEVEL range: its token total at
        its quantiles (`around`), and its last calls' end (`tpm_end`: on a heavy tail, one long call sent late
        ends the lane). The two parts add: the same long calls make both (a reasoning model writes as long as it
        runs; bench tpm-b, seeds 0-20: tokens over forecast and end past the tokens' time correlate at 0.57)."""
        if self._tpm_spread is None:
            rate = (self.tpm or 1.0) * TPM_SHARE / 60.0
            t = self.tokens[0]
            tok = ((t - around(t, self.tokens_var, -Z)) / rate, (around(t, self.tokens_var, Z) - t) / rate)
            end = self.tpm_end()[1:]
            self._tpm_spread = (tok[0] + end[0], tok[1] + end[1])
        return self._tpm_spread

    def tail(self) -> tuple[float, float, float]:
        if self._tail is None:
            self._tail = tail_past(self.laws, self.concurrency)
        return self._tail

    def conc_seconds(self, k: int, z: float = 0.0) -> float:
        """The concurrency bound: its call-seconds over its slots, then the calls still running when its queue
        empties (`tail_past`: a lane's end is no sooner than its busiest slot's). The LEVEL range: that tail's,
        and its call-seconds' (`calls` draws of each law's variance, around a mean known from `n` of them),
        in quadrature; `z`, `k` as `tpm_seconds`."""
        m = max(1, self.concurrency)
        tail = self.tail()
        t = (self.busy_s[k] + self.held_s[k]) / m + tail[0]
        if not z and k == 0:
            return t
        sd = math.sqrt(sum(n * law.var() * (1.0 + n / max(law.n, n)) for law, n in self.laws)) / m
        return ranged(t, (self.busy_s[0] + self.held_s[0]) / m + tail[0],
                      math.hypot(tail[0] - tail[1], Z * sd), math.hypot(tail[2] - tail[0], Z * sd), k, z)

    def seconds(self, k: int, z: float = 0.0) -> tuple[float, str]:
        """How long this lane's work takes, and what binds it (its longest chain: an answer still to
        come, then the critique that quotes it, cannot overlap; the last of its calls on the wire);
        `z`: its token total at that quantile (`tpm_tokens`)."""
        parts = [(self.conc_seconds(k, z), "concurrency"),
                 (self.chain_s[k], "longest chain"), (self.held_end[k], "calls in flight"),
                 (spread(self.busy_s[k], self.calls[k], self.concurrency), "last calls")]
        if self.rpm:
            parts.append((self.calls[k] / (self.rpm / 60.0) + self.tail_s[k], "RPM"))
        if self.tpm:  # (paced at TPM_SHARE of the key: runner.budgets.local)
            parts.append((self.tpm_seconds(k, z), "TPM"))
        return max(parts)


def ranged(t: float, point: float, down: float, up: float, k: int, z: float) -> float:
    """A bound's figure `t` ([expected, most, least][k]) no nearer its point than the LEVEL range (`down`, `up`
    from `point`); `z` > 0 or < 0: the range's ends themselves."""
    if z > 0 or k == 1:
        return point + up if z else max(t, point + up)
    return max(0.0, point - down) if z else min(t, point - down)


TAIL_STEPS = 96
"""Points the expected longest residual is integrated over (`tail_past`)."""


def last_residual(laws: list[tuple[Law, float]], k: float) -> tuple[float, float, float, float]:
    """What is left of the calls in progress at a random moment of a lane busy with `k` of them at once: (the
    longest's mean, one's mean, the longest's LEVEL low and high) s. A call in progress is picked by its length (a
    long one covers more moments): its law by each law's share of the work (requests x mean), what is left of it
    with P(R > x) = E[(L - x)+] / E[L] (renewal theory), the `k` of them independent. `laws`: (a pass's
    latencies, its requests on the lane). (0, 0, 0, 0): no work, or fewer than 2 at once."""
    laws = [(law, n) for law, n in laws if n > 0 and law.mean > 0]
    k = min(k, sum(n for _, n in laws))
    if not laws or k < 2:
        return (0.0, 0.0, 0.0, 0.0)
    work = sum(n * law.excess(0.0) for law, n in laws)

    def s_e(x: float) -> float:
        return sum(n * law.excess(x) for law, n in laws) / work

    hi = max(law.mean for law, _ in laws)
    while k * s_e(hi) > 1e-6 and hi < 1e7:
        hi *= 2
    step = hi / TAIL_STEPS
    pts = [1.0 - (1.0 - min(1.0, s_e(i * step))) ** k for i in range(TAIL_STEPS + 1)]
    e_max = step * (sum(pts) - (pts[0] + pts[-1]) / 2)  # E[max] = integral of P(max > x)
    e_one = sum(n * (law.var() + law.excess(0.0) ** 2) for law, n in laws) / (2 * work)  # E[R] = E[L^2] / 2E[L]

    def at(q: float) -> float:  # P(max R <= x) = (1 - S_e(x))^k = q
        want, lo, up = 1.0 - q ** (1.0 / k), 0.0, hi
        for _ in range(40):
            mid = (lo + up) / 2
            lo, up = (mid, up) if s_e(mid) > want else (lo, mid)
        return up

    return (e_max, e_one, at((1 - LEVEL) / 2), at((1 + LEVEL) / 2))


def tail_past(laws: list[tuple[Law, float]], slots: int) -> tuple[float, float, float]:
    """How far past its work / slots a lane busy on all its slots ends: (expected, LEVEL low, LEVEL high) s.
    When its queue empties (at T0) each slot is in a call, and the lane's work is slots * T0 plus what those
    calls have left (R_i, `last_residual`), so it ends at work / slots + max R_i - mean R_i."""
    e_max, e_one, low, high = last_residual(laws, slots)
    return (e_max - e_one, low - e_one, high - e_one)


def spread(busy_s: float, calls: float, concurrency: int) -> float:
    """A lane's (or a model's) last calls end with the slowest of those in flight together: its mean
    call times ~1 + ln k for k calls at once (runner.calls.estimates says the same of an n call's
    samples); the calls left at the end of a pass are those still running."""
    if calls <= 0:
        return 0.0
    return busy_s / calls * (1.0 + math.log(max(1.0, min(calls, concurrency))))


@dataclass
class Forecast:
    expected_s: float
    most_s: float
    lane: str
    bound: str
    models: dict[tuple[str, str], tuple[float, float, float]] = field(default_factory=dict)
    """Per (run, model) with work left: (expected, most, least) seconds until its last call ends."""
    least_s: float = 0.0
    high_s: float = 0.0
    """The LEVEL range's upper end (`least_s` its lower): the TPM lanes' token totals at their quantiles.
    `most_s` is no less: it also has every call writing its whole limit."""
    lanes: dict[str, tuple[float, float, float, str]] = field(default_factory=dict)
    """Per lane: (expected, least, high) seconds until its work ends, and what binds it."""


@dataclass
class Law:
    """A pass's latencies as a lognormal of this mean and sigma (None: unknown, memoryless), and how many
    calls its mean is from (`n`: the unsent calls' mean is known within two standard errors); `cap`: cut there."""

    mean: float
    sigma: float | None = None
    n: float = 0.0
    cap: float | None = None
    """No latency past this (the longest seen: a real tail is bounded by the limit and the timeout)."""

    def survival(self, x: float) -> float:
        """P(latency > x)."""
        if x <= 0:
            return 1.0
        if self.cap is not None and x >= self.cap:
            return 0.0
        if not self.sigma:
            return math.exp(-x / self.mean)
        mu = math.log(self.mean) - self.sigma ** 2 / 2
        return 0.5 * math.erfc((math.log(x) - mu) / (self.sigma * math.sqrt(2)))

    def excess(self, x: float) -> float:
        """E[(L - x)+], L cut at `cap`: the work past `x` (a lane's calls in progress at a random moment are its
        long ones: what they have left is this over the mean, `tail_past`)."""
        def uncut(y: float) -> float:
            if y <= 0:
                return self.mean - y
            if not self.sigma:
                return self.mean * math.exp(-y / self.mean)
            s = self.sigma
            mu = math.log(self.mean) - s * s / 2
            z = (math.log(y) - mu) / s
            return self.mean * 0.5 * math.erfc((z - s) / math.sqrt(2)) - y * 0.5 * math.erfc(z / math.sqrt(2))
        if self.cap is not None and x >= self.cap:
            return 0.0
        return uncut(x) - (uncut(self.cap) if self.cap is not None else 0.0)

    def var(self) -> float:
        """The variance of a latency (cut at `cap`): E[min(L, c)^2] - E[min(L, c)]^2, a lognormal's in closed form."""
        m = self.excess(0.0)
        if not self.sigma:
            sq = 2 * self.mean * self.mean
            if self.cap is not None:  # E[min(L, c)^2] = 2 * integral of x S(x) over [0, c]
                c, b = self.cap, self.mean
                sq = 2 * b * (b - math.exp(-c / b) * (c + b))
            return max(0.0, sq - m * m)
        s = self.sigma
        mu = math.log(self.mean) - s * s / 2
        sq = self.mean * self.mean * math.exp(s * s)
        if self.cap is not None:
            zc = (math.log(self.cap) - mu) / s
            sq = sq * 0.5 * math.erfc(-(zc - 2 * s) / math.sqrt(2)) + self.cap ** 2 * self.survival(self.cap * (1 - 1e-12))
        return max(0.0, sq - m * m)

    def residual(self, age: float) -> float:
        """The expected seconds left of a call running for `age` s: E[L - a | L > a]. Memoryless: the mean;
        a lognormal's grows with age (its tail is heavy): a call long past the typical is long from done."""
        if not self.sigma or age <= 0:
            return self.mean
        s = self.sigma
        mu = math.log(self.mean) - s * s / 2
        z = (math.log(age) - mu) / s
        below = 0.5 * math.erfc(z / math.sqrt(2))
        if below < 1e-300:  # far past any latency seen: the tail's asymptote (a s^2 / (ln a - mu))
            return age * s * s / max(math.log(age) - mu, 1e-9)
        return max(0.0, self.mean * 0.5 * math.erfc((z - s) / math.sqrt(2)) / below - age)

    def factors(self) -> tuple[float, float, float]:
        """(expected, most, least) multipliers of the mean for the unsent calls: its standard error over
        `n` calls, twice (a mean of few heavy-tailed calls may be far off)."""
        if not self.sigma or self.n < 2:
            return (1.0, 1.0, 1.0)
        se = math.sqrt(math.expm1(min(self.sigma ** 2, 50.0)) / self.n)
        return (1.0, 1.0 + 2 * se, max(0.5, 1.0 - 2 * se))


def cut(law: Law) -> Law:
    """`law` cut where `n` draws of it would end (its 1 - 1 / (n + 1) quantile) when no longest latency is known:
    a lognormal fit of n calls says nothing past them, and a lane's last calls' tail (`last_residual`: E[L^2] grows
    as e^(sigma^2)) would run off with a fit's upper tail."""
    if law.cap is not None or not law.sigma or law.n < 2:
        return law
    mu = math.log(law.mean) - law.sigma ** 2 / 2
    return Law(law.mean, law.sigma, law.n, math.exp(mu + law.sigma * NormalDist().inv_cdf(1 - 1 / (law.n + 1))))


def latest(flights: list[tuple[float, Law]], q: float) -> float:
    """Seconds until the last of calls on the wire ends, at probability `q`: the t where the product of
    each's P(left <= t | its age) reaches q (bisection; `flights`: (age, law) of each)."""
    if not flights:
        return 0.0
    below = [(a, law, law.survival(a)) for a, law in flights]

    def p(t: float) -> float:
        out = 1.0
        for a, law, s0 in below:
            out *= 1.0 - (law.survival(a + t) / s0 if s0 > 1e-300 else math.exp(-t / law.mean))
        return out

    lo, hi = 0.0, max(law.mean for _, law in flights)
    while p(hi) < q and hi < 1e7:
        lo, hi = hi, hi * 2
    for _ in range(30):  # (to ~1e-9 of the bracket)
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if p(mid) < q else (lo, mid)
    return hi


@dataclass
class Flight:
    """Calls of one (run, model, pass) on one lane, on the wire now."""

    lane: Any
    run: str
    model: str
    ages: list[float]
    law: Law
    after: Three = field(default_factory=three)
    """[expected, most, least] seconds of the passes chained after these (a critique waits for its answer)."""


def call_latency(plan: Any, pass_: str, out_per_call: float) -> float:
    s, n = plan.latency_seen.get(pass_, [0.0, 0])
    return s / n if n else LATENCY_S + out_per_call / OUT_TOKENS_PER_S


def wall(todo: list[Any], models: dict[str, Any], flights: list[Flight] | None = None,
         laws: dict[tuple[str, str, str], Law] | None = None, fresh: bool = False) -> Forecast | None:
    """The sweep's wall time from its remaining plans (runner.remaining.Plan) and its calls on the wire
    (`flights`), None with nothing to do; `laws`: per (run, model, pass), its latencies' law (the range); `fresh`:
    a run not started yet (the dry run), whose TPM lanes spend their keys' buckets at once (`LaneWork.depth`)."""
    lanes: dict[int, LaneWork] = {}
    laws = laws or {}

    def put(target: str, plan: Any, pass_: str, calls: tuple[float, float], tin: float,
            out: tuple[float, float], requests: tuple[float, float], before: Three) -> Three:
        """`calls`: rows (samples), `requests`: what they go out as (fewer where `n` carries samples);
        `before`: [expected, most, least] seconds of the chain's earlier passes still to come (a critique
        starts once its answer ended). Returns the chain's seconds with this pass."""
        m = models[target]
        paced = [ln for ln in m.lanes] or []
        calls3, out3, req3 = (*calls, calls[0]), (*out, out[0]), (*requests, requests[0])
        law = laws.get((plan.run, plan.model, pass_))
        f = law.factors() if law is not None else (1.0, 1.0, 1.0)
        chain = list(before)
        for k in (0, 1, 2):
            if calls3[k]:  # a row's latency is its request's (samples arrive together)
                chain[k] += call_latency(plan, pass_, out3[k] / calls3[k]) * f[k]
        for ln in paced:
            ep = ln.endpoint
            w = lanes.setdefault(id(ln), LaneWork(ln.name, ep.rpm, ep.tpm, ep.max_concurrency or 1))
            share = 1.0 / len(paced)
            if fresh:
                w.depth = max(w.depth, plan.tpm_depth)
            w.tokens_var += plan.output_var(pass_, share)  # (a model's lanes split its calls: each its share's draws)
            sigma = law.sigma if law is not None else plan.latency_sigma.get(pass_)
            if req3[0] and sigma:
                lat_law = cut(Law(chain[0] - before[0], sigma, plan.latency_seen.get(pass_, [0, 0])[1],
                                  (law.cap if law is not None else None) or plan.latency_cap.get(pass_)))
                w.laws.append((lat_law, req3[0] * share))
            for k in (0, 1, 2):
                if not calls3[k]:
                    continue
                lat = chain[k] - before[k]
                got = (req3[k] * share, (tin / max(calls[1], 1) * calls3[k] + out3[k]) * share,
                       req3[k] * share * lat)
                w.calls[k] += got[0]
                w.tokens[k] += got[1]
                w.busy_s[k] += got[2]
                w.tail_s[k] = max(w.tail_s[k], lat)
                w.chain_s[k] = max(w.chain_s[k], chain[k])
                mine = _part(w, plan.run, plan.model)[k]
                for i in range(3):
                    mine[i] += got[i]
                mine[3] = max(mine[3], chain[k])
        return chain

    for t in todo:
        chain = three()
        if t.calls:
            chain = put(t.model, t, "answer", (t.calls, t.calls), t.input_tokens,
                        (t.expected_output_tokens(), t.max_output_tokens), (t.requests, t.requests), chain)
        for pass_, (n, most, tin, max_out) in t.follow.items():
            target = t.follow_via.get(pass_) or t.model
            chain = put(target, t, pass_, (n, most), tin, (t.follow_expected_output_tokens(pass_), max_out),
                        (n, most), chain)
    for fl in flights or []:
        ep = fl.lane.endpoint
        w = lanes.setdefault(id(fl.lane), LaneWork(fl.lane.name, ep.rpm, ep.tpm, ep.max_concurrency or 1))
        held = sum(fl.law.residual(a) for a in fl.ages)
        mine = _part(w, fl.run, fl.model)
        for k, q in enumerate(QUANTILES):
            end = latest([(a, fl.law) for a in fl.ages], q) + fl.after[k]
            w.held_s[k] += held
            w.held_end[k] = max(w.held_end[k], end)
            mine[k][4] += held
            mine[k][3] = max(mine[k][3], end)
    if not lanes:
        return None
    exp = max((w.seconds(0) + (w.name,) for w in lanes.values()), key=lambda x: x[0])
    most = max(w.seconds(1)[0] for w in lanes.values())
    least = max(w.seconds(2)[0] for w in lanes.values())
    high = max(w.seconds(0, Z)[0] for w in lanes.values())
    ends: dict[tuple[str, str], Three] = {}
    for w in lanes.values():
        for k in (0, 1, 2):
            for key, t in w.ends(k).items():
                e = ends.setdefault(key, three())
                e[k] = max(e[k], t)
    by_lane = {w.name: (e, min(w.seconds(2)[0], e), max(w.seconds(0, Z)[0], e), bound)
               for w in lanes.values() for e, bound in [w.seconds(0)]}
    return Forecast(exp[0], max(most, high, exp[0]), exp[2], exp[1],
                    {key: (e, max(e, m), min(e, lo)) for key, (e, m, lo) in ends.items()}, min(least, exp[0]),
                    max(high, exp[0]), by_lane)


def _part(w: LaneWork, run: str, model: str) -> list[list[float]]:
    return w.parts.setdefault((run, model), [[0.0] * 5 for _ in range(3)])
