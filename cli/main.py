"""`evalsweep`: run, sweep, score, report, models, cache. Arguments are validated here, at the edge."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

from runner.checks import check_common, check_run_args, check_run_values
from runner.config import Config, ConfigError, load_config
from runner.results import disk_full, write_error
from suites.base import RunSpec, SuiteError, get_suite

EXIT_OK, EXIT_USAGE, EXIT_ROW_ERRORS, EXIT_ABORTED, EXIT_MAX_COST, EXIT_INTERRUPTED = 0, 2, 3, 4, 5, 130


def _common_run_args(p: argparse.ArgumentParser) -> None:
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
        "--deadline", type=_duration, default=8 * 3600.0, help="for --batch auto: e.g. 8h (default), 90m"
    )
    p.add_argument("--prefer", choices=("latency", "cost"), default="latency", help="for --batch auto")
    p.add_argument(
        "--max-cost",
        type=_usd,
        metavar="USD",
        help="a hard ceiling on what the providers bill for these run directories (earlier runs included): "
        "each call's worst case is reserved before it is sent; calls that would cross it are not sent "
        "(skipped rows) and the run exits 5",
    )


def _usd(s: str) -> float:
    try:
        v = float(s.removeprefix("$"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an amount in USD: {s!r} (e.g. 0.20)") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive amount: {s!r}")
    return v


def _duration(s: str) -> float:
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


def _run_parser(suite_name: str | None) -> tuple[argparse.ArgumentParser, list[str]]:
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
    _common_run_args(p)
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


def _suite_flags_help() -> str:
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


def _models_arg(s: str) -> list[str]:
    models = [m.strip() for m in s.split(",") if m.strip()]
    if not models:
        raise ConfigError("--models: give at least one model name")
    return models


def cmd_run(argv: list[str]) -> int:
    from runner.run import RunPlan

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("suite", nargs="?")
    known, _ = pre.parse_known_args(argv)
    parser, dests = _run_parser(known.suite if known.suite and not known.suite.startswith("-") else None)
    if dests == [] and {"-h", "--help"} & set(argv) and not (known.suite and not known.suite.startswith("-")):
        print(parser.format_help() + _suite_flags_help())  # no suite named: every suite's flags too
        return EXIT_OK
    a = parser.parse_args(argv)
    check_run_args(a)
    spec = RunSpec(
        suite=a.suite,
        options={d: getattr(a, d) for d in dests},
        samples=a.samples,
        temperature=a.temperature,
        limit=a.limit,
    )
    cfg = load_config(a.config)
    out = a.out or Path("runs") / get_suite(a.suite).run_name(spec)
    plan = RunPlan(spec=spec, models=_models_arg(a.models), out=out, join=a.join)
    if a.dry_run:
        return _dry_run([plan], cfg, a)
    command = "evalsweep run " + shlex.join(argv)
    code = _execute([plan], cfg, a, command)
    if a.join and code in (EXIT_OK, EXIT_ROW_ERRORS):  # several workers end at once: one scoring, later
        print(f"every unit of {out} is done; score it once with: evalsweep score {out}", file=sys.stderr)
    tables = a.tables if a.tables is not None else len(plan.models) == 1
    return _finish(code, [out], a.no_score or a.join, say=not a.join, command=command, tables=tables)


def _execute(plans: list[Any], cfg: Config, a: argparse.Namespace, command: str) -> int:
    from cli.progress import watch
    from runner.run import execute

    for p in plans:
        p.resend_partial = a.resend_partial
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

    for p in plans:
        p.resend_partial = a.resend_partial
    cache = None
    if not (a.no_cache or a.refresh):
        cache = a.cache_dir or (Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir())
    return dry_run(
        plans, cfg, batch=a.batch, deadline_s=a.deadline, prefer=a.prefer, cache_dir=cache, keep_going=a.keep_going,
        max_cost=a.max_cost,
    )


def _finish(
    code: int, run_dirs: list[Path], no_score: bool, say: bool = True, *, command: str = "", tables: bool = True
) -> int:
    """Score and report a run or sweep that ran to its end (errors in rows included), then say the
    outcome last (cli.summary), where no table can scroll it away."""
    if code not in (EXIT_OK, EXIT_ROW_ERRORS):
        return code
    report = None
    if no_score:
        for d in run_dirs if say else []:
            print(f"score with: evalsweep score {d}", file=sys.stderr)
    else:
        from cli.finish import report_dir_of, score_and_report

        try:
            report = score_and_report(run_dirs, report_dir_of(run_dirs), show=tables)
        except OSError as e:
            if not disk_full(e):
                raise
            print(f"evalsweep: every call is done and its row saved, but scoring stopped: "
                  f"{write_error(Path(e.filename or run_dirs[0]), e)}. Free space, then:\n  evalsweep score "
                  + " ".join(shlex.quote(str(d)) for d in run_dirs), file=sys.stderr)
            return EXIT_ABORTED
    if say and command:
        from cli.summary import closing

        print("\n" + "\n".join(closing(run_dirs, code, command, report, tables)), file=sys.stderr)
    return code


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
        parser, dests = _run_parser(r["suite"])
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
        models = r["models"] if isinstance(r["models"], list) else _models_arg(str(r["models"]))
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


def cmd_sweep(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="evalsweep sweep", description="Run many [[runs]] in one scheduler.")
    p.add_argument("sweep", type=Path, help="SWEEP.toml: optional config and out; [[runs]] with suite, models, options")
    _common_run_args(p)
    a = p.parse_args(argv)
    check_common(a)
    cfg, plans = load_sweep(a.sweep)
    if a.config:
        cfg = load_config(a.config)
    if a.dry_run:
        return _dry_run(plans, cfg, a)
    command = "evalsweep sweep " + shlex.join(argv)
    code = _execute(plans, cfg, a, command)
    tables = a.tables if a.tables is not None else len({m for p in plans for m in p.models}) == 1
    return _finish(code, [p.out for p in plans if p.out is not None], a.no_score, command=command, tables=tables)


def cmd_score(argv: list[str]) -> int:
    from runner.results import check_run_dir
    from runner.score import score_run

    p = argparse.ArgumentParser(prog="evalsweep score", description="Score run directories.")
    p.add_argument("run_dirs", nargs="+", type=Path, help="run directories (each with results.jsonl)")
    a = p.parse_args(argv)
    for d in a.run_dirs:
        check_run_dir(d)
    for d in a.run_dirs:
        score_run(d)
    return EXIT_OK


def cmd_report(argv: list[str]) -> int:
    from report import cli_main

    return cli_main(argv)


def cmd_view(argv: list[str]) -> int:
    from report.serve import cli_main

    return cli_main(argv)


def cmd_export(argv: list[str]) -> int:
    from report.export import cli_main

    return cli_main(argv)


def cmd_models(argv: list[str]) -> int:
    from cli.models import cmd_models as run

    return run(argv, load_config)


def cmd_cache(argv: list[str]) -> int:
    from cli.cache import cmd_cache as run

    return run(argv)


def cmd_suites(argv: list[str]) -> int:
    """The suites `run` finds: the built-ins, `jsonl:PATH`, installed packages' entry points, and the two
    ways to name one's own (a file, a module)."""
    import importlib

    from suites.base import ENTRY_POINTS, SUITES, installed

    argparse.ArgumentParser(prog="evalsweep suites", description=cmd_suites.__doc__).parse_args(argv)
    print("built in:")
    for name in SUITES:
        doc = (importlib.import_module(f"suites.{name}").__doc__ or "").strip().split("\n")[0]
        print(f"  {name:<12} {doc[:100]}")
    print("  jsonl:PATH   your data, one JSON object a line (id, prompt, choices, answer); flags shape the protocol")
    found = installed()
    print(f"installed (entry points, group {ENTRY_POINTS!r}):" + ("" if found else " none"))
    for name, ep in found.items():
        print(f"  {name:<12} {ep.value}")
    print("your own: evalsweep run path/to/my_suite.py ... (a file defining SUITE), or package.module:SUITE")
    return EXIT_OK


def cmd_demo(argv: list[str]) -> int:
    from cli.demo import demo

    p = argparse.ArgumentParser(
        prog="evalsweep demo",
        description="Offline demo: simulated models on bundled JEEBench, scored and reported.",
    )
    p.add_argument("--out", type=Path, default=Path("runs/demo"), help="where the runs and the report go")
    p.add_argument("--models", help="comma-separated sim/<name> models")
    p.add_argument("--latency-ms", type=float, default=50.0, help="median simulated latency")
    p.add_argument("--no-live", dest="live", action="store_false", default=None, help="plain log lines")
    p.add_argument("--tables", action="store_true", default=None, help="print the paper tables on the terminal")
    a = p.parse_args(argv)
    return demo(a.out, _models_arg(a.models) if a.models else None, a.latency_ms, a.live, a.tables)


COMMANDS = {
    "run": cmd_run,
    "sweep": cmd_sweep,
    "score": cmd_score,
    "report": cmd_report,
    "view": cmd_view,
    "export": cmd_export,
    "models": cmd_models,
    "cache": cmd_cache,
    "demo": cmd_demo,
    "suites": cmd_suites,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("evalsweep").setLevel(logging.INFO)
    if argv and argv[0] in ("--version", "-V"):
        from core import __version__

        print(f"evalsweep {__version__}")
        return EXIT_OK
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print(
            "usage: evalsweep {demo,run,sweep,score,report,view,export,models,cache,suites} ... | --version\n"
            "  demo                     offline demo: sim/ models on bundled JEEBench, scored, reported\n"
            "  run SUITE --models a,b   run a suite (jeebench, marvel, m3gia, vrb, jsonl:PATH, my_suite.py, "
            "package.module:SUITE)\n"
            "  suites                   the suites run finds (built-in, installed, your own)\n"
            "  sweep SWEEP.toml         many runs in one scheduler\n"
            "  score RUN_DIR            score a run: scored.jsonl, scores.json, tables\n"
            "  report RUN_DIR... --out  leaderboards, cost/accuracy frontier, HTML, sample viewer\n"
            "  view RUN_DIR...          the report served on 127.0.0.1\n"
            "  export RUN_DIR --format  inspect | every-eval-ever | hf\n"
            "  models                   models the config defines\n"
            "  cache stats|prune        the response cache",
            file=sys.stderr,
        )
        return EXIT_OK if argv and argv[0] in ("-h", "--help") else EXIT_USAGE
    try:
        return COMMANDS[argv[0]](argv[1:])
    except (ConfigError, SuiteError) as e:
        print(f"evalsweep: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        if not disk_full(e):
            raise
        print(f"evalsweep: stopped: {write_error(Path(e.filename or '.'), e)}. Nothing already written is "
              f"lost. Free space, then rerun:\n  evalsweep {shlex.join(argv)}", file=sys.stderr)
        return EXIT_ABORTED


if __name__ == "__main__":
    sys.exit(main())
