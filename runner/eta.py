"""The live ETA (`Live`): runner.forecast's forecast on the work left. The run's whole plan, made once (in a thread),
less the final rows each pass has so far (read from the scheduler's counters), at what the calls spent and
lasted so far: the model's in this run, else in the sweep's other runs, its history, its other passes, its
lanes' other models (a pass's first rows weighed with the next basis: one heavy-tailed call is no mean);
recomputed every `EVERY_S` in a thread, never per row. A model whose pace nothing has shown yet keeps the
view's rate (the prior is the dry run's guess, 4x off on a first night). A model's ETA is when its lanes
reach the end of its share of their work, shared as the lanes share it (each model's calls in turn:
processor sharing), so the latest model's ETA is the sweep's.

The forecast itself (a lane's end from its work, calls on the wire included) is runner.forecast.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from runner.forecast import (
    Flight,
    Forecast,
    Law,
    call_latency,
    three,
    wall,
)
from runner.history import LATMAX, at_n, latency_sigma, token_var

log = logging.getLogger(__name__)

EVERY_S = 2.0
"""The live ETA is recomputed this often, in a thread (~5 ms for 90 models x runs: nothing on the hot path)."""
SHARE_OF_CPU = 50
"""... or 50 times what one took, whichever is longer: a sweep of thousands of models spends at most ~2% of
a core on its ETA."""
SHRINK = 8
"""Rows below which a pass's own mean is weighed with the next basis (the sweep's other runs, then history)."""

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
        token_var={p: v for p in ["answer", *base.follow] if (v := _spread(p, seen, pool, base.token_var)) is not None},
    )


def _spread(pass_: str, *bases: dict[str, Any]) -> float | None:
    """A sample's output-token variance of `pass_` from the nearest basis that knows it (a tally, then the
    base plan's, from its history)."""
    for b in bases[:-1]:
        if (v := token_var(b, pass_)) is not None:
            return v
    return bases[-1].get(pass_)


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
        from runner.rowindex import by_pass

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
                self.resumed[i] = by_pass(r.done)  # (from the index's codes: no identity re-read)

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
                pool = at_n(pools.get(t.model) or {}, t.per_request("answer"))  # (the sweep's runs: as many samples a call)
                t2 = left(t, st.done + was.get("answer", 0) + sent.get("answer", 0),
                          {p: v + sent.get(p, 0) for p, v in follow.items()}, seen, pool, peers)
                order = ["answer", *t.follow]
                for p in order:
                    law = laws[(t2.run, t2.model, p)] = _law(t2, p, (seen, pool, peers),
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
                    after = three()
                    for q in order[order.index(p) + 1:] if p in order else []:
                        f = laws[(t2.run, t2.model, q)].factors()
                        for k in (0, 1, 2):
                            if t2.follow[q][1 if k == 1 else 0]:
                                after[k] += laws[(t2.run, t2.model, q)].mean * f[k]
                    law = laws.get((t2.run, t2.model, p)) or Law(call_latency(t2, p, 0.0))
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
    sigma = next((v for b in bases if (v := latency_sigma(b, pass_)) is not None), None)
    total, n = t.latency_seen.get(pass_, [0.0, 0])
    if not n:
        return Law(call_latency(t, pass_, 0.0), sigma, 0.0)
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
            acc[0] = max(acc[0], v[0]) if key.startswith(LATMAX) else acc[0] + v[0]
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
