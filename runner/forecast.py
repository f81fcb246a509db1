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


@dataclass
class LaneWork:
    name: str
    rpm: float | None
    tpm: float | None
    concurrency: int
    calls: list[float] = field(default_factory=lambda: [0.0, 0.0])
    tokens: list[float] = field(default_factory=lambda: [0.0, 0.0])
    busy_s: list[float] = field(default_factory=lambda: [0.0, 0.0])
    """[expected, most] of each: calls, tokens (in + out), call-seconds."""
    tail_s: list[float] = field(default_factory=lambda: [0.0, 0.0])
    """The longest typical call among its work: a lane paced by RPM or TPM sends its last request when its
    budget allows, and that request still takes this long."""
    chain_s: list[float] = field(default_factory=lambda: [0.0, 0.0])
    """Its longest typical chain: an answer still to come, then the critique quoting it (the lane's end
    is no sooner, nor before its last calls in flight end: `spread`)."""
    parts: dict[tuple[str, str], list[list[float]]] = field(default_factory=dict)
    """Per (run, model) whose calls it carries: [[calls, tokens, call-seconds, its tail] expected, [...] most]."""

    def ends(self, k: int) -> dict[tuple[str, str], float]:
        """When each (run, model) on this lane has its work done, the lane taking its models' calls in
        turn (processor sharing on what binds it): a model with w of the binding work, of W in all, ends
        after sum(min(w_i, w)) / W of the lane's time (the model with the most ends with the lane), and
        no sooner than its own longest chain and its last calls (`spread`)."""
        total, bound = self.seconds(k)
        j = {"RPM": 0, "TPM": 1}.get(bound, 2)
        work = {key: p[k][j] for key, p in self.parts.items() if p[k][2] > 0}
        whole = sum(work.values()) or 1.0
        return {key: max(p[k][3], spread(p[k][2], p[k][0], self.concurrency),
                         total * sum(min(v, w) for v in work.values()) / whole)
                for key, w in work.items() if (p := self.parts[key])}

    def seconds(self, k: int) -> tuple[float, str]:
        """How long this lane's work takes, and what binds it (its longest chain: an answer still to
        come, then the critique that quotes it, cannot overlap)."""
        parts = [(self.busy_s[k] / max(1, self.concurrency), "concurrency"), (self.chain_s[k], "longest chain"),
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
    models: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    """Per (run, model) with work left: (expected, most) seconds until its last call ends."""


def _latency(plan: Any, pass_: str, out_per_call: float) -> float:
    s, n = plan.latency_seen.get(pass_, [0.0, 0])
    return s / n if n else LATENCY_S + out_per_call / OUT_TOKENS_PER_S


def wall(todo: list[Any], models: dict[str, Any]) -> Forecast | None:
    """The sweep's wall time from its remaining plans (runner.remaining.Plan), None with nothing to do."""
    lanes: dict[int, LaneWork] = {}

    def put(target: str, plan: Any, pass_: str, calls: tuple[float, float], tin: float,
            out: tuple[float, float], requests: tuple[float, float], before: list[float]) -> list[float]:
        """`calls`: rows (samples), `requests`: what they go out as (fewer where `n` carries samples);
        `before`: [expected, most] seconds of the chain's earlier passes still to come (a critique starts
        once its answer ended). Returns the chain's seconds with this pass."""
        m = models[target]
        paced = [ln for ln in m.lanes] or []
        chain = list(before)
        for k in (0, 1):
            if calls[k]:  # a row's latency is its request's (samples arrive together)
                chain[k] += _latency(plan, pass_, out[k] / calls[k])
        for ln in paced:
            ep = ln.endpoint
            w = lanes.setdefault(id(ln), LaneWork(ln.name, ep.rpm, ep.tpm, ep.max_concurrency or 1))
            share = 1.0 / len(paced)
            for k in (0, 1):
                if not calls[k]:
                    continue
                lat = chain[k] - before[k]
                got = (requests[k] * share, (tin / max(calls[1], 1) * calls[k] + out[k]) * share,
                       requests[k] * share * lat)
                w.calls[k] += got[0]
                w.tokens[k] += got[1]
                w.busy_s[k] += got[2]
                w.tail_s[k] = max(w.tail_s[k], lat)
                w.chain_s[k] = max(w.chain_s[k], chain[k])
                mine = w.parts.setdefault((plan.run, plan.model), [[0.0] * 4, [0.0] * 4])[k]
                for i in range(3):
                    mine[i] += got[i]
                mine[3] = max(mine[3], chain[k])
        return chain

    for t in todo:
        chain = [0.0, 0.0]
        if t.calls:
            chain = put(t.model, t, "answer", (t.calls, t.calls), t.input_tokens,
                        (t.expected_output_tokens(), t.max_output_tokens), (t.requests, t.requests), chain)
        for pass_, (n, most, tin, max_out) in t.follow.items():
            target = t.follow_via.get(pass_) or t.model
            chain = put(target, t, pass_, (n, most), tin, (t.follow_expected_output_tokens(pass_), max_out),
                        (n, most), chain)
    if not lanes:
        return None
    exp = max((w.seconds(0) + (w.name,) for w in lanes.values()), key=lambda x: x[0])
    most = max(w.seconds(1)[0] for w in lanes.values())
    ends: dict[tuple[str, str], list[float]] = {}
    for w in lanes.values():
        for k in (0, 1):
            for key, t in w.ends(k).items():
                e = ends.setdefault(key, [0.0, 0.0])
                e[k] = max(e[k], t)
    return Forecast(exp[0], max(most, exp[0]), exp[2], exp[1], {key: (e, max(e, m)) for key, (e, m) in ends.items()})


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

    def refresh(self) -> Forecast | None:
        """The forecast of what is left now (inputs kept in `todo`)."""
        todo = []
        pools: dict[str, dict[str, list[Any]]] = {}  # per model: its tally over the session's runs
        for r in self.runs:
            for m, by in list(r.spent.items()):
                _add(pools.setdefault(m, {}), by, True)
        lanes: dict[int, dict[str, list[Any]]] = {}  # per lane: its models' tallies
        for m, by in pools.items():
            for ln in getattr(self.models.get(m), "lanes", ()):
                _add(lanes.setdefault(id(ln), {}), by)
        for i, plans in self.base.items():
            r = self.runs[i]
            old = self.resumed.get(i, {})
            for t in plans:
                st = r.stats.get(t.model)
                if st is None:
                    continue
                seen = r.spent.get(t.model, {})
                was = old.get(t.model, {})
                peers: dict[str, list[Any]] = {}
                for ln in self.models[t.model].lanes:
                    _add(peers, lanes.get(id(ln), {}))
                todo.append(left(t, st.done + was.get("answer", 0), _follow_done(t, st, seen, was), seen,
                                 pools.get(t.model), peers))
        self.todo = todo
        self.blind = {t.model + "\x1f" + t.run for t in todo if _blind(t)}
        self.last = wall(todo, self.models) if todo else None
        if self.last is None and todo:  # nothing left anywhere
            self.last = Forecast(0.0, 0.0, "", "", {})
        self.at = time.monotonic()
        return self.last

    def eta(self, i: int, model: str) -> tuple[float, float] | None:
        """(expected, most) seconds left for a model of run `i`; 0 once its every pass is done; None:
        no forecast (not made yet, a batched model, a pace not seen yet: `blind`)."""
        if self.last is None or f"{model}\x1f{i}" in self.blind or all(t.model != model for t in self.base.get(i, [])):
            return None
        e = self.last.models.get((str(i), model))
        if e is None:
            return (0.0, 0.0)
        gone = time.monotonic() - self.at
        return (max(1.0, e[0] - gone), max(1.0, e[1] - gone))

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
