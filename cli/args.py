"""The arguments of `run` and `sweep`: the flags they share, `run`'s parser (a suite's own flags only once
the suite is named) and the value types that check a flag at the edge (an amount, a duration, models).
A sweep file's [[runs]] take the same options (cli.sweep), so one parser serves both.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from runner.config import ConfigError
from suites.base import get_suite


def common_run_args(p: argparse.ArgumentParser) -> None:
    """The flags `run` and `sweep` share."""
    p.add_argument(
        "--config", help="evalsweep.toml (default: $EVALSWEEP_CONFIG, else ./evalsweep.toml if present)"
    )
    p.add_argument("--out", type=Path, help="run directory (default runs/<suite>-<variant>; rerun to resume)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the response cache")
    p.add_argument("--refresh", action="store_true", help="ignore cached answers (still write new ones)")
    p.add_argument(
        "--cache-dir", type=Path, help="cache directory (default $EVALSWEEP_CACHE_DIR or ~/.cache/evalsweep)"
    )
    p.add_argument("--grace", type=float, default=30.0, help="seconds in-flight calls get after Ctrl-C")
    p.add_argument("--live", dest="live", action="store_true", default=None, help="force the live view")
    p.add_argument(
        "--no-live", dest="live", action="store_false", help="plain log lines instead of the live view"
    )
    p.add_argument(
        "--progress-every",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="without the live view: one progress line for the sweep this often (plus any model whose "
        "state changed)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the remaining calls (finished rows and cache hits skipped), tokens and cost; send nothing",
    )
    p.add_argument("--no-score", action="store_true", help="do not score and report when the calls are done")
    p.add_argument(
        "--resend-partial",
        action="store_true",
        help="on resume, send again the streams cut mid-answer (billed, no answer; kept as error rows otherwise)",
    )
    p.add_argument(
        "--tables",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="print the paper tables on the terminal too (default: only for a one-model run; they are always "
        "in each run directory's tables.txt and in the report)",
    )
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="run even when the pre-flight cannot reach an endpoint (its calls end in error rows)",
    )
    p.add_argument(
        "--relearn",
        action="store_true",
        help="re-check every rule learned from providers' refusals: each model's first call goes as "
        "configured; accepted, the rule is forgotten (rules older than 14 days are re-checked anyway)",
    )
    p.add_argument(
        "--batch",
        choices=("off", "on", "auto"),
        default="off",
        help="send calls as provider batches (OpenAI, Anthropic: half price, within 24 h); auto: when live "
        "calls would miss --deadline, or always with --prefer cost. An endpoint's `batch = true` forces it",
    )
    p.add_argument(
        "--deadline", type=duration, default=8 * 3600.0, help="for --batch auto: e.g. 8h (default), 90m"
    )
    p.add_argument("--prefer", choices=("latency", "cost"), default="latency", help="for --batch auto")
    p.add_argument(
        "--max-cost",
        type=usd,
        metavar="USD",
        help="a hard ceiling on what the providers bill for these run directories (earlier runs included): "
        "each call's worst case is reserved before it is sent; calls that would cross it are not sent "
        "(skipped rows) and the run exits 5",
    )


def usd(s: str) -> float:
    """`--max-cost`: a positive amount in USD (`0.20`, `$5`)."""
    try:
        v = float(s.removeprefix("$"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an amount in USD: {s!r} (e.g. 0.20)") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive amount: {s!r}")
    return v


def duration(s: str) -> float:
    """`8h`, `90m`, `45s`, `1.5d`; a bare number is hours."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        if s and s[-1] in units:
            v = float(s[:-1]) * units[s[-1]]
        else:
            v = float(s) * 3600
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {s!r} (e.g. 8h, 90m)") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {s!r}")
    return v


def run_parser(suite_name: str | None) -> tuple[argparse.ArgumentParser, list[str]]:
    """`run`'s parser, with the named suite's own flags; returns it and those flags' dests (its options)."""
    p = argparse.ArgumentParser(prog="evalsweep run", description="Run a suite over models.")
    p.add_argument("suite", help="jeebench | marvel | m3gia | vrb | jsonl:PATH")
    p.add_argument("--models", required=True, help="comma-separated model names (config or sim/<name>)")
    p.add_argument("--samples", type=int, help="samples per item (suite default otherwise)")
    p.add_argument("--temperature", type=float, help="sampling temperature (suite default otherwise)")
    p.add_argument(
        "--limit",
        type=int,
        help="only the first K items, in the suite's unit (questions, puzzles, per language...)",
    )
    common_run_args(p)
    p.add_argument(
        "--join",
        action="store_true",
        help="one of several workers (any host, --out on a shared filesystem) splitting this run through "
        "leases in [shared] cache_url; each writes results.<host>-<pid>.jsonl. Score once all are done",
    )
    before = {a.dest for a in p._actions}
    if suite_name:
        get_suite(suite_name).add_arguments(p)
    suite_dests = [a.dest for a in p._actions if a.dest not in before]
    return p, suite_dests


def suite_flags_help() -> str:
    """Each paper suite's own flags, as `run SUITE --help` lists them (they exist only with that suite)."""
    from suites.base import SUITES, installed

    out = []
    for name in [*SUITES, *installed()]:
        p = argparse.ArgumentParser(prog=f"evalsweep run {name}", add_help=False, usage=argparse.SUPPRESS)
        get_suite(name).add_arguments(p)
        text = p.format_help().replace("options:", f"{name} options (evalsweep run {name} ...):", 1)
        out.append(text.strip())
    out.append("your own suite: evalsweep run path/to/my_suite.py ... (a file defining SUITE) or "
               "package.module:SUITE; `evalsweep suites` lists what is found")
    return "\n\n" + "\n\n".join(out) + "\n"


def models_arg(s: str) -> list[str]:
    """`--models a,b` (or a sweep's `models = "a,b"`): the names, at least one."""
    models = [m.strip() for m in s.split(",") if m.strip()]
    if not models:
        raise ConfigError("--models: give at least one model name")
    return models

