"""Which models send their calls as batches (`--batch off|on|auto`), and what live and batch cost in
money and wall time: the numbers `--dry-run` prints and `auto` decides on.

Live wall time is a rough model, not a promise: per lane, calls per second is the smallest of its
RPM share, its TPM share and concurrency / per-call latency (1 s + output tokens at 50 tokens/s,
output taken as half of max_tokens). Batches finish within 24 h, typically in about an hour.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from providers.batches import BATCH_APIS
from runner.lanes import Lane
from runner.pool import ModelEntry, estimate_tokens

log = logging.getLogger("evalsweep")

LATENCY_S = 1.0
OUT_TOKENS_PER_S = 50.0
BATCH_WALL = "≤24h (~1h typical)"


BATCH_HOSTS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}
"""The hosts whose batch APIs we implement, by endpoint kind. Other servers of kind openai (DeepSeek,
xAI, vLLM, Together...) speak the chat API but have no batch API: they batch only when their config
says so (`batch = true`, or `batch_api = true` for a proxy or Azure that implements OpenAI's)."""


def has_batch_api(ep: Any) -> bool:
    """Whether an endpoint's provider takes our batches: a kind we implement, on its provider's own host
    (Anthropic's default base URL included) or declared in the config; never with `batch = false`."""
    if ep.kind not in BATCH_APIS or ep.batch is False:
        return False
    if ep.batch or ep.batch_api:
        return True
    host = urlsplit(ep.base_url).hostname if ep.base_url else BATCH_HOSTS.get(ep.kind)
    return host == BATCH_HOSTS.get(ep.kind)


def batch_lanes(m: ModelEntry) -> list[Lane]:
    """The model's lanes that can take batches (one provider kind: a file goes to one API). A model
    served only on the Responses API batches as `/v1/responses` lines (providers.batch_openai)."""
    ok = [ln for ln in m.lanes if has_batch_api(ln.endpoint)]
    return [ln for ln in ok if ln.endpoint.kind == ok[0].endpoint.kind] if ok else []


def live_rate(m: ModelEntry, tok_in: float, max_out: float) -> float:
    """Calls per second the model's lanes sustain live."""
    latency = LATENCY_S + 0.5 * max_out / OUT_TOKENS_PER_S
    rate = 0.0
    for lane in m.lanes:
        ep = lane.endpoint
        r = ep.max_concurrency / latency
        if ep.rpm:
            r = min(r, ep.rpm / 60.0)
        if ep.tpm:
            r = min(r, ep.tpm / 60.0 / max(1.0, tok_in + max_out))
        rate += r
    return rate


def live_seconds(m: ModelEntry, calls: int, tok_in: float, max_out: float) -> float:
    rate = live_rate(m, tok_in, max_out)
    return calls / rate if rate > 0 else float("inf")


def batch_discount(m: ModelEntry) -> float | None:
    """The saving on batch calls, or None when none of the model's endpoints takes batches."""
    lanes = batch_lanes(m)
    return lanes[0].endpoint.batch_discount if lanes else None


def fmt_duration(s: float) -> str:
    if s == float("inf"):
        return "?"
    return f"{s / 3600:.1f}h" if s >= 3600 else f"{s / 60:.0f}m" if s >= 60 else f"{s:.0f}s"


def sample_tokens(run: Any, k: int = 64) -> tuple[float, float]:
    """Mean estimated input tokens and max_tokens per call, from the first `k` requests."""
    tin = tout = n = 0
    for r in itertools.islice(run.suite.build(run.spec), k):
        mx = r.decoding.max_tokens or 256
        tin += estimate_tokens(r) - mx
        tout += mx
        n += 1
    return (tin / n, tout / n) if n else (0.0, 0.0)


def decide(
    m: ModelEntry, mode: str, deadline_s: float, prefer: str, live_s: float | Callable[[], float]
) -> str | None:
    """Why `m` should send batches under these flags, or None for live calls. `live_s`: the estimated
    live duration (or how to compute it: only `auto` needs it)."""
    lanes = batch_lanes(m)
    if not lanes:
        return None
    if any(ln.endpoint.batch for ln in lanes):
        return "batch = true in the config"
    if mode == "on":
        return "--batch on"
    if mode == "auto" and prefer == "cost":
        return "--batch auto --prefer cost"
    if mode == "auto":
        est = live_s() if callable(live_s) else live_s
        if est > deadline_s:
            return f"live would take ~{fmt_duration(est)} > deadline {fmt_duration(deadline_s)}"
    return None


def choose(
    models: dict[str, ModelEntry],
    runs: list[Any],
    mode: str,
    deadline_s: float,
    prefer: str,
    pinned: set[str] = frozenset(),  # type: ignore[assignment]
) -> dict[str, str]:
    """Set `ModelEntry.batch` for every model; returns why, for the models that batch."""
    work = _workload(runs) if mode == "auto" and prefer != "cost" else {}
    why: dict[str, str] = {}
    for name, m in models.items():
        m.batch = False
        if name in pinned:
            if batch_lanes(m):
                why[name] = "batches in flight in the run directory"
            else:
                log.warning(
                    "%s has batches in flight but no batch endpoint now: they are not collected", name
                )
        else:
            calls, tin, tout = work.get(name, [0, 0.0, 0.0])
            reason = decide(m, mode, deadline_s, prefer, partial(live_seconds, m, int(calls), tin, tout))
            if reason:
                why[name] = reason
        m.batch = name in why
    for name, reason in why.items():
        log.info("%s: batch mode (%s)", name, reason)
    return why


def _workload(runs: list[Any]) -> dict[str, list[float]]:
    """Per called model: first-pass calls (a judge: at most one per answer), mean input and max tokens."""
    work: dict[str, list[float]] = {}
    for r in runs:
        tin, tout = sample_tokens(r)
        answers = sum(st.total for st in r.stats.values())
        judge = r.spec.opt("judge")
        for name in r.models + ([judge] if judge else []):
            w = work.setdefault(name, [0, 0.0, 0.0])
            w[0] += r.stats[name].total if name in r.stats else answers
            w[1], w[2] = max(w[1], tin), max(w[2], tout)
    return work
