"""What every export writer reads: one `ExportRun` per run directory with, per model, one `ExportSample`
per scored row and the calls it was made from (built by `report.export.load_export`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from report.load import Entry

COUNTS = ("n", "n_planned", "n_scored", "n_errors", "n_reasoning_exhausted")
"""scores.json keys that count rows rather than measure: kept as counts, not offered as metrics."""


@dataclass
class ExportSample:
    item: str
    sample: int | None
    """The scored row's sample index (None: one scored row stands for all of the item's samples)."""
    scored: dict[str, Any]
    calls: list[dict[str, Any]]
    """The final results rows (every sample and pass) this scored row was made from, in order."""

    @property
    def score(self) -> float | None:
        v = self.scored.get("score")
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    @property
    def error(self) -> str | None:
        e = self.scored.get("error")
        if e:
            return str(e)
        errs = [c.get("error") for c in self.calls if c.get("error")]
        return str(errs[0]) if errs and self.score is None else None

    def usage(self) -> dict[str, int]:
        out = {"input_tokens": 0, "output_tokens": 0, "cached_input_tokens": 0, "reasoning_tokens": 0}
        for c in self.calls:
            u = c.get("usage") or {}
            for k in out:
                if isinstance(u.get(k), int):
                    out[k] += u[k]
        return out

    def cost_usd(self) -> float | None:
        costs = [c["cost_usd"] for c in self.calls if isinstance(c.get("cost_usd"), int | float)]
        return sum(costs) if costs else None


@dataclass
class ExportRun:
    run_dir: Path
    suite: str
    manifest: dict[str, Any]
    entries: list[Entry]
    samples: dict[str, list[ExportSample]]
    prompts: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    """item → its first pass's messages as text ({role, content}); empty when the data is not here."""
    prompt_note: str | None = None

    @property
    def created(self) -> str:
        return str(self.manifest.get("created") or "")


def slug(text: str) -> str:
    """A file-name-safe form of a suite or model name (`jsonl:d.jsonl` → `jsonl-d.jsonl`)."""
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in text).strip("-") or "run"
