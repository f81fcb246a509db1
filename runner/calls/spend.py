"""A hard ceiling on what the providers bill: `--max-cost USD` for everything a command sends, and a
model's `max_cost` in the config for its own calls.

Before a call is sent, its worst case is reserved under every ceiling it counts against: its input at
the dearer of the input and cache-write prices (images at their largest), plus the most output it may
return, reasoning included (its token limit), for each sample. When the answer comes the reservation
is released and its real cost (the rows' `cost_usd`) is spent. A call whose reservation does not fit
waits while other calls are in flight (answers mostly cost far less than their worst case); when it
still does not fit with none in flight, the ceiling is reached: nothing more is sent under it, and
each call not sent ends as a skipped row saying why. Per call this is plain arithmetic on one event
loop: no lock, no I/O.

A ceiling covers its run directories' whole bill: what earlier invocations of the same runs paid (rows
not served from the cache) is spent from the start, so going on after a stop takes a higher ceiling,
and no finished call is sent again. Batched calls reserve at the live price: an item that fails inside
a batch goes live under the same reservation (a call made while one is held is covered by it). A call
that ended without an answer (a 5xx, a timeout after its retries) is taken as unbilled. A call sent twice
(an endpoint's `hedge_after`: runner.budgets.hedge) bills its cancelled send on its row (`lost`), and its copy
reserves a worst case of its own before it goes (`copy_fits`).
"""

from __future__ import annotations

import asyncio
import math
import re
import statistics
from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import ConfigError
from core.types import Completion, Request, Row, text_of
from runner.budgets.hedge import COPY_FITS
from runner.pool import ModelEntry
from runner.results import results_files, scan
from runner.rows import error_row

IMAGE_TOKENS = 1600
"""An image's most input tokens (Anthropic: ~1,600 at its 1.15 MP cap; OpenAI high detail: 765-1,105)."""
CHARS_PER_TOKEN = 3
"""Text at 3 characters a token (English runs ~4): a reservation errs high, never low."""
NO_LIMIT_TOKENS = 4096
"""The output of a request with no token limit, for a model whose maximum output is unknown."""
_HELD: ContextVar[tuple[Spend, list[float]] | None] = ContextVar("evalsweep_spend_held", default=None)
"""Set inside a reserved call, to its model's Spend and [its worst case, what copies of it hold]: the calls it makes
(another key, missing samples, a batch item's live fallback) are covered by its reservation; a copy of it
(runner.budgets.hedge) reserves its own (`copy_fits`)."""


@dataclass
class Ceiling:
    usd: float
    what: str
    """`--max-cost` or `max_cost of MODEL`: how messages name it."""
    spent: float = 0.0
    held: float = 0.0
    in_flight: int = 0
    reached: str | None = None
    """Why calls are no longer sent (the skipped rows' error), once reached."""
    skipped: int = 0
    """Samples not sent under it."""
    wanted: float = 0.0
    """The worst cases of the calls not sent: what a ceiling that lets them all through adds."""
    reals: list[float] = field(default_factory=list)
    """What each call of this command was billed: the rate a suggested ceiling is made from."""
    _freed: asyncio.Event | None = field(default=None, repr=False)

    def reach(self, usd: float) -> None:
        self.reached = (
            f"skipped: {self.what} ${self.usd:g} reached (spent ${self.spent:.4f}; the next call's worst "
            f"case, ${usd:.4f}, would cross it)"
        )

    async def freed(self) -> None:
        if self._freed is None:
            self._freed = asyncio.Event()
        self._freed.clear()
        await self._freed.wait()

    def settle(self, held: float, real: float) -> None:
        self.held -= held
        self.in_flight -= 1
        self.spent += real
        self.reals.append(real)
        if self._freed is not None:
            self._freed.set()


@dataclass
class Spend:
    """One model's ceilings and the prices its worst case is figured at (USD per token)."""

    ceilings: tuple[Ceiling, ...]
    in_usd: float
    out_usd: float
    max_out: int
    shape: Any = None
    past_limit: float = 1.0
    """The most this model's calls were billed for output, as a multiple of what their requests allowed:
    later worst cases count it, so a provider billing past the limit (3,000 tokens for 1,024) cannot run
    the bill past the ceiling once it has done so (a model's first call goes alone: runner.calls.gate)."""

    def _out(self, req: Request) -> int:
        mx = req.decoding.max_tokens
        return (self.shape.limit(mx) if self.shape is not None else mx) or self.max_out

    def worst(self, req: Request, n: int) -> float:
        chars = images = 0
        for msg in req.messages:
            chars += len(text_of(msg.content))
            if not isinstance(msg.content, str):
                images += sum(p.type == "image" for p in msg.content)
        tin = chars // CHARS_PER_TOKEN + IMAGE_TOKENS * images + 8 * len(req.messages)
        return n * (tin * self.in_usd + self._out(req) * self.past_limit * self.out_usd)

    def _learn(self, req: Request, rows: list[Row]) -> None:
        """Output billed past the request's limit raises the model's later worst cases (row by row: a
        sample's usage is its own)."""
        most = max(((r.get("usage") or {}).get("output_tokens") or 0 for r in rows if not r["cached"]), default=0)
        if isinstance(most, int | float) and most > self._out(req) * self.past_limit:
            self.past_limit = most / max(1, self._out(req))

    async def paid(
        self,
        req: Request,
        group: list[int],
        keys: dict[int, str],
        call: Callable[[], Awaitable[list[Row]]],
        sent: bool = False,
    ) -> list[Row]:
        """`call()` under the ceilings, or skipped rows when it may not be sent; `sent`: it went out
        before (a batch of an earlier run, re-attached): never refused, its cost spent when it comes."""
        if sent:
            rows = await call()
            for c in self.ceilings:
                c.spent += _real(rows, 0.0)
            return rows
        usd = self.worst(req, len(group))
        why = await self._reserve(usd)
        if why is not None:
            return [error_row(req, s, keys[s], why, "skipped") for s in group]
        hold = [usd, 0.0]
        token = _HELD.set((self, hold))
        hook = COPY_FITS.set(copy_fits)  # (runner.budgets.hedge asks it before it re-sends this call)
        try:
            rows = await call()
        except BaseException:  # cancelled (or a bug) mid-call: it may have been billed, count its worst case
            for c in self.ceilings:
                c.settle(usd + hold[1], usd + hold[1])
            raise
        finally:
            _HELD.reset(token)
            COPY_FITS.reset(hook)
        real = _real(rows, usd)
        self._learn(req, rows)
        for c in self.ceilings:
            c.settle(usd + hold[1], real)
        return rows

    async def _reserve(self, usd: float) -> str | None:
        while True:
            for c in self.ceilings:
                if c.reached is not None:
                    c.skipped += 1
                    c.wanted += usd
                    return c.reached
            short = next((c for c in self.ceilings if c.spent + c.held + usd > c.usd), None)
            if short is None:
                for c in self.ceilings:
                    c.held += usd
                    c.in_flight += 1
                return None
            if short.in_flight == 0:
                short.reach(usd)
            else:
                await short.freed()


def copy_fits() -> bool:
    """Whether the call being run (this context's) may be sent again (runner.budgets.hedge): under a ceiling its copy
    reserves the call's worst case too, held until the call settles (its row then bills the loser: `lost`); a copy
    that does not fit is not sent. No ceiling: always."""
    held = _HELD.get()
    if held is None:
        return True
    spend, hold = held
    if any(c.reached is not None or c.spent + c.held + hold[0] > c.usd for c in spend.ceilings):
        return False
    for c in spend.ceilings:
        c.held += hold[0]
    hold[1] += hold[0]
    return True


def lost(comp: Completion, m: ModelEntry, pass_: str, n: int) -> tuple[dict[str, Any], float | None]:
    """A hedged call's loser (runner.budgets.hedge: `comp.hedge`), estimated on the safe side: the row's field (a
    sample's share of the loser's tokens and USD) and that USD share, which its row's `cost_usd` adds (so the bill,
    `--max-cost`, the reports and the frontier count it).

    What a cancelled request is billed, as far as is published: the provider bills what it generated before it saw
    the client go, and some bill it past that. "The provider has already generated tokens and, for most providers,
    already charged for them"; a cancelled Anthropic stream gets only the opening usage block, its input
    (truefoundry.com/docs/ai-gateway/stream-disconnect-cost-accounting). novita.ai bills a client disconnect (499)
    once inference began (novita.ai/docs/guides/llm-billing). OpenAI's cancelled stream reports no usage at all
    (community.openai.com/t/cancelling-stream-does-not-show-usage/1377768), and a relay billed hedge losers cut before
    their first token at near-full usage (github.com/Wei-Shaw/sub2api/issues/4408). So: the prompt in full (at the
    input price: no cache read is assumed), and the output it would have made by the cut, its elapsed seconds at its
    kind's tokens a second (the kind's mean output over its median latency: high for a heavy tail, the safe side),
    or the winner's output when larger (a provider finishing a non-streamed call it was hung up on bills in full).
    What the loser streamed is not counted apart: a reasoning model's thought is not streamed (o-series), and the
    cancel ends the send without its partial answer. A loser that ended in an error of its own (`lost_s` None) is
    unbilled, as every error row is (`_real`)."""
    h = comp.hedge or {}
    took = h.get("lost_s")
    tokens, usd = 0, 0.0
    if took is not None:
        ins = comp.input_tokens or 0
        mean = m.usage.out.get(pass_)
        secs = m.usage.seconds(pass_, n)
        rate = mean.get(0.0) * n / secs if mean is not None and 0.0 < secs < math.inf else 0.0
        out = max(round(took * rate), comp.output_tokens or 0)
        tokens = ins + out
        price = m.cost(ins, out)
        if price is None and comp.reported_cost is not None:  # (priced by the provider only: pro rata)
            price = comp.reported_cost * tokens / max(1, ins + (comp.output_tokens or 0))
        usd = price  # type: ignore[assignment]
    share = None if usd is None else usd / n
    return ({**h, "lost_tokens": round(tokens / n), "lost_cost": None if share is None else round(share, 8)},
            share)


def _real(rows: list[Row], worst: float) -> float:
    """What a call's rows were billed: their cost; an answer without usage (no cost) at its worst case; a
    stream cut mid-answer at its worst case at least: its row counts what arrived, but the provider bills
    what it generated, past the cut too (100 cut streams billed $10.33 at the mock while rows said $9.45)."""
    each = worst / max(1, len(rows))
    return sum(
        max(each, r["cost_usd"] or 0.0) if r.get("finish_reason") == "partial"
        else r["cost_usd"] if r["cost_usd"] is not None
        else each if r["error"] is None else 0.0
        for r in rows
        if not r["cached"]
    )


async def paid(
    m: ModelEntry,
    req: Request,
    group: list[int],
    keys: dict[int, str],
    call: Callable[[], Awaitable[list[Row]]],
    sent: bool = False,
) -> list[Row]:
    """The hook where a call is sent (runner.calls.call, the batcher): `call()` as is without a ceiling or
    inside a call already reserved; else under the model's ceilings (`sent`: Spend.paid)."""
    if m.spend is None or _HELD.get():
        return await call()
    return await m.spend.paid(req, group, keys, call, sent)


def _max_out(m: ModelEntry) -> int:
    if m.provider_kind == "anthropic":
        from providers.anthropic import max_output_tokens

        return max_output_tokens(m.model_id) + (m.shape.extra if m.shape is not None else 0)
    p = m.profile
    return (p.max_output_tokens if p is not None else None) or m.cfg.max_output_tokens or NO_LIMIT_TOKENS


def attach(models: dict[str, ModelEntry], max_cost: float | None, run_dirs: Iterable[Path]) -> list[Ceiling]:
    """Give each model its ceilings (`--max-cost`, its own `max_cost`), spent from the start what the run
    directories' rows were billed. A model without a known price cannot be run under a ceiling: a
    ConfigError before anything is sent. Returns every ceiling (the run's end and the live view read them)."""
    billed = _billed(run_dirs) if max_cost is not None or any(m.cfg.max_cost for m in models.values()) else {}
    top = Ceiling(max_cost, "--max-cost", spent=sum(billed.values())) if max_cost is not None else None
    out = [top] if top is not None else []
    for name, m in models.items():
        mine = [top] if top is not None else []
        if m.cfg.max_cost is not None:
            own = Ceiling(m.cfg.max_cost, f"max_cost of {name}", spent=billed.get(name, 0.0))
            mine.append(own)
            out.append(own)
        if not mine or m.provider_kind == "replay":  # a replay bills nothing
            m.spend = None
            continue
        p = m.prices
        if p.price_in is None or p.price_out is None:
            raise ConfigError(
                f"{mine[0].what}: model {name!r} has no known price ({p.source}), so no ceiling can hold "
                "its calls; set price_in and price_out (USD per million tokens) for it in the config"
            )
        dearest_in = max(p.price_in, p.cache_write or 0.0)
        m.spend = Spend(tuple(mine), dearest_in / 1e6, p.price_out / 1e6, _max_out(m), m.shape)
    return out


def _billed(run_dirs: Iterable[Path]) -> dict[str, float]:
    """USD billed so far per called model (a judge's rows bill the judge), rows served from the cache apart."""
    out: dict[str, float] = {}
    for d in run_dirs:
        for f in results_files(d):
            for _, r in scan(f):
                c = r.get("cost_usd")
                if c and not r.get("cached"):
                    k = r.get("via") or r.get("model")
                    out[k] = out.get(k, 0.0) + c
    return out


def reached(ceilings: list[Ceiling]) -> list[Ceiling]:
    return [c for c in ceilings if c.reached is not None]


def round_up(x: float) -> float:
    """Up to two significant digits: $0.0413 -> 0.042, $12.3 -> 13."""
    if x <= 0:
        return 0.01
    step = 10 ** (math.floor(math.log10(x)) - 1)
    return round(math.ceil(x / step - 1e-9) * step, 10)


def with_max_cost(command: str, usd: float) -> str:
    """The command with `--max-cost` set to `usd` (added when it had none)."""
    new = f"--max-cost {usd:g}"
    out, n = re.subn(r"--max-cost(=|\s+)\S+", new, command)
    return out if n else f"{command} {new}"


def stop_message(ceilings: list[Ceiling], command: str) -> str:
    """What the run's end says when a ceiling stopped it: spent, the ceiling, what was not sent, and the
    command that goes on."""
    lines = []
    for c in reached(ceilings):
        lines.append(
            f"evalsweep: stopped by {c.what}: spent ${c.spent:.4f} of the ${c.usd:g} ceiling (these run "
            f"directories' calls, earlier runs included); {c.skipped:,} calls not sent, skipped rows "
            f"(their worst case ${c.wanted:.4f})."
        )
    top = next((c for c in reached(ceilings) if c.what == "--max-cost"), None)
    own = [c.what.removeprefix("max_cost of ") for c in reached(ceilings) if c is not top]
    raise_own = f"raise max_cost of {', '.join(own)} in the config" if own else ""
    if top is not None:
        higher = round_up(max(suggested(top), top.usd * 1.01))
        also = f" ({raise_own} too)" if own else ""
        lines.append(f"Go on with a higher ceiling{also} (no finished call is sent again):\n  "
                     f"{with_max_cost(command, higher)}")
    else:
        lines.append(f"To go on, {raise_own}, then rerun (no finished call is sent again):\n  {command}")
    return "\n".join(lines)


def suggested(c: Ceiling) -> float:
    """A ceiling that lets the skipped calls go, from the run's real rate: what was spent, each call
    counted at most 10x the median call (one absurd bill, 10^9 prompt tokens, does not set it), plus the
    skipped calls at the median and room for one call's worst case (a call is sent only when its worst
    case fits: with that room they go one after another, at least), within their worst cases."""
    if not c.reals or not c.skipped:
        return c.spent + c.wanted
    typical = statistics.median(c.reals)
    sane = c.spent - sum(max(0.0, r - 10 * typical) for r in c.reals)
    return sane + min(c.wanted, 1.2 * typical * c.skipped + c.wanted / c.skipped)


def live_text(ceilings: list[Ceiling]) -> str:
    """`$0.12/$0.20` for the live view: each ceiling (a model's named), the reached ones marked."""
    return " ".join(
        f"{'' if c.what == '--max-cost' else c.what.removeprefix('max_cost of ') + ' '}"
        f"{_money(c.spent)}/{_money(c.usd)}{' reached' if c.reached else ''}"
        for c in ceilings
    )


def _money(x: float) -> str:
    return f"${x:,.2f}" if x >= 0.1 or x == 0 else f"${x:.2g}"


def summary(ceilings: list[Ceiling]) -> dict[str, Any]:
    """For manifest.json: each ceiling, what it spent, whether it stopped the run."""
    return {
        c.what: {"ceiling_usd": c.usd, "spent_usd": round(c.spent, 6), "reached": c.reached is not None,
                 "skipped": c.skipped}
        for c in ceilings
    }
