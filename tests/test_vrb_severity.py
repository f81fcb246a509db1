"""VRB severity analyses as the reference's error_by_model_analysis.py (mean over models, the severity
regression, top/middle/low tiers), the paper's numbers beside ours, and the models its figures leave out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from suites.base import RunSpec
from suites.vrb import SUITE, data, paper
from suites.vrb.effects import Answers
from suites.vrb.severity import severity_effects, severity_mean, severity_tables, severity_tiers


def test_severity_mean_is_the_mean_of_model_means() -> None:
    per = {"a": {"no_error": 0.6, "minor": 0.5, "medium": 0.3}, "b": {"no_error": 0.2, "medium": 0.1}}
    assert severity_mean(per) == pytest.approx({"no_error": 0.4, "minor": 0.5, "medium": 0.2})  # minor: a only


def test_severity_regression_own_fitted_means_are_the_observed_shares() -> None:
    rng = np.random.default_rng(1)
    rows, sev = [], []
    for m, skill in (("a", 0.9), ("b", 0.5), ("c", 0.3)):
        for i in range(120):
            lv = ("no_error", "no_error", "minor", "medium")[i % 4]
            p = skill * (1.0, 1.0, 0.9, 0.7)[i % 4] * (0.8 if i % 3 else 1.0)
            rows.append((float(rng.random() < p), f"q{i}", m, ("x", "y")[i % 2], ("cat1", "cat2", "cat3")[i % 3]))
            sev.append(lv)
    a = Answers(*zip(*rows, strict=True), skills=[() for _ in rows])  # type: ignore[call-arg]
    out = severity_effects(a, sev, n_resamples=40)
    share = {lv: np.mean([y for y, s in zip(a.correct, sev, strict=True) if s == lv]) for lv in set(sev)}
    assert list(out["levels"]) == ["no_error", "minor", "medium"] and "Treatment('no_error')" in out["formula"]
    for lv, v in out["levels"].items():
        assert v["accuracy"] == pytest.approx(share[lv], abs=1e-6)
        assert v["ci95"][0] <= v["accuracy"] <= v["ci95"][1]
    assert out["levels"]["minor"]["n_items"] == 30
    assert severity_effects(a, ["minor"] * len(sev), n_resamples=2)["levels"] == {}  # no baseline level


def test_tiers_are_thirds_by_accuracy_pooled_over_answers() -> None:
    def answers(acc_no: float, acc_med: float) -> list[tuple[str, float]]:
        return [("no_error", 1.0)] * int(10 * acc_no) + [("no_error", 0.0)] * (10 - int(10 * acc_no)) + \
            [("medium", 1.0)] * int(10 * acc_med) + [("medium", 0.0)] * (10 - int(10 * acc_med))  # fmt: skip

    ans = {"m1": answers(0.9, 0.5), "m2": answers(0.8, 0.6), "m3": answers(0.5, 0.4), "m4": answers(0.2, 0.2)}
    t = severity_tiers(ans)["tiers"]
    # 4 models: n//3 = 1 Top, 1 Middle, the remaining 2 Low (the reference's split)
    assert (t["Top"]["models"], t["Middle"]["models"], t["Low"]["models"]) == (["m1"], ["m2"], ["m3", "m4"])
    assert t["Top"]["by_severity"]["no_error"] == {"accuracy": 0.9, "n": 10}
    assert t["Low"]["by_severity"]["medium"] == {"accuracy": pytest.approx(0.3), "n": 20}  # pooled answers
    assert t["Low"]["overall"] == [pytest.approx(0.2), pytest.approx(0.45)]
    [tab] = severity_tables({}, {"tiers": t}, "n")
    assert tab.rows[0][-1] == "-40.0" and tab.rows[2][-1] == "-5.0" and "minor" in tab.columns
    assert severity_tiers({"a": ans["m1"], "b": ans["m2"]})["tiers"] == {}  # needs three models


def test_paper_numbers_and_threshold() -> None:
    assert paper.accuracy("openrouter/google/gemini-3-flash-preview") == "78"
    assert paper.accuracy("gemini-3.0-pro") == "76" and paper.accuracy("moonshotai/kimi-k2.5") == "60"
    assert paper.accuracy("gpt-4o") == "-"
    assert round(658 / 701, 2) == paper.USEFULNESS_THRESHOLD  # §3.3: full consensus on 658 of 701
    assert set(paper.SKILL_AME_PP) == set(SUITE_SKILLS) - {"Other"}
    assert list(paper.FRONTIER_SNAPSHOTS.values()) == ["2024-11-30", "2025-04-30", "2025-12-31"]


def test_score_leaves_the_reference_exclusions_out_and_prints_the_paper(tmp_path: Path) -> None:
    from suites.vrb.synthetic import write_dataset
    from tests.test_vrb_score import row

    root = write_dataset(tmp_path / "syn", {"zambia": 60, "india": 40})
    reqs = list(SUITE.build(RunSpec(suite="vrb", options={"data_dir": str(root)})))
    rng = np.random.default_rng(0)
    models = (("good", 0.8), ("mid", 0.6), ("poor", 0.4))
    rows = [row(m, r.item, r.sim["correct"] if rng.random() < p else r.sim["wrong"][0])
            for r in reqs for m, p in models]  # fmt: skip
    gold = {it.key: it.solution for it in data.load(RunSpec(suite="vrb", options={"data_dir": str(root)}))}
    rows += [row("lab/lfm2-vl-1.6b", k, f"So:\n{g}") for k, g in gold.items()]  # excluded by the reference
    rep = SUITE.score(rows, RunSpec(suite="vrb", options={"data_dir": str(root)}), tmp_path)
    x = rep.extra
    assert x["frontier"] == {"snapshots": ["2024-11-30", "2025-04-30", "2025-12-31"],
                             "excluded_models": ["lab/lfm2-vl-1.6b"], "paper": list(paper.FRONTIER_TEXT)}  # fmt: skip
    kept = ["good", "mid", "poor"]
    assert x["severity_mean"]["models"] == kept
    for lv, v in x["severity_mean"]["mean"].items():
        assert v == pytest.approx(np.mean([rep.models[m]["by_severity"][lv]["accuracy"] for m in kept]))
    tiers = x["severity_tiers"]["tiers"]
    assert sorted(m for t in tiers.values() for m in t["models"]) == kept
    assert set(x["severity_effects"]["levels"]) <= {"no_error", "minor", "medium"}
    assert rep.models["lab/lfm2-vl-1.6b"]["accuracy"] == 1.0
    assert rep.models["lab/lfm2-vl-1.6b"]["meets_usefulness_threshold"] is True
    assert rep.models["poor"]["meets_usefulness_threshold"] is False and x["usefulness_threshold"] == 0.94
    by_title = {t.title.split(" (")[0].split(":")[1].strip(): t for t in rep.tables}
    acc = next(t for t in rep.tables if t.title.startswith("vrb: accuracy % (chance"))
    assert "usefulness threshold 94%" in acc.title and acc.columns[-3:] == ["vs 94%", "paper", "gap"]
    assert "left out of every per-model table, the severity mean and analyses and the frontier" in acc.note
    sev = next(t for t in rep.tables if t.title == "vrb: accuracy % by image-quality severity")
    assert sev.rows[-3][0] == "mean over models" and sev.rows[-2][0] == "paper (Fig. 10, §4.3)"
    ne = sev.columns.index("no_error")
    assert sev.rows[-2][ne] == "38"
    # #38: the gap row, mean − paper in points, where the paper gives a number
    assert sev.rows[-1][0].startswith("gap") and abs(float(sev.rows[-1][ne]) - (float(sev.rows[-3][ne]) - 38)) < 0.11
    assert sev.rows[-1][sev.columns.index("minor")] == "-"
    skills = next(t for t in rep.tables if t.title.startswith("vrb: skill effects"))
    assert skills.columns[-2:] == ["paper (Fig. 9)", "gap pp"]
    [fold] = [r for r in skills.rows if r[0] == "Folding"]
    assert fold[-2] == "-9" and (abs(float(fold[-1]) - (float(fold[1]) + 9)) < 0.11 if fold[1] != "-" else fold[-1] == "-")
    assert any(k.startswith("image-error severity regression") for k in by_title)
    assert any(t.title.startswith("vrb: accuracy % by model tier") for t in rep.tables)
    every = SUITE.score(rows, RunSpec(suite="vrb", options={"data_dir": str(root), "exclude_models": "none"}),
                        tmp_path).extra  # fmt: skip
    assert every["frontier"]["excluded_models"] == [] and len(every["severity_mean"]["models"]) == 4
    assert sum(len(t["models"]) for t in every["severity_tiers"]["tiers"].values()) == 4


SUITE_SKILLS = __import__("suites.vrb.data", fromlist=["SKILLS"]).SKILLS
