"""The sweep report's rules: Pareto frontier, snapshots over release dates, loading run directories."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from report.costs import run_costs
from report.frontier import Point, dominates, over_time, pareto, pick_snapshots
from report.load import ReportError, load_runs, parse_date, read_models_table
from report.tables import views_of
from tests.report_runs import make_run, row

# ---------------------------------------------------------------- Pareto frontier


def test_pareto_excludes_dominated_keeps_ties_and_skips_unknown_cost() -> None:
    pts = [
        Point("cheap", 0.5, 0.30),
        Point("a", 1.0, 0.50),
        Point("a-twin", 1.0, 0.50),  # identical cost and accuracy: neither dominates, both stay
        Point("b", 2.0, 0.70),
        Point("b-twin", 2.0, 0.70),
        Point("same-cost-worse", 2.0, 0.65),  # dominated by b (equal cost, lower accuracy)
        Point("same-acc-dearer", 4.0, 0.70),  # dominated by b (equal accuracy, higher cost)
        Point("dominated", 3.0, 0.60),
        Point("free-but-bad", 0.0, 0.10),  # cost 0 is a known cost: cheapest, on the frontier
        Point("no-price", None, 0.99),  # unknown cost: not placed at all
        Point("no-score", 0.1, None),
    ]
    front = [p.name for p in pareto(pts)]
    assert front == ["free-but-bad", "cheap", "a", "a-twin", "b", "b-twin"]


def test_dominates_needs_one_strict_improvement() -> None:
    a, a2 = Point("a", 1.0, 0.5), Point("a2", 1.0, 0.5)
    assert not dominates(a, a2) and not dominates(a2, a)
    assert dominates(Point("c", 1.0, 0.6), a) and dominates(Point("d", 0.9, 0.5), a)
    assert not dominates(Point("e", 0.9, 0.4), a)  # cheaper but worse: a trade-off, not domination


def test_pareto_single_and_empty() -> None:
    assert pareto([]) == []
    assert [p.name for p in pareto([Point("only", 3.0, 0.2)])] == ["only"]


# ---------------------------------------------------------------- frontier over time


def test_snapshots_follow_release_dates_and_record_changes_only() -> None:
    pts = [
        Point("x", 10.0, 0.50, date(2024, 1, 1)),
        Point("y", 1.0, 0.40, date(2024, 3, 1)),  # cheaper, worse: joins the frontier
        Point("z", 20.0, 0.45, date(2024, 5, 1)),  # dominated on arrival: no new snapshot
        Point("w", 5.0, 0.60, date(2024, 7, 1)),  # cheaper and better than x: replaces it
        Point("undated", 0.1, 0.90, None),  # would dominate all, but cannot be placed in time
        Point("unpriced", None, 0.95, date(2024, 2, 1)),
    ]
    snaps = over_time(pts)
    assert [(s.when, [p.name for p in s.frontier], s.new) for s in snaps] == [
        (date(2024, 1, 1), ["x"], ["x"]),
        (date(2024, 3, 1), ["y", "x"], ["y"]),
        (date(2024, 7, 1), ["y", "w"], ["w"]),
    ]
    assert [p.name for p in pareto(pts)] == ["undated"]  # the full frontier still counts it


def test_snapshot_same_day_releases_and_picking() -> None:
    pts = [Point("a", 1.0, 0.5, date(2025, 1, 1)), Point("b", 1.0, 0.5, date(2025, 1, 1))]
    (s,) = over_time(pts)
    assert [p.name for p in s.frontier] == ["a", "b"] and s.new == ["a", "b"]
    many = over_time([Point(f"m{i}", 1.0, 0.1 * i, date(2020 + i, 1, 1)) for i in range(1, 10)])
    assert len(many) == 9
    picked = pick_snapshots(many, 6)
    assert len(picked) == 6 and picked[0] is many[0] and picked[-1] is many[-1]
    assert pick_snapshots(many[:3], 6) == many[:3]


# ---------------------------------------------------------------- loading


def test_run_cost_uses_final_rows_and_keeps_unknown_unknown(tmp_path: Path) -> None:
    results = [
        row("m1", "1", None, error="timeout"),  # superseded by the retry below
        row("m1", "1", 0.002),
        row("m1", "2", 0.003),
        row("m1", "2", 0.001, pass_="judge"),  # a second pass is its own identity
        row("m2", "1", 0.004),
        row("m2", "1", None, error="500"),  # a later error never replaces a success (as in scoring)
        row("m2", "2", None),  # answered, but no price known → the total is unknown
        row("m3", "1", 0.005),
        row("m3", "2", None, error="skipped: circuit breaker open", attempts=0),  # never sent: costs nothing
    ]
    p = tmp_path / "results.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in results) + '{"model": "m1", "ite')  # torn last line
    costs = run_costs(p)
    m1, m2, m3 = costs["m1"], costs["m2"], costs["m3"]
    assert m1.total == pytest.approx(0.006) and (m1.calls, m1.priced_calls, m1.cached_calls) == (3, 3, 0)
    assert (m1.errors, m2.errors, m3.errors) == (0, 0, 1)
    assert m2.total is None and m2.priced == pytest.approx(0.004) and (m2.calls, m2.priced_calls) == (2, 1)
    assert m3.total == pytest.approx(0.005) and (m3.calls, m3.priced_calls) == (2, 2)


def test_load_run_dirs_with_config_and_models_table(tmp_path: Path) -> None:
    table = tmp_path / "models.csv"
    table.write_text(
        "model_id,provider,open,url,release_date,size,input_cost,output_cost,display_name,is_reasoning,is_vision\n"
        "gpt-4o-2024-08-06,OpenAI,False,u,08/2024,,2.5,10.0,GPT-4o,False,True\n"
        "fw-llama,Meta,True,u,09/2024,1e9,0.1,,Llama-3.2 1B,False,False\n"
        "llama-bf16,Meta,True,u,09/2024,1e9,0.005,0.01,Llama-3.2 1B,False,False\n"
        "o3-2025-04-16,OpenAI,False,u,04/2025,,2.0,8.0,o3,True,True\n"
    )
    run = make_run(
        tmp_path,
        "run",
        "vrb",
        {
            "gpt4o": {
                "model": "openai/gpt-4o-2024-08-06",
                "price_in": 3.0,
            },  # config price wins over the table
            "o3": {},  # matched by display name = run name
            "Llama-3.2 1B": {},  # display name shared by two rows with different prices: ambiguous
            "mystery": {"release_date": "2025-02-14", "open_weights": True},
        },
        {
            "gpt4o": {"accuracy": 0.6, "ci95": [0.5, 0.7], "n": 10},
            "o3": {"accuracy": 0.8},
            "Llama-3.2 1B": {"accuracy": 0.3},
            "mystery": {"accuracy": 0.4, "ci95": None},
        },
        [row("gpt4o", "1", 0.01), row("o3", "1", 0.02), row("mystery", "1", None)],
    )
    loaded = load_runs([run], table)
    e = {x.model: x for x in loaded.entries}
    g = e["gpt4o"].info
    assert (g.price_in, g.price_out, g.open_weights, g.reasoning, g.release_date, g.display_name) == (
        3.0,
        10.0,
        False,
        False,
        date(2024, 8, 1),
        "GPT-4o",
    )
    assert e["gpt4o"].ci95 == (0.5, 0.7) and e["gpt4o"].n == 10 and e["gpt4o"].run_cost_usd == 0.01
    assert e["o3"].info.reasoning is True and e["o3"].info.price_in == 2.0
    assert e["Llama-3.2 1B"].info.price_in is None
    assert any("Llama-3.2 1B" in n and "2 rows" in n and "different data" in n for n in loaded.notes)
    m = e["mystery"]
    assert (
        m.info.release_date == date(2025, 2, 14) and m.info.open_weights is True and m.info.price_in is None
    )
    assert m.run_cost_usd is None and m.ci95 is None
    assert any(n.startswith("mystery: no row in the models table") for n in loaded.notes)
    assert e["Llama-3.2 1B"].run_cost_usd is None and e["Llama-3.2 1B"].cost.calls == 0  # no rows: unknown


def test_later_run_dir_wins_for_the_same_model(tmp_path: Path) -> None:
    a = make_run(
        tmp_path, "a", "jsonl:/data/q.jsonl", {"m": {}}, {"m": {"accuracy": 0.2}}, [row("m", "1", 0.1)]
    )
    b = make_run(
        tmp_path, "b", "jsonl:/data/q.jsonl", {"m": {}}, {"m": {"accuracy": 0.9}}, [row("m", "1", 0.1)]
    )
    loaded = load_runs([a, b])
    assert [x.accuracy for x in loaded.entries] == [0.9]
    assert any("uses" in n and str(b) in n for n in loaded.notes)


def test_experiments_of_one_suite_stay_apart(tmp_path: Path) -> None:
    """Two variants of a suite are two leaderboards; two batches of one variant are one."""
    cot1 = make_run(
        tmp_path, "c1", "jeebench", {"m": {}}, {"m": {"overall": 0.3}}, [], options={"variant": "cot"}
    )
    cot2 = make_run(
        tmp_path, "c2", "jeebench", {"n": {}}, {"n": {"overall": 0.4}}, [], options={"variant": "cot"}
    )
    sc = make_run(
        tmp_path, "sc", "jeebench", {"m": {}}, {"m": {"overall": 0.5}}, [], options={"variant": "sc"}
    )
    q1 = make_run(tmp_path, "q1", "jsonl:/a/q.jsonl", {"m": {}}, {"m": {"accuracy": 0.1}}, [])
    q2 = make_run(tmp_path, "q2", "jsonl:/b/q.jsonl", {"m": {}}, {"m": {"accuracy": 0.2}}, [])
    loaded = load_runs([cot1, cot2, sc, q1, q2])
    views = views_of(loaded.entries, loaded.extras)
    assert [(v.label, v.slug, [e.model for e in v.entries]) for v in views] == [
        ("jeebench (cot)", "jeebench-cot", ["n", "m"]),
        ("jeebench (sc)", "jeebench-sc", ["m"]),
        ("jsonl:q.jsonl", "jsonl-q-jsonl", ["m"]),
        ("jsonl:q.jsonl #2", "jsonl-q-jsonl-2", ["m"]),
    ]
    assert not loaded.notes


def test_labels_are_words_not_dict_dumps(tmp_path: Path) -> None:
    """The settings that tell two runs of a suite apart, in words: no `None`, no `key=value` dump."""
    opts = {"variant": "cot", "judge": None, "marks": None}
    runs = [
        make_run(tmp_path, "a", "jeebench", {"m": {}}, {"m": {"overall": 0.3}}, [], options=opts),
        make_run(
            tmp_path, "b", "jeebench", {"m": {}}, {"m": {"overall": 0.3}}, [],
            options={**opts, "judge": "gpt-4o-mini"},
        ),
        make_run(tmp_path, "c", "jeebench", {"m": {}}, {"m": {"overall": 0.3}}, [], options=opts, limit=20),
    ]  # fmt: skip
    labels = [v.label for v in views_of(*_loaded(runs))]
    assert labels == [
        "jeebench (cot, all items, no judge)",
        "jeebench (cot, all items, judge gpt-4o-mini)",
        "jeebench (cot, first 20 items, no judge)",
    ]
    assert not any("None" in lb or "=" in lb for lb in labels)


def _loaded(runs: list[Path]) -> tuple:
    loaded = load_runs(runs)
    return loaded.entries, loaded.extras


def test_headline_metric_per_suite(tmp_path: Path) -> None:
    run = make_run(tmp_path, "j", "jeebench", {"m": {}}, {"m": {"overall": 0.25, "accuracy": 0.9}}, [])
    (e,) = load_runs([run]).entries
    assert (e.metric, e.accuracy) == ("overall", 0.25)  # the suite's declared headline
    scores = json.loads((run / "scores.json").read_text())
    (run / "scores.json").write_text(json.dumps({**scores, "headline": "accuracy"}))
    (e,) = load_runs([run]).entries
    assert (e.metric, e.accuracy) == ("accuracy", 0.9)  # what the scorer wrote wins


def test_headline_table_matches_the_suites() -> None:
    """The report's lookup (used when scores.json lacks "headline") agrees with each suite's own."""
    from report.load import HEADLINES
    from suites.base import get_suite

    for key, metric in HEADLINES.items():
        assert get_suite("jsonl:x.jsonl" if key == "jsonl" else key).headline == metric, key


def test_bad_input_names_the_file_and_fix(tmp_path: Path) -> None:
    run = make_run(tmp_path, "r", "vrb", {"m": {}}, {"m": {"accuracy": 0.5}}, [])
    (run / "scores.json").unlink()
    with pytest.raises(ReportError, match=r"scores.json: missing; score the run first: `evalsweep score"):
        load_runs([run])
    bad = make_run(tmp_path, "b", "vrb", {"m": {"release_date": "March 2024"}}, {"m": {"accuracy": 0.5}}, [])
    with pytest.raises(ReportError, match=r"config.json: models\[0\].release_date: bad release date"):
        load_runs([bad])
    t = tmp_path / "t.csv"
    t.write_text("model_id,display_name\nx,X\n")
    with pytest.raises(ReportError, match=r"t.csv: missing column\(s\) provider, open"):
        read_models_table(t)
    t.write_text(
        "model_id,provider,open,release_date,input_cost,output_cost,display_name,is_reasoning\n"
        "x,P,maybe,01/2024,1,2,X,False\n"
    )
    with pytest.raises(ReportError, match=r"t.csv:2: open: expected true/false"):
        read_models_table(t)
    with pytest.raises(ReportError, match="not a run directory"):
        load_runs([tmp_path / "nope"])


def test_parse_dates() -> None:
    assert parse_date("06/2024", "f") == date(2024, 6, 1)
    assert parse_date("2025-12-11", "f") == date(2025, 12, 11)
    assert parse_date(None, "f") is None
    with pytest.raises(ReportError, match="f: bad release date '13/2024'"):
        parse_date("13/2024", "f")


def test_real_models_table_parses(shared_data: Path) -> None:
    rows = read_models_table(shared_data / "vrb" / "models.csv")
    assert len(rows) == 212
    g = next(r for r in rows if r.model_id == "gpt-4o-2024-08-06")
    assert (g.price_in, g.open_weights, g.release_date) == (2.5, False, date(2024, 8, 1))
