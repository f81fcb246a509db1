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

    def seconds(self, k: int) -> tuple[float, str]:
        """How long this lane's work takes, and what binds it."""
        parts = [(self.busy_s[k] / max(1, self.concurrency), "concurrency")]
        if self.rpm:
            parts.append((self.calls[k] / (self.rpm / 60.0), "RPM"))
        if self.tpm:
            parts.append((self.tokens[k] / (self.tpm / 60.0), "TPM"))
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
            out: tuple[float, float]) -> None:
        m = models[target]
        paced = [ln for ln in m.lanes] or []
        for ln in paced:
            ep = ln.endpoint
            w = lanes.setdefault(id(ln), LaneWork(ln.name, ep.rpm, ep.tpm, ep.max_concurrency or 1))
            share = 1.0 / len(paced)
            for k in (0, 1):
                if not calls[k]:
                    continue
                per_out = out[k] / calls[k]
                w.calls[k] += calls[k] * share
                w.tokens[k] += (tin / max(calls[1], 1) * calls[k] + out[k]) * share
                w.busy_s[k] += calls[k] * share * _latency(plan, pass_, per_out)

    for t in todo:
        if t.calls:
            put(t.model, t, "answer", (t.calls, t.calls), t.input_tokens,
                (t.expected_output_tokens(), t.max_output_tokens))
        for pass_, (n, most, tin, max_out) in t.follow.items():
            target = t.follow_via.get(pass_) or t.model
            put(target, t, pass_, (n, most), tin, (t.follow_expected_output_tokens(pass_), max_out))
    if not lanes:
        return None
    exp = max((w.seconds(0) + (w.name,) for w in lanes.values()), key=lambda x: x[0])
    most = max(w.seconds(1)[0] for w in lanes.values())
    return Forecast(exp[0], max(most, exp[0]), exp[2], exp[1])
