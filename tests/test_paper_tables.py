"""The papers' tables the data allow, on hand-made inputs with known values: JEEBench's random baseline,
per-year scores and MCQ-only marks; M3GIA's Table 1 layout and factor correlation; VRB's category effects."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from suites.jeebench.baselines import by_year, mcq_marks, random_row, random_score, random_table, year_table
from suites.jeebench.data import load_items
from suites.m3gia.factors import TABLE1, factor_correlation, table1
from suites.vrb.categories import category_effects, category_table
from suites.vrb.effects import Answers


def test_jeebench_random_baseline_is_the_authors() -> None:
    items = load_items()
    by = {it.type: it for it in items}
    assert random_score(by["MCQ"]) == 0.25 and random_score(by["Integer"]) == random_score(by["Numeric"]) == 0
    multi = [it for it in items if it.type == "MCQ(multiple)"]
    want = {1: 0.0625, 2: 0.09375, 3: 0.203125, 4: 0.5}
    assert all(random_score(it) == want[len(it.gold)] for it in multi)
    row = random_row(items)
    assert row["by_type"]["MCQ"] == 0.25 and row["by_type"]["Integer"] == 0.0
    assert row["by_type"]["MCQ(multiple)"] == pytest.approx(np.mean([want[len(it.gold)] for it in multi]))
    n_mcq = sum(it.type == "MCQ" for it in items)
    assert row["overall"] == pytest.approx((0.25 * n_mcq + sum(want[len(it.gold)] for it in multi)) / 515)
    t = random_table(row, "cot")
    assert t.rows[0][0] == "Random" and t.rows[0][t.columns.index("overall")] == round(row["overall"], 3)


def test_jeebench_years_and_mcq_marks() -> None:
    rows = [
        {"year": 2016, "score": 1.0, "type": "MCQ", "marks": 3},
        {"year": 2016, "score": 0.0, "type": "MCQ(multiple)", "marks": -2},
        {"year": 2023, "score": 0.25, "type": "MCQ(multiple)", "marks": 1},
        {"year": 2023, "score": 1.0, "type": "Integer", "marks": 3},  # Table 5 counts MCQs only
    ]
    assert by_year(rows) == {2016: 0.5, 2023: 0.625}
    assert mcq_marks(rows) == {"positive": 4.0, "negative": -2.0, "total": 2.0, "questions": 3}
    t = year_table({"m": {"by_year": {2016: 0.5, 2023: 0.625}}}, "cot")
    assert t is not None and t.columns == ["model", "2016", "2023"] and t.rows == [["m", 0.5, 0.625]]
    assert year_table({"m": {}}, "cot") is None


def _m3(acc: float, f: dict[str, float]) -> dict:
    return {"accuracy": acc, "by_factor": f}


def test_m3gia_table1_layout_and_factor_correlation() -> None:
    rng = np.random.default_rng(0)
    models = {f"m{i}": _m3(0.3 + 0.1 * i, {f: float(rng.random()) for f in TABLE1}) for i in range(5)}
    t = table1(models)
    assert t.columns[:10] == ["model", "I", "RG", "RQ", "Gf", "Gc", "Gq", "Grw", "Gv", "Overall"]
    assert t.rows[2][9] == pytest.approx(0.5) and "Human row" in t.note
    corr, table = factor_correlation(models)
    x = [models[m]["by_factor"]["Gf"] for m in models]
    y = [models[m]["by_factor"]["Gc"] for m in models]
    assert corr["Gf"]["Gc"] == pytest.approx(sps.pearsonr(x, y).statistic)
    assert corr["Gf"]["Gf"] == pytest.approx(1.0) and table is not None and len(table.rows) == 8
    assert factor_correlation(dict(list(models.items())[:2])) == ({}, None)  # r needs 3 models


def _vrb_answers(balanced: bool) -> Answers:
    rng = np.random.default_rng(3)
    cats, base = ("count", "odd one out", "shape"), {"count": 0.8, "odd one out": 0.35, "shape": 0.55}
    rows = []
    for m, skill in (("weak", 0.4), ("strong", 1.0)):
        for i in range(150):
            c = cats[i % 3]
            if not balanced and m == "weak" and c == "count":
                continue  # the weak model never answered the easy category
            p = min(0.98, base[c] * skill)
            rows.append((float(rng.random() < p), f"q{i}", m, "zambia" if i % 2 else "india", c))
    return Answers(*zip(*rows, strict=True), skills=[() for _ in rows])  # type: ignore[call-arg]


def _shares(a: Answers) -> dict[str, float]:
    return {c: float(np.mean([y for y, cat in zip(a.correct, a.category, strict=True) if cat == c])) for c in set(a.category)}


def test_vrb_category_effects_are_the_references_own_fitted_means() -> None:
    """The reference's Fig. 11 (bambi predictions, average_by category, no conditional): each category's own
    answers' fitted probabilities averaged. Under the maximum-likelihood logit that is the category's observed
    share of right answers, with or without the skill covariates; Other is never a covariate."""
    ub = _vrb_answers(balanced=False)
    skills = [("Other", "Counting") if i % 4 == 0 else ("Rotation",) if i % 3 else () for i in range(len(ub.correct))]
    a = Answers(ub.correct, ub.item, ub.model, ub.dataset, ub.category, skills)
    for cov in ("skills", "none"):
        eff = category_effects(a, n_resamples=30, covariates=cov)
        assert eff["estimand"] == "reference" and "own fitted probabilities" in eff["estimator"]
        for c, v in eff["categories"].items():
            assert v["accuracy"] == pytest.approx(_shares(a)[c], abs=1e-6)
            assert v["ci95"][0] <= v["accuracy"] <= v["ci95"][1]
    assert "has_Counting" in eff["formula"] or "has_Counting" in category_effects(a, n_resamples=2)["formula"]
    assert "has_Other" not in category_effects(a, n_resamples=2)["formula"]
    t = category_table(eff)
    assert t is not None and t.columns[2:] == ["predicted accuracy %", "95% CI", "paper"]
    assert t.rows[0][2] == f"{100 * min(_shares(a).values()):.1f}" and t.rows[0][4] == "-"  # hardest first, in %


def test_vrb_category_effects_standardise_over_models() -> None:
    a = _vrb_answers(balanced=True)
    eff = category_effects(a, n_resamples=50, estimand="standardised")
    shares = {c: np.mean([y for y, cat in zip(a.correct, a.category, strict=True) if cat == c]) for c in set(a.category)}
    # saturated in category x model x dataset cells and balanced: standardised accuracy = the raw share
    for c, v in eff["categories"].items():
        assert v["accuracy"] == pytest.approx(shares[c], abs=0.02)
        assert v["ci95"][0] <= v["accuracy"] <= v["ci95"][1] and v["n_items"] == 50
    assert list(eff["categories"]) == sorted(eff["categories"], key=lambda c: shares[c])  # hardest first
    # unbalanced: the raw share of "count" comes from the strong model only; standardising over both
    # models (as observed) lowers it toward what an average model would get
    ub = _vrb_answers(balanced=False)
    raw = np.mean([y for y, c in zip(ub.correct, ub.category, strict=True) if c == "count"])
    std = category_effects(ub, n_resamples=20, estimand="standardised")["categories"]["count"]["accuracy"]
    assert std < raw - 0.05
    t = category_table(eff)
    assert t is not None and "C(category)" in t.note and "marginal standardisation" in t.note


def test_vrb_category_effects_hold_skills_fixed() -> None:
    """The reference's Fig. 11 model has the skill indicators beside category: a category that is hard only
    because its items need a hard skill looks hard without them and like the others with them."""
    rng = np.random.default_rng(5)
    rows, skills = [], []
    for m in ("a", "b", "c"):
        for i in range(240):
            cat = ("count", "shape")[i % 2]
            hard = i % 8 < (3 if cat == "count" else 1)  # "count" items need the hard skill 3x as often
            rows.append((float(rng.random() < (0.25 if hard else 0.8)), f"q{i}", m, ("zambia", "india")[i % 3 % 2], cat))
            skills.append(("spatial",) if hard else ())
    a = Answers(*zip(*rows, strict=True), skills=skills)  # type: ignore[call-arg]
    with_skills = category_effects(a, n_resamples=20, estimand="standardised")
    without = category_effects(a, n_resamples=20, covariates="none", estimand="standardised")
    assert "has_spatial" in with_skills["formula"] and "has_" not in without["formula"]
    gap = lambda e: e["categories"]["shape"]["accuracy"] - e["categories"]["count"]["accuracy"]  # noqa: E731
    assert gap(without) > 0.1  # the raw confound: count looks ~0.14 harder
    assert abs(gap(with_skills)) < 0.05  # the skill explains it
