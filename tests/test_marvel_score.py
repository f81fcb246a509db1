"""MARVEL scoring: instance vs group accuracy, the output-bias flag, samples, judge stage, tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scipy.stats import chi2

from suites.base import RunSpec, SuiteError
from suites.marvel import SUITE
from suites.marvel.data import KINDS, load
from suites.marvel.score import choice_bias

SPEC = RunSpec(suite="marvel")
P = {p.id: p for p in load()}


def row(
    model: str, item: str, text: str | None, sample: int = 0, pass_: str = "answer", error: str | None = None
):
    return {"model": model, "suite": "marvel", "item": item, "sample": sample, "pass": pass_, "text": text,
            "error": error, "usage": {}, "via": None}  # fmt: skip


def right(pid: int, kind: str) -> str:
    p = P[pid]
    if kind == "avr":
        return f"The answer is choice {p.answer}."
    if kind == "fine":
        return f"{p.fine_answer}."
    return f"There are {p.gold(kind)} grids."


def wrong(pid: int, kind: str) -> str:
    p = P[pid]
    if kind == "avr":
        return f"The answer is choice {p.answer % 4 + 1}."
    if kind == "fine":
        return f"{p.fine_distractor}."
    return f"There are {int(p.gold(kind)) + 1} grids."


def rows_for(model: str, plan: dict[int, set[str]], sample: int = 0) -> list[dict[str, Any]]:
    """All five questions of each puzzle; the kinds in plan[pid] are answered wrong."""
    return [
        row(model, f"{pid}/{k}", (wrong if k in bad else right)(pid, k), sample)
        for pid, bad in plan.items()
        for k in KINDS
    ]


def test_group_accuracy_differs_from_instance(tmp_path: Path) -> None:
    # 4 puzzles: all right; only avr wrong; only fine wrong; one coarse question wrong.
    plan = {1: set(), 2: {"avr"}, 3: {"fine"}, 4: {"coarse-choices"}}
    rep = SUITE.score(rows_for("m", plan), SPEC, tmp_path)
    s = rep.models["m"]
    assert s["avr"] == 0.75 and s["fine"] == 0.75
    assert s["coarse_context"] == 1.0 and s["coarse_choices"] == 0.75 and s["coarse_whole"] == 1.0
    assert s["perc_c"] == 0.75  # puzzle 4 fails the coarse group
    assert s["perc_cf"] == 0.5  # puzzles 3 and 4 fail
    assert s["perc_cf_avr"] == 0.25  # only puzzle 1 has all five right
    assert s["n_puzzles"] == 4 and s["n_rows"] == 20


def test_missing_question_counts_as_wrong_and_error_rows_are_not_scored(tmp_path: Path) -> None:
    rows = rows_for("m", {1: set(), 2: set()})
    rows = [r for r in rows if r["item"] != "2/fine"]  # never answered
    rows = [
        ({**r, "text": None, "error": "HTTP 500", "error_kind": "server"} if r["item"] == "1/avr" else r)
        for r in rows
    ]
    rep = SUITE.score(rows, SPEC, tmp_path)
    s = rep.models["m"]
    assert s["avr"] == 1.0 and s["n"] == 1  # over the answered puzzle only: a failed call is not wrong
    assert s["n_errors"] == 1 and s["choice_none"] == 0
    assert s["fine"] == 1.0  # over the rows present
    # puzzle 1's group with the failed AVR call is left out; puzzle 2 misses its fine question (wrong)
    assert s["perc_c"] == 1.0 and s["perc_cf"] == 0.5 and s["perc_cf_avr"] == 0.0
    err = next(x for x in rep.scored if x["item"] == "1/avr")
    assert err["stage"] == "error" and err["score"] is None and err["extracted"] is None
    assert err["error_kind"] == "server"


def test_by_pattern_and_configuration(tmp_path: Path) -> None:
    tm_seq = [p.id for p in load() if p.pattern == "Temporal Movement" and p.configuration == "Sequence"][:2]
    q_mat = [p.id for p in load() if p.pattern == "Quantities" and p.configuration == "Matrix"][:2]
    plan = {tm_seq[0]: set(), tm_seq[1]: {"avr"}, q_mat[0]: set(), q_mat[1]: set()}
    s = SUITE.score(rows_for("m", plan), SPEC, tmp_path).models["m"]
    assert s["by_pattern"] == {"Temporal Movement": 0.5, "Quantities": 1.0}
    assert s["by_configuration"] == {"Sequence": 0.5, "Matrix": 1.0}
    assert s["by_pattern_configuration"] == {
        "Temporal Movement": {"Sequence": 0.5},
        "Quantities": {"Matrix": 1.0},
    }


def test_chi_square_known_values() -> None:
    # 30/20/25/25 vs uniform 25: chi2 = (25 + 25) / 25 = 2, df 3
    r = choice_bias([1] * 30 + [2] * 20 + [3] * 25 + [4] * 25)
    assert r["chi2"] == pytest.approx(2.0)
    assert r["chi2_p"] == pytest.approx(0.5724067, abs=1e-6)
    assert r["chi2_p"] == pytest.approx(chi2.sf(2.0, 3))
    assert r["choice_distribution"] == {"1": 0.3, "2": 0.2, "3": 0.25, "4": 0.25}
    assert not r["biased"]
    # 40 x choice 2: chi2 = (3 * 10^2 + 30^2) / 10 = 120
    r = choice_bias([2] * 40 + [None] * 3)
    assert r["chi2"] == pytest.approx(120.0) and r["chi2_p"] < 1e-20 and r["biased"]
    assert r["choice_none"] == 3 and r["choice_counts"] == {"1": 0, "2": 40, "3": 0, "4": 0}
    # around the threshold: p = 0.0074 is not flagged, p = 6.5e-5 is
    r = choice_bias([1] * 40 + [2] * 20 + [3] * 20 + [4] * 20)
    assert (
        r["chi2"] == pytest.approx(12.0)
        and r["chi2_p"] == pytest.approx(chi2.sf(12.0, 3))
        and not r["biased"]
    )
    r = choice_bias([1] * 45 + [2] * 20 + [3] * 20 + [4] * 15)
    assert r["chi2"] == pytest.approx(22.0) and r["chi2_p"] == pytest.approx(6.5e-5, rel=0.05) and r["biased"]
    # pooled over 2 samples: the test uses counts per sample, so the same shares give the same p
    assert choice_bias([2] * 80, n_samples=2)["chi2"] == pytest.approx(120.0)
    assert choice_bias([None, None])["chi2_p"] is None and not choice_bias([])["biased"]


def test_bias_flag_constant_vs_uniform_model(tmp_path: Path) -> None:
    ids = [p.id for p in load()[:60]]
    rows = [row("const", f"{i}/avr", "The answer is choice 2.") for i in ids]
    rows += [row("uniform", f"{i}/avr", f"The answer is choice {k % 4 + 1}.") for k, i in enumerate(ids)]
    rep = SUITE.score(rows, RunSpec(suite="marvel", options={"questions": "avr"}), tmp_path)
    assert rep.models["const"]["biased"] and rep.models["const"]["chi2_p"] < 0.001
    assert not rep.models["uniform"]["biased"] and rep.models["uniform"]["chi2_p"] == pytest.approx(1.0)
    for t in rep.tables:  # flagged in every table: a row label, or a column head in the paper's Tables 4 and 5
        if "Table" in t.title:  # column heads carry no spaces (the terminal sizes a column by its head)
            assert "const[BIASED]" in t.columns and "uniform" in t.columns, t.title
            continue
        labels = [str(r[0]) for r in t.rows]
        assert "const [BIASED]" in labels, t.title
        assert "uniform" in labels and "uniform [BIASED]" not in labels, t.title


def test_samples_are_averaged(tmp_path: Path) -> None:
    rows = rows_for("m", {1: set(), 2: set()}, sample=0) + rows_for("m", {1: {"avr"}, 2: {"fine"}}, sample=1)
    s = SUITE.score(rows, SPEC, tmp_path).models["m"]
    assert s["avr"] == 0.75 and s["fine"] == 0.75
    assert s["perc_cf_avr"] == 0.5  # sample 0: 2/2 puzzles, sample 1: 0/2
    assert s["perc_c"] == 1.0 and s["n_puzzles"] == 2 and s["n_rows"] == 20


def test_judge_rows_rescue_rule_failures(tmp_path: Path) -> None:
    p = P[1]
    vague = "Going by the pattern, I'd pick the candidate labelled three."
    rows = [
        row("m", "1/avr", vague),
        row("m", "1/avr", str(p.answer), pass_="judge"),
        row("m", "2/avr", vague),  # no judge row: stays unparsed
        row("m", "3/avr", "I'm sorry, I can't determine the answer."),
        row("m", "3/avr", "None", pass_="judge"),
    ]
    rep = SUITE.score(rows, RunSpec(suite="marvel", options={"questions": "avr"}), tmp_path)
    by = {r["item"]: r for r in rep.scored}
    assert (
        by["1/avr"]["stage"] == "judge" and by["1/avr"]["extracted"] == p.answer and by["1/avr"]["score"] == 1
    )
    assert by["2/avr"]["stage"] == "none" and by["2/avr"]["extracted"] is None
    assert by["3/avr"]["stage"] == "judge" and by["3/avr"]["extracted"] is None
    s = rep.models["m"]
    assert (s["n_judged"], s["n_judged_parsed"], s["n_unparsed"]) == (2, 1, 1)
    assert len(rep.scored) == 3  # judge rows are not items


def test_scores_keys_and_reference_rows(tmp_path: Path) -> None:
    rep = SUITE.score(rows_for("m", {1: set(), 2: {"avr"}}), SPEC, tmp_path)
    keys = {"avr", "fine", "coarse_context", "coarse_choices", "coarse_whole", "perc_c", "perc_cf", "perc_cf_avr",
            "by_pattern", "by_configuration", "by_pattern_configuration", "choice_distribution", "chi2",
            "chi2_p", "biased"}  # fmt: skip
    assert keys <= set(rep.models["m"])
    main = rep.tables[0]
    names = [r[0] for r in main.rows]
    assert names[:3] == ["m", "random", "human"] and len(names) == 3 + 10  # + the paper's ten models (Table 2)
    assert main.rows[1][2:4] == ["25.00", "50.00"] and main.rows[2][2:4] == ["68.86 ± 9.74", "98.67"]  # Table 2
    assert main.rows[3][:4] == ["paper: Qwen-VL", "-", "19.61", "37.27"] and main.rows[3][4] == "-"  # no coarse column
    assert main.rows[4][:4] == ["paper: Fuyu †", "-", "24.29", "34.94"]
    group = rep.tables[1]
    assert group.rows[-4] == ["paper: GPT-4o", "-", "62.73", "43.77", "12.21", *["-"] * 8]
    assert rep.extra["reference"]["human"]["avr"] == 0.6886


def test_tables_4_and_5_in_the_papers_orientation(tmp_path: Path) -> None:
    """Rows as the paper prints them (patterns; Sequence, Two-row, Matrix, Group, Reassembling), our models,
    random, then the paper's Human and models; few-shot runs keep only the paper's Human column."""
    ids = [p.id for p in load()]
    rows = [row("m", f"{i}/avr", f"The answer is choice {P[i].answer if k % 2 else P[i].answer % 4 + 1}.")
            for k, i in enumerate(ids)]  # fmt: skip
    rep = SUITE.score(rows, RunSpec(suite="marvel", options={"questions": "avr"}), tmp_path)
    t4, t5 = (next(t for t in rep.tables if t.title.startswith(f"MARVEL Table {n}")) for n in (4, 5))
    assert [r[0] for r in t4.rows] == ["Temporal Movement", "Spatial Relationship", "Quantities", "Mathematical",
                                       "2D-Geometry", "3D-Geometry"]  # fmt: skip
    assert t4.columns[:6] == ["pattern", "puzzles", "m", "gap:m", "random", "paper:Human"]
    assert t4.columns[6:8] == ["paper:Qwen-VL", "paper:Fuyu†"] and len(t4.columns) == 16
    assert t4.rows[2][:2] == ["Quantities", 240] and t4.rows[2][4:7] == ["25.00", "81.57", "15.76"]
    s = rep.models["m"]
    assert t4.rows[0][2] == f"{100 * s['by_pattern']['Temporal Movement']:.2f}"
    assert [r[0] for r in t5.rows] == ["Sequence", "Two-row", "Matrix", "Group", "Reassembling"]
    assert [r[1] for r in t5.rows] == [165, 225, 225, 135, 20]  # the data's counts, "3D" = Reassembling
    assert t5.rows[4][2] == f"{100 * s['by_configuration']['3D']:.2f}" and t5.rows[1][5] == "71.56"
    assert "by_configuration" in s and list(s["by_configuration"]) == ["Sequence", "Matrix", "Two-row", "Group", "3D"]
    few = SUITE.score(rows, RunSpec(suite="marvel", options={"questions": "avr", "shots": 1, "demos": "ood"}),
                      tmp_path)  # fmt: skip
    t4 = next(t for t in few.tables if t.title.startswith("MARVEL Table 4"))
    assert t4.columns[-1] == "paper:Human" and "zero-shot" in t4.note
    main = few.tables[0]
    assert "Table 9, one-shot (OOD)" in main.note
    assert "gap:m" not in t4.columns  # the paper's per-pattern model values: zero-shot (4) or same-pattern demos (12)


def test_table12_beside_a_few_shot_run(tmp_path: Path) -> None:
    """#38: a --shots 1|2 run (same-pattern demos) gets Table 12's columns of its shots by pattern, with gaps;
    the two-shot half's unnamed second column is GPT-4o's (before: Human only, Table 12 not printed)."""
    ids = [p.id for p in load()]
    rows = [row("m", f"{i}/avr", f"The answer is choice {P[i].answer if k % 2 else P[i].answer % 4 + 1}.")
            for k, i in enumerate(ids)]  # fmt: skip
    for shots, gpt4o_2d in ((1, "45.00"), (2, "38.33")):
        rep = SUITE.score(rows, RunSpec(suite="marvel", options={"questions": "avr", "shots": shots}), tmp_path)
        (t,) = [t for t in rep.tables if t.title.startswith("MARVEL Table 12")]
        assert ("one", "two")[shots - 1] + "-shot" in t.title
        assert t.columns == ["pattern", "puzzles", "m", "gap:m", "random", "paper:Human", "paper:Gemini",
                             "paper:GPT-4o", "paper:GPT-4V", "paper:Claude3(Sonnet)", "paper:Claude3(Opus)"]  # fmt: skip
        r = dict(zip(t.columns, t.rows[4], strict=True))  # 2D-Geometry
        assert r["paper:GPT-4o"] == gpt4o_2d and r["paper:Human"] == "59.17"
        want = 100 * rep.models["m"]["by_pattern"]["2D-Geometry"] - float(gpt4o_2d)
        assert r["gap:m"] == f"{want:+.2f}"  # against GPT-4o (ref.)
        assert "the second is GPT-4o" in t.note and not any(t.title.startswith("MARVEL Table 4") for t in rep.tables)


def test_table6_fine_accuracy_by_category(tmp_path: Path) -> None:
    """Each fine question's category (categories.py) groups the fine accuracy; counts beside the paper's."""
    from suites.marvel.categories import category, counts

    ps = load()
    rows = [row("m", f"{p.id}/fine", f"{p.fine_answer if category(p) in ('Color', 'Quantity') else p.fine_distractor}.")
            for p in ps]  # fmt: skip
    rep = SUITE.score(rows, RunSpec(suite="marvel", options={"questions": "fine"}), tmp_path)
    s = rep.models["m"]
    assert s["by_fine_category"] == {"Location": 0.0, "Color": 1.0, "Shape": 0.0, "Quantity": 1.0, "Comparison": 0.0}
    (t6,) = [t for t in rep.tables if t.title.startswith("MARVEL Table 6")]
    n = counts(ps)
    assert [r[:3] for r in t6.rows] == [[c, n[c], want] for c, want in
                                         (("Location", 65), ("Color", 53), ("Shape", 177), ("Quantity", 304),
                                          ("Comparison", 171))]  # fmt: skip
    assert t6.rows[1][3:7] == ["100.00", "+30.99", "50.00", "37.74"]  # Color: 100 − GPT-4o's 69.01
    assert t6.columns[3:7] == ["m", "gap:m", "random", "paper:Qwen-VL"]


def test_questions_subset_leaves_other_keys_none(tmp_path: Path) -> None:
    rows = [r for r in rows_for("m", {1: set()}) if r["item"].endswith(("avr", "fine"))]
    s = SUITE.score(rows, RunSpec(suite="marvel", options={"questions": "avr,fine"}), tmp_path).models["m"]
    assert s["avr"] == 1.0 and s["fine"] == 1.0
    assert s["coarse_whole"] is None and s["perc_c"] is None and s["perc_cf_avr"] is None


def test_pattern_task(tmp_path: Path) -> None:
    spec = RunSpec(suite="marvel", options={"task": "pattern"})
    geo3d = [p for p in load() if p.pattern == "3D-Geometry"][:2]
    ps = [*load()[:2], *geo3d]
    rows = [row("m", f"{p.id}/pattern", f"The pattern is {p.pattern}.") for p in ps[:3]]
    rows.append(row("m", f"{ps[3].id}/pattern", "Quantities"))
    rep = SUITE.score(rows, spec, tmp_path)
    s = rep.models["m"]
    assert s["pattern"] == 0.75 and s["by_pattern"] == {"Temporal Movement": 1.0, "3D-Geometry": 0.5}
    assert s["prediction_distribution"]["Quantities"] == 0.25
    assert s["confusion"]["3D-Geometry"] == {"3D-Geometry": 1, "Quantities": 1}
    assert rep.extra["headline"] == "pattern"


def test_foreign_item_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match="not a MARVEL question id"):
        SUITE.score([row("m", "q17", "A")], SPEC, tmp_path)


def test_left_set_excludes_refusals(tmp_path: Path) -> None:
    """The paper's left set: refusals leave the denominator; in the headline figures they count as wrong."""
    rows = rows_for("m", {1: set(), 2: {"avr"}, 3: set(), 4: set()})
    refuse = "I'm sorry, but I can't determine the answer from this image."
    rows = [row("m", r["item"], refuse) if r["item"] in ("3/avr", "4/avr", "4/fine") else r for r in rows]
    s = SUITE.score(rows, SPEC, tmp_path).models["m"]
    assert s["avr"] == 0.25 and s["fine"] == 0.75  # refusals wrong
    left = s["left_set"]
    assert left["avr"] == 0.5 and left["avr_refused"] == 2  # puzzles 1 (right) and 2 (wrong) are left
    assert left["fine"] == 1.0 and left["fine_refused"] == 1 and left["coarse_whole_refused"] == 0
    t = [t for t in SUITE.score(rows, SPEC, tmp_path).tables if "left set" in t.title]
    assert t and t[0].rows[0][1] == "50.00"


def test_gap_and_the_papers_value_beside_ours(tmp_path: Path) -> None:
    """Every MARVEL paper table whose rows match the paper's: the paper's value beside ours and the gap (ours −
    paper, points), against the same model where the name names one of the paper's, else GPT-4o (ref.)."""
    ids = [p.id for p in load()]
    rows = []
    for m in ("gpt-4o-2024-05-13", "sim/x"):
        rows += [row(m, f"{i}/avr", f"The answer is choice {P[i].answer if k % 4 == 0 else P[i].answer % 4 + 1}.")
                 for k, i in enumerate(ids)]  # fmt: skip
        rows += [row(m, f"{i}/fine", f"{P[i].fine_answer}.") for i in ids]
    rep = SUITE.score(rows, RunSpec(suite="marvel", options={"questions": "avr,fine"}), tmp_path)
    main = rep.tables[0]
    at = {c: main.columns.index(c) for c in ("avr", "fine", "vs paper", "paper avr", "gap avr", "paper fine", "gap fine")}
    for m, want in (("gpt-4o-2024-05-13", "GPT-4o"), ("sim/x", "GPT-4o (ref.)")):
        r = next(r for r in main.rows if r[0] == m)
        assert [r[at[c]] for c in ("vs paper", "paper avr", "paper fine")] == [want, "27.79", "68.44"]
        assert r[at["gap avr"]] == f"{float(r[at['avr']]) - 27.79:+.2f}" and r[at["gap fine"]] == f"{100 - 68.44:+.2f}"
    assert "gap = ours − the paper's value" in main.note
    group = rep.tables[1]
    assert group.columns[-7:] == ["vs paper", "paper perc_c", "gap perc_c", "paper perc_cf", "gap perc_cf",
                                  "paper perc_cf_avr", "gap perc_cf_avr"]  # fmt: skip
    t4 = next(t for t in rep.tables if t.title.startswith("MARVEL Table 4"))
    s = rep.models["sim/x"]
    g = t4.columns.index("gap:sim/x")
    assert t4.rows[0][g] == f"{100 * s['by_pattern']['Temporal Movement'] - 23.81:+.2f}"  # GPT-4o's Temporal row
    t5 = next(t for t in rep.tables if t.title.startswith("MARVEL Table 5"))
    g = t5.columns.index("gap:gpt-4o-2024-05-13")
    assert "gpt-4o-2024-05-13 vs GPT-4o, sim/x vs GPT-4o (ref.)" in t5.note
    assert t5.rows[4][g] == f"{100 * rep.models['gpt-4o-2024-05-13']['by_configuration']['3D'] - 25.00:+.2f}"
    few = SUITE.score(rows, RunSpec(suite="marvel", options={"questions": "avr,fine", "shots": 1}), tmp_path)
    r = next(r for r in few.tables[0].rows if r[0] == "sim/x")
    assert few.tables[0].columns[-5:] == ["vs paper", "paper avr", "gap avr", "paper fine", "gap fine"]
    assert r[-4] == "30.78" and r[-2] == "68.44"  # Table 8's AVR; Table 2's fine: asked zero-shot, as there


def test_pattern_table_gap(tmp_path: Path) -> None:
    spec = RunSpec(suite="marvel", options={"task": "pattern"})
    rows = [row("claude-3-opus-20240229", f"{p.id}/pattern", f"The pattern is {p.pattern}.") for p in load()]
    t = next(t for t in SUITE.score(rows, spec, tmp_path).tables if "pattern classification" in t.title)
    assert t.columns[2:6] == ["pattern", "vs paper", "paper pattern", "gap pattern"]
    assert t.rows[0][2:6] == ["100.00", "Claude3 (Opus)", "25.84", f"{100 - 25.84:+.2f}"]
    assert all(len(r) == len(t.columns) for r in t.rows)


def test_group_table_gap_on_all_three_of_table2s_group_columns(tmp_path: Path) -> None:
    """#38: Table 2 prints PercC, PercC&F and PercC&F&AVR; each gets the paper's value and the gap beside ours
    (before: PercC&F&AVR only)."""
    plan = {1: set(), 2: {"avr"}, 3: {"fine"}, 4: {"coarse-whole"}}
    rep = SUITE.score(rows_for("claude-3-opus-20240229", plan), SPEC, tmp_path)
    group, s = rep.tables[1], rep.models["claude-3-opus-20240229"]
    assert (s["perc_c"], s["perc_cf"], s["perc_cf_avr"]) == (0.75, 0.5, 0.25)
    r = dict(zip(group.columns, group.rows[0], strict=True))
    assert r["vs paper"] == "Claude3 (Opus)"  # Table 2: 44.94, 20.13, 5.97
    assert [r[f"paper {c}"] for c in ("perc_c", "perc_cf", "perc_cf_avr")] == ["44.94", "20.13", "5.97"]
    assert [r[f"gap {c}"] for c in ("perc_c", "perc_cf", "perc_cf_avr")] == ["+30.06", "+29.87", "+19.03"]
    few = SUITE.score(rows_for("m", plan), RunSpec(suite="marvel", options={"shots": 1}), tmp_path).tables[1]
    assert "gap perc_c" in few.columns and "gap perc_cf_avr" not in few.columns  # its AVR is few-shot (Table 8)


def test_few_shot_run_keeps_table2_for_its_zero_shot_questions(tmp_path: Path) -> None:
    """#38: --shots and --panels change the AVR question only; the fine and coarse questions are asked as in
    Table 2, so a few-shot run's fine, PercC and PercC&F get Table 2's values and the gap (before: AVR only)."""
    plan = {1: set(), 2: {"avr"}, 3: {"fine"}, 4: {"coarse-whole"}}
    rep = SUITE.score(rows_for("claude-3-opus-20240229", plan), RunSpec(suite="marvel", options={"shots": 2}),
                      tmp_path)  # fmt: skip
    inst, group = rep.tables[0], rep.tables[1]
    r = dict(zip(inst.columns, inst.rows[0], strict=True))
    assert (r["paper avr"], r["gap avr"]) == ("23.64", f"{75 - 23.64:+.2f}")  # Table 8, two-shot
    assert (r["paper fine"], r["gap fine"]) == ("47.27", f"{75 - 47.27:+.2f}")  # Table 2
    g = dict(zip(group.columns, group.rows[0], strict=True))
    assert (g["paper perc_c"], g["paper perc_cf"]) == ("44.94", "20.13") and "paper perc_cf_avr" not in g
    opus = next(x for x in inst.rows if x[0] == "paper: Claude3 (Opus)")
    assert opus[2:4] == ["23.64", "47.27"] and "Table 2 (fine, PercC, PercC&F" in inst.note
    assert not any(str(x[0]).startswith("paper: Qwen-VL") for x in inst.rows)  # Table 8's five models only


def test_few_shot_paper_rows_carry_no_dagger(tmp_path: Path) -> None:
    """#38: Tables 8-11 mark no model † (§6: "The inductive bias is mitigated in few-shot settings"); only
    Table 2's zero-shot rows do (before: "paper: Gemini †" beside Table 8's 28.7)."""
    rows = rows_for("m", {1: set(), 2: {"avr"}})
    for opts, table in (({"shots": 1}, "Table 8"), ({"questions": "avr", "panels": "one-by-one"}, "Table 11")):
        main = SUITE.score(rows, RunSpec(suite="marvel", options=opts), tmp_path).tables[0]
        names = [r[0] for r in main.rows if str(r[0]).startswith("paper:")]
        assert table in main.note and "paper: Gemini" in names and not any("†" in n for n in names)
        assert "†" not in main.note
    zero = SUITE.score(rows, SPEC, tmp_path).tables[0]
    assert "paper: Gemini †" in [r[0] for r in zero.rows] and "† as the paper marks" in zero.note
