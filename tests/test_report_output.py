"""The written report: frontier.csv, a self-contained sortable HTML page, VRB breakdowns."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest

import report
from tests.report_runs import make_run, row

# ---------------------------------------------------------------- the written report


CATS = [
    "Reasoning by Analogy",
    "Odd One Out",
    "Pattern Completion (Linear)",
    "Pattern Completion (2D)",
    "Match (Process)",
    "Match (Figure)",
]


def _vrb_scores(acc: float) -> dict[str, Any]:
    return {
        "accuracy": acc,
        "ci95": [acc - 0.05, acc + 0.05],
        "n": 100,
        "by_dataset": {
            "zambia": acc - 0.01,
            "india": {"accuracy": acc + 0.01, "ci95": [acc - 0.1, acc + 0.1]},
        },
        "by_category": {c: round(acc + 0.03 * (i - 2.5), 4) for i, c in enumerate(CATS)},
        "by_skill": {"Counting": acc - 0.1, "Rotation": acc + 0.05},
        "by_severity": {"no_error": acc, "minor": acc - 0.02, "medium": acc - 0.08},
        "skill_effects": {
            "Counting": {"ame_pp": -10.0 + acc, "ci95": [-15.0, -5.0]},
            "Rotation": {"ame_pp": 2.0, "ci95": [-1.0, 5.0]},
        },
    }


@pytest.fixture
def sweep(tmp_path: Path) -> list[Path]:
    """A VRB run with a price frontier (tie, dominated, unknown price) and a jsonl run."""
    models = {
        "free": dict(price_in=0.0, release_date="2024-01-10", open_weights=True, reasoning=False),
        "cheap": dict(price_in=0.1, release_date="2024-03-01", open_weights=True, reasoning=False),
        "mid": dict(price_in=1.0, release_date="2024-06-01", open_weights=False, reasoning=True),
        "mid-twin": dict(price_in=1.0, release_date="2024-07-01", open_weights=False, reasoning=True),
        "dear-worse": dict(price_in=5.0, release_date="2024-08-01", open_weights=False, reasoning=False),
        "best": dict(price_in=10.0, release_date="2025-01-01", open_weights=False, reasoning=True),
        "unpriced": dict(open_weights=True, reasoning=None),
    }
    accs = {
        "free": 0.2,
        "cheap": 0.4,
        "mid": 0.6,
        "mid-twin": 0.6,
        "dear-worse": 0.5,
        "best": 0.8,
        "unpriced": 0.9,
    }
    # run costs: mid-twin spends more than mid for the same accuracy → off the run-cost frontier
    spend = {
        "free": 0.0,
        "cheap": 0.01,
        "mid": 0.1,
        "mid-twin": 0.2,
        "dear-worse": 0.5,
        "best": 1.0,
        "unpriced": None,
    }
    results = [row(m, str(i), None if c is None else c / 2) for m, c in spend.items() for i in range(2)]
    vrb = make_run(
        tmp_path,
        "vrb",
        "vrb",
        {k: dict(v) for k, v in models.items()},
        {m: _vrb_scores(a) for m, a in accs.items()},
        results,
    )
    js = make_run(
        tmp_path,
        "jsonl-q",
        "jsonl:/somewhere/q.jsonl",
        {"cheap": dict(price_in=0.1)},
        {"cheap": {"accuracy": 0.75, "ci95": [0.5, 1.0], "n": 4}},
        [row("cheap", "1", 0.001)],
    )
    return [vrb, js]


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_report_writes_frontier_csv(sweep: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "report"
    report.main(sweep, out, None)
    with (out / "frontier.csv").open(newline="") as f:
        header = next(csv.reader(f))
    assert header == ["model", "suite", "accuracy", "price_in", "run_cost_usd", "on_frontier"]
    rows = {(r["suite"], r["model"]): r for r in _csv(out / "frontier.csv")}
    on = {m for (s, m), r in rows.items() if s == "vrb" and r["on_frontier"] == "True"}
    assert on == {"free", "cheap", "mid", "mid-twin", "best"}  # dear-worse dominated; unpriced excluded
    assert rows[("vrb", "unpriced")]["price_in"] == "" and rows[("vrb", "unpriced")]["run_cost_usd"] == ""
    assert rows[("vrb", "unpriced")]["on_frontier"] == "False"
    assert float(rows[("vrb", "mid-twin")]["run_cost_usd"]) == pytest.approx(0.2)
    assert float(rows[("vrb", "best")]["accuracy"]) == 0.8
    assert rows[("jsonl:q.jsonl", "cheap")]["on_frontier"] == "True"
    assert len(rows) == 8

    lb = {r["model"]: r for r in _csv(out / "leaderboard.csv") if r["suite"] == "vrb"}
    assert lb["mid-twin"]["on_frontier_run_cost"] == "False" and lb["mid"]["on_frontier_run_cost"] == "True"
    assert lb["unpriced"]["rank"] == "1" and lb["mid"]["rank"] == lb["mid-twin"]["rank"] == "3"
    snaps = _csv(out / "frontier_snapshots.csv")
    price = [r for r in snaps if r["suite"] == "vrb" and r["cost_axis"] == "price_in"]
    assert sorted({r["snapshot"] for r in price}) == [
        "2024-01-10",
        "2024-03-01",
        "2024-06-01",
        "2024-07-01",
        "2025-01-01",
    ]  # dear-worse's release changes nothing
    groups = {(r["grouping"], r["group"]): r for r in _csv(out / "groups.csv") if r["suite"] == "vrb"}
    assert groups[("weights", "open weights")]["best_model"] == "unpriced"
    assert groups[("reasoning", "reasoning")]["models"] == "3"
    assert float(groups[("weights", "proprietary")]["median_accuracy"]) == pytest.approx(0.6)
    bd = _csv(out / "breakdowns.csv")
    assert {r["kind"] for r in bd} == {
        "by_dataset",
        "by_category",
        "by_skill",
        "by_severity",
        "skill_effect_pp",
    }
    bw = {r["model"]: r for r in _csv(out / "best_worst_category.csv")}
    assert (bw["best"]["best"], bw["best"]["worst"]) == ("Match (Figure)", "Reasoning by Analogy")
    assert float(bw["best"]["range"]) == pytest.approx(0.15)
    india = next(r for r in bd if r["model"] == "best" and r["key"] == "india")
    assert float(india["ci_lo"]) == pytest.approx(0.7)


def test_report_html_is_self_contained_and_sortable(sweep: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "report"
    report.main(sweep, out, None)
    page = (out / "index.html").read_text()
    for png in (
        "frontier.png",
        "frontier_time.png",
        "leaderboard_vrb.png",
        "categories_vrb.png",
        "skill_models_vrb.png",
        "severity_vrb.png",
        "leaderboard-jsonl-q-jsonl.png".replace("-", "_", 1),
    ):
        assert (out / png).stat().st_size > 1000, png
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//|@import|<link\b|<script[^>]*\bsrc", page, re.I)
    imgs = re.findall(r'<img [^>]*src="([^"]*)"', page)
    assert len(imgs) == 7 and all(s.startswith("data:image/png;base64,") for s in imgs)
    assert page.count('<table class="sortable">') >= 10 and "addEventListener('click'" in page
    assert "Not placed (cost unknown, so excluded from this frontier): unpriced." in page
    assert 'data-v="0.8">80.0<' in page  # raw value for sorting, percent for reading
    assert "Reasoning by Analogy" in page and "mean over models" in page


def test_report_pooled_skill_effects_and_no_breakdowns(tmp_path: Path) -> None:
    # the VRB suite's pooled fit, at the top level of scores.json
    pooled = {
        "skill_effects": {
            "formula": "correct ~ skills + C(model) + C(dataset) + C(category)",
            "effects": {
                "Counting": {"ame_pp": -12.5, "ci95_pp": [-20.0, -5.0], "n_items": 40},
                "Folding": {"ame_pp": None, "ci95_pp": None, "n_items": 0, "note": "no data"},
            },
        }
    }
    run = make_run(
        tmp_path,
        "r",
        "vrb",
        {"a": dict(price_in=1.0), "b": dict(price_in=2.0)},
        {"a": {"accuracy": 0.5}, "b": {"accuracy": 0.4}},
        [],
        extra=pooled,
    )
    out = tmp_path / "out"
    report.main([run], out, None)
    bd = _csv(out / "breakdowns.csv")
    assert bd == [
        {
            "suite": "vrb",
            "kind": "skill_effect_pp",
            "model": "all models",
            "key": "Counting",
            "value": "-12.5",
            "ci_lo": "-20.0",
            "ci_hi": "-5.0",
            "n": "40",
        }
    ]
    assert "Not estimated: Folding (no data)." in (out / "index.html").read_text()
    assert (out / "skills_vrb.png").is_file() and not (out / "categories_vrb.png").exists()
    assert not (out / "skill_models_vrb.png").exists()
    rows = _csv(out / "frontier.csv")
    assert [(r["model"], r["on_frontier"], r["run_cost_usd"]) for r in rows] == [
        ("a", "True", ""),
        ("b", "False", ""),
    ]


# ---------------------------------------------------------------- the table sorter (real JS, in node)

SHIM = """
const spec = JSON.parse(process.argv[1]);
function mkCell(c){return {textContent:c.text, hasAttribute:k=>k in c.attrs, getAttribute:k=>c.attrs[k]};}
const header = {children: []};
const rows = spec.rows.map(r => ({cells: r.map(mkCell), key: r[0].text}));
const tbody = {rows: rows.slice(), appendChild(r){const i=this.rows.indexOf(r); this.rows.splice(i,1); this.rows.push(r);}};
const table = {tBodies:[tbody], querySelectorAll: () => header.children};
spec.head.forEach(h => { const th = {dataset:{}, parentNode:header, closest:()=>table, text:h,
  addEventListener(ev, fn){this.click = fn;}}; header.children.push(th); });
global.document = {querySelectorAll: () => header.children};
eval(spec.js);
const out = [];
for (const i of spec.clicks) { header.children[i].click(); out.push(tbody.rows.map(r => r.key)); }
console.log(JSON.stringify(out));
"""


def test_table_sorter_sorts_numbers_numerically_and_unknowns_last(tmp_path: Path) -> None:
    import shutil
    import subprocess
    from html.parser import HTMLParser

    from report.html import JS, pct, table, usd

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (the sorter is plain browser JS)")
    rows = [
        {"m": "a", "acc": 0.9, "cost": 10.0},
        {"m": "b", "acc": None, "cost": 2.0},  # unknown accuracy: last both ways
        {"m": "c", "acc": 0.1, "cost": 100.0},  # "100" < "2" as text: must sort as a number
        {"m": "d", "acc": 0.55, "cost": None},
    ]
    page = table(rows, [("m", "model", None), ("acc", "acc", pct(100)), ("cost", "cost", usd)])

    class P(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.body: list[list[dict]] = []

        def handle_starttag(self, tag: str, attrs: list) -> None:
            if tag == "tr":
                self.body.append([])
            if tag == "td":
                self.body[-1].append({"attrs": {k: v for k, v in attrs if k == "data-v"}, "text": ""})

        def handle_data(self, data: str) -> None:
            if self.body and self.body[-1] and self.get_starttag_text().startswith("<td"):
                self.body[-1][-1]["text"] += data

    p = P()
    p.feed(page)
    spec = {
        "head": ["model", "acc", "cost"],
        "rows": [r for r in p.body if r],
        "js": JS,
        "clicks": [1, 1, 2, 2, 0],
    }
    res = subprocess.run([node, "-e", SHIM, json.dumps(spec)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == [
        ["c", "d", "a", "b"],  # acc ascending, unknown last
        ["a", "d", "c", "b"],  # descending, unknown still last
        ["b", "a", "c", "d"],  # cost ascending: 2 < 10 < 100 (numeric), unknown last
        ["c", "a", "b", "d"],
        ["a", "b", "c", "d"],  # text column
    ]


def test_severity_in_the_papers_order(sweep: list[Path], tmp_path: Path) -> None:
    """scores.json sorts its keys (medium, minor, no_error); the page shows the reference's order."""
    from report.rows import levels

    assert levels({"m": {"medium": 0, "minor": 0, "no_error": 0, "x": 0}}, "by_severity") == [
        "no_error", "minor", "medium", "x"]  # fmt: skip
    for run in sweep:  # as runner.atomic writes it
        for f in Path(run).rglob("scores.json"):
            f.write_text(json.dumps(json.loads(f.read_text()), sort_keys=True, indent=2))
    out = tmp_path / "report"
    report.main(sweep, out, None)
    page = (out / "index.html").read_text()
    sev = page[page.index("<h3>Image-quality severity</h3>"):]
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", sev[: sev.index("</tr>")])
    assert heads[1:4] == ["no_error", "minor", "medium"]


def test_m3gia_factor_correlation_figure(tmp_path: Path) -> None:
    """M3GIA's factor figure in the report: the heatmap and its table, from scores.json's factor_correlation."""
    import numpy as np

    from suites.m3gia.factors import TABLE1, factor_correlation

    rng = np.random.default_rng(1)
    scores = {f"m{i}": {"accuracy": 0.3 + 0.1 * i, "by_factor": {f: float(rng.random()) for f in TABLE1}} for i in range(4)}
    fcorr, _ = factor_correlation(scores)
    run = make_run(tmp_path, "m3gia", "m3gia", {m: {} for m in scores}, scores, [row(m, "1", 0.0) for m in scores],
                   extra={"factor_correlation": fcorr})  # fmt: skip
    out = tmp_path / "report"
    report.main([run], out, None)
    page = (out / "index.html").read_text()
    assert (out / "factors_m3gia.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    sec = page[page.index("<h3>Correlation of CHC factor accuracies across models</h3>"):]
    assert sec.index("<img") < sec.index("<table")
    assert f'data-v="{fcorr["Gf"]["Gc"]}">{fcorr["Gf"]["Gc"]:.2f}<' in sec


def test_jeebench_thresholding_curves_figure(tmp_path: Path) -> None:
    grid = [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0]
    by_type = {kind: [[t, 9 - t, -3 * t, 9 - 4 * t] for t in grid] for kind in ("MCQ", "MCQ(multiple)")}
    scores = {m: {"accuracy": 0.3, "thresholding": {"curve": {"tau_single": [[t, 10 + k * t] for t in grid],
                                                               "tau_multiple": [[t, 5 - k * t] for t in grid]},
                                                     "by_type": by_type}}
              for k, m in enumerate(("a", "b"))}  # fmt: skip
    run = make_run(tmp_path, "jee", "jeebench", {m: {} for m in scores}, scores, [row(m, "1", 0.0) for m in scores])
    out = tmp_path / "report"
    report.main([run], out, None)
    page = (out / "index.html").read_text()
    assert (out / "thresholds_jeebench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    sec = page[page.index("<h3>Confidence thresholding: validation marks along each threshold</h3>"):]
    assert sec.index("<img") < 200
    assert (out / "threshold_marks_jeebench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    sec = page[page.index("<h3>Threshold v/s marks per MCQ type, every year (the authors' released plots)</h3>"):]
    assert sec.index("<img") < 200
    plain = make_run(tmp_path, "jee2", "jeebench", {"a": {}}, {"a": {"accuracy": 0.3}}, [row("a", "1", 0.0)])
    report.main([plain], tmp_path / "r2", None)
    assert not (tmp_path / "r2" / "thresholds_jeebench.png").exists()  # no SC run: no curve, no figure
    assert not (tmp_path / "r2" / "threshold_marks_jeebench.png").exists()


def test_the_papers_figures_a_suite_draws_are_in_the_report(tmp_path: Path):
    """JEEBench draws Fig. 7 beside scores.json (`fig7_png`); the report shows it in the suite's details,
    as an image in the page (no file beside it needed)."""
    from tests.helpers import cli

    out = tmp_path / "r"
    r = cli("run", "jeebench", "--variant", "cot-sc", "--models", "sim/strong,sim/weak", "--limit", "40",
            "--out", str(out), "--no-live")
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "scores.json").read_text())["fig7_png"] == "jeebench_fig7.png"
    page = (out / "report" / "index.html").read_text()
    section = page.split("The paper's figures, drawn for these runs", 1)[1].split("<h3>", 1)[0]
    assert '<img alt="fig7" src="data:image/png;base64,' in section
