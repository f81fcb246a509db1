"""What `run` and `sweep` do when their calls are done: score every run directory and write the report,
so a finished command leaves scores.json, the paper's tables and index.html behind (`--no-score` skips).
"""

from __future__ import annotations

import os
from pathlib import Path

from runner.score import score_run


def score_and_report(run_dirs: list[Path], report_dir: Path, show: bool = True) -> Path:
    """Score each run, then one report over all of them (it prints where); returns index.html. The
    tables go to each run's tables.txt and the report; `show`: the terminal prints them too."""
    from report import main as report_main

    for d in run_dirs:
        score_run(d, quiet=not show)
    report_main(run_dirs, report_dir, None, show=show)
    return report_dir / "index.html"


def report_dir_of(run_dirs: list[Path]) -> Path:
    """One run: RUN_DIR/report. Several: `report/` in the folder they share (a sweep's `out`)."""
    if len(run_dirs) == 1:
        return run_dirs[0] / "report"
    return Path(os.path.commonpath([d.resolve().parent for d in run_dirs])) / "report"
