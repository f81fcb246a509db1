"""What one run carries through the scheduler: its context (suite, run directory, writer, finished
rows) and the live counters per model that the progress view and the manifest read."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.results import ResultsWriter
from suites.base import RunSpec, Suite, _no_follow_up


@dataclass
class Stats:
    """Live counters for one (run, model); read by the progress view, never on a lock.

    `total`, `done`, `resumed` and `cached` count first-pass answers (so done + resumed <= total on
    any resume); errors, tokens and cost count every call, follow-up passes included."""

    total: int = 0
    done: int = 0
    resumed: int = 0
    cached: int = 0
    errors: int = 0
    skipped: int = 0
    halted: int = 0
    """Of skipped: never sent because the run was stopping (Ctrl-C): work left for the resume, not trouble."""
    exhausted: int = 0
    """Of errors: reasoning that used the whole token limit before any answer."""
    ok: int = 0
    """Success rows, every pass (the closing summary reads it from the manifest, not the rows)."""
    kinds: dict[str, int] = field(default_factory=dict)
    """Error rows by kind, every pass, skips apart."""
    skip_reason: str = ""
    """The first skipped row's reason."""
    retries: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    """Of input_tokens, read from the providers' prompt caches (the live view's cost cell)."""
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True
    started: float = field(default_factory=time.monotonic)


@dataclass
class RunCtx:
    name: str
    spec: RunSpec
    suite: Suite
    models: list[str]
    run_dir: Path
    writer: ResultsWriter
    done: Any
    """Identity -> location of each finished row: a runner.rowindex.RowIndex on resume (an empty dict in a new
    run, or before the resume's read)."""
    stats: dict[str, Stats] = field(default_factory=dict)
    batcher: Any = None
    """runner.batch.batcher.Batcher when some model of this run sends its calls as batches."""
    lock: int = -1
    """The run directory's lock (runner.lock), held until the run ends."""
    answered: dict[str, int] = field(default_factory=dict)
    """Per model, first-pass identities with a final row (resumed or written now): the invariant's
    cheap check (runner.run.account reads the file only when this falls short of the plan)."""
    spent: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    """Per model and pass, [output tokens, rows] of the answers received in this session (and under
    `latency:<pass>`, [seconds, rows]): its record in runner.history, kept as rows are written."""
    join: bool = False
    partial: set[str] | None = None
    """Identities whose final row is a stream cut mid-answer (billed, no answer), kept as final on resume
    (runner.rowindex.index); None: `--resend-partial`, they are sent again."""
    leases: Any = None
    """runner.budgets.leases.Leases for a --join worker: which (model, item shard) units this process runs."""
    loaded: asyncio.Event | None = None
    """Set once `done` holds the run directory's finished rows (read in a thread while other runs call:
    runner.run); None: `done` is complete already. No stream of the run builds a request before."""

    @property
    def has_follow_up(self) -> bool:
        return self.suite.follow_up is not _no_follow_up
