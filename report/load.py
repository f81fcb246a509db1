"""Read run directories (manifest, config snapshot, results, scores) and an optional models table.

One `Entry` per (experiment, model), where an experiment is a suite with its settings (variant,
samples, limit...): run directories of one experiment (a sweep split into batches of models) are
merged, different settings of one suite stay apart. An entry holds the headline score with its CI,
the model's metadata (config first, the models table fills what the config leaves unset) and the
measured cost of the run. Nothing is guessed: a price, a cost or a flag that no source gives stays
None and is shown as unknown.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any

import orjson

from report.costs import Cost, run_costs
from report.extras import merge_extra
from suites.base import SuiteError

# Headline metric per suite, for scores.json files written without "headline" (the runner writes it);
# known names are looked up here, so the report does not import every suite's dependencies.
HEADLINES = {
    "jeebench": "overall",
    "marvel": "avr",
    "m3gia": "accuracy",
    "vrb": "accuracy",
    "jsonl": "accuracy",
}


class ReportError(SuiteError):
    """Bad report input: the message names the file (and line or field) and the fix."""


@dataclass(frozen=True)
class ModelInfo:
    """What the report knows about a model besides its scores."""

    name: str
    display_name: str
    model_id: str | None = None
    provider: str | None = None
    price_in: float | None = None
    price_out: float | None = None
    open_weights: bool | None = None
    reasoning: bool | None = None
    release_date: date | None = None
    source: str = "config"


@dataclass
class Entry:
    """One model's result in one suite (one row of the leaderboard)."""

    suite: str
    model: str
    info: ModelInfo
    experiment: str
    """The suite and its settings as canonical JSON: entries with the same key are comparable."""
    spec: dict[str, Any]
    metric: str
    accuracy: float | None
    ci95: tuple[float, float] | None
    n: int | None
    scores: dict[str, Any]
    cost: Cost
    run_dir: Path

    @property
    def run_cost_usd(self) -> float | None:
        return self.cost.total


@dataclass
class Loaded:
    entries: list[Entry]
    notes: list[str] = field(default_factory=list)
    extras: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per experiment: scores.json's top-level keys besides `suite`/`models` (e.g. pooled skill effects)."""
    run_dirs: list[Path] = field(default_factory=list)
    """The folders that were read as runs (the others were skipped with a note)."""


def suite_label(suite: str) -> str:
    """`jsonl:/long/path/data.jsonl` → `jsonl:data.jsonl`; benchmark suites keep their name."""
    key, sep, rest = suite.partition(":")
    return f"{key}:{Path(rest).name}" if sep else suite


def experiment_key(
    suite: str, spec: dict[str, Any], identity: dict[str, Any] | None = None
) -> tuple[str, dict[str, Any]]:
    """The settings that make two runs comparable (everything in the manifest's spec but the models),
    and the content of their data (the manifest's `data_identity`): two runs of one file path edited
    in between (30 items, then 31) are two experiments, never one leaderboard."""
    settings = {k: spec.get(k) for k in ("options", "samples", "temperature", "limit")}
    settings["options"] = {k: v for k, v in (settings["options"] or {}).items() if v is not None}
    data = sorted(str(v).split(":")[-1][:8] for v in (identity or {}).values() if v)
    if data:
        settings["data"] = "+".join(data)
    return orjson.dumps({"suite": suite, **settings}, option=orjson.OPT_SORT_KEYS).decode(), settings


def headline_of(suite: str) -> str:
    key = suite.split(":", 1)[0]
    if key in HEADLINES:
        return HEADLINES[key]
    try:
        from suites.base import get_suite

        return get_suite(suite).headline
    except Exception:  # a suite that is not installed here still gets a report
        return "accuracy"


def atomic_write(path: Path, data: bytes | str) -> None:
    """Temp file + rename: a kill never leaves a partial report file beside an older one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    if not path.is_file():
        raise ReportError(f"{path}: missing")
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as e:
        raise ReportError(f"{path}: not valid JSON ({e})") from None


def _num(v: Any, where: str) -> float | None:
    if v is None or v == "":
        return None
    if isinstance(v, bool):
        raise ReportError(f"{where}: expected a number, got {v!r}")
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ReportError(f"{where}: expected a number, got {v!r}") from None


def _bool(v: Any, where: str) -> bool | None:
    if v is None or v == "":
        return None
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ReportError(f"{where}: expected true/false, got {v!r}")


def parse_date(v: Any, where: str) -> date | None:
    """`YYYY-MM-DD` (config), `YYYY-MM` or `MM/YYYY` (models table; the 1st of the month)."""
    if v is None or v == "":
        return None
    s = str(v).strip()
    for pat, parts in (
        (r"(\d{4})-(\d{2})-(\d{2})", "ymd"),
        (r"(\d{4})-(\d{2})", "ym"),
        (r"(\d{1,2})/(\d{4})", "my"),
    ):
        m = re.fullmatch(pat, s)
        if m:
            g = [int(x) for x in m.groups()]
            y, mo, d = {"ymd": g, "ym": [g[0], g[1], 1], "my": [g[1], g[0], 1]}[parts]
            try:
                return date(y, mo, d)
            except ValueError:
                break
    raise ReportError(f"{where}: bad release date {v!r}; write YYYY-MM-DD (config) or MM/YYYY (models table)")


# ---------------------------------------------------------------- models table


TABLE_COLUMNS = (
    "model_id",
    "provider",
    "open",
    "release_date",
    "input_cost",
    "output_cost",
    "display_name",
    "is_reasoning",
)


def read_models_table(path: Path) -> list[ModelInfo]:
    """The models.csv format (model_id, provider, open, release_date MM/YYYY, input_cost, ...)."""
    if not path.is_file():
        raise ReportError(f"{path}: no such models table (--models-table)")
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in TABLE_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ReportError(
                f"{path}: missing column(s) {', '.join(missing)}; expected the header of "
                f"models.csv: {','.join(TABLE_COLUMNS)} (others ignored)"
            )
        out = []
        for lineno, r in enumerate(reader, 2):
            where = f"{path}:{lineno}"
            mid = (r["model_id"] or "").strip()
            if not mid:
                raise ReportError(f"{where}: empty model_id")
            out.append(
                ModelInfo(
                    name=mid,
                    display_name=(r["display_name"] or "").strip() or mid,
                    model_id=mid,
                    provider=(r["provider"] or "").strip() or None,
                    price_in=_num(r["input_cost"], f"{where}: input_cost"),
                    price_out=_num(r["output_cost"], f"{where}: output_cost"),
                    open_weights=_bool(r["open"], f"{where}: open"),
                    reasoning=_bool(r["is_reasoning"], f"{where}: is_reasoning"),
                    release_date=parse_date(r["release_date"], f"{where}: release_date"),
                    source=f"{path.name}:{lineno}",
                )
            )
    return out


def _meta(i: ModelInfo) -> tuple:
    return (i.price_in, i.price_out, i.open_weights, i.reasoning, i.release_date)


def match_table(info: ModelInfo, table: list[ModelInfo]) -> tuple[ModelInfo | None, str | None]:
    """The table row for a run's model: by model_id (name, provider id, its last path segment), else by
    display name. Returns (row, note); a display name shared by rows with different data is ambiguous."""
    keys = [k.lower() for k in (info.name, info.model_id, (info.model_id or "").rsplit("/", 1)[-1]) if k]
    for k in keys:
        for row in table:
            if row.model_id and row.model_id.lower() == k:
                return row, None
    for k in dict.fromkeys(x.lower() for x in (info.name, info.model_id, info.display_name) if x):
        hits = [row for row in table if row.display_name.lower() == k]
        if len({_meta(h) for h in hits}) == 1:
            return hits[0], None
        if hits:
            return None, (
                f"{info.name}: display name {k!r} matches {len(hits)} rows of the models table with "
                f"different data ({', '.join(h.source for h in hits)}); add its model_id to match"
            )
    return None, None


def merge(info: ModelInfo, row: ModelInfo) -> ModelInfo:
    """Config values win; the table fills only what the config leaves unset."""
    pick = {
        f: getattr(row, f)
        for f in ("provider", "price_in", "price_out", "open_weights", "reasoning", "release_date")
        if getattr(info, f) is None
    }
    if info.display_name == info.name and row.display_name:
        pick["display_name"] = row.display_name
    return replace(info, **pick, source=f"{info.source}+{row.source}" if pick else info.source)


# ---------------------------------------------------------------- run directories


def config_models(path: Path) -> dict[str, ModelInfo]:
    cfg = read_json(path)
    out: dict[str, ModelInfo] = {}
    for k, m in enumerate(cfg.get("models") or []):
        where = f"{path}: models[{k}]"
        if not isinstance(m, dict) or not m.get("name"):
            raise ReportError(f'{where}: each model needs a "name"')
        out[m["name"]] = ModelInfo(
            name=m["name"],
            display_name=m.get("display_name") or m["name"],
            model_id=m.get("model"),
            provider=m.get("provider"),
            price_in=_num(m.get("price_in"), f"{where}.price_in"),
            price_out=_num(m.get("price_out"), f"{where}.price_out"),
            open_weights=_bool(m.get("open_weights"), f"{where}.open_weights"),
            reasoning=_bool(m.get("reasoning"), f"{where}.reasoning"),
            release_date=parse_date(m.get("release_date"), f"{where}.release_date"),
        )
    return out


def _ci(v: Any) -> tuple[float, float] | None:
    if isinstance(v, list | tuple) and len(v) == 2 and all(isinstance(x, int | float) for x in v):
        return float(v[0]), float(v[1])
    return None


def load_run(run_dir: Path, table: list[ModelInfo] | None = None) -> Loaded:
    manifest = read_json(run_dir / "manifest.json")
    scores_path = run_dir / "scores.json"
    if not scores_path.is_file():
        raise ReportError(f"{scores_path}: missing; score the run first: `evalsweep score {run_dir}`")
    scores = read_json(scores_path)
    if not isinstance(scores.get("models"), dict):
        raise ReportError(f'{scores_path}: no "models" object; rescore with `evalsweep score {run_dir}`')
    suite = scores.get("suite") or manifest.get("suite")
    if not suite:
        raise ReportError(f'{run_dir / "manifest.json"}: no "suite"')
    cfg_path = run_dir / "config.json"
    infos = config_models(cfg_path) if cfg_path.is_file() else {}
    costs = run_costs(run_dir / "results.jsonl")
    metric = scores.get("headline") or headline_of(suite)
    spec = manifest.get("spec") if isinstance(manifest.get("spec"), dict) else {}
    experiment, settings = experiment_key(suite, spec, manifest.get("data_identity"))
    notes: list[str] = []
    entries = []
    order = list(manifest.get("models") or [])
    names = order + [m for m in scores["models"] if m not in order]
    for name in names:
        s = scores["models"].get(name)
        if s is None:
            notes.append(f"{run_dir}: {name} is in the manifest but not scored; rescore the run")
            continue
        info = infos.get(name) or ModelInfo(name=name, display_name=name, source="none")
        if table is not None:
            row, note = match_table(info, table)
            if row is not None:
                info = merge(info, row)
            if note:
                notes.append(note)
            elif row is None:
                notes.append(f"{name}: no row in the models table matches its name, model id or display name")
        acc = s.get(metric) if isinstance(s, dict) else None
        if not isinstance(acc, int | float) or isinstance(acc, bool):
            notes.append(f"{scores_path}: {name} has no numeric {metric!r}; left out of the rankings")
            acc = None
        cost = costs.get(name, Cost(None, 0.0, 0, 0, 0))  # no rows at all: nothing measured
        entries.append(
            Entry(
                suite=suite,
                model=name,
                info=info,
                experiment=experiment,
                spec=settings,
                metric=metric,
                accuracy=None if acc is None else float(acc),
                ci95=_ci(s.get("ci95")),
                n=s.get("n") if isinstance(s.get("n"), int) else None,
                scores=s,
                cost=cost,
                run_dir=run_dir,
            )
        )
    extra = {k: v for k, v in scores.items() if k not in ("suite", "models", "headline")}
    return Loaded(entries=entries, notes=notes, extras={experiment: extra})


def why_not_a_run(d: Path, skip: list[Path]) -> str | None:
    """Why `d` is not read as a scored run (None when it is one), so `report runs/*` can be given a
    folder that also holds `cache/` and the report's own output."""
    if not d.is_dir():
        return f"{d}: not a run directory (no such folder), skipped"
    if any(d.resolve() == s.resolve() for s in skip):
        return f"{d}: the report's output folder, skipped"
    if not (d / "manifest.json").is_file():
        return f"{d}: not a run directory (no manifest.json), skipped"
    if not (d / "scores.json").is_file():
        return f"{d / 'scores.json'}: missing; score the run first: `evalsweep score {d}` (skipped)"
    return None


def load_runs(run_dirs: list[Path], models_table: Path | None = None, skip: list[Path] = ()) -> Loaded:
    """All runs; a model seen in two run directories of one experiment keeps the later directory's.
    Folders that are not scored runs are skipped with a note; none left is an error."""
    table = read_models_table(models_table) if models_table else None
    by_key: dict[tuple[str, str], Entry] = {}
    merged: dict[str, list[Path]] = {}
    out = Loaded(entries=[])
    for d in run_dirs:
        why = why_not_a_run(d, list(skip))
        if why:
            out.notes.append(why)
            continue
        out.run_dirs.append(d)
        one = load_run(d, table)
        out.notes += one.notes
        for k, v in one.extras.items():
            if "skill_effects" in v and "skill_effects" in out.extras.get(k, {}):
                out.notes.append(
                    f"{d}: the pooled skill-effect fit shown is this run directory's (its models only); "
                    "for one fit over every model, run them into one directory and score it"
                )
            merge_extra(out.extras.setdefault(k, {}), v, merged.setdefault(k, []), d)
            merged[k].append(d)
        for e in one.entries:
            prev = by_key.get((e.experiment, e.model))
            if prev is not None:
                out.notes.append(
                    f"{e.model} ({suite_label(e.suite)}) is in both {prev.run_dir} and {d}; "
                    f"the report uses {d}"
                )
            by_key[(e.experiment, e.model)] = e
    out.entries = list(by_key.values())
    if not out.entries:
        why = "; ".join(out.notes) or "run `evalsweep score` first"
        raise ReportError(f"no scored models in {', '.join(map(str, run_dirs))}: {why}")
    return out


def run_dirs_of(dirs: list[Path]) -> list[Path]:
    """Each run directory as given; a folder without a manifest stands for the runs directly under it
    (a sweep's folder); anything else is passed on for the report to name and skip."""
    out: list[Path] = []
    for d in dirs:
        if not (d / "manifest.json").is_file() and d.is_dir():
            subs = sorted(x for x in d.iterdir() if (x / "manifest.json").is_file())
            if subs:
                out.extend(subs)
                continue
        out.append(d)
    return out
