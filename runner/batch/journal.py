"""`batches.jsonl`: the write-ahead journal of a run directory's batches.

One JSON line per event, appended with one `write(2)` each (a killed process loses nothing it wrote):
  submit   {local, model, lane, keys: [[cache keys of one request], ...], t}  BEFORE anything is sent
  created  {local, id, t}                     the provider's id, fsynced before the batch counts as sent
  state    {local, state, counts}             when the provider's status changes
  ended    {local, state, counts, failed, t}  results delivered; `failed` keys went to live calls
Replaying the events gives every batch this directory ever sent and what is still owed by it. No
key or header is ever written here: `lane` is the endpoint (and env var) name.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from runner.results import repair_tail

JOURNAL = "batches.jsonl"


@dataclass
class Batch:
    local: str
    """Our id, known before the provider's: names the batch in the journal (and in OpenAI metadata)."""
    model: str
    lane: str
    lines: dict[str, list[str]]
    """custom_id → the cache keys it answers, in choice order (custom_id = the first key)."""
    t: float
    id: str | None = None
    state: str = "submitting"
    counts: dict[str, int] = field(default_factory=dict)
    ended: bool = False
    failed: set[str] = field(default_factory=set)

    @property
    def n_keys(self) -> int:
        return sum(len(ks) for ks in self.lines.values())


class Journal:
    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / JOURNAL
        repair_tail(self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _write(self, ev: dict[str, Any], sync: bool = False) -> None:
        os.write(self._fd, orjson.dumps(ev) + b"\n")
        if sync:
            os.fsync(self._fd)

    def submit(self, b: Batch) -> None:
        keys = list(b.lines.values())
        self._write(
            {"ev": "submit", "local": b.local, "model": b.model, "lane": b.lane, "keys": keys, "t": b.t}, True
        )

    def created(self, b: Batch) -> None:
        self._write({"ev": "created", "local": b.local, "id": b.id, "t": time.time()}, True)

    def state(self, b: Batch) -> None:
        self._write({"ev": "state", "local": b.local, "state": b.state, "counts": b.counts})

    def ended(self, b: Batch) -> None:
        ev = {
            "ev": "ended",
            "local": b.local,
            "state": b.state,
            "counts": b.counts,
            "failed": sorted(b.failed),
        }
        self._write(ev | {"t": time.time()})

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def load_journal(run_dir: Path) -> dict[str, Batch]:
    """Every batch of the run directory by local id, as its events left it; garbled lines skipped."""
    batches: dict[str, Batch] = {}
    path = run_dir / JOURNAL
    if not path.exists():
        return batches
    for line in path.read_bytes().splitlines():
        try:
            ev = orjson.loads(line)
            if ev["ev"] == "submit":
                lines = {ks[0]: ks for ks in ev["keys"]}
                batches[ev["local"]] = Batch(ev["local"], ev["model"], ev["lane"], lines, ev["t"])
                continue
            b = batches[ev["local"]]
            if ev["ev"] == "created":
                b.id = ev["id"]
            elif ev["ev"] == "state":
                b.state, b.counts = ev["state"], ev.get("counts") or {}
            elif ev["ev"] == "ended":
                b.ended, b.state, b.failed = True, ev["state"], set(ev.get("failed") or [])
        except (orjson.JSONDecodeError, KeyError, TypeError, IndexError):
            continue
    return batches


def pending_models(run_dir: Path) -> set[str]:
    """Models with journaled batches not yet ended: they stay in batch mode on resume, whatever the
    flags now say, so that nothing in flight is paid for twice."""
    return {b.model for b in load_journal(run_dir).values() if not b.ended}


def age(s: float) -> str:
    return f"{s / 3600:.1f}h" if s >= 3600 else f"{s / 60:.0f}m" if s >= 60 else f"{s:.0f}s"


def counts_text(b: Batch) -> str:
    n = b.n_keys
    return f"{n - len(b.failed)}/{n} answered" + (f", {len(b.failed)} go live" if b.failed else "")


def batch_errors(raw: dict[str, Any]) -> str:
    """The provider's reason when a whole batch failed validation (OpenAI `errors.data`)."""
    data = (raw.get("errors") or {}).get("data") or []
    return f": {str(data[0].get('message', ''))[:200]}" if data and isinstance(data[0], dict) else ""
