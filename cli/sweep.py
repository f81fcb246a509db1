"""A sweep file (SWEEP.toml) read into run plans: each [[runs]] table is checked as `run` checks its flags
(the same parser gives a suite's options and their defaults), so a typo fails before any call is sent.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from cli.args import models_arg, run_parser
from runner.checks import check_run_values
from runner.config import Config, ConfigError, load_config
from suites.base import RunSpec, get_suite

_RUN_KEYS = {"suite", "models", "samples", "temperature", "limit", "out"}


def load_sweep(path: Path) -> tuple[Config, list[Any]]:
    """SWEEP.toml: optional `config`, `out`; [[runs]] with suite, models, samples... and suite options."""
    from runner.run import RunPlan

    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: sweep file not found") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    cfg_path = data.get("config")
    cfg = load_config((path.parent / cfg_path) if cfg_path else None)
    base = Path(data.get("out", "runs"))
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs:
        raise ConfigError(f"{path}: needs at least one [[runs]] table with suite and models")
    plans = []
    for i, r in enumerate(runs):
        where = f"{path}: runs[{i}]"
        if "suite" not in r or "models" not in r:
            raise ConfigError(f"{where}: needs `suite` and `models`")
        parser, dests = run_parser(r["suite"])
        opts = {d: parser.get_default(d) for d in dests}
        for k, v in r.items():
            if k in _RUN_KEYS:
                continue
            dest = k.replace("-", "_")
            if dest not in opts:
                raise ConfigError(
                    f"{where}.{k}: not an option of suite {r['suite']!r} (known: {', '.join(dests)})"
                )
            opts[dest] = ",".join(map(str, v)) if isinstance(v, list) else v
        models = r["models"] if isinstance(r["models"], list) else models_arg(str(r["models"]))
        check_run_values(r.get("samples"), r.get("temperature"), r.get("limit"), where=f"{where}: ")
        spec = RunSpec(
            suite=r["suite"],
            options=opts,
            samples=r.get("samples"),
            temperature=r.get("temperature"),
            limit=r.get("limit"),
        )
        out = Path(r["out"]) if "out" in r else base / get_suite(r["suite"]).run_name(spec)
        plans.append(RunPlan(spec=spec, models=models, out=out))
    return cfg, plans
