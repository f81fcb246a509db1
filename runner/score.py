"""The scoring stage: results.jsonl → the suite's scorer → scored.jsonl, scores.json, printed tables.

Re-runnable at any time (a new extractor, a fixed metric) without a single API call. Rows stream from
results.jsonl through the suite's scorer; scored rows are written to scored.jsonl as they are made
(into a temp file renamed at the end, so a kill never leaves a partial file beside scores.json).

Coverage (scores.json, per model): `n_planned` is the number of first-pass (answer) calls the run's
plan holds per model — the suite's `count`, else its `build`, for the run's own settings and `--limit`
(the same figure the runner's progress counts to). `n_errors` counts the planned calls whose final row
is an error (skipped rows included) or whose LLM-judge extraction failed, `n_scored` those answered and
scored, and `coverage = n_scored / n_planned`; calls never made are in neither count.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from core.term import tables_text
from core.types import Row, answer_problem
from providers.pricing import Prices, recorded
from runner.atomic import atomic_open, write_json
from runner.config import ConfigError
from runner.prompt_cache import PromptCache
from runner.results import RESULTS, final_rows
from suites.base import RunSpec, Sink, Suite, SuiteError, Table, get_suite

COVERAGE_KEYS = ("n_planned", "n_scored", "n_errors", "coverage")
UNREADABLE = 0.2
"""A model whose answered calls no extraction rule could read above this share is named (scores.json
`unreadable_models`, the last screen): its score says more about the prompt or the rules than the model."""
JUDGE_PASSES = ("judge", "critique-judge")
"""Extraction passes: when one failed, its sample was never read (not scored)."""


def load_spec(run_dir: Path) -> RunSpec:
    man = run_dir / "manifest.json"
    if not man.is_file():
        raise ConfigError(f"{run_dir}: not a run directory (no manifest.json)")
    return RunSpec.from_manifest(orjson.loads(man.read_bytes())["spec"])


def _manifest_models(run_dir: Path) -> list[str]:
    try:
        return list(orjson.loads((run_dir / "manifest.json").read_bytes()).get("models") or [])
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return []


class Coverage:
    """Per model, counted off the row stream on its way to the scorer: planned calls answered, and failed
    (the answer call's final row is an error, or an LLM-judge pass its extraction needed failed, so it
    was never read). Rows come sorted, so each (model, item, sample) is one run of rows."""

    def __init__(self, prices: dict[str, Prices] | None = None) -> None:
        self.ok: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.exhausted: Counter[str] = Counter()
        self.prices = prices or {}
        self.cache: dict[str, PromptCache] = {}
        """Per model, its rows' prompt caching (a judge's rows priced at the judge's prices)."""

    def watch(self, rows: Iterable[Row]) -> Iterator[Row]:
        unit: tuple[str, str, int] | None = None
        answered = failed = False
        for r in rows:
            key = (r["model"], r["item"], r.get("sample", 0))
            if key != unit:
                if unit is not None and answered:
                    (self.errors if failed else self.ok)[unit[0]] += 1
                unit, answered, failed = key, False, False
            p = r.get("pass", "answer")
            if p == "answer":
                answered, failed = True, failed or bool(r.get("error"))
                self.exhausted[r["model"]] += r.get("error_kind") == "reasoning_exhausted"
            elif p in JUDGE_PASSES and r.get("error"):
                failed = True
            pc = self.cache.get(r["model"]) or self.cache.setdefault(r["model"], PromptCache())
            pc.add(r, self.prices.get(r.get("via") or r["model"]) or Prices())
            yield r
        if unit is not None and answered:
            (self.errors if failed else self.ok)[unit[0]] += 1

    def fields(self, model: str, planned: int | None) -> dict[str, Any]:
        scored, errors = self.ok[model], self.errors[model]
        n = max(planned if planned is not None else 0, scored + errors)
        return {"n_planned": n, "n_scored": scored, "n_errors": errors, "coverage": scored / n if n else None,
                "n_reasoning_exhausted": self.exhausted[model]}


def _model_deviations(report: Any, run_dir: Path) -> None:
    """How models' requests departed from the suite's (providers.shape.departures, recorded in the
    manifest before the run): deviations too, in scores.json and under every table."""
    try:
        man = orjson.loads((run_dir / "manifest.json").read_bytes())
        extra, shaping = man.get("model_deviations") or [], man.get("request_shaping") or {}
    except (OSError, orjson.JSONDecodeError, AttributeError):
        extra, shaping = [], {}
    if not extra:
        return
    proto = report.extra.setdefault("protocol", {"protocol": "paper", "deviations": []})
    proto["deviations"] = [*proto.get("deviations", []), *extra]
    proto["protocol"] = "custom"
    if shaping:  # the table form (runner.deviations): one line under each table, not one per model and fact
        proto["request_shaping"] = shaping
    rest = [d for d in extra if not any(d.startswith(f"{m}: ") for m in shaping)]
    line = (f"Requests of {len(shaping)} model{'s' * (len(shaping) != 1)} depart from the suite's "
            f"(deviations.txt; request_shaping in scores.json)" if shaping else "")
    line = "; ".join(x for x in (line, *rest) if x)
    for t in report.tables:
        t.note = f"{t.note}\n{line}.".strip()


def well_typed(rows: Iterable[Row]) -> Iterator[Row]:
    """Rows as the scorers may trust them: a success row whose text or usage has the wrong type (written
    from a damaged cache by an older version) is scored as a failed call, never crashes the scorer."""
    for r in rows:
        if r.get("error") is None:
            why = answer_problem(r)
            if why is not None:
                r = {**r, "text": None, "usage": {}, "error": f"ill-typed row ({why})", "error_kind": "malformed"}
        elif not isinstance(r.get("usage"), dict):
            r = {**r, "usage": {}}
        yield r


def planned_calls(suite: Suite, spec: RunSpec) -> int | None:
    """First-pass calls per model the run planned (samples included), or None if the plan cannot be
    rebuilt (then n_planned falls back to the rows present)."""
    try:
        if suite.count is not None:
            return suite.count(spec)
        return sum(r.decoding.n for r in suite.build(spec))
    except (SuiteError, OSError):
        return None


def score_run(run_dir: Path, *, quiet: bool = False) -> dict[str, Any]:
    spec = load_spec(run_dir)
    suite = get_suite(spec.suite)
    man = orjson.loads((run_dir / "manifest.json").read_bytes())
    cov = Coverage({m: recorded(d) for m, d in (man.get("prices") or {}).items()})
    out, tmp = run_dir / "scored.jsonl", run_dir / "scored.jsonl.tmp"
    opt = orjson.OPT_SERIALIZE_NUMPY
    try:
        read: dict[str, list[int]] = {}  # model -> [answers no rule read, answers with an extraction]

        def write(row: Row) -> None:
            if "extracted" in row and not row.get("error"):
                c = read.setdefault(row["model"], [0, 0])
                c[0] += row["extracted"] is None
                c[1] += 1
            f.write(orjson.dumps(row, option=opt) + b"\n")

        with tmp.open("wb", buffering=1 << 20) as f:
            sink = Sink(write)
            report = suite.score(cov.watch(well_typed(final_rows(run_dir / RESULTS))), spec, run_dir, sink)
            for row in report.scored if sink.n == 0 else ():  # a scorer that returned its rows instead
                write(row)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except OSError as e:
        if e.filename is None:  # a write to the open file names nothing: say which file, where
            raise OSError(e.errno, e.strerror, str(out)) from None
        raise
    finally:
        tmp.unlink(missing_ok=True)
    planned = planned_calls(suite, spec)
    for m, s in report.models.items():
        s.update(cov.fields(m, planned))
        if m in cov.cache:  # the providers' prompt caches: share of input read, writes, USD saved
            s["prompt_cache"] = cov.cache[m].fields()
        if m in read and read[m][1]:
            s.setdefault("unreadable", read[m][0] / read[m][1])
    _model_deviations(report, run_dir)
    scores = {"suite": spec.suite, "headline": suite.headline, "models": report.models, **report.extra}
    unread = {m: s["unreadable"] for m, s in report.models.items() if (s.get("unreadable") or 0) > UNREADABLE}
    if unread:
        scores["unreadable_models"] = unread
    scores["tables"] = [  # the report shows them in the suite's section
        {"title": t.title, "columns": t.columns, "rows": t.rows, "note": t.note} for t in report.tables
    ]
    absent = [m for m in _manifest_models(run_dir) if m not in report.models]
    if absent:
        scores["unscored_models"] = {m: cov.fields(m, planned) for m in absent}
    write_json(run_dir / "scores.json", _plain(scores))
    with atomic_open(run_dir / "tables.txt", "w", encoding="utf-8") as f:  # the terminal prints them only when asked
        f.write(tables_text(report.tables, report.models))
    if not quiet:
        print_tables(report.tables, {m: s for m, s in report.models.items()})
        print(f"wrote {run_dir / 'scores.json'}, {run_dir / 'tables.txt'} and {out}")
    return scores


def _plain(x: Any) -> Any:
    """numpy scalars and tuples → JSON types (suites compute with numpy)."""
    return orjson.loads(orjson.dumps(x, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS))


def print_tables(tables: list[Table], models: dict[str, dict[str, Any]] | None = None) -> None:
    """Each table fitted to the terminal (core.term.fit), models below full coverage marked."""
    from core.term import console as make_console
    from core.term import render

    console = make_console()
    for t in tables:
        for rt in render(t, console.width, models or {}):
            console.print(rt)
