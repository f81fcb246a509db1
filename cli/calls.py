"""The calls `run` and `sweep` make of their plans, in one place: sent (runner.run.execute, with the live
view or progress lines) or, with --dry-run, only planned and priced (cli.dryrun). What both read of the
flags reaches the plans here, once (--resend-partial: a rerun sends again the streams cut mid-answer).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from runner.config import Config


def run_calls(plans: list[Any], cfg: Config, a: argparse.Namespace, command: str) -> int:
    """Send the plans' remaining calls, or with --dry-run print what they would send and cost; the exit
    code. `command`: the command line, which the runner writes in each run's manifest and names to resume."""
    for p in plans:
        p.resend_partial = a.resend_partial
    return _dry_run(plans, cfg, a) if a.dry_run else _execute(plans, cfg, a, command)


def _execute(plans: list[Any], cfg: Config, a: argparse.Namespace, command: str) -> int:
    """Send the calls: the runner is given the flags and the terminal's progress view (cli.progress)."""
    from cli.progress import watch
    from runner.run import execute

    return execute(
        plans,
        cfg,
        command=command,
        no_cache=a.no_cache,
        refresh=a.refresh,
        cache_dir=a.cache_dir,
        grace_s=a.grace,
        live=a.live,
        progress_s=a.progress_every,
        batch=a.batch,
        deadline_s=a.deadline,
        prefer=a.prefer,
        keep_going=a.keep_going,
        watch=watch,
        max_cost=a.max_cost,
        relearn=a.relearn,
    )


def _dry_run(plans: list[Any], cfg: Config, a: argparse.Namespace) -> int:
    """Plan what is left: the run directories' finished rows and the cache's answers are skipped."""
    from cache.store import default_cache_dir
    from cli.dryrun import dry_run

    cache = None
    if not (a.no_cache or a.refresh):
        cache = a.cache_dir or (Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir())
    return dry_run(
        plans, cfg, batch=a.batch, deadline_s=a.deadline, prefer=a.prefer, cache_dir=cache, keep_going=a.keep_going,
        max_cost=a.max_cost,
    )
