"""JEEBench tables across a sweep's runs (Table 2 across variants, Table 5 side by side, §4.6's 2023 exam
view), from real sim runs through the CLI, in the terminal and in the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from suites.jeebench.sweep import MAX_2023, sweep_tables


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sweep")
    for v in ("cot", "cot-exam"):
        args = ["run", "jeebench", "--models", "sim/strong,sim/weak", "--variant", v, "--out", str(root / v)]
        assert main(args) == 0
    return root


def _scores(d: Path) -> dict:
    return json.loads((d / "scores.json").read_text())


def test_tables_from_the_runs(sweep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cot, exam = _scores(sweep / "cot"), _scores(sweep / "cot-exam")
    # §4.6's marks are the 2023 rows' marks in scored.jsonl
    rows = [json.loads(ln) for ln in (sweep / "cot" / "scored.jsonl").read_text().splitlines()]
    for m, s in cot["models"].items():
        mine = [r for r in rows if r["model"] == m and r["year"] == 2023]
        assert s["marks_by_year"]["2023"] == {"total": sum(r["marks"] for r in mine), "questions": 65}
    capsys.readouterr()
    assert main(["report", str(sweep), "--out", str(sweep / "report")]) == 0
    said = capsys.readouterr().err
    page = (sweep / "report" / "index.html").read_text()
    for title in ("Table 2 across variants", "Table 5 side by side", "§4.6"):  # the terminal wraps long titles
        assert title in said and title in page
    assert "§4.6: marks out of 229, scaled x360/229" in page
    runs = [
        {"label": "a", "variant": "cot", "models": cot["models"], "deviations": cot["protocol"]["deviations"]},
        {"label": "b", "variant": "cot-exam", "models": exam["models"], "deviations": []},
    ]
    t2, t5, human = sweep_tables(runs)
    ours = [r for r in t2.rows if not r[0].startswith(("paper", "replay"))]
    assert [(r[0], r[1], r[-3]) for r in ours] == [
        (m, v, round(s["models"][m]["overall"], 3)) for m in sorted(cot["models"]) for v, s in
        (("cot", cot), ("cot-exam", exam))
    ]  # fmt: skip
    # the gap: ours − the paper's GPT-4 row of the method (Table 2 prints none for cot-exam)
    assert [r[-2] for r in ours] == [round(r[-3] - 0.350, 3) if r[1] == "cot" else None for r in ours]
    # the paper's numbers beside ours: Table 2's GPT-4+CoT row, then the replay of its released responses
    # (our rules on the authors' GPT-4 CoT text: the protocol's gap alone), Table 5's GPT-4 row (negatives signed)
    assert t2.rows[-2] == ["paper: GPT-4+CoT", "cot", 0.468, 0.280, 0.335, 0.256, 0.473, 0.448, 0.175, 0.350, None,
                           515]  # fmt: skip
    assert t2.rows[-1] == ["replay: GPT-4+CoT (released, 41 unread)", "cot", 0.455, 0.280, 0.329, 0.232, 0.473,
                           0.449, 0.168, 0.345, -0.005, 515]  # fmt: skip
    assert "gap" in t2.columns and "replay: ..." in t2.note
    assert t5.rows[-1] == ["paper: GPT-4 (gpt-4-0314)", 489, -181, 308, 404, -206, 198, -110, None, None]
    assert t5.columns[-2:] == ["gap cot", "gap exam"]
    for r in t5.rows[:-1]:  # each run asked all 296 MCQs: ours − the paper's totals (308, 198)
        a, b = cot["models"][r[0]]["marks_mcq"], exam["models"][r[0]]["marks_mcq"]
        assert r[1:] == [a["positive"], a["negative"], a["total"], b["positive"], b["negative"], b["total"],
                         b["total"] - a["total"], a["total"] - 308, b["total"] - 198]  # fmt: skip
    ours, ref = human.rows[:-3], human.rows[-3:]
    assert len(ours) == 2
    for r in ours:  # only the cot run answered the whole 2023 paper; the gap: scaled − the paper's 77
        assert r[1:3] == ["cot", "as answered"] and r[4] == MAX_2023 and r[5] == round(r[3] * 360 / 229, 1)
        assert r[-1] == round(r[3] * 360 / 229 - 77, 1)
    # §4.6's reference points: GPT-4's 49/229 → 77/360, the candidates' top 10% (97) and top 20% (70)
    assert [(r[3], r[4], r[5]) for r in ref] == [(49, 229, 77), (None, None, 97), (None, None, 70)]
    assert "a: answers read by rules" in t2.note and "b:" not in t2.note


def test_single_run_has_no_cross_variant_tables() -> None:
    one = [{"label": "a", "variant": "cot", "models": {"m": {"overall": 0.5, "n": 3}}, "deviations": []}]
    assert sweep_tables(one) == []
