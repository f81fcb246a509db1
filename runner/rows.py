"""Result rows as the scheduler and the batcher write them: one plain dict per (model, item, sample,
pass), a success (text), an error (with its kind) or a skip, never anything in between."""

from __future__ import annotations

import time
from typing import Any

from core.types import Completion, Request, Row, text_of


def answer_row(
    req: Request,
    s: int,
    key: str,
    text: str | None,
    usage: dict[str, Any],
    cost: float | None,
    latency: float,
    attempts: int,
    *,
    cached: bool,
    finish: str | None,
    lane: str | None,
) -> Row:
    row = {
        "model": req.model,
        "suite": req.suite,
        "item": req.item,
        "sample": s,
        "pass": req.pass_,
        "key": key,
        "text": text,
        "usage": usage,
        "cost_usd": cost,
        "latency_s": round(latency, 4),
        "attempts": attempts,
        "cached": cached,
        "error": None,
        "via": req.via,
        "lane": lane,
        "finish_reason": finish,
        "t": time.time(),
    }
    if req.pass_ != "answer":  # a follow-up's prompt quotes an answer and the suite's template as sent
        row["prompt"] = [{"role": m.role, "text": text_of(m.content)} for m in req.messages]
    return row


def hit_row(req: Request, s: int, key: str, v: dict[str, Any]) -> Row:
    """A sample answered from the cache (value as cache.store keeps it): no call, no latency."""
    row = answer_row(
        req,
        s,
        key,
        v["text"],
        v.get("usage") or {},
        v.get("cost_usd"),
        0.0,
        0,
        cached=True,
        finish=v.get("finish_reason"),
        lane=None,
    )
    if v.get("tool_calls") is not None:
        row["tool_calls"] = v["tool_calls"]
    return row


def error_row(
    req: Request,
    s: int,
    key: str,
    msg: str,
    kind: str,
    attempts: int = 0,
    lane: str | None = None,
    latency: float = 0.0,
) -> Row:
    """`kind`: transient, fatal, quota, internal (retried on resume) or skipped (a reason, not a failure).
    `latency`: how long the last attempt waited (a timed-out call: its timeout, not 0)."""
    r = answer_row(
        req,
        s,
        key,
        None,
        {"input_tokens": None, "output_tokens": None},
        None,
        latency,
        attempts,
        cached=False,
        finish=None,
        lane=lane,
    )
    r["error"], r["error_kind"] = msg, kind
    return r


def contiguous(samples: list[int]) -> list[list[int]]:
    """Runs of consecutive sample indices (each run can go as one call with `n`)."""
    groups: list[list[int]] = []
    for s in samples:
        if groups and groups[-1][-1] == s - 1:
            groups[-1].append(s)
        else:
            groups.append([s])
    return groups


def split_tokens(total: int | None, weights: list[int]) -> list[int | None]:
    """Split a call's token count over its samples (integers that add up to the total)."""
    if total is None:
        return [None] * len(weights)
    if len(weights) == 1:
        return [total]
    w = sum(weights)
    parts = [total * x // w for x in weights]
    parts[0] += total - sum(parts)
    return parts


def total_tokens(comp: Completion) -> int | None:
    if comp.input_tokens is None or comp.output_tokens is None:
        return None
    return comp.input_tokens + comp.output_tokens


EXHAUSTED = ("length", "max_tokens", "max_output_tokens")
"""Finish reasons of an answer cut by its token limit (chat, Anthropic, Responses)."""


def billed(comp: Completion, texts: list[str | None]) -> list[dict[str, Any]]:
    """Each sample's usage as the provider billed it: the call's counts split over its samples
    (input evenly, output by text length). Cached input and cache writes are parts of input_tokens,
    reasoning a part of output_tokens; None where the provider did not say. One sample (the usual call)
    takes the call's counts as they are: nothing to split (~0.3 us instead of ~1.6, once a call)."""
    n = len(texts)
    if n == 1:
        return [{"input_tokens": comp.input_tokens, "output_tokens": comp.output_tokens,
                 "cached_input_tokens": comp.cached_input_tokens, "cache_write_tokens": comp.cache_write_tokens,
                 "reasoning_tokens": comp.reasoning_tokens}]
    even, w = [1] * n, [len(t or "") + 1 for t in texts]
    ins, outs = split_tokens(comp.input_tokens, even), split_tokens(comp.output_tokens, w)
    cached, writes = split_tokens(comp.cached_input_tokens, even), split_tokens(comp.cache_write_tokens, even)
    reasoning = split_tokens(comp.reasoning_tokens, w)
    return [
        {"input_tokens": ins[i], "output_tokens": outs[i], "cached_input_tokens": cached[i],
         "cache_write_tokens": writes[i], "reasoning_tokens": reasoning[i]}
        for i in range(n)
    ]


def exhausted(text: str | None, finish: str | None, reasons: bool) -> bool:
    """A reasoning model that spent its whole budget thinking: no answer, cut by the limit. Its own
    class, never a wrong answer, and not retried (the same budget gives the same outcome)."""
    return reasons and finish in EXHAUSTED and not (text or "").strip()


def exhausted_row(req: Request, s: int, key: str, usage: dict[str, Any], cost: float | None,
                  attempts: int, lane: str | None, finish: str | None) -> Row:
    r = usage.get("reasoning_tokens")
    spent = f" ({r:,} of {usage['output_tokens']:,} output tokens reasoning)" if r and usage.get("output_tokens") else ""
    row = error_row(
        req, s, key,
        f"reasoning exhausted the token limit before any answer{spent} (finish_reason={finish}); "
        "raise the model's thinking_budget or reasoning_effort",
        "reasoning_exhausted", attempts, lane,
    )
    row["usage"], row["cost_usd"], row["finish_reason"] = usage, cost, finish
    return row
