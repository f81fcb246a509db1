"""The night's wall time, forecast from the work left on each lane (one endpoint + key, shared by the
models on it): a lane ends no sooner than its requests at its RPM, its tokens at its TPM, its calls'
latency spread over its concurrency, its longest chain (an answer, then its critique) or its last calls in
flight (they end with the slowest of them); the sweep ends with its slowest lane.

Each model's calls, every pass (runner.remaining), go to its lanes evenly (the pool spreads them), a
judge's to the judge's; a call lasts what the model's calls of that pass lasted in the run so far
(`latency_s`), else in its earlier runs (runner.history), else a prior (a second plus its output at 50 tokens/s). The range: output at each
model's expected length, and every call writing its whole limit.

The live ETA (`Live`) is the same forecast on the work left: the run's whole plan, made once (in a thread),
less the final rows each pass has so far (read from the scheduler's counters), at what the calls spent and
lasted so far: the model's in this run, else in the sweep's other runs, its history, its other passes, its
lanes' other models (a pass's first rows weighed with the next basis: one heavy-tailed call is no mean);
recomputed every `EVERY_S` in a thread, never per row. A model whose pace nothing has shown yet keeps the
view's rate (the prior is the dry run's guess, 4x off on a first night). A model's ETA is when its lanes
reach the end of its share of their work, shared as the lanes share it (each model's calls in turn:
processor sharing), so the latest model's ETA is the sweep's.

Calls on the wire (`runner.lanes.Lane.wire`: when each was sent) are no longer work to send: each holds its
lane for what it has still to go given how long it has run (`Law.residual`: a heavy tail's grows with age, a
call 30 s into a law with a 60 s tail is not a fresh call), and the last of them ends the lane no sooner than
the median of their latest end. The range (`least`, `most`): their latest end at its 10th and 90th
percentile, the unsent calls' mean latency within two standard errors of its estimate, and (`most`) every
call writing its whole limit.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from runner.batch.plan import LATENCY_S, OUT_TOKENS_PER_S
from runner.budgets.local import TPM_SHARE

log = logging.getLogger(__name__)

EVERY_S = 2.0
"""The live ETA is recomputed this often, in a thread (~5 ms for 90 models x runs: nothing on the hot path)."""
SHARE_OF_CPU = 50
"""... or 50 times what one took, whichever is longer: a sweep of thousands of models spends at most ~2% of
a core on its ETA."""
SHRINK = 8
"""Rows below which a pass's own mean is weighed with the next basis (the sweep's other runs, then history)."""
QUANTILES = (0.5, 0.9, 0.1)
"""The latest end of a lane's (a model's) calls in flight said as its median (expected), 90th (most) and 10th
(least) percentile: a mean of the max is dominated by a tail no one call shows."""
Three = list[float]
"""[expected, most, least] of a quantity."""


def _three() -> Three:
    return [0.0, 0.0, 0.0]


@dataclass
class LaneWork:
    name: str
    rpm: float | None
    tpm: float | None
    concurrency: int
    calls: Three = field(default_factory=_three)
    tokens: Three = field(default_factory=_three)
    busy_s: Three = field(default_factory=_three)
    """[expected, most, least] of each: calls, tokens (in + out), call-seconds of the calls not sent yet."""
    tail_s: Three = field(default_factory=_three)
    """The longest typical call among its work: a lane paced by RPM or TPM sends its last request when its
    budget allows, and that request still takes this long."""
    chain_s: Three = field(default_factory=_three)
    """Its longest typical chain: an answer still to come, then the critique quoting it (the lane's end
    is no sooner, nor before its last calls in flight end: `spread`)."""
    held_s: Three = field(default_factory=_three)
    """Call-seconds its calls on the wire have still to go (each's `residual`)."""
    held_end: Three = field(default_factory=_three)
    """When the last of its calls on the wire ends (`latest`), and the passes chained after it."""
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

    def seconds(self, k: int) -> tuple[float, str]:
        """How long this lane's work takes, and what binds it (its longest chain: an answer still to
        come, then the critique that quotes it, cannot overlap; the last of its calls on the wire)."""
        parts = [((self.busy_s[k] + self.held_s[k]) / max(1, self.concurrency), "concurrency"),
                 (self.chain_s[k], "longest chain"), (self.held_end[k], "calls in flight"),
                 (spread(self.busy_s[k], self.calls[k], self.concurrency), "last calls")]
        if self.rpm:
            parts.append((self.calls[k] / (self.rpm / 60.0) + self.tail_s[k], "RPM"))
        if self.tpm:  # (paced at TPM_SHARE of the key: runner.budgets.local)
            parts.append((self.tokens[k] / (self.tpm * TPM_SHARE / 60.0) + self.tail_s[k], "TPM"))
        return max(parts)


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


@dataclass
class Law:
    """A pass's latencies as a lognormal of this mean and sigma (None: unknown, memoryless), and how many
    calls its mean is from (`n`: the unsent calls' mean is known within two standard errors)."""

    mean: float
    sigma: float | None = None
    n: float = 0.0

    def survival(self, x: float) -> float:
        """P(latency > x)."""
        if x <= 0:
            return 1.0
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
    after: Three = field(default_factory=_three)
    """[expected, most, least] seconds of the passes chained after these (a critique waits for its answer)."""


def _latency(plan: Any, pass_: str, out_per_call: float) -> float:
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
                chain[k] += _latency(plan, pass_, out3[k] / calls3[k]) * f[k]
        for ln in paced:
            ep = ln.endpoint
            w = lanes.setdefault(id(ln), LaneWork(ln.name, ep.rpm, ep.tpm, ep.max_concurrency or 1))
            share = 1.0 / len(paced)
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
        chain = _three()
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
    ends: dict[tuple[str, str], Three] = {}
    for w in lanes.values():
        for k in (0, 1, 2):
            for key, t in w.ends(k).items():
                e = ends.setdefault(key, _three())
                e[k] = max(e[k], t)
    return Forecast(exp[0], max(most, exp[0]), exp[2], exp[1],
                    {key: (e, max(e, m), min(e, lo)) for key, (e, m, lo) in ends.items()}, min(least, exp[0]))


def _part(w: LaneWork, run: str, model: str) -> list[list[float]]:
    return w.parts.setdefault((run, model), [[0.0] * 5 for _ in range(3)])


def left(base: Any, first: int, follow: dict[str, int], seen: dict[str, list[Any]],
         pool: dict[str, list[Any]] | None = None, peers: dict[str, list[Any]] | None = None) -> Any:
    """`base` (a runner.remaining.Plan of the whole run) less `first` first-pass rows and `follow[pass]`
    rows of each follow-up pass already final, at what the model spent and took per pass so far: in this
    run (`seen`: this session's runner.history tally), else in the sweep's other runs (`pool`: the same
    tally over every run of the session), else in its earlier runs (`base`'s basis), else its calls' mean
    latency in this session, any pass (a model's own pace is nearer than a prior: `pool["latency:*"]`),
    else its lanes' other models' so far (`peers`: a model not started yet on a lane that is), else the
    prior."""
    pool, peers = pool or {}, peers or {}
    calls = max(0, base.calls - first)
    f = calls / base.calls if base.calls else 0.0
    passes = {}
    for p, (n, most, tin, mx) in base.follow.items():
        done = follow.get(p, 0)
        n2, most2 = max(0, n - done), max(0, most - done)
        g = most2 / most if most else 0.0
        passes[p] = [n2, most2, round(tin * g), round(mx * g)]

    def own(key: str, old: list[Any], prior: float | None = None) -> list[Any]:
        """The nearest basis, its first rows weighed with the next one's mean as SHRINK rows in all (one
        heavy-tailed first call would otherwise set a whole pass's forecast); `prior`: a row's output
        by the prior, the basis under all others."""
        got: list[Any] | None = None
        mine, sweep = seen.get(key), pool.get(key)
        if mine and sweep and sweep[1] <= mine[1]:
            sweep = None  # (the same rows: the model in this run only)
        under = ((peers.get(key), pool.get("latency:*")) if key.startswith("latency:")
                 else (None if prior is None else [prior, 1], peers.get(key)))
        for v in (*under, old, sweep, mine):
            if v and v[1]:
                got = list(v) if got is None or v[1] >= SHRINK else [
                    v[0] + (SHRINK - v[1]) * got[0] / got[1], SHRINK]
        return old if got is None else got

    return replace(
        base, calls=calls, requests=-(-base.requests * calls // base.calls) if base.calls else 0,
        input_tokens=round(base.input_tokens * f), max_output_tokens=round(base.max_output_tokens * f),
        out_tokens_seen=own("answer", base.out_tokens_seen,
                            base.expected_output_tokens() / base.calls if base.calls else None), follow=passes,
        follow_seen={p: own(p, base.follow_seen.get(p, [0, 0]),
                            base.follow_expected_output_tokens(p) / n if (n := base.follow[p][0]) else None)
                     for p in base.follow},
        latency_seen={p: own(f"latency:{p}", base.latency_seen.get(p, [0.0, 0])) for p in ["answer", *base.follow]},
    )


@dataclass
class Live:
    """The live ETA of a sweep (runner.run passes it to the progress view): `prepare` (the runs' whole
    plans, their resumed rows by pass), then `refresh` (the counters), in a thread every EVERY_S;
    `eta(i, model)` counts down between refreshes. Batched models and `--join` workers (whose run is shared
    with processes it does not count) are left to the view's rate."""

    runs: list[Any]
    models: dict[str, Any]
    cache_dir: Path | None = None
    base: dict[int, list[Any]] = field(default_factory=dict)
    """Per run (index): runner.remaining.Plan of each model, every pass, as if nothing was done."""
    resumed: dict[int, dict[str, dict[str, int]]] = field(default_factory=dict)
    """Per run: model -> pass -> rows finished before this session (read once the run is loaded)."""
    todo: list[Any] = field(default_factory=list)
    """The last refresh's inputs: what each model has left (runner.remaining.Plan)."""
    last: Forecast | None = None
    at: float = 0.0
    blind: set[str] = field(default_factory=set)
    """Models (`model<US>run`) whose calls' pace is the prior alone yet (no row of theirs, their lanes' or
    their earlier runs'): their ETA is the rate's until one comes (the prior is the dry run's guess)."""

    def prepare(self) -> None:
        """The slow part, once per run: its plan (the suite's requests and follow-up chains, no file
        read: what is done comes from the counters) and, once loaded, its resumed rows by pass."""
        from runner import history
        from runner.remaining import remaining

        for i, r in enumerate(self.runs):
            if i not in self.base and getattr(r, "join", False):  # other workers' rows are not counted here
                self.base[i] = []
            if i not in self.base:
                plan = SimpleNamespace(spec=r.spec, models=r.models, out=None)
                got = remaining([plan], self.models, lambda _k: False,
                                prior=lambda m, _out: history.prior(self.cache_dir, self.models[m].cache_id))
                for t in got:
                    t.run = str(i)
                self.base[i] = [t for t in got if not getattr(self.models[t.model], "batch", False)]
            if i not in self.resumed and (r.loaded is None or r.loaded.is_set()):
                by: dict[str, dict[str, int]] = {}
                for ident in list(r.done):
                    model, _, rest = ident.partition("\x1f")
                    p = rest.rsplit("\x1f", 1)[-1]
                    d = by.setdefault(model, {})
                    d[p] = d.get(p, 0) + 1
                self.resumed[i] = by

    def refresh(self, now: float | None = None) -> Forecast | None:
        """The forecast of what is left `now` (time.monotonic(); inputs kept in `todo`)."""
        now = time.monotonic() if now is None else now
        todo = []
        pools: dict[str, dict[str, list[Any]]] = {}  # per model: its tally over the session's runs
        for r in self.runs:
            for m, by in list(r.spent.items()):
                _add(pools.setdefault(m, {}), by, True)
        lanes: dict[int, dict[str, list[Any]]] = {}  # per lane: its models' tallies
        for m, by in pools.items():
            for ln in getattr(self.models.get(m), "lanes", ()):
                _add(lanes.setdefault(id(ln), {}), by)
        wire = self.on_wire(now)
        flights: list[Flight] = []
        laws: dict[tuple[str, str, str], Law] = {}
        unknown = set()
        for i, plans in self.base.items():
            r = self.runs[i]
            old = self.resumed.get(i, {})
            for t in plans:
                st = r.stats.get(t.model)
                if st is None:
                    unknown.add(f"{t.model}\x1f{i}")
                    continue
                seen = r.spent.get(t.model, {})
                was = old.get(t.model, {})
                peers: dict[str, list[Any]] = {}
                for ln in self.models[t.model].lanes:
                    _add(peers, lanes.get(id(ln), {}))
                mine = wire.get((i, t.model), {})
                sent = {p: sum(n for _, _, n in v) for p, v in mine.items()}  # rows on the wire, not final yet
                follow = _follow_done(t, st, seen, was)
                t2 = left(t, st.done + was.get("answer", 0) + sent.get("answer", 0),
                          {p: v + sent.get(p, 0) for p, v in follow.items()}, seen, pools.get(t.model), peers)
                order = ["answer", *t.follow]
                for p in order:
                    law = laws[(t2.run, t2.model, p)] = _law(t2, p, (seen, pools.get(t.model) or {}, peers),
                                                             mine.get(p, []))
                    if law.n:  # (the unsent calls' mean too)
                        was_s, was_n = t2.latency_seen.get(p, [0.0, 0])
                        t2.latency_seen[p] = [law.mean * law.n, law.n]
                        tok = t2.out_tokens_seen if p == "answer" else t2.follow_seen.get(p)
                        if was_n and tok and tok[1]:  # a call long on the wire is writing long (at a pace)
                            tok = [tok[0] * law.mean / (was_s / was_n), tok[1]]  # (a new list: the base's kept)
                            if p == "answer":
                                t2.out_tokens_seen = tok
                            else:
                                t2.follow_seen[p] = tok
                for p, v in mine.items():
                    by_lane: dict[int, list[Any]] = {}
                    for ln, age, _n in v:
                        by_lane.setdefault(id(ln), [ln, []])[1].append(age)
                    after = _three()
                    for q in order[order.index(p) + 1:] if p in order else []:
                        f = laws[(t2.run, t2.model, q)].factors()
                        for k in (0, 1, 2):
                            if t2.follow[q][1 if k == 1 else 0]:
                                after[k] += laws[(t2.run, t2.model, q)].mean * f[k]
                    law = laws.get((t2.run, t2.model, p)) or Law(_latency(t2, p, 0.0))
                    flights += [Flight(ln, t2.run, t2.model, ages, law, after) for ln, ages in by_lane.values()]
                todo.append(t2)
        self.todo = todo
        self.blind = {t.model + "\x1f" + t.run for t in todo if _blind(t)} | unknown
        self.last = wall(todo, self.models, flights, laws) if todo else None
        if self.last is None and todo:  # nothing left anywhere
            self.last = Forecast(0.0, 0.0, "", "", {})
        self.at = now
        return self.last

    def on_wire(self, now: float) -> dict[tuple[int, str], dict[str, list[tuple[Any, float, int]]]]:
        """Per (run, model), per pass: its calls on the wire, (lane, age, samples) each (runner.lanes.WIRE:
        read from this thread without a lock: a dict's copy is atomic)."""
        ids = {id(r): i for i, r in enumerate(self.runs)}
        out: dict[tuple[int, str], dict[str, list[tuple[Any, float, int]]]] = {}
        every = {id(ln): ln for m in self.models.values() for ln in getattr(m, "lanes", ())}
        for ln in every.values():
            for t0, tag in getattr(ln, "wire", {}).copy().values():
                if tag is None or (i := ids.get(tag[0])) is None:
                    continue
                _, model, pass_, n = tag
                out.setdefault((i, model), {}).setdefault(pass_, []).append((ln, max(0.0, now - t0), n))
        return out

    def eta(self, i: int, model: str) -> tuple[float, float, float] | None:
        """(expected, least, most) seconds left for a model of run `i`; 0 once its every pass is done; None:
        no forecast (not made yet, a batched model, a pace not seen yet: `blind`)."""
        if self.last is None or f"{model}\x1f{i}" in self.blind or all(t.model != model for t in self.base.get(i, [])):
            return None
        e = self.last.models.get((str(i), model))
        if e is None:
            return (0.0, 0.0, 0.0)
        gone = time.monotonic() - self.at
        return (max(1.0, e[0] - gone), max(1.0, e[2] - gone), max(1.0, e[1] - gone))

    def step(self) -> None:
        self.prepare()
        self.refresh()

    async def run(self) -> None:
        """Until cancelled: prepare (in a thread) and refresh every EVERY_S. A failure costs the view its
        forecast (it falls back to the rate), never the run."""
        while True:
            t0 = time.monotonic()
            try:
                await asyncio.to_thread(self.step)
            except Exception as e:
                log.debug("live forecast failed: %s: %s", type(e).__name__, e)
            await asyncio.sleep(max(EVERY_S, SHARE_OF_CPU * (time.monotonic() - t0)))


def _law(t: Any, pass_: str, bases: tuple[dict[str, list[Any]], ...], flying: list[tuple[Any, float, int]]
         ) -> Law:
    """A pass's latency law: its mean the forecast's (`t.latency_seen`, else the prior) with its calls on the
    wire counted at their age plus what they have left (the finished calls alone are the short ones), its
    sigma from the nearest basis (`bases`: this run's tally, the sweep's, the lanes') with two rows."""
    sigma = None
    for b in bases:
        ln, ln2 = b.get(f"lnlat:{pass_}"), b.get(f"lnlat2:{pass_}")
        if ln and ln2 and ln[1] >= 2 and ln2[1] == ln[1]:
            mean = ln[0] / ln[1]
            sigma = math.sqrt(max(0.0, ln2[0] / ln2[1] - mean * mean) * ln[1] / (ln[1] - 1))
            break
    total, n = t.latency_seen.get(pass_, [0.0, 0])
    if not n:
        return Law(_latency(t, pass_, 0.0), sigma, 0.0)
    law = Law(total / n, sigma, n)
    if flying:
        rows = sum(k for _, _, k in flying)
        law = Law((total + sum(k * (a + law.residual(a)) for _, a, k in flying)) / (n + rows), sigma, n + rows)
    return law


def _blind(t: Any) -> bool:
    """A plan with work whose calls' latency is the prior's: nothing seen of it anywhere yet."""
    passes = (["answer"] if t.calls else []) + [p for p, v in t.follow.items() if v[1]]
    return any(not t.latency_seen.get(p, [0, 0])[1] for p in passes)


def _add(into: dict[str, list[Any]], by: dict[str, list[Any]], every_pass: bool = False) -> None:
    """Sum runner.history tallies (`every_pass`: the latencies of all passes under `latency:*` too)."""
    for k, v in list(by.items()):
        for key in (k, "latency:*") if every_pass and k.startswith("latency:") else (k,):
            acc = into.setdefault(key, [0, 0])
            acc[0] += v[0]
            acc[1] += v[1]


def _follow_done(t: Any, st: Any, seen: dict[str, list[Any]], was: dict[str, int]) -> dict[str, int]:
    """Final rows of each follow-up pass: resumed, plus this session's (every row written, less the
    first pass's: errors and cache hits have no per-pass count, so the rest goes to the passes by what
    each still expects)."""
    passes = list(t.follow)
    if not passes:
        return {}
    rows = max(0, st.ok + st.errors + st.skipped - st.done)
    ok = {p: (seen.get(p) or [0, 0])[1] for p in passes}
    rest = max(0, rows - sum(ok.values()))
    want = {p: max(0, t.follow[p][0] - ok[p] - was.get(p, 0)) for p in passes}
    total = sum(want.values())
    return {p: was.get(p, 0) + ok[p] + (round(rest * want[p] / total) if total else 0) for p in passes}
