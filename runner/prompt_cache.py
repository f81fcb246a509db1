"""What the providers' prompt caches did for a model's calls: the share of input served from cache,
the tokens written to it, and the dollars saved against no caching, from the rows' usage (scores.json
`prompt_cache`, the report's cost table, and through `Stats.cached_input_tokens` the live view).

The saving is priced as the row was billed: cache reads at the model's cache-read price instead of its
input price, less the cache writes' surcharge, times the row's discount (a batch row cost half its list
price: its saving is halved too). A provider-reported cost (OpenRouter) is taken as billed likewise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from providers.pricing import Prices


@dataclass
class PromptCache:
    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    saved_usd: float | None = 0.0
    """None when some row read or wrote the cache at unknown prices (never a made-up number)."""

    def add(self, row: dict[str, Any], prices: Prices) -> None:
        u = row.get("usage") or {}
        ins, c, w = u.get("input_tokens") or 0, u.get("cached_input_tokens") or 0, u.get("cache_write_tokens") or 0
        self.input_tokens += ins
        self.cached_input_tokens += c
        self.cache_write_tokens += w
        if not (c or w) or self.saved_usd is None:
            return
        saved = prices.saved(c, w)
        cost, listed = row.get("cost_usd"), prices.cost(ins, u.get("output_tokens") or 0, c, w)
        if cost is not None and (h := row.get("hedge")):  # (its cancelled copy's spend: runner.calls.spend.lost)
            cost -= h.get("lost_cost") or 0.0
        if saved is None or cost is None:
            self.saved_usd = None
            return
        self.saved_usd += saved * (cost / listed if listed else 1.0)

    def fields(self) -> dict[str, Any]:
        share = self.cached_input_tokens / self.input_tokens if self.input_tokens else None
        saved = None if self.saved_usd is None else round(self.saved_usd, 6)
        return {"input_tokens": self.input_tokens, "cached_input_tokens": self.cached_input_tokens,
                "cached_share": share, "cache_write_tokens": self.cache_write_tokens, "saved_usd": saved}
