"""What a set of run plans still has to send: rows already finished in the run directory (what a rerun
resumes) and answers already in the cache (what a rerun replays for free) are counted, not planned.

Shared by the dry run (cli.dryrun prices it) and the resume message (runner.resume) from one place.
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cache.key import cache_keys
from core.types import row_identity
from runner.pool import ModelEntry, estimate_tokens
from runner.results import results_files, scan
from suites.base import get_suite

DEFAULT_MAX_TOKENS = 256
"""What a request without max_tokens is priced at (the scheduler's estimate assumes the same)."""


@dataclass
class Plan:
    """The remaining first-pass work of one (run, model)."""

    run: str
    model: str
    calls: int = 0
    finished: int = 0
    cached: int = 0
    input_tokens: int = 0
    max_output_tokens: int = 0
    out_tokens_seen: list[int] = field(default_factory=lambda: [0, 0])
    """[output tokens, successful rows] of this model in the run directory: the expected-output basis."""
    answer_tokens: int | None = None
    """The suite's typical answer length (suites.base.Suite.answer_tokens)."""
    reasoning_tokens: int = 0
    """The model's reasoning budget per call (its limit adds it to the answer budget)."""

    def expected_output_tokens(self) -> float:
        """The run's own mean so far (reasoning included); else the suite's typical answer plus half the
        reasoning budget; else half of the limit."""
        tokens, n = self.out_tokens_seen
        if n:
            return min(self.max_output_tokens, self.calls * tokens / n)
        if self.answer_tokens is not None:
            return min(self.max_output_tokens, self.calls * (self.answer_tokens + 0.5 * self.reasoning_tokens))
        return 0.5 * self.max_output_tokens


def _finished(run_dir: Path | None) -> tuple[set[str], dict[str, list[int]]]:
    """Identities with a successful row, and per model [output tokens, rows] of those rows."""
    done: set[str] = set()
    seen: dict[str, list[int]] = {}
    if run_dir is None:
        return done, seen
    for _, r in (row for f in results_files(run_dir) for row in scan(f)):  # `--join` workers' files too
        if r.get("error") is None:
            done.add(row_identity(r["model"], r["item"], r["sample"], r["pass"]))
            out = (r.get("usage") or {}).get("output_tokens")
            if out is not None and r["pass"] == "answer":
                s = seen.setdefault(r["model"], [0, 0])
                s[0] += out
                s[1] += 1
    return done, seen


def remaining(
    plans: list[Any],
    models: dict[str, ModelEntry],
    in_cache: Callable[[str], bool],
    known: Container[str] | None = None,
) -> list[Plan]:
    """Per (run, model): the first-pass calls still to make, skipping finished rows and cache hits.
    `known`: the one plan's finished identities, already read (runner.resume): its files are not read
    again (and its output tokens so far are not counted)."""
    assert known is None or len(plans) == 1
    out: list[Plan] = []
    names = [get_suite(p.spec.suite).run_name(p.spec) for p in plans]
    for p, name in zip(plans, names, strict=True):
        suite = get_suite(p.spec.suite)
        if suite.check is not None:
            suite.check(p.spec)
        done: Container[str]
        done, seen = (known, {}) if known is not None else _finished(p.out)
        if names.count(name) > 1 and p.out is not None:  # runs told apart by their folders
            name = f"{name} ({p.out.name})"
        todo = {
            m: Plan(name, m, out_tokens_seen=seen.get(m, [0, 0]), answer_tokens=suite.answer_tokens,
                    reasoning_tokens=models[m].shape.extra if models[m].shape is not None else 0)
            for m in dict.fromkeys(p.models)
        }
        for r in suite.build(p.spec):
            mx = r.decoding.max_tokens or DEFAULT_MAX_TOKENS
            tin = estimate_tokens(r) - mx
            samples = range(r.sample, r.sample + r.decoding.n)
            for model, plan in todo.items():
                m = models[model]
                left = [s for s in samples if row_identity(model, r.item, s, r.pass_) not in done]
                plan.finished += len(samples) - len(left)
                if left and m.provider_cacheable:
                    keys = cache_keys(r, m.cache_id, m.key_params, left)
                    hits = sum(map(in_cache, keys))
                    plan.cached += hits
                    n = len(left) - hits
                else:
                    n = len(left)
                plan.calls += n
                plan.input_tokens += tin * n
                shape = m.shape
                plan.max_output_tokens += (shape.limit(mx) if shape is not None else mx) * n
        out.extend(todo.values())
    return out
