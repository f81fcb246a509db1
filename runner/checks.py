"""Run arguments checked at the edge, before anything is read, made or sent: one line naming the flag.

Kept apart from the parser so every way in (`run`, `sweep` files, `demo`) applies the same rules.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from runner.config import ConfigError


def check_number(flag: str, v: Any, *, lo: float, lo_ok: bool, integer: bool = False) -> None:
    """None passes (the suite default); else a finite number (an int when `integer`) above `lo`."""
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, int | float) or (integer and not isinstance(v, int)):
        raise ConfigError(f"{flag}: must be {'an integer' if integer else 'a number'}, got {v!r}")
    if not math.isfinite(v) or v < lo or (v == lo and not lo_ok):
        bound = f">= {lo:g}" if lo_ok else f"> {lo:g}"
        raise ConfigError(f"{flag}: must be {bound}, got {v!r}")


def check_run_values(samples: Any, temperature: Any, limit: Any, where: str = "") -> None:
    check_number(f"{where}--samples", samples, lo=1, lo_ok=True, integer=True)
    check_number(f"{where}--temperature", temperature, lo=0, lo_ok=True)
    check_number(f"{where}--limit", limit, lo=0, lo_ok=True, integer=True)


def check_dir_arg(flag: str, path: Path | None) -> None:
    """A directory we will create or use: neither a file nor inside one."""
    if path is None:
        return
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                raise ConfigError(f"{flag} {path}: {p} is a file, not a directory")
            return


def check_common(a: Any) -> None:
    """The flags `run` and `sweep` share."""
    check_number("--grace", getattr(a, "grace", None), lo=0, lo_ok=True)
    check_number("--progress-every", getattr(a, "progress_every", None), lo=0, lo_ok=False)
    check_dir_arg("--out", getattr(a, "out", None))
    check_dir_arg("--cache-dir", getattr(a, "cache_dir", None))
    cfg = getattr(a, "config", None)
    if cfg is not None and Path(cfg).is_dir():
        raise ConfigError(f"--config {cfg}: is a directory, not a config file")


def check_run_args(a: Any) -> None:
    check_common(a)
    check_run_values(a.samples, a.temperature, a.limit)
