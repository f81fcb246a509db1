"""The streaming scoring stage: bounded-memory bootstrap CIs equal to the one-matrix method, rows walked one
(model, item) group at a time, failed calls scored None with their kind, coverage fields in scores.json,
and terminal tables that fit 80 columns, ranked by the headline, never cutting it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest
from rich.console import Console

from core.term import render
from runner.score import Coverage
from suites.base import Table, by_model, group_rows, ranked
from suites.stats import EXACT_MAX, bootstrap_ci, bootstrap_means, ci_method
from tests.helpers import REPO, write_dataset


def _one_matrix_ci(values: list[float], n_resamples: int = 1000, seed: int = 0) -> tuple[float, float]:
    """The method as it was: one n_resamples x N index matrix."""
    x = np.asarray(values, dtype=float)
    idx = np.random.default_rng(seed).integers(0, x.size, size=(n_resamples, x.size))
    lo, hi = np.quantile(x[idx].mean(axis=1), [0.025, 0.975])
    return float(lo), float(hi)


@pytest.mark.parametrize("n", [1, 7, 515, 3001])
@pytest.mark.parametrize("chunk", [1, 1000, 1 << 22])
def test_chunked_bootstrap_equals_the_one_matrix_method(n: int, chunk: int) -> None:
    rng = np.random.default_rng(n)
    values = rng.choice([0.0, 0.25, 0.5, 1.0], size=n).tolist()
    for seed in (0, 3):
        got = bootstrap_ci(values, seed=seed, chunk_elements=chunk)
        want = _one_matrix_ci(values, seed=seed)
        assert got is not None
        assert abs(got[0] - want[0]) <= 1e-12 and abs(got[1] - want[1]) <= 1e-12


def test_multinomial_bootstrap_above_exact_max_matches_the_binomial_distribution() -> None:
    n = EXACT_MAX + 50_000
    p = 0.3
    x = np.zeros(n)
    x[: int(p * n)] = 1.0
    means = bootstrap_means(x, n_resamples=4000, seed=1)
    assert means.shape == (4000,)
    se = np.sqrt(p * (1 - p) / n)  # the bootstrap distribution of a 0/1 mean is Binomial(n, p) / n
    assert abs(means.mean() - p) < 0.2 * se and abs(means.std() - se) < 0.1 * se
    lo, hi = bootstrap_ci(x)  # type: ignore[misc]
    assert lo < p < hi and abs((hi - lo) / 2 - 1.96 * se) < 0.15 * se
    assert "multinomial" in ci_method(n) and "multinomial" not in ci_method(515)


def _r(model: str, item: str, sample: int = 0, pass_: str = "answer", **kw: object) -> dict:
    return {"model": model, "item": item, "sample": sample, "pass": pass_, "error": None, **kw}


def test_groups_stream_one_model_and_item_at_a_time() -> None:
    rows = [_r("a", "1"), _r("a", "1", 1), _r("a", "1", 0, "judge"), _r("a", "2"), _r("b", "1")]
    seen = []

    def stream():  # sorted, as runner.results.final_rows yields them
        for r in rows:
            seen.append(r)
            yield r

    groups = group_rows(stream())
    (key, grp) = next(groups)
    assert key == ("a", "1") and len(grp) == 3 and len(seen) == 4  # read one row past the group, no more
    per_model = [(m, [i for i, _ in g]) for m, g in by_model(rows)]
    assert per_model == [("a", ["1", "2"]), ("b", ["1"])]
    # a list (tests, small callers) is grouped whole even when unsorted
    assert [k for k, _ in group_rows([rows[3], rows[0], rows[4], rows[1]])] == [
        ("a", "1"),
        ("a", "2"),
        ("b", "1"),
    ]
    # ... and still when a suite's score counts truncation on the way (before: the count turned the list
    # into a stream, left unsorted: item 1's later row was a second group, scored twice)
    from suites.base import Truncation

    unsorted = [rows[3], rows[0], rows[4], rows[1]]
    assert [k for k, _ in group_rows(Truncation().watch(unsorted))] == [("a", "1"), ("a", "2"), ("b", "1")]
    # an unsorted stream says so instead of splitting a group
    with pytest.raises(ValueError, match="come apart"):
        list(group_rows(iter(unsorted)))


def test_coverage_counts_each_planned_call_once() -> None:
    rows = [
        _r("m", "1"),
        _r("m", "2", error="HTTP 500", error_kind="server"),
        _r("m", "3"),
        _r("m", "3", 0, "judge", error="timeout"),  # the judge its extraction needed failed: not read
        _r("m", "4"),
        _r("m", "4", 0, "critique"),
        _r("m", "5", error="reasoning exhausted", error_kind="reasoning_exhausted"),
    ]
    cov = Coverage()
    assert list(cov.watch(iter(rows))) == rows
    assert cov.fields("m", 6) == {
        "n_planned": 6, "n_scored": 2, "n_errors": 3, "coverage": 2 / 6, "n_reasoning_exhausted": 1
    }
    assert cov.fields("m", None)["n_planned"] == 5  # plan unknown: the rows present


def test_ranked_puts_the_best_headline_first_and_none_last() -> None:
    models = {"b": {"acc": 0.5}, "a": {"acc": 0.5}, "c": {"acc": 0.9}, "d": {"acc": None}}
    assert ranked(models, "acc") == ["c", "a", "b", "d"]


def _text(tables: list) -> list[str]:
    buf = io.StringIO()
    con = Console(file=buf, width=80, color_system=None)
    for t in tables:
        con.print(t)
    return buf.getvalue().splitlines()


def test_wide_table_fits_80_columns_headline_whole_in_first_panel() -> None:
    cols = ["model", "variant", *(f"metric {i}" for i in range(9)), "overall", "95% CI"]
    rows = [
        [
            f"provider/model-{k}-with-a-long-name",
            "cot",
            *(0.1 * k + 0.01 * i for i in range(9)),
            0.5 + k / 10,
            [0.41, 0.5 + k / 10],
        ]
        for k in range(3)
    ]
    partial = {
        "provider/model-1-with-a-long-name": {"coverage": 0.8, "n_scored": 4, "n_planned": 5, "n_errors": 1}
    }
    t = Table(title="t", columns=cols, rows=rows, note="n", key=("overall", "95% CI"))
    panels = render(t, 80, partial)
    lines = _text(panels)
    assert len(panels) > 2 and max(map(len, lines)) <= 80  # panels, then the note
    first = "\n".join(_text(panels[:1]))
    for k in range(3):
        assert f"{0.5 + k / 10:.3f}" in first and f"[0.410, {0.5 + k / 10:.3f}]" in first  # never cut
    assert "…" not in "\n".join(lines)
    assert "variant" not in first and "in every row: variant cot" in "\n".join(lines)  # constant column noted
    # long labels shortened by the live view's rule: the shared "provider/" into the header, names whole
    assert panels[0].columns[0]._cells[1] == "model-1-with-a-long-name*"
    assert panels[0].columns[0].header == "model (provider/*)"
    assert "4/5 answered (80%), 1 errors" in " ".join(" ".join(lines).split())


def _run_dir(tmp_path: Path) -> Path:
    data = write_dataset(tmp_path / "d.jsonl", 6)
    run = tmp_path / "run"
    run.mkdir()
    suite = f"jsonl:{data}"
    spec = {"suite": suite, "options": {}, "samples": None, "temperature": None, "limit": None}
    (run / "manifest.json").write_bytes(orjson.dumps({"spec": spec, "models": ["good", "flaky", "never"]}))
    lines = []
    for i in range(6):
        gold = "ABCD"[i % 4]
        lines.append(_r("good", f"q{i}", suite=suite, text=f"The answer is {gold}."))
        if i < 3:
            lines.append(
                _r("flaky", f"q{i}", suite=suite, text="The answer is Z." if i else f"answer: {gold}")
            )
        elif i < 5:
            lines.append(
                _r("flaky", f"q{i}", suite=suite, text=None, error="HTTP 429", error_kind="rate_limit")
            )
    (run / "results.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    return run


def test_score_cli_streams_scored_rows_and_reports_coverage(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-m", "cli", "score", str(run)], capture_output=True, text=True,
                       cwd=REPO, env=env, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    scores = json.loads((run / "scores.json").read_text())
    good, flaky = scores["models"]["good"], scores["models"]["flaky"]
    assert {k: good[k] for k in ("n_planned", "n_scored", "n_errors", "coverage")} == {
        "n_planned": 6, "n_scored": 6, "n_errors": 0, "coverage": 1.0}  # fmt: skip
    # flaky: q0 right, q1 and q2 unextractable (wrong, as the papers score them), q3 q4 failed, q5 never made
    assert {k: flaky[k] for k in ("n_planned", "n_scored", "n_errors")} == {
        "n_planned": 6,
        "n_scored": 3,
        "n_errors": 2,
    }
    assert (
        flaky["coverage"] == pytest.approx(0.5)
        and flaky["n"] == 3
        and flaky["accuracy"] == pytest.approx(1 / 3)
    )
    assert scores["unscored_models"]["never"]["coverage"] == 0.0
    scored = [json.loads(x) for x in (run / "scored.jsonl").read_text().splitlines()]
    failed = [s for s in scored if s["model"] == "flaky" and s["item"] in ("q3", "q4")]
    assert len(scored) == 11 and all(s["score"] is None and s["error_kind"] == "rate_limit" for s in failed)
    assert not (run / "scored.jsonl.tmp").exists()
    out = r.stdout.splitlines()
    assert max(map(len, out[:-1])) <= 80  # the tables; the last line names the files written
    body = [x for x in out if x.startswith("│")]
    assert body[0].split("│")[1].strip() == "good" and body[1].split("│")[1].strip() == "flaky*"
    assert "flaky 3/6 answered (50%), 2 errors" in " ".join(" ".join(out).split())


def test_final_rows_match_the_identity_dict_method(tmp_path: Path) -> None:
    """The compact final_offsets keeps what the dict of identities kept: per identity the last success,
    else the last error, over every results file of the run, in (model, item, sample, pass) order."""
    from core.types import row_identity
    from runner.results import final_offsets, final_rows
    from runner.rowindex import index

    rng = np.random.default_rng(5)
    path = tmp_path / "results.jsonl"
    for name, n in (("results.jsonl", 3000), ("results.host-1.jsonl", 500)):
        lines = []
        for k in range(n):
            model = ["b", "a", "c/x"][int(rng.integers(3))]
            item = f"q{int(rng.integers(400))}"
            lines.append(orjson.dumps({"model": model, "item": item, "sample": int(rng.integers(3)),
                                       "pass": ["answer", "judge"][int(rng.integers(2))], "k": k,
                                       "error": None if rng.random() < 0.6 else "HTTP 500"}) + b"\n")  # fmt: skip
        (tmp_path / name).write_bytes(b"".join(lines))
    _, final = index(path)

    def key(ident: str) -> tuple:
        m, i, s, p = ident.split("\x1f")
        return m, i, int(s), p

    want = [
        loc if isinstance(loc, tuple) else (path, loc)
        for _, loc in sorted(final.items(), key=lambda kv: key(kv[0]))
    ]
    paths, which, offsets = final_offsets(path)
    assert [(paths[k], off) for k, off in zip(which.tolist(), offsets.tolist(), strict=True)] == want
    assert any(p != path for p, _ in want)
    got = list(final_rows(path))
    assert [row_identity(r["model"], r["item"], r["sample"], r["pass"]) for r in got] == sorted(
        final, key=key
    )
