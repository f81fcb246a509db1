"""`evalsweep demo`: an offline sweep on built-in simulated models and the bundled JEEBench data,
then scoring and the report — the whole pipeline in one command, no key and no network."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cli.finish import score_and_report
from cli.progress import watch
from cli.summary import closing
from runner.config import Config, Endpoint
from runner.run import RunPlan, execute
from suites.base import RunSpec, get_suite

DEMO_MODELS = ["sim/frontier", "sim/strong", "sim/medium", "sim/open-large", "sim/weak"]


def demo(
    out: Path,
    models: list[str] | None = None,
    latency_ms: float = 50.0,
    live: bool | None = None,
    tables: bool | None = None,
) -> int:
    models = models or DEMO_MODELS
    cfg = Config(
        endpoints=[
            Endpoint(name="sim", kind="sim", latency_ms=latency_ms, max_concurrency=512, max_attempts=1)
        ]
    )
    plans = [
        RunPlan(
            spec=RunSpec(suite="jeebench", options=_opts(variant)),
            models=models,
            out=out / f"jeebench-{variant}",
        )
        for variant in ("cot", "cot-sc", "cot-critique")
    ]
    command = f"evalsweep demo --out {out}"
    code = execute(plans, cfg, command=command, cache_dir=out / "cache", live=live, watch=watch)
    if code not in (0, 3):
        return code
    dirs = [p.out for p in plans if p.out is not None]
    show = tables if tables is not None else len(models) == 1
    report = score_and_report(dirs, out / "report", show=show)
    print("\n" + "\n".join(closing(dirs, code, command, report, show)), file=sys.stderr)
    return code


def _opts(variant: str) -> dict[str, object]:
    """The suite's own defaults for every flag, with the variant set (as `evalsweep run` would)."""
    parser = argparse.ArgumentParser(add_help=False)
    get_suite("jeebench").add_arguments(parser)
    opts: dict[str, object] = {a.dest: a.default for a in parser._actions}
    opts["variant"] = variant
    return opts
