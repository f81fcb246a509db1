"""What a suite is: plain functions over plain data.

A suite knows its benchmark (load → prompt → extract → score → aggregate) and nothing of HTTP.
The runner calls `build` lazily per model, `follow_up` on every finished row (second passes:
self-critique, LLM-judge extraction), and `score` on the deduplicated rows of a run directory.

Scoring streams: `score(rows, spec, run_dir, sink)` reads `rows` once, in (model, item, sample, pass)
order (`group_rows` / `by_model` walk them one (model, item) group / one model at a time), hands each
scored row to `sink` as soon as it is made (the runner writes it to scored.jsonl at once) and keeps
only per-model aggregates. A failed call is not a wrong answer: its scored row has `score: None` and
the row's `error_kind`, and every metric is computed over the answered items.
"""

from __future__ import annotations

import argparse
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.types import Request, Row


class SuiteError(Exception):
    """Bad suite input (missing data file, bad option): the message names the file/field and the fix."""


@dataclass(frozen=True)
class RunSpec:
    """Everything that defines one run's requests, independent of the models it runs on.

    `options` holds the suite's own flags by argparse dest name (`variant`, `data_dir`, `judge`...).
    `samples`/`temperature` are None when the user did not set them (the suite picks its default).
    """

    suite: str
    options: dict[str, Any] = field(default_factory=dict)
    samples: int | None = None
    temperature: float | None = None
    limit: int | None = None

    def opt(self, name: str, default: Any = None) -> Any:
        v = self.options.get(name)
        return default if v is None else v

    @classmethod
    def from_manifest(cls, spec: dict[str, Any]) -> RunSpec:
        """The spec as `manifest.json` records it (its "spec" object)."""
        return cls(
            suite=spec["suite"],
            options=spec.get("options") or {},
            samples=spec.get("samples"),
            temperature=spec.get("temperature"),
            limit=spec.get("limit"),
        )


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]]
    note: str = ""
    key: tuple[str, ...] = ()
    """Headline columns: kept beside the row label when the terminal is too narrow for the whole table."""


class Sink:
    """Where a scorer puts its scored rows: `write` (the runner: scored.jsonl, written as it goes), or
    kept in `rows` when there is no writer (tests, small callers)."""

    def __init__(self, write: Callable[[Row], None] | None = None) -> None:
        self.rows: list[Row] = []
        self._write = write if write is not None else self.rows.append
        self.n = 0

    def __call__(self, row: Row) -> None:
        self._write(row)
        self.n += 1


@dataclass
class ScoreReport:
    """What a suite's scorer returns. `models` becomes scores.json's `models`; `extra` is merged into
    scores.json's top level; `scored` are the scored.jsonl rows the sink kept (empty when they went to
    a file: one per model and item: `model, item, extracted, gold, score` plus suite fields)."""

    models: dict[str, dict[str, Any]]
    scored: list[Row] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def _no_follow_up(req: Request, row: Row, spec: RunSpec) -> list[Request]:
    return []


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    return None


def _default_run_name(spec: RunSpec) -> str:
    v = spec.options.get("variant")
    return f"{spec.suite}-{v}" if v else spec.suite


@dataclass(frozen=True)
class Suite:
    name: str
    build: Callable[[RunSpec], Iterable[Request]]
    """Model-agnostic first-pass requests (model left ""), lazily; the runner fills in each model."""
    score: Callable[..., ScoreReport]
    """`score(rows, spec, run_dir, sink=None)`: rows are the run's final rows, one per (model, item,
    sample, pass), sorted; scored rows go to `sink` (a new `Sink()` when None) as they are made."""
    follow_up: Callable[[Request, Row, RunSpec], list[Request]] = _no_follow_up
    """Requests to make once `row` (the answer to `req`, one sample) is in; [] when the item is done.
    Rows with an `error` are passed too, so a suite can decide (usually: no follow-up)."""
    add_arguments: Callable[[argparse.ArgumentParser], None] = _no_arguments
    headline: str = "accuracy"
    """The key of each model's scores that leaderboards and the report rank by."""
    run_name: Callable[[RunSpec], str] = _default_run_name
    """Default run directory name under runs/ (deterministic, so rerunning resumes)."""
    check: Callable[[RunSpec], None] | None = None
    """Validate data/options before anything is sent; raise SuiteError with a clear message."""
    count: Callable[[RunSpec], int] | None = None
    """First-pass calls per model (samples included), for progress and ETA; default: iterate `build`."""
    answer_tokens: int | None = None
    """A typical answer's length in tokens (measured on published responses), for the dry run's expected
    cost before a run has answers of its own; None: half of max_tokens."""
    revision: int = 0
    """Bumped when the requests the suite builds for the same settings change (a default that now follows
    the paper): a run directory made at another revision is not resumed into, so no run mixes the two."""
    revision_note: str = ""
    """What the current revision changed, said when an older directory is refused."""
    open_max_tokens: int | None = None
    """The max_tokens the paper's code sends when the suite leaves it to each model's maximum (VRB: 33,000);
    a model whose maximum is unknown gets its provider's fallback, recorded as a deviation."""
    deviations: Callable[[RunSpec], list[str]] | None = None
    passes: tuple[str, ...] = ("answer",)
    """The passes the suite makes (a user's suite declares its follow-ups: ("answer", "critique")): a
    declared pass that no `follow_up` makes is an error before the first call, never 0 calls and exit 0."""
    """How this run departs from the paper's protocol (empty: the paper's protocol). Said before the run
    starts, recorded in the manifest, in scores.json (`protocol.deviations`) and under every table."""
    paper_judge: tuple[Callable[[str], bool], str] | None = None
    """(is this name or model id the paper's judge?, the paper's judge in words): `deviations` reads the
    --judge name; the runner also checks the model id that name resolves to (an alias is not the model)."""


TRUNCATED = ("length", "max_tokens")
"""finish_reason of an answer cut by the token limit (OpenAI-compatible / Anthropic)."""


class Truncation:
    """Counts, as a run's rows stream past, each model's answers and those cut by the token limit."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.cut: Counter[str] = Counter()

    def watch(self, rows: Iterable[Row]) -> Iterable[Row]:
        """`rows`, counted as they pass; a list stays a list (group_rows sorts a list, not a stream)."""
        if isinstance(rows, list):
            for r in rows:
                self._count(r)
            return rows
        return self._watch(rows)

    def _watch(self, rows: Iterable[Row]) -> Iterator[Row]:
        for r in rows:
            self._count(r)
            yield r

    def _count(self, r: Row) -> None:
        if not r.get("error") and r.get("pass", "answer") == "answer":
            self.calls[r["model"]] += 1
            self.cut[r["model"]] += r.get("finish_reason") in TRUNCATED


def run_deviations(spec: RunSpec, items: str, paper: str = "the paper") -> list[str]:
    """The departures every suite words alike: samples or temperature other than one greedy answer, and
    `--limit` (a subset of `items`)."""
    out = []
    if spec.samples not in (None, 1) or spec.temperature not in (None, 0.0):
        out.append(f"samples {spec.samples or 1} at temperature {spec.temperature or 0} ({paper}: 1, greedy)")
    if spec.limit is not None:
        out.append(f"--limit {spec.limit}: a subset of {items}")
    return out


def with_protocol(
    report: ScoreReport, deviations: list[str], truncation: Truncation | None = None
) -> ScoreReport:
    """Record `deviations` in scores.json (`protocol: {"protocol": paper|custom, "deviations": [...]}`) and
    show them under every table, next to the numbers. With `truncation`: each model's `truncated` answers
    and `truncation_rate` (finish_reason length), and a table when any answer was cut."""
    if truncation is not None:
        for m, s in report.models.items():
            n = truncation.calls[m]
            s["truncated"] = truncation.cut[m]
            s["truncation_rate"] = truncation.cut[m] / n if n else None
        if any(truncation.cut.values()):
            report.tables.append(
                Table(
                    title="answers cut by the token limit (finish_reason length)",
                    columns=["model", "answers", "truncated", "rate"],
                    rows=[
                        [m, truncation.calls[m], s["truncated"], s["truncation_rate"]]
                        for m, s in report.models.items()
                    ],
                    note="A cut answer usually lacks its final line; raise max_tokens (config `max_output_tokens`).",
                )
            )
    report.extra["protocol"] = {"protocol": "custom" if deviations else "paper", "deviations": deviations}
    if deviations:
        line = "Deviations from the paper's protocol: " + "; ".join(deviations) + "."
        for t in report.tables:
            t.note = f"{t.note}\n{line}".strip()
    return report


ENTRY_POINTS = "evalsweep.suites"
"""The entry-point group an installed package names its suites in (`name = "package.module:SUITE"`)."""
_LOADED: dict[str, Suite] = {}


def get_suite(name: str) -> Suite:
    """Resolve `jeebench`, `marvel`, `m3gia`, `vrb`, `jsonl:PATH`, a suite file (`path/to/my_suite.py`, its
    `SUITE`), a module (`package.module:SUITE`) or an installed package's entry point to its Suite. A
    user's suite needs nothing of our source tree."""
    import importlib

    if name in _LOADED:
        return _LOADED[name]
    key = name.split(":", 1)[0]
    if not key.isidentifier() and (name.endswith(".py") or "/" in key):  # (jsonl:/a/b is a built-in's)
        return _remember(name, _from_file(name))
    if "." in key and all(p.isidentifier() for p in key.split(".")):
        return _remember(name, _from_module(key, name.split(":", 1)[1] if ":" in name else "SUITE", name))
    if not key.isidentifier():
        raise SuiteError(f"unknown suite {name!r}")
    try:
        mod = importlib.import_module(f"suites.{key}")
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith(f"suites.{key}"):
            found = installed()
            if key in found:
                return _remember(name, _checked(found[key].load(), name))
            raise SuiteError(f"unknown suite {name!r}; known: {', '.join(SUITES)}, jsonl:PATH"
                             + "".join(f", {k}" for k in found) + ", a suite file (path/to/suite.py) or "
                             "package.module:SUITE (`evalsweep suites` lists them)") from None
        raise
    return mod.SUITE


def installed() -> dict[str, Any]:
    """Suites installed packages declare (entry points of the `evalsweep.suites` group), by name."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINTS)}


def _remember(name: str, suite: Suite) -> Suite:
    _LOADED[name] = suite
    return suite


def _checked(obj: Any, where: str) -> Suite:
    if not isinstance(obj, Suite):
        raise SuiteError(f"{where}: SUITE is a {type(obj).__name__}, not a suites.base.Suite")
    later = [p for p in obj.passes if p != "answer"]
    if later and obj.follow_up is _no_follow_up:
        raise SuiteError(f"{where}: SUITE declares the pass{'es' if len(later) > 1 else ''} "
                         f"{', '.join(later)} but wires no follow_up= to make them (Suite(..., follow_up=...))")
    if obj.run_name is _default_run_name and obj.name != where.split(":", 1)[0]:
        from dataclasses import replace  # runs/<the suite's own name>[-variant], not runs/<its path>

        obj = replace(obj, run_name=lambda spec, n=obj.name: _default_run_name(spec).replace(spec.suite, n, 1))
    return obj


def _from_file(path: str) -> Suite:
    """A suite file outside our tree: imported under a name of its own, its `SUITE` returned."""
    import hashlib
    import importlib.util
    import sys
    from pathlib import Path

    p = Path(path).expanduser()
    if not p.is_file():
        raise SuiteError(f"{path}: no such suite file (a Python file defining SUITE = Suite(...))")
    mod_name = f"evalsweep_suite_{p.stem}_{hashlib.sha256(str(p.resolve()).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise SuiteError(f"{path}: cannot be imported as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # the user's file: its error, named with the file
        import traceback

        where = next((f"{f.filename}:{f.lineno}" for f in reversed(traceback.extract_tb(e.__traceback__))
                      if Path(f.filename).resolve() == p.resolve()), str(p))
        raise SuiteError(f"{where}: the suite file failed to import: {type(e).__name__}: {e}") from None
    if not hasattr(mod, "SUITE"):
        raise SuiteError(f"{path}: defines no SUITE (SUITE = Suite(name=..., build=..., score=...))")
    return _checked(mod.SUITE, path)


def _from_module(module: str, attr: str, name: str) -> Suite:
    import importlib

    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise SuiteError(f"{name}: cannot import {module} ({e})") from None
    if not hasattr(mod, attr):
        raise SuiteError(f"{name}: {module} has no {attr}")
    return _checked(getattr(mod, attr), name)


SUITES = ("jeebench", "marvel", "m3gia", "vrb")


def has_paper(suite: str) -> bool:
    """A suite reproducing a paper's protocol (the built-ins); `jsonl:` and a user's suite have none,
    and their departures are from their own protocol."""
    return suite.split(":", 1)[0] in SUITES


def protocol_of(suite: str) -> str:
    """How the departures' heading names the protocol: the paper's, or the suite's own."""
    return "the paper's protocol" if has_paper(suite) else "the suite's protocol"


def judge_request(req: Request, row: Row, judge: str, instruction: str, sim: dict | None = None) -> Request:
    """An LLM-judge extraction pass over `row`'s answer: called on `judge`, recorded under `req.model`."""
    from core.types import user

    prompt = f"{instruction}\n\n--- RESPONSE ---\n{row.get('text') or ''}\n--- END ---"
    return Request(
        suite=req.suite,
        item=req.item,
        model=req.model,
        sample=row["sample"],
        pass_="judge",
        via=judge,
        messages=[user(prompt)],
        decoding={"temperature": 0.0, "max_tokens": 32},
        sim=sim,
    )


def _model_item(r: Row) -> tuple[str, str]:
    return r["model"], r["item"]


def group_rows(rows: Iterable[Row]) -> Iterator[tuple[tuple[str, str], list[Row]]]:
    """Group rows by (model, item), samples and passes together, holding one group at a time.

    The runner's rows come sorted (`runner.results.final_rows`); a list (tests, small callers) is
    sorted here first, stably, so its groups come out whole in (model, item) order too. A stream that is
    not sorted would split a group and score it twice: a ValueError, never a silent loss."""
    if isinstance(rows, list):
        rows = sorted(rows, key=_model_item)
    seen: set[tuple[str, str]] = set()
    for key, grp in itertools.groupby(rows, key=_model_item):
        if key in seen:
            raise ValueError(f"rows of {key[0]} on item {key[1]!r} come apart: a stream of rows must be "
                             "sorted by (model, item) (runner.results.final_rows); pass a list to have it sorted")
        seen.add(key)
        yield key, list(grp)


def by_model(rows: Iterable[Row]) -> Iterator[tuple[str, Iterator[tuple[str, list[Row]]]]]:
    """(model, its (item, rows) groups) one model at a time, for per-model aggregation."""
    groups = group_rows(rows)
    for model, grp in itertools.groupby(groups, key=lambda g: g[0][0]):
        yield model, ((item, rows) for (_, item), rows in grp)


def scored_row(r: Row, **fields: Any) -> Row:
    """A scored row for answer row `r`: `model, item, sample`, the suite's fields, and for a failed call
    `score: None` with its `error` and `error_kind` (a failed call is not a wrong answer)."""
    out: Row = {"model": r["model"], "item": r["item"], "sample": r.get("sample", 0), **fields}
    if r.get("error"):
        out.update(score=None, error=r["error"], error_kind=r.get("error_kind") or "error")
    else:
        out.setdefault("error", None)
    return out


def ranked(
    models: Mapping[str, Mapping[str, Any]], key: str | Callable[[Mapping[str, Any]], Any]
) -> list[str]:
    """Model names by their headline score, best first (None last), then by name: every table's order."""
    get = key if callable(key) else (lambda s: s.get(key))

    def k(m: str) -> tuple[bool, float, str]:
        v = get(models[m])
        return (not isinstance(v, int | float), -float(v) if isinstance(v, int | float) else 0.0, m)

    return sorted(models, key=k)
