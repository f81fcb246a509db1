"""A run directory made ready for calls: locked (one runner, or `--join` workers sharing it), settings
checked against what it was made with, config.json and manifest.json written (prices and each model's
settings as used, the deviations said and recorded: runner.deviations), and its results file indexed
for resume (here, or by runner.resume.load in a thread while other runs call). The directory is the
unit of resume: config.json (no secrets), manifest.json, results.jsonl (append-only), log.txt."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import __version__ as VERSION
from providers.pricing import PRICE_KEYS
from runner.atomic import write_json
from runner.budgets.leases import results_name
from runner.checks import check_dir_arg
from runner.config import Config
from runner.deviations import write as write_devs
from runner.ending import not_running, now
from runner.identity import identities, spec_fingerprint
from runner.lock import lock_run_dir, unlock
from runner.pool import ModelEntry
from runner.protocol import judges_of, protocol_deviations, request_shaping
from runner.results import RESULTS, ResultsWriter, read_manifest
from runner.resume import check_settings
from runner.rowindex import index
from runner.settings import check_models, keep_earlier, model_settings, recorded
from runner.state import RunCtx
from suites.base import RunSpec, get_suite


@dataclass
class RunPlan:
    spec: RunSpec
    models: list[str]
    out: Path | None = None
    join: bool = False
    """--join: one of several workers sharing this run directory (runner.budgets.leases)."""
    resend_partial: bool = False
    """--resend-partial: send again the streams cut mid-answer (billed, no answer); else they are kept."""


def out_of(plan: RunPlan) -> Path:
    """The plan's run directory: `--out`, else `runs/<run name>`."""
    return plan.out or Path("runs") / get_suite(plan.spec.suite).run_name(plan.spec)


def lock_plan(plan: RunPlan) -> int:
    """Take the plan's run directory lock (made if missing): before the pre-flight, so a second launch
    on a running directory is refused before it sends anything at all."""
    out = out_of(plan)
    check_dir_arg("--out", out)
    out.mkdir(parents=True, exist_ok=True)
    return lock_run_dir(out, shared=plan.join)


def prepare(
    plan: RunPlan,
    cfg: Config,
    models: dict[str, ModelEntry],
    command: str,
    read: bool = True,
    lock: int | None = None,
) -> RunCtx:
    """`read` False: `done` is left empty, for the caller to fill (runner.resume.load) before any call.
    `lock`: the directory's lock already taken (`lock_plan`); else it is taken here."""
    suite = get_suite(plan.spec.suite)
    run_name = suite.run_name(plan.spec)
    out = out_of(plan)
    if lock is None:
        lock = lock_plan(plan)
    try:
        return _prepare(plan, cfg, models, command, out, suite, run_name, lock, read)
    except BaseException as e:
        if not plan.join:
            not_running(out / "manifest.json", e)
        unlock(lock)
        raise


def _prepare(
    plan: RunPlan,
    cfg: Config,
    models: dict[str, ModelEntry],
    command: str,
    out: Path,
    suite: Any,
    run_name: str,
    lock: int,
    read: bool,
) -> RunCtx:
    man_path = out / "manifest.json"
    (out / "scored.jsonl.tmp").unlink(missing_ok=True)  # a `score` killed mid-write left it
    fp = spec_fingerprint(plan.spec)
    manifest: dict[str, Any] = {}
    if man_path.exists():
        manifest = read_manifest(out)
        fp = check_settings(out, plan.spec, manifest)  # the run keeps its first spelling of a path
    else:
        manifest["data_identity"] = identities(fp)
    all_models = list(dict.fromkeys([*manifest.get("models", []), *plan.models]))
    snap = cfg.snapshot(list(dict.fromkeys(all_models + judges_of(plan.spec))))
    used = {m["name"]: model_settings(m) for m in snap["models"]}
    check_models(out, manifest, {k: v for k, v in used.items() if k in plan.models})
    manifest["model_settings"] = {**used, **recorded(out, manifest)}  # each model as its rows were made
    for m in snap["models"]:  # the prices actually used and their source (config, genai-prices, map)
        e = models.get(m["name"])
        if e is not None:
            m.update(e.prices.record())
    manifest["prices"] = {m["name"]: {k: m.get(k) for k in PRICE_KEYS} for m in snap["models"]}
    write_json(out / "config.json", keep_earlier(out / "config.json", snap, now()))
    manifest.update(
        {
            "evalsweep": VERSION,
            "suite": fp["suite"],
            "run_name": run_name,
            "spec": {**fp, "limit": plan.spec.limit},
            "models": all_models,
            "command": command,
            "created": manifest.get("created", now()),
            "updated": now(),
            "status": "running",
            "suite_revision": suite.revision,
        }
    )
    own, manifest["model_deviations"] = protocol_deviations(suite, plan.spec, models, all_models)
    deviations = own + manifest["model_deviations"]
    manifest["protocol"] = {"protocol": "custom" if deviations else "paper", "deviations": deviations}
    manifest["request_shaping"] = request_shaping(suite, plan.spec, models, all_models)
    write_devs(out, run_name, own, manifest["model_deviations"], manifest["request_shaping"], plan.spec.suite)
    write_json(man_path, manifest)  # said before anything is sent (`execute`): no morning surprise
    results = out / (results_name() if plan.join else RESULTS)
    partial: set[str] | None = None if plan.resend_partial else set()
    done = index(results, partial)[0] if read else {}
    writer = ResultsWriter(results)
    writer.keep = {n: (out / n).read_bytes() for n in ("manifest.json", "config.json")}
    return RunCtx(
        name=run_name,
        spec=plan.spec,
        suite=suite,
        models=list(dict.fromkeys(plan.models)),
        run_dir=out,
        writer=writer,
        done=done,
        lock=lock,
        join=plan.join,
        partial=partial,
    )
