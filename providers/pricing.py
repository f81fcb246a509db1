"""USD cost of a call: the config's prices, else genai-prices, else litellm's bundled cost map, else
unknown (None). Where genai-prices and the map disagree by more than 2x for the same model, the newer
of the two is used and the other is kept beside it (`Prices.other`, shown by `evalsweep models NAME`).

The cost map is read as a JSON file from litellm's installed package, without importing litellm
(a 3 s import that must stay off the OpenAI-compatible path). Never a made-up number.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from datetime import date, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson


@lru_cache(maxsize=1)
def _cost_map() -> dict:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    p = Path(next(iter(spec.submodule_search_locations))) / "model_prices_and_context_window_backup.json"
    try:
        return orjson.loads(p.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}


def map_entry(model_id: str) -> dict:
    """litellm's bundled entry for a model id (also tried without a `provider/` prefix), or {}."""
    cm = _cost_map()
    entry = cm.get(model_id) or cm.get(model_id.split("/", 1)[-1])
    return entry if isinstance(entry, dict) else {}


def list_prices(model_id: str) -> tuple[float | None, float | None]:
    """USD per million input/output tokens from litellm's cost map, or (None, None) when unknown."""
    entry = map_entry(model_id)
    if not entry:
        return None, None
    cin, cout = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    return (cin * 1e6 if cin is not None else None, cout * 1e6 if cout is not None else None)


def cost_usd(
    input_tokens: int | None, output_tokens: int | None, price_in: float | None, price_out: float | None
) -> float | None:
    if input_tokens is None or output_tokens is None or price_in is None or price_out is None:
        return None
    return (input_tokens * price_in + output_tokens * price_out) / 1e6


PRICE_KEYS = ("price_in", "price_out", "price_cache_read", "price_cache_write", "price_source", "price_other")


@dataclass(frozen=True)
class Prices:
    """A model's prices in USD per million tokens, resolved once per model, and where they came from
    (recorded in manifest.json so a frontier can be reproduced a year later)."""

    price_in: float | None = None
    price_out: float | None = None
    cache_read: float | None = None
    cache_write: float | None = None
    source: str = "unknown"
    other: str | None = None
    """The other source's prices where the two disagree by more than 2x, and why this one won."""

    def cost(
        self, ins: int | None, outs: int | None, cached: int | None = None, writes: int | None = None
    ) -> float | None:
        """Uncached input x price_in + cache reads x cache_read + cache writes x cache_write + output
        (reasoning included) x price_out. A cache price the source does not give is billed as input
        (an upper bound, never 0); unknown prices or counts: None."""
        if ins is None or outs is None or self.price_in is None or self.price_out is None:
            return None
        c, w = cached or 0, writes or 0
        read = self.price_in if self.cache_read is None else self.cache_read
        write = self.price_in if self.cache_write is None else self.cache_write
        return ((max(0, ins - c - w)) * self.price_in + c * read + w * write + outs * self.price_out) / 1e6

    def saved(self, cached: int | None, writes: int | None) -> float | None:
        """USD the prompt cache saved on these input tokens against no caching (reads at their price
        instead of price_in, minus the writes' surcharge): negative when writes outweigh reads."""
        if self.price_in is None:
            return None if cached or writes else 0.0
        read = self.price_in if self.cache_read is None else self.cache_read
        write = self.price_in if self.cache_write is None else self.cache_write
        return ((cached or 0) * (self.price_in - read) + (writes or 0) * (self.price_in - write)) / 1e6

    def record(self) -> dict[str, Any]:
        return dict(
            zip(
                PRICE_KEYS,
                (self.price_in, self.price_out, self.cache_read, self.cache_write, self.source, self.other),
                strict=True,
            )
        )


def recorded(d: dict[str, Any] | None) -> Prices:
    """Prices as `Prices.record` wrote them (manifest.json `prices`)."""
    d = d or {}
    return Prices(d.get("price_in"), d.get("price_out"), d.get("price_cache_read"), d.get("price_cache_write"),
                  d.get("price_source") or "unknown")


def resolve_prices(cfg: Any, when: datetime | None = None) -> Prices:
    """The config's prices, else genai-prices (pydantic's maintained database; the price in force on
    `when`), else litellm's bundled map, else unknown; the newer of the two databases where they
    disagree by more than 2x (`fresher`)."""
    if cfg.price_in is not None and cfg.price_out is not None:
        return Prices(cfg.price_in, cfg.price_out, cfg.price_cache_read, cfg.price_cache_write, "config")
    found, other = fresher(_genai_prices(cfg.model_id, when), _map_prices(cfg.model_id))
    if found is None:
        return Prices(
            cfg.price_in,
            cfg.price_out,
            cfg.price_cache_read,
            cfg.price_cache_write,
            "config" if cfg.price_in is not None or cfg.price_out is not None else "unknown",
        )
    pin, pout, read, write, src = found[:5]
    return Prices(
        cfg.price_in if cfg.price_in is not None else pin,
        cfg.price_out if cfg.price_out is not None else pout,
        cfg.price_cache_read if cfg.price_cache_read is not None else read,
        cfg.price_cache_write if cfg.price_cache_write is not None else write,
        src,
        other,
    )


def apart(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Input, output or cache-read prices more than 2x apart (a price one side lacks is no evidence)."""
    return any(x and y and max(x / y, y / x) > 2 for x, y in zip(a[:3], b[:3], strict=True))


def fresher(g: tuple[Any, ...] | None, m: tuple[Any, ...] | None) -> tuple[tuple[Any, ...] | None, str | None]:
    """(the prices to use, the other source's in words) for genai-prices' `g` and the map's `m`.

    Agreeing within 2x, or only one known: genai-prices first (as always). Apart by more than 2x: the
    newer. genai-prices says how recent its price is only when it dates it (the start date of the price
    in force, or a "checked on" date in its comments); the map has no dates but is refreshed with every
    litellm release, so it is the newer one against an undated genai-prices entry (DeepSeek's R1-era,
    hour-of-day prices, while api-docs.deepseek.com/quick_start/pricing lists one V3.2 price since
    2025-09-05) and the older one against a dated entry."""
    if g is None or m is None or not apart(g, m):
        return g or m, None
    use, other = (g, m) if g[5] is not None else (m, g)
    why = f"genai-prices dates its price {g[5]}" if g[5] is not None else "genai-prices' price is undated"
    return use, (f"{other[4]}: {_mtok(other)} (more than 2x apart; {why}, so {use[4]} is used)")


def _mtok(p: tuple[Any, ...]) -> str:
    return "/".join("?" if x is None else f"{x:g}" for x in p[:3]) + " $/M in/out/cache read"


def _num(x: Any) -> float | None:
    if x is None:
        return None
    base = getattr(x, "base", x)  # tiered prices: the base tier (prompts under the first threshold)
    return float(base)


def _genai_prices(model_id: str, when: datetime | None) -> tuple[Any, ...] | None:
    try:
        from genai_prices import Usage, calc_price
    except ImportError:
        return None
    try:
        r = calc_price(
            Usage(input_tokens=1, output_tokens=1),
            model_ref=model_id.rsplit("/", 1)[-1],
            genai_request_timestamp=when,
        )
    except Exception:  # noqa: BLE001 - unknown to it (LookupError) or a bad entry: next source
        return None
    mp = r.model_price
    return (
        _num(mp.input_mtok),
        _num(mp.output_mtok),
        _num(mp.cache_read_mtok),
        _num(mp.cache_write_mtok),
        f"genai-prices ({r.provider.id}/{r.model.id})",
        _dated(r.model, r.provider, mp),
    )


_ISO = re.compile(r"\b(20\d\d)-(\d\d)-(\d\d)\b")


def _dated(model: Any, provider: Any, mp: Any) -> date | None:
    """When genai-prices says its price holds from (a StartDateConstraint) or was checked (a date in its
    comments); None when it does not say."""
    prices = model.prices if isinstance(model.prices, list) else []
    starts = [c.constraint.start_date for c in prices
              if c.prices is mp and getattr(c.constraint, "start_date", None) is not None]
    notes = f"{getattr(model, 'price_comments', None) or ''} {getattr(provider, 'price_comments', None) or ''}"
    found = starts + [date(int(y), int(mo), int(d)) for y, mo, d in _ISO.findall(notes)]
    return max(found) if found else None


def _map_prices(model_id: str) -> tuple[Any, ...] | None:
    entry = map_entry(model_id)
    if not entry or entry.get("input_cost_per_token") is None:
        return None

    def per_m(k: str) -> float | None:
        v = entry.get(k)
        return v * 1e6 if isinstance(v, int | float) else None

    return (
        per_m("input_cost_per_token"),
        per_m("output_cost_per_token"),
        per_m("cache_read_input_token_cost"),
        per_m("cache_creation_input_token_cost"),
        "litellm map",
        None,
    )
