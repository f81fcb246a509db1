"""Hand-made run directories in the runner's format, for the report tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# ---------------------------------------------------------------- helpers: hand-made run directories


def row(
    model: str,
    item: str,
    cost: float | None,
    *,
    error: str | None = None,
    attempts: int = 1,
    sample: int = 0,
    pass_: str = "answer",
) -> dict[str, Any]:
    return {
        "model": model,
        "suite": "x",
        "item": item,
        "sample": sample,
        "pass": pass_,
        "key": f"k{item}",
        "text": None if error else "The answer is A.",
        "usage": {"input_tokens": 100, "output_tokens": 20},
        "cost_usd": cost,
        "latency_s": 0.5,
        "attempts": attempts,
        "cached": False,
        "error": error,
    }


def make_run(
    root: Path,
    name: str,
    suite: str,
    models: dict[str, dict[str, Any]],
    scores: dict[str, dict[str, Any]],
    results: list[dict[str, Any]],
    extra: dict | None = None,
    options: dict | None = None,
    limit: int | None = None,
) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(
        json.dumps(
            {
                "evalsweep": "0.1.0",
                "suite": suite,
                "run_name": name,
                "spec": {
                    "suite": suite,
                    "options": options or {},
                    "samples": None,
                    "temperature": None,
                    "limit": limit,
                },
                "models": list(models),
                "created": "2026-01-01T00:00:00",
                "updated": "2026-01-01T01:00:00",
                "command": ["evalsweep", "run", suite],
                "status": "complete",
            }
        )
    )
    cfg_models = [
        {
            "name": n,
            "model": m.pop("model", n),
            "provider": "openai",
            "endpoint": "local",
            "price_in": None,
            "price_out": None,
            "open_weights": None,
            "reasoning": None,
            "release_date": None,
            "display_name": None,
            **m,
        }
        for n, m in models.items()
    ]
    (d / "config.json").write_text(json.dumps({"endpoints": [{"name": "local"}], "models": cfg_models}))
    (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    (d / "scores.json").write_text(json.dumps({"suite": suite, "models": scores, **(extra or {})}))
    return d
