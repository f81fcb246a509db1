"""The night's wall time, forecast from the work left on each lane (one endpoint + key, shared by the
models on it): a lane ends no sooner than its requests at its RPM, its tokens at its TPM, or its calls'
latency spread over its concurrency; the sweep ends with its slowest lane.

Each model's calls, every pass (runner.remaining), go to its lanes evenly (the pool spreads them), a
judge's to the judge's; a call lasts what the model's calls of that pass lasted in the run so far
(`latency_s`), else in its earlier runs (runner.history), else a prior (a second plus its output at 50 tokens/s). The range: output at each
model's expected length, and every call writing its whole limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runner.batch.plan import LATENCY_S, OUT_TOKENS_PER_S
from runner.budgets.local import TPM_SHARE


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

    def seconds(self, k: int) -> tuple[float, str]:
        """How long this lane's work takes, and what binds it."""
        parts = [(self.busy_s[k] / max(1, self.concurrency), "concurrency")]
        if self.rpm:
            parts.append((self.calls[k] / (self.rpm / 60.0) + self.tail_s[k], "RPM"))
        if self.tpm:  # (paced at TPM_SHARE of the key: runner.budgets.local)
            parts.append((self.tokens[k] / (self.tpm * TPM_SHARE / 60.0) + self.tail_s[k], "TPM"))
        return max(parts)


@dataclass
class Forecast:
    expected_s: float
    most_s: float
    lane: str
    bound: str


def _latency(plan: Any, pass_: str, out_per_call: float) -> float:
    s, n = plan.latency_seen.get(pass_, [0.0, 0])
    return s / n if n else LATENCY_S + out_per_call / OUT_TOKENS_PER_S


def wall(todo: list[Any], models: dict[str, Any]) -> Forecast | None:
    """The sweep's wall time from its remaining plans (runner.remaining.Plan), None with nothing to do."""
    lanes: dict[int, LaneWork] = {}

    def put(target: str, plan: Any, pass_: str, calls: tuple[float, float], tin: float,
            out: tuple[float, float], requests: tuple[float, float]) -> None:
        """`calls`: rows (samples), `requests`: what they go out as (fewer where `n` carries samples)."""
        m = models[target]
        paced = [ln for ln in m.lanes] or []
        for ln in paced:
            ep = ln.endpoint
            w = lanes.setdefault(id(ln), LaneWork(ln.name, ep.rpm, ep.tpm, ep.max_concurrency or 1))
            share = 1.0 / len(paced)
            for k in (0, 1):
                if not calls[k]:
                    continue
                per_out = out[k] / calls[k]  # a row's latency is its request's (samples arrive together)
                w.calls[k] += requests[k] * share
                w.tokens[k] += (tin / max(calls[1], 1) * calls[k] + out[k]) * share
                lat = _latency(plan, pass_, per_out)
                w.busy_s[k] += requests[k] * share * lat
                w.tail_s[k] = max(w.tail_s[k], lat)

    for t in todo:
        if t.calls:
            put(t.model, t, "answer", (t.calls, t.calls), t.input_tokens,
                (t.expected_output_tokens(), t.max_output_tokens), (t.requests, t.requests))
        for pass_, (n, most, tin, max_out) in t.follow.items():
            target = t.follow_via.get(pass_) or t.model
            put(target, t, pass_, (n, most), tin, (t.follow_expected_output_tokens(pass_), max_out), (n, most))
    if not lanes:
        return None
    exp = max((w.seconds(0) + (w.name,) for w in lanes.values()), key=lambda x: x[0])
    most = max(w.seconds(1)[0] for w in lanes.values())
    return Forecast(exp[0], max(most, exp[0]), exp[2], exp[1])
