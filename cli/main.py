"""`evalsweep`: run, sweep, score, report, models, cache. Arguments are validated at the edge: here and in
cli.args (the flags of run and sweep), cli.sweep (a sweep file's runs)."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from pathlib import Path

from cli.args import common_run_args, models_arg, run_parser, suite_flags_help
from cli.calls import run_calls
from cli.sweep import load_sweep
from runner.checks import check_common, check_run_args
from runner.config import ConfigError, load_config
from runner.results import disk_full, write_error
from suites.base import RunSpec, SuiteError, get_suite

EXIT_OK, EXIT_USAGE, EXIT_ROW_ERRORS, EXIT_ABORTED, EXIT_MAX_COST, EXIT_INTERRUPTED = 0, 2, 3, 4, 5, 130


def cmd_run(argv: list[str]) -> int:
    from runner.run import RunPlan

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("suite", nargs="?")
    known, _ = pre.parse_known_args(argv)
    parser, dests = run_parser(known.suite if known.suite and not known.suite.startswith("-") else None)
    if dests == [] and {"-h", "--help"} & set(argv) and not (known.suite and not known.suite.startswith("-")):
        print(parser.format_help() + suite_flags_help())  # no suite named: every suite's flags too
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
    plan = RunPlan(spec=spec, models=models_arg(a.models), out=out, join=a.join)
    command = "evalsweep run " + shlex.join(argv)
    code = run_calls([plan], cfg, a, command)
    if a.dry_run:
        return code
    if a.join and code in (EXIT_OK, EXIT_ROW_ERRORS):  # several workers end at once: one scoring, later
        print(f"every unit of {out} is done; score it once with: evalsweep score {out}", file=sys.stderr)
    tables = a.tables if a.tables is not None else len(plan.models) == 1
    return _finish(code, [out], a.no_score or a.join, say=not a.join, command=command, tables=tables)


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


def cmd_sweep(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="evalsweep sweep", description="Run many [[runs]] in one scheduler.")
    p.add_argument("sweep", type=Path, help="SWEEP.toml: optional config and out; [[runs]] with suite, models, options")
    common_run_args(p)
    a = p.parse_args(argv)
    check_common(a)
    cfg, plans = load_sweep(a.sweep)
    if a.config:
        cfg = load_config(a.config)
    command = "evalsweep sweep " + shlex.join(argv)
    code = run_calls(plans, cfg, a, command)
    if a.dry_run:
        return code
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
    return demo(a.out, models_arg(a.models) if a.models else None, a.latency_ms, a.live, a.tables)


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
