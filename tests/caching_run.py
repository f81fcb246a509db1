"""Requests through the real scheduler to a Claude model on a caching mock (tests.mock_caching), for the
prompt-caching tests and bench/prompt_caching.py: the suite is given as plain functions, so a critique
pass that re-sends the first prompt needs no suite of its own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import orjson

from core.types import Request, Row
from runner.config import load_config
from runner.pool import build_models, close_models
from runner.results import ResultsWriter
from runner.scheduler import Scheduler
from runner.state import RunCtx
from suites.base import RunSpec, ScoreReport, Suite

MODEL = "claude-sonnet-4-5"
FollowUp = Callable[[Request, Row, RunSpec], list[Request]]


def config(out: Path, base_url: str, *, caching: bool = True, concurrency: int = 64) -> Path:
    path = out / "evalsweep.toml"
    path.write_text(
        f'[[endpoints]]\nname = "claude"\nkind = "anthropic"\nbase_url = "{base_url}"\nrpm = 1000000\n'
        f"tpm = 1000000000\nmax_concurrency = {concurrency}\nprompt_caching = {str(caching).lower()}\n\n"
        f'[[models]]\nname = "claude"\nendpoint = "claude"\nmodel = "{MODEL}"\nprice_in = 3.0\n'
        "price_out = 15.0\nprice_cache_read = 0.3\nprice_cache_write = 3.75\n"
    )
    return path


def run(
    requests: list[Request],
    base_url: str,
    out: Path,
    *,
    caching: bool = True,
    follow_up: FollowUp | None = None,
    concurrency: int = 64,
    window: int = 1024,
    answered_before: bool = False,
) -> list[Row]:
    """Every request (and its follow-ups) answered into `out`/results.jsonl; returns the rows.
    `answered_before`: the model has answered in an earlier run (as a resumed run's success rows say),
    so its first call does not gate the rest (runner.calls.gate): what a test of the fan-out alone needs."""
    out.mkdir(parents=True, exist_ok=True)
    cfg = load_config(config(out, base_url, caching=caching, concurrency=concurrency))
    models = build_models(cfg, ["claude"])
    kw = {"follow_up": follow_up} if follow_up is not None else {}
    suite = Suite(name="caching", build=lambda spec: iter(requests), score=_no_score, **kw)  # type: ignore[arg-type]
    writer = ResultsWriter(out / "results.jsonl")
    ctx = RunCtx("caching", RunSpec("caching"), suite, ["claude"], out, writer, {})

    async def go() -> None:
        try:
            sched = Scheduler(models, None, window=window)
            if answered_before:
                sched._answered("claude")
            await sched.run([ctx])
        finally:
            writer.flush()
            await close_models(models)

    asyncio.run(go())
    writer.close()
    return [orjson.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines() if line]


def _no_score(*_: object, **__: object) -> ScoreReport:
    raise NotImplementedError
