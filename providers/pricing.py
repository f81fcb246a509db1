"""USD cost of a call: the config's prices, else litellm's bundled cost map, else unknown (None).

The cost map is read as a JSON file from litellm's installed package, without importing litellm
(a 3 s import that must stay off the OpenAI-compatible path). Never a made-up number.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

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
