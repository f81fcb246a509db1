"""Built-in simulated models `sim/<name>`: deterministic, offline, realistic enough to exercise a sweep.

Each model has an ability level; an item is answered correctly with a probability that falls with the
item's (hash-derived) difficulty. The text comes from the suite's `sim` hints (full responses in the
benchmark's real style), so extraction and scoring run exactly as on a real model. Latency is
lognormal, tokens are counted from the text, and each model has a list price.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from typing import Any

from core.types import Request, text_of
from providers.base import Completion

# name: (ability, price_in, price_out, open_weights, reasoning, release_date)
PROFILES: dict[str, tuple[float, float, float, bool, bool, str]] = {
    "sim/frontier": (0.92, 15.0, 60.0, False, True, "2025-09-01"),
    "sim/strong": (0.8, 5.0, 15.0, False, True, "2025-05-01"),
    "sim/medium": (0.6, 1.0, 4.0, False, False, "2024-11-01"),
    "sim/open-large": (0.65, 0.6, 0.6, True, False, "2025-02-01"),
    "sim/weak": (0.35, 0.1, 0.4, True, False, "2024-06-01"),
    "sim/random": (0.0, 0.0, 0.0, True, False, "2024-01-01"),
}


def _u(*parts: Any) -> float:
    """A uniform number in [0, 1) from a stable hash (not Python's salted hash())."""
    h = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2**64


def sim_model(name: str) -> dict[str, Any]:
    """The `[[models]]` fields of built-in `sim/<name>` (runner.config builds the ModelCfg: providers
    sit below the runner and never import it)."""
    ability, pin, pout, open_w, reasoning, released = PROFILES.get(name) or (
        round(0.2 + 0.7 * _u("ability", name), 3),
        round(0.1 + 10 * _u("price", name), 2),
        round(0.4 + 30 * _u("price_out", name), 2),
        _u("open", name) < 0.5,
        False,
        "2025-01-01",
    )
    return {
        "name": name,
        "provider": "sim",
        "endpoint": "sim",
        "model": name,
        "price_in": pin,
        "price_out": pout,
        "open_weights": open_w,
        "reasoning": reasoning,
        "release_date": released,
        "params": {"ability": ability},
    }


class SimProvider:
    supports_n = True
    cacheable = True

    def __init__(self, latency_ms: float | None = None) -> None:
        self.latency_s = 0.4 if latency_ms is None else latency_ms / 1000.0

    async def close(self) -> None:
        return None

    async def complete(
        self,
        req: Request,
        model_id: str,
        n: int,
        sample: int,
        api_key: str | None,
        params: dict[str, Any],
        shape: Any = None,
    ) -> Completion:
        ability = float(params.get("ability", 0.5))
        hints = req.sim or {}
        texts = []
        greedy = req.decoding.temperature == 0  # None: the provider's default, which samples
        for s in range(sample, sample + n):
            # At temperature 0 every sample is the same answer, as with a real greedy decoder.
            seed = (model_id, req.item, req.pass_, 0 if greedy else s)
            texts.append(_answer(ability, hints, req.item, seed))
        if self.latency_s > 0:
            lat = self.latency_s * math.exp(0.5 * _normal(_u("lat", *seed), _u("lat2", *seed)))
            await asyncio.sleep(lat)
        n_in = sum(len(text_of(m.content)) for m in req.messages) // 4 + 1
        n_in += 765 * sum(
            1 for m in req.messages if not isinstance(m.content, str) for p in m.content if p.type == "image"
        )
        n_out = sum(len(t) // 4 + 1 for t in texts)
        return Completion(
            texts=texts, input_tokens=n_in * n, output_tokens=n_out, finish_reasons=["stop"] * n
        )


def _answer(ability: float, hints: dict[str, Any], item: str, seed: tuple[Any, ...]) -> str:
    correct, wrong = hints.get("correct"), list(hints.get("wrong") or [])
    if correct is None:
        return "I am not able to answer this."
    difficulty = float(hints.get("difficulty", _u("difficulty", item)))
    if ability <= 0:  # chance level: uniform over all candidate answers
        pool = [correct, *wrong]
        return pool[int(_u("pick", *seed) * len(pool))]
    p = 1.0 / (1.0 + math.exp(-6.0 * (ability - difficulty)))
    if _u("correct", *seed) < p or not wrong:
        return correct
    return wrong[int(_u("wrong", *seed) * len(wrong))]


def _normal(u1: float, u2: float) -> float:
    """Box-Muller: a standard normal from two uniforms."""
    return math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2 * math.pi * u2)
