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
(1 - LEVEL) / 2 and (1 + LEVEL) / 2 quantiles: `least` and `high` (`most` no less than `high`). And its last
call: on a heavy tail the lane ends with one long call sent late (the bench's tpm-b: 11 to 37 s past its last send),
not with a typical one; `end_spread` says how far from its median that end may land, from the passes' latency laws
(lognormal, cut at the longest latency seen), and the two parts add in quadrature.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
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
    sent: list[tuple[Law, float]] = field(default_factory=list)
    """Its unsent requests by law (expected): (a pass's latencies, requests), where the law's spread is known."""
    _tpm_spread: tuple[float, float] | None = field(default=None, repr=False)
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
        rate = (self.tpm or 1.0) * TPM_SHARE / 60.0
        t = self.tokens[k] / rate + self.tail_s[k]
        if not z and k == 0:
            return t
        point = self.tokens[0] / rate + self.tail_s[0]
        down, up = self.tpm_spread()
        if z > 0 or k == 1:
            return point + up if z else max(t, point + up)
        return max(0.0, point - down) if z else min(t, point - down)

    def tpm_spread(self) -> tuple[float, float]:
        """How far (below, above) a TPM lane's end may land from its point at the LEVEL range: its token total at
        its quantiles (`around`), and its last calls' end (`end_spread`: on a heavy tail, one long call sent late
        ends the lane), independent parts added in quadrature."""
        if self._tpm_spread is None:
            rate = (self.tpm or 1.0) * TPM_SHARE / 60.0
            t = self.tokens[0]
            tok = ((t - around(t, self.tokens_var, -Z)) / rate, (around(t, self.tokens_var, Z) - t) / rate)
            end = end_spread(self.sent, t / rate)
            self._tpm_spread = (math.hypot(tok[0], end[0]), math.hypot(tok[1], end[1]))
        return self._tpm_spread

    def seconds(self, k: int, z: float = 0.0) -> tuple[float, str]:
        """How long this lane's work takes, and what binds it (its longest chain: an answer still to
        come, then the critique that quotes it, cannot overlap; the last of its calls on the wire);
        `z`: its token total at that quantile (`tpm_tokens`)."""
        parts = [((self.busy_s[k] + self.held_s[k]) / max(1, self.concurrency), "concurrency"),
                 (self.chain_s[k], "longest chain"), (self.held_end[k], "calls in flight"),
                 (spread(self.busy_s[k], self.calls[k], self.concurrency), "last calls")]
        if self.rpm:
            parts.append((self.calls[k] / (self.rpm / 60.0) + self.tail_s[k], "RPM"))
        if self.tpm:  # (paced at TPM_SHARE of the key: runner.budgets.local)
            parts.append((self.tpm_seconds(k, z), "TPM"))
        return max(parts)


END_STEPS = 24
"""Points of the send span the last calls' end is integrated over (`end_spread`)."""


def end_spread(sent: list[tuple[Law, float]], span: float) -> tuple[float, float]:
    """How far (below, above) the last call's end past the last send lands from its median, at the LEVEL range,
    requests sent evenly over `span` s (a paced lane), each law's `n` of them: P(all ended x s after the last send)
    = prod F(x + age at the last send), in logs n / span * integral of ln F(x + u) du over the span."""
    sent = [(law, n) for law, n in sent if n > 0 and law.sigma]
    if not sent:
        return (0.0, 0.0)
    grid = [(i + 0.5) / END_STEPS * span for i in range(END_STEPS)]

    def log_p(x: float) -> float:
        out = 0.0
        for law, n in sent:
            per = n / END_STEPS
            for u in grid:
                out += per * math.log(max(1e-300, 1.0 - law.survival(x + u)))
        return out

    def at(q: float) -> float:
        lo, hi, want = 0.0, max(law.mean for law, _ in sent), math.log(q)
        while log_p(hi) < want and hi < 1e7:
            lo, hi = hi, hi * 2
        for _ in range(40):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if log_p(mid) < want else (lo, mid)
        return hi

    mid = at(0.5)
    return (mid - at((1 - LEVEL) / 2), at((1 + LEVEL) / 2) - mid)


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
         laws: dict[tuple[str, str, str], Law] | None = None) -> Forecast | None:
    """The sweep's wall time from its remaining plans (runner.remaining.Plan) and its calls on the wire
    (`flights`), None with nothing to do; `laws`: per (run, model, pass), its latencies' law (the range)."""
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
            w.tokens_var += plan.output_var(pass_, share)  # (a model's lanes split its calls: each its share's draws)
            if req3[0] and (sigma := (law.sigma if law is not None else plan.latency_sigma.get(pass_))):
                w.sent.append((Law(chain[0] - before[0], sigma, cap=plan.latency_cap.get(pass_)), req3[0] * share))
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
