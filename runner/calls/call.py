"""One call of one model for a group of samples: the circuit breaker, the lane (pacing, retries), the
provider, and the rows the answer makes, each answer cached as it is made. Never raises for what the
provider or the input did: every sample of the group comes back as exactly one row (an answer, an
error with its kind, or a skip)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from cache.store import AsyncCache
from core.secrets import redact_url
from core.types import Request, Row
from providers.base import Completion, ProviderError
from runner.budgets.tokens import TPM_SHARE
from runner.calls import learned
from runner.calls.halt import Halted
from runner.calls.spend import lost, paid
from runner.lanes import Lane
from runner.pool import ModelEntry, note_ignored_n, pick_lane
from runner.rows import answer_row, billed, error_row, exhausted, exhausted_row, total_tokens

log = logging.getLogger("evalsweep")


def refused_key(lane: Lane, e: ProviderError, msg: str) -> str:
    """A refused key (HTTP 401/403) named by its variable and the endpoint it went to, never its value:
    with several keys and endpoints, which one to fix."""
    if e.status not in (401, 403):
        return msg
    env = lane.name.split("/", 1)[1] if "/" in lane.name else None
    who = f"the key in ${env}" if env else "no key (the endpoint sets no api_key_env)"
    ep = lane.endpoint
    return f"{msg}: {who}, sent to endpoint {ep.name!r} ({redact_url(ep.base_url or ep.kind)})"


@dataclass
class Breaker:
    """Per called model: after `threshold` consecutive final failures, stop calling it."""

    threshold: int
    failures: int = 0
    last_error: str = ""
    unread: dict[str, str] = field(default_factory=dict)
    """400s no rule could read, by their normalised words: the item each first came from."""

    @property
    def open(self) -> bool:
        return self.failures >= self.threshold

    def reason(self, name: str) -> str:
        return (
            f"skipped: circuit breaker open for {name} after {self.failures} consecutive failures "
            f"(last: {self.last_error})"
        )


class _BreakerOpen(ProviderError):
    """Raised inside a lane when the breaker opened while the call was queued: not a failure."""


class _Regroup(Exception):
    """Raised inside a lane by a call formed with `n` > 1 for a model learnt meanwhile to take one sample a
    call: it is not sent as formed, but re-formed as single calls (a refused `n` costs one request, not
    one per call already queued)."""


ITEM_SPECIFIC = re.compile(r"context|too long|too many tokens|maximum .{0,20}length|content.policy|"
                           r"content.filter|safety|flagged|image|file|size|pixel|auth|api.?key|credential|"
                           r"permission|db.?connection", re.I)
"""A 400 about the item itself (its length, its content, its image), or about the key rather than the
model (a proxy's authentication): not the model refusing every request."""


def fit_tpm(group: list[int], prompt: int, per_sample: int, tpm: float | None) -> list[list[int]]:
    """`group` (consecutive samples, one `n` call) in the fewest calls whose worst case, `prompt` + k x
    `per_sample` tokens, fits the key's TPM bucket as the lane paces it: a key admits a request on that
    worst case, so 8 x 4,096 on a 20k key is never admitted whole (refused forever, or sent on a full
    bucket and overdrawn). Sizes balanced, order kept; a single sample over the bucket is left to the
    caller (what it says of a prompt over the limit)."""
    if not tpm or len(group) <= 1:
        return [group]
    k = max(1, int((tpm * TPM_SHARE - prompt) // max(1, per_sample)))
    if k >= len(group):
        return [group]
    calls = -(-len(group) // k)
    base, extra = divmod(len(group), calls)
    out, i = [], 0
    for c in range(calls):
        size = base + (c < extra)
        out.append(group[i : i + size])
        i += size
    return out


def same_words(msg: str) -> str:
    """A 400's words with what changes from request to request masked (numbers, ids, quoted values)."""
    return re.sub(r"\d+", "#", re.sub(r"(['\"`])[^'\"`]{0,80}\1", "'_'", msg)).strip()[:200]


def send(
    req: Request,
    m: ModelEntry,
    group: list[int],
    keys: dict[int, str],
    breaker: Breaker,
    cache: AsyncCache | None,
) -> Coroutine[Any, Any, list[Row]]:
    """Samples `group` of `req` in one call to `m` (`n` = len(group)): one row each, never raised. The
    coroutine to await, not one of its own: a frame less on every call's way out and back."""
    if m.spend is not None:  # a spend ceiling: reserved before the call is sent (runner.calls.spend)
        return paid(m, req, group, keys, lambda: _send(req, m, group, keys, breaker, cache))
    return _send(req, m, group, keys, breaker, cache)


async def _send(
    req: Request, m: ModelEntry, group: list[int], keys: dict[int, str], breaker: Breaker, cache: AsyncCache | None
) -> list[Row]:
    if breaker.open:
        return [error_row(req, s, keys[s], breaker.reason(m.cfg.name), "skipped") for s in group]
    if len(group) > 1 and not m.supports_n:  # formed before the model was learnt to take one sample a call
        return [r for g in await asyncio.gather(*(send(req, m, [s], keys, breaker, cache) for s in group))
                for r in g]
    lane = pick_lane(m)
    if lane is None:  # every key of this model is out of quota: error rows, and the breaker opens
        breaker.failures = max(breaker.failures, breaker.threshold)
        breaker.last_error = m.lanes[0].stopped or "out of quota"
        return [error_row(req, s, keys[s], breaker.last_error, "quota") for s in group]
    if len(group) > 1 and lane.tpm is not None:  # an `n` call over the key's bucket: the fewest calls that fit
        est1, charge1 = m.usage.cost(req)
        budget = req.decoding.max_tokens or 256
        prompt = charge1 - budget
        limit = m.shape.limit(budget) if m.shape is not None else budget  # (reasoning budget included)
        parts = fit_tpm(group, prompt, max(limit or budget, est1 - prompt), lane.tpm)
        if len(parts) > 1:
            return [r for g in await asyncio.gather(*(send(req, m, p, keys, breaker, cache) for p in parts))
                    for r in g]
    n, start = len(group), group[0]
    est, charge = m.usage.cost(req) if lane.tpm is not None else (0, 0)  # what its answers so far used
    est, charge = est * n, charge * n
    tpm = lane.endpoint.tpm
    if tpm is not None and est // n > tpm:  # would wait forever for a minute that never comes
        msg = f"prompt needs ~{est // n} tokens, endpoint tpm is {tpm:g}"
        return [error_row(req, s, keys[s], msg, "fatal", 0, lane.name) for s in group]
    if m.context_window is not None:  # refused before it is paid for (the provider would 400)
        need = m.estimate_tokens(req) + (m.shape.extra if m.shape is not None else 0)
        if need > m.context_window:
            msg = (f"prompt + answer budget need ~{need:,} tokens, over {m.cfg.name}'s context window "
                   f"of {m.context_window:,}")
            return [error_row(req, s, keys[s], msg, "context_exceeded", 0, lane.name) for s in group]
    provider = lane.provider
    shaped = [0]  # the version of the model's learned request shape this call went out in

    async def attempt() -> Completion:
        if breaker.open:  # opened while this call waited for the lane
            raise _BreakerOpen(breaker.reason(m.cfg.name))
        if n > 1 and not m.supports_n:  # learnt while this call waited: not sent as formed
            raise _Regroup()
        shaped[0] = learned.version(m, lane)
        return await provider.complete(req, m.model_id, n, start, lane.api_key, learned.params(m, lane),
                                       learned.shape(m, lane))

    try:
        comp, attempts, latency = await lane.call(attempt, est, m.usage.work(req.pass_, n), charge)
    except (_BreakerOpen, Halted) as e:  # not sent: the breaker opened, or the run is stopping
        return [error_row(req, s, keys[s], str(e), "skipped") for s in group]
    except _Regroup:
        return [r for g in await asyncio.gather(*(send(req, m, [s], keys, breaker, cache) for s in group))
                for r in g]
    except ProviderError as e:
        if e.quota:  # the lane stopped itself: the model's other keys take its calls
            return await send(req, m, group, keys, breaker, cache)
        if learned.retry(m, e, shaped[0], n, lane):  # the provider named what the model refuses: sent again as it says
            groups = [group] if m.supports_n or n == 1 else [[s] for s in group]
            return [r for g in await asyncio.gather(*(send(req, m, g, keys, breaker, cache) for g in groups))
                    for r in g]
        breaker.failures += 1
        msg = refused_key(lane, e, lane.scrub(str(e)))
        if e.status in (400, 422) and e.kind == "fatal" and not ITEM_SPECIFIC.search(msg):
            words = same_words(msg)  # a refusal no rule read: the same on a second item stops the model
            first = breaker.unread.setdefault(words, req.item)
            if first != req.item:
                e.refuses_model = True  # runner.calls.gate stops it: its calls not sent, rows model_refused
                log.warning("%s: the provider refused two items with the same words no rule could read; "
                            "stopping the model: %s", m.cfg.name, msg[:300])
        breaker.last_error = msg[:200]
        if breaker.failures == breaker.threshold:
            log.warning("circuit breaker opened for %s: %s", m.cfg.name, breaker.last_error)
        attempts = getattr(e, "attempts", 1)
        kind = e.kind
        if kind == "model_refused" and e.status in (401, 403) and len(m.lanes) > 1:
            kind = "key_refused"  # this key, not the model: its other keys may be let in (runner.calls.gate)
        took = getattr(e, "latency_s", 0.0)
        return [error_row(req, s, keys[s], msg, kind, attempts, lane.name, took) for s in group]
    except asyncio.CancelledError:
        raise
    except Exception as e:  # bad input (missing image file...) becomes an error row, not a crash
        msg = lane.scrub(f"{type(e).__name__}: {e}")
        return [error_row(req, s, keys[s], msg, "fatal", 1, lane.name) for s in group]
    breaker.failures = 0
    learned.accepted(m, lane)  # (rules being re-checked that this call did without are forgotten)
    lane.reconcile(est, total_tokens(comp), charge)
    m.usage.observe(req.pass_, n, comp.output_tokens, latency)
    try:
        if lane.api_key:  # a server echoing the key in an answer: never into rows or the cache
            comp.texts = [t if t is None else lane.scrub(t) for t in comp.texts]
        got = (
            len(comp.texts)
            if n == 1
            else sum(
                t is not None or r is not None
                for t, r in zip(comp.texts, comp.finish_reasons, strict=False)
            )
        )
        if got < n:  # the server ignored `n`: keep what came back, send the rest one by one
            return await _refill(req, m, lane, comp, group, keys, attempts, latency, breaker, cache)
        return rows_from(req, m, comp, group, keys, attempts, latency, lane.name, cache)
    except asyncio.CancelledError:
        raise
    except Exception as e:  # a provider that slipped an ill-typed completion past its parse
        msg = lane.scrub(f"malformed completion: {type(e).__name__}: {e}")
        return [error_row(req, s, keys[s], msg, "transient", attempts, lane.name) for s in group]

_FLAGGED: set[str] = set()


def implausible(req: Request, m: ModelEntry, comp: Completion, n: int) -> str | None:
    """Usage the request cannot explain: output past its token limit (thinking budget included), or a
    prompt far beyond what its bytes hold. Billed as reported (it is what the invoice will say), but
    flagged on the row and said once per model."""
    mx = req.decoding.max_tokens
    limit = (m.shape.limit(mx) if m.shape is not None else mx) if mx else None
    why = None
    if limit and comp.output_tokens is not None and comp.output_tokens > n * limit * 1.1 + 32:
        why = f"output {comp.output_tokens:,} tokens reported for a limit of {limit:,} a sample"
    ins = comp.input_tokens
    if ins is not None and ins > 2_000 * n:  # (the room below is never less: its estimate only then)
        room = n * (4 * (m.estimate_tokens(req) - (mx or 0)) + 2_000)  # (some bill the prompt once a sample)
        if ins > room:
            why = f"prompt {ins:,} tokens reported for a request of ~{room // 4 - 500:,}"
    if why and m.cfg.name not in _FLAGGED:
        _FLAGGED.add(m.cfg.name)
        log.warning("%s: the provider reports usage the request cannot explain (%s); billed as reported, "
                    "flagged on its rows (usage_flag)", m.cfg.name, why)
    return why


async def _refill(
    req: Request,
    m: ModelEntry,
    lane: Lane,
    comp: Completion,
    group: list[int],
    keys: dict[int, str],
    attempts: int,
    latency: float,
    breaker: Breaker,
    cache: AsyncCache | None,
) -> list[Row]:
    """The server ignored `n`: keep what came back, send the rest one by one."""
    kept = [
        i
        for i, (t, r) in enumerate(zip(comp.texts, comp.finish_reasons, strict=False))
        if t is not None or r is not None
    ]
    note_ignored_n(m, lane, len(kept), len(group))
    part = Completion(
        [comp.texts[i] for i in kept],
        comp.input_tokens,
        comp.output_tokens,
        [comp.finish_reasons[i] for i in kept],
        hedge=comp.hedge,
    )
    rows = rows_from(req, m, part, [group[i] for i in kept], keys, attempts, latency, lane.name, cache)
    rest = [s for i, s in enumerate(group) if i not in kept]
    for more in await asyncio.gather(*(send(req, m, [s], keys, breaker, cache) for s in rest)):
        rows.extend(more)
    return rows

def rows_from(
    req: Request,
    m: ModelEntry,
    comp: Completion,
    group: list[int],
    keys: dict[int, str],
    attempts: int,
    latency: float,
    lane: str,
    cache: AsyncCache | None,
) -> list[Row]:
    """The rows of one answered call (an exhausted reasoning budget, no text, or text), each answer
    put in the cache as it is made; each says its call's samples (`n`: how long a call lasts depends on
    it, runner.history, which could only guess it from the rows' latencies before)."""
    n = len(group)
    texts = (comp.texts + [None] * n)[:n]
    usages = billed(comp, texts)
    flag = implausible(req, m, comp, n)
    reasons = m.profile is not None and m.profile.thinks  # Claude reasons only with thinking on
    hedge, share = lost(comp, m, req.pass_, n) if comp.hedge is not None else (None, 0.0)  # (a loser's share)
    rows = []
    for i, s in enumerate(group):
        text = texts[i]
        finish = comp.finish_reasons[i] if i < len(comp.finish_reasons) else None
        calls = comp.tool_calls[i] if i < len(comp.tool_calls) else None
        if calls is not None and text is None:  # a turn that only called tools answered: its calls are the answer
            text = ""
        usage = usages[i]
        cost = (
            comp.reported_cost / n
            if comp.reported_cost is not None
            else m.cost(usage["input_tokens"], usage["output_tokens"], usage["cached_input_tokens"],
                        usage["cache_write_tokens"])
        )
        if hedge is not None:  # its loser billed on it: rows, the bill, the ceilings and the cache's price count it
            cost = None if cost is None or share is None else cost + share
        if reasons and exhausted(text, finish, True):
            row = exhausted_row(req, s, keys[s], usage, cost, attempts, lane, finish)
            row["n"] = n
            rows.append(row)
            continue
        if text is None:
            msg = (f"stream cut before its end: {comp.cut} (finish_reason={finish})" if comp.cut else
                   f"no text in the response (finish_reason={finish})")
            kind = "fatal" if finish in ("content_filter", "refusal") else "transient"
            row = error_row(req, s, keys[s], msg, kind, attempts, lane, latency)
            if comp.cut and cost is None:  # what it consumed: its prompt, and what was received of its answer
                cost = m.cost(m.estimate_tokens(req) - (req.decoding.max_tokens or 0),
                              comp.received_chars // max(1, n * 4))
            row["usage"], row["cost_usd"], row["finish_reason"], row["n"] = usage, cost, finish, n
            rows.append(row)
            continue
        row = answer_row(
            req, s, keys[s], text, usage, cost, latency, attempts, cached=False, finish=finish, lane=lane
        )
        row["n"] = n
        if flag:
            row["usage_flag"] = flag
        if calls is not None:
            row["tool_calls"] = calls
        rows.append(row)
        if cache is not None and m.provider_cacheable:
            value = {"text": text, "usage": usage, "cost_usd": cost, "finish_reason": finish, "model": m.model_id,
                     "t": row["t"]}
            if calls is not None:
                value["tool_calls"] = calls
            if made := learned.made_with(m):
                value["learned"] = made
            cache.put(keys[s], value)
    if hedge is not None:
        for row in rows:
            row["hedge"] = hedge
    return rows
