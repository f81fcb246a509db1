"""The viewer's data (report/samples.py) and the report's defensive reading of run folders: which
sample is correct/wrong/error/unextractable, calls joined to their scored rows, the per-model cap,
folders that are not runs, and the coverage and deviation fields of newer scores.json files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from report.load import ReportError, load_runs
from report.samples import status_of, write_view
from report.tables import coverage_of, deviations_of, views_of
from tests.report_runs import make_run, row


def _js(path: Path) -> object:
    text = path.read_text()
    assert text.startswith("EVS.put(") and text.endswith(");\n")
    key, _, data = text[len("EVS.put(") : -3].partition(",")
    return json.loads(data)


def test_status_of_each_outcome() -> None:
    assert status_of(1.0, "B", None) == "correct"
    assert status_of(0.5, "AB", None) == "partial"
    assert status_of(0.0, "C", None) == "wrong"
    assert status_of(0.0, None, None) == "unextractable"  # no answer found: wrong, as the papers score it
    assert status_of(None, None, "timeout") == "error"  # a failed call is not a wrong answer
    assert status_of(None, "B", None) == "unscored"


def _scored(run: Path, rows: list[dict]) -> None:
    (run / "scored.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_records_join_calls_to_scored_rows(tmp_path: Path) -> None:
    results = [
        row("m", "1", 0.01, sample=0),
        row("m", "1", 0.02, sample=1),
        row("m", "2", None, error="HTTP 500", attempts=6),
        row("n", "1", 0.01),
    ]
    results[0]["text"], results[1]["text"] = "so (B)", "maybe C"
    # a resume wrote more rows for the same calls: the last success wins over a later error
    results += [
        row("m", "1", None, error="HTTP 429", sample=1),
        row("m", "2", None, error="HTTP 500", attempts=6),
    ]
    results.insert(0, row("m", "1", None, error="timeout", sample=0))
    run = make_run(
        tmp_path, "r", "vrb", {"m": {}, "n": {}}, {"m": {"accuracy": 1}, "n": {"accuracy": 0}}, results
    )
    _scored(
        run,
        [  # one row per (model, item) with per-sample extracts (JEEBench's shape)
            {"model": "m", "item": "1", "extracted": "B", "gold": "B", "score": 1.0,
             "samples": ["B", "C"], "stages": ["rules", "judge"]},
            {"model": "m", "item": "2", "extracted": None, "gold": "A", "score": None,
             "error": "HTTP 500", "error_kind": "server"},
            {"model": "n", "item": "1", "extracted": None, "gold": "B", "score": 0.0, "stage": "none"},
        ],
    )  # fmt: skip
    loaded = load_runs([run])
    (v,) = views_of(loaded.entries, loaded.extras)
    out = tmp_path / "report"
    vd = write_view(out, v.slug, v.label, v.entries)
    by = {m["name"]: m for m in vd.models}
    assert by["m"]["counts"] == {"correct": 1, "error": 1} and by["n"]["counts"] == {"unextractable": 1}
    assert by["m"]["stages"] == ["judge", "rules"]
    m = {r["i"]: r for r in _js(out / by["m"]["file"])}  # type: ignore[union-attr]
    one = m["1"]
    assert [(c["n"], c["t"], c["x"], c["sg"]) for c in one["k"]] == [
        (0, "so (B)", "B", "rules"),
        (1, "maybe C", "C", "judge"),
    ]
    assert (one["st"], one["x"], one["g"], one["sg"], one["c"], one["a"]) == (
        "correct",
        "B",
        "B",
        "rules",
        0.03,
        2,
    )
    two = m["2"]
    assert (two["st"], two["e"], two["k"][0]["a"], two["k"][0]["e"]) == ("error", "HTTP 500", 6, "HTTP 500")
    # the vrb data is not reachable here: responses are still shown, with a note instead of prompts
    assert vd.prompts is None and any("prompts not shown" in n for n in vd.notes)


def test_per_sample_scored_rows_and_the_cap(tmp_path: Path) -> None:
    """Suites that score samples one by one get one viewer row per sample, with that sample's calls;
    a model with more items than the cap keeps the first ones, and a note says so."""
    results = [row("m", str(i), 0.01, sample=s) for i in range(5) for s in (0, 1)]
    run = make_run(tmp_path, "r", "vrb", {"m": {}}, {"m": {"accuracy": 0.5}}, results)
    _scored(
        run,
        [
            {"model": "m", "item": str(i), "sample": s, "extracted": "A", "gold": "A", "score": float(s)}
            for i in range(5)
            for s in (0, 1)
        ],
    )
    loaded = load_runs([run])
    (v,) = views_of(loaded.entries, loaded.extras)
    out = tmp_path / "report"
    vd = write_view(out, v.slug, v.label, v.entries, max_items=3)
    recs = _js(out / vd.models[0]["file"])
    assert [(r["i"], r["n"], r["st"], [c["n"] for c in r["k"]]) for r in recs] == [  # type: ignore[union-attr]
        (str(i), s, "correct" if s else "wrong", [s]) for i in range(3) for s in (0, 1)
    ]
    assert "m: the viewer shows the first 3 of its 5 items" in vd.notes


def test_report_skips_folders_that_are_not_scored_runs(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    good = make_run(runs, "a", "vrb", {"m": {}}, {"m": {"accuracy": 0.5}}, [row("m", "1", 0.1)])
    unscored = make_run(runs, "b", "vrb", {"m": {}}, {"m": {"accuracy": 0.5}}, [])
    (unscored / "scores.json").unlink()
    (runs / "cache").mkdir()
    (runs / "report").mkdir()
    (runs / "README.txt").write_text("x")
    loaded = load_runs(sorted(runs.iterdir()), skip=[runs / "report"])
    assert loaded.run_dirs == [good] and [e.model for e in loaded.entries] == ["m"]
    assert loaded.notes == [
        f"{runs / 'README.txt'}: not a run directory (no such folder), skipped",
        f"{unscored / 'scores.json'}: missing; score the run first: `evalsweep score {unscored}` (skipped)",
        f"{runs / 'cache'}: not a run directory (no manifest.json), skipped",
        f"{runs / 'report'}: the report's output folder, skipped",
    ]
    with pytest.raises(ReportError, match=r"no scored models in .*cache: not a run directory"):
        load_runs([runs / "cache"])


def test_coverage_and_deviations_are_read_defensively(tmp_path: Path) -> None:
    scores = {
        "full": {"accuracy": 0.5, "n_planned": 10, "n_scored": 10, "n_errors": 0, "coverage": 1.0},
        "low": {"accuracy": 0.5, "n_planned": 10, "n_scored": 7, "n_errors": 3},  # coverage derived
        "old": {"accuracy": 0.5},  # an older run dir: nothing to say
        "odd": {"accuracy": 0.5, "n_planned": "10", "coverage": True},  # garbage is not a number
    }
    run = make_run(tmp_path, "r", "vrb", {m: {} for m in scores}, scores, [])
    loaded = load_runs([run])
    cov = {e.model: coverage_of(e)["coverage"] for e in loaded.entries}
    assert cov == {"full": 1.0, "low": 0.7, "old": None, "odd": None}
    assert deviations_of({"deviations": ["max_tokens 1024", {"text": "no judge"}, {"k": "v"}]}) == [
        "max_tokens 1024",
        "no judge",
        "k: v",
    ]
    assert deviations_of(None) == deviations_of({"deviations": "x"}) == []


def test_join_workers_files_are_read_too(tmp_path: Path) -> None:
    """A --join run keeps each worker's rows in results.<host>-<pid>.jsonl: costs and the viewer read
    them with results.jsonl, the last success of each call winning across files."""
    run = make_run(
        tmp_path, "r", "vrb", {"m": {}}, {"m": {"accuracy": 1}}, [row("m", "1", None, error="HTTP 500")]
    )
    (run / "results.h-2.jsonl").write_text(
        json.dumps(row("m", "1", 0.25)) + "\n" + json.dumps(row("m", "2", 0.5))
    )
    _scored(run, [{"model": "m", "item": i, "extracted": "A", "gold": "A", "score": 1.0} for i in ("1", "2")])
    (e,) = load_runs([run]).entries
    assert (e.cost.total, e.cost.calls, e.cost.errors) == (0.25, 1, 0)  # the torn line of item 2 skipped
    loaded = load_runs([run])
    (v,) = views_of(loaded.entries, loaded.extras)
    vd = write_view(tmp_path / "out", v.slug, v.label, v.entries)
    recs = _js(tmp_path / "out" / vd.models[0]["file"])
    assert [(r["i"], r["st"], [c["c"] for c in r["k"]]) for r in recs] == [
        ("1", "correct", [0.25]),
        ("2", "correct", []),
    ]  # type: ignore[union-attr]
