"""VRB metrics: hand-made scoring cases for every rule, bootstrap CIs against a direct computation, and
skill effects (average marginal effects) on synthetic data with known effects."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import statsmodels.api as sm
from PIL import Image
from scipy.special import expit

from suites.base import RunSpec, SuiteError
from suites.stats import bootstrap_ci
from suites.vrb import SUITE
from suites.vrb.effects import Answers, Design, ames, newton_logit, skill_effects

# id, option_id, gold, dataset, category, skills, severity
ITEMS = [
    ("Q1", "alpha_upper", "A", "x", "Odd One Out", "Rotation", ""),
    ("Q2", "alpha_upper", "B", "x", "Odd One Out", "Rotation; Counting", "minor"),
    ("Q3", "alpha_lower", "c", "x", "Match (Figure)", "Counting", "fatal"),
    ("Q1", "numeric", "4", "y", "Match (Figure)", "Other", "moderate"),
    ("Q2", "alpha_upper", "D", "y", "Odd One Out", "Counting", ""),
]


def make_data(root: Path, annotated: bool = True) -> Path:
    root.mkdir()
    (root / "options.csv").write_text(
        'option_id,values\nalpha_upper,"A,B,C,D"\nalpha_lower,"a,b,c,d"\nnumeric,"1,2,3,4"\n'
    )
    for ds in ("x", "y"):
        (root / f"{ds}-images").mkdir()
        rows = [it for it in ITEMS if it[3] == ds]
        q = "id,question,option_id,solution\n" + "".join(f"{i},Which one?,{o},{g}\n" for i, o, g, *_ in rows)
        (root / f"{ds}-questions-gold.csv").write_text(q)
        c = "id,solution,category,skills,error_type_value,error_severity_value\n" + "".join(
            f'{i},{g},{cat},"{sk}",,{sev}\n' for i, _, g, _, cat, sk, sev in rows
        )
        if annotated:
            (root / f"{ds}-questions-categories-gold.csv").write_text(c)
        for i, *_ in rows:
            Image.new("RGB", (8, 8)).save(root / f"{ds}-images" / f"{i}.png")
    return root


def row(
    model: str, item: str, text: str | None, sample: int = 0, error: str | None = None, pass_: str = "answer"
):
    return {"model": model, "suite": "vrb", "item": item, "sample": sample, "pass": pass_, "text": text,
            "error": error, "usage": {}, "cost_usd": 0.0}  # fmt: skip


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_data(tmp_path / "vrb")


def run(rows: list[dict], root: Path, tmp_path: Path):
    return SUITE.score(rows, RunSpec(suite="vrb", options={"data_dir": str(root)}), tmp_path)


def test_scoring_rules(root: Path, tmp_path: Path) -> None:
    rows = [
        row("m", "x/Q1", "Rotation again.\nA"),  # right
        row("m", "x/Q2", "The answer is **C**"),  # wrong
        row("m", "x/Q3", "\\boxed{c}"),  # right, but a fatal image: only in the headline accuracy
        row("m", "y/Q1", "I cannot determine the answer from this image."),  # no answer: wrong
        row("m", "y/Q2", None, error="HTTP 500 after 6 attempts"),  # an error: not scored, never dropped
        row("m", "y/Q2", "D", pass_="judge"),  # other passes are not answers
    ]
    rep = run(rows, root, tmp_path)
    m = rep.models["m"]
    assert m["accuracy"] == pytest.approx(2 / 4) and m["n"] == 4  # over the answered items
    assert (m["no_answer"], m["errors"]) == (1, 1)
    # combined = datasets weighted by question count
    assert m["by_dataset"]["x"]["accuracy"] == pytest.approx(2 / 3)
    assert m["by_dataset"]["y"]["accuracy"] == 0.0
    assert m["accuracy"] == pytest.approx((3 * 2 / 3 + 1 * 0.0) / 4)
    # categories keep every item, the fatal x/Q3 included, as the reference's Figs 8 and 12 (#38: it was left out)
    assert (
        m["by_category"]["Odd One Out"]["accuracy"] == pytest.approx(1 / 2)
        and m["by_category"]["Odd One Out"]["n"] == 2
    )
    assert m["by_category"]["Match (Figure)"]["accuracy"] == 0.5 and m["by_category"]["Match (Figure)"]["n"] == 2
    assert list(m["by_category"]) == ["Odd One Out", "Match (Figure)"]  # the paper's order
    # skills, as the reference's skill analysis: no item with an image error (x/Q2 minor, x/Q3 fatal,
    # y/Q1 medium) and no Other column; y/Q2 (Counting) failed
    assert m["by_skill"] == {"Rotation": {"accuracy": 1.0, "ci95": [1.0, 1.0], "n": 1}}  # x/Q1 right
    # severity: no_error, minor, medium (moderate read as medium); fatal not a level
    assert {k: v["accuracy"] for k, v in m["by_severity"].items()} == {
        "no_error": 1.0,  # x/Q1 (y/Q2 failed)
        "minor": 0.0,
        "medium": 0.0,
    }
    assert set(m) >= {
        "accuracy",
        "ci95",
        "by_dataset",
        "by_category",
        "by_skill",
        "by_severity",
        "skill_effects",
    }
    by_item = {s["item"]: s for s in rep.scored}
    assert len(rep.scored) == 5
    q3 = by_item["x/Q3"]
    assert (q3["extracted"], q3["gold"], q3["score"], q3["extract_step"], q3["severity"]) == (
        "c",
        "c",
        1.0,
        3,
        "fatal",
    )
    assert by_item["y/Q2"]["extracted"] is None and by_item["y/Q2"]["error"]
    assert by_item["y/Q2"]["score"] is None and by_item["y/Q2"]["error_kind"] == "error"
    assert rep.extra["chance"] == 0.25


def test_samples_average_within_an_item(root: Path, tmp_path: Path) -> None:
    rows = [row("m", "x/Q1", t, sample=s) for s, t in enumerate(["A", "B", "A", "A"])]
    rows += [row("m", "x/Q2", "B", sample=s) for s in range(4)]
    m = run(rows, root, tmp_path).models["m"]
    assert m["n"] == 2 and m["accuracy"] == pytest.approx((0.75 + 1.0) / 2)


def test_unknown_item_is_an_error(root: Path, tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match=r"results hold item 'z/Q9', which is not in the VRB data"):
        run([row("m", "z/Q9", "A")], root, tmp_path)


def test_without_annotations(tmp_path: Path) -> None:
    root = make_data(tmp_path / "plain", annotated=False)
    rep = run([row("m", "x/Q1", "A"), row("m", "y/Q2", "B")], root, tmp_path)
    m = rep.models["m"]
    assert m["accuracy"] == 0.5 and m["by_category"] == m["by_skill"] == m["by_severity"] == {}
    assert m["skill_effects"] == {} and "no skill annotations" in rep.extra["skill_effects"]["note"]


def test_bootstrap_ci_against_direct_computation() -> None:
    x = np.random.default_rng(7).integers(0, 2, 57).astype(float)
    rng = np.random.default_rng(0)
    means = [x[rng.integers(0, len(x), len(x))].mean() for _ in range(1000)]
    assert bootstrap_ci(x, n_resamples=1000, seed=0) == pytest.approx(
        tuple(np.percentile(means, [2.5, 97.5]))
    )
    lo, hi = bootstrap_ci(x)
    se = np.sqrt(x.mean() * (1 - x.mean()) / len(x))
    assert hi - lo == pytest.approx(2 * 1.96 * se, rel=0.15)  # close to the normal approximation
    assert bootstrap_ci([1.0] * 10) == (1.0, 1.0)


def test_model_ci_is_the_item_bootstrap(root: Path, tmp_path: Path) -> None:
    texts = {"x/Q1": "A", "x/Q2": "C", "x/Q3": "c", "y/Q1": "4", "y/Q2": "A"}
    m = run([row("m", k, t) for k, t in texts.items()], root, tmp_path).models["m"]
    item_scores = [1.0, 0.0, 1.0, 1.0, 0.0]
    assert m["ci95"] == pytest.approx(list(bootstrap_ci(item_scores, n_resamples=1000, seed=0)))
    assert m["by_dataset"]["x"]["ci95"] == pytest.approx(list(bootstrap_ci([1.0, 0.0, 1.0])))


# ---------------------------------------------------------------- skill effects


def answers(rows: list[tuple]) -> Answers:
    cols = list(zip(*rows, strict=True))
    return Answers(correct=list(cols[0]), item=list(cols[1]), model=list(cols[2]), dataset=list(cols[3]),
                   category=list(cols[4]), skills=list(cols[5]))  # fmt: skip


def test_known_effect_exactly_and_its_bootstrap() -> None:
    """One skill, nothing else: the logit is saturated, so the AME is the difference in accuracy
    (50% with Rotation vs 70% without: exactly -20 pp) and each bootstrap replicate is the difference of
    the resampled proportions, which we compute directly."""
    rows = [(float(i < 70), f"d/n{i:03d}", "m", "d", "c", ()) for i in range(100)]
    rows += [(float(i < 50), f"d/r{i:03d}", "m", "d", "c", ("Rotation",)) for i in range(100)]
    out = skill_effects(answers(rows), ["Rotation", "Counting"], n_resamples=300, seed=3)
    e = out["effects"]["Rotation"]
    assert e["ame_pp"] == pytest.approx(-20.0, abs=1e-8) and e["n_items"] == 100
    assert e["log_odds"] == pytest.approx(np.log(1.0) - np.log(0.7 / 0.3), abs=1e-8)
    assert (
        out["effects"]["Counting"]["ame_pp"] is None
        and "never or always" in out["effects"]["Counting"]["note"]
    )

    keys = sorted(r[1] for r in rows)
    y = {r[1]: r[0] for r in rows}
    rng, reps = np.random.default_rng(3), []
    for _ in range(300):
        pick = [keys[i] for i in rng.integers(0, len(keys), len(keys))]
        rot = [y[k] for k in pick if "/r" in k]
        non = [y[k] for k in pick if "/n" in k]
        reps.append(100 * (np.mean(rot) - np.mean(non)))
    assert e["ci95_pp"] == pytest.approx(list(np.quantile(reps, [0.025, 0.975])), abs=1e-6)


def _synthetic(seed: int = 11, n_items: int = 500):
    """4 models, 2 datasets, 3 categories, 4 skills; Rotation has log-odds -1.2, Counting +0.5."""
    rng = np.random.default_rng(seed)
    skills = ["Rotation", "Counting", "Folding", "Layering"]
    beta = {"Rotation": -1.2, "Counting": 0.5, "Folding": 0.0, "Layering": 0.0}
    ability = {"m0": -0.5, "m1": 0.0, "m2": 0.6, "m3": 1.2}
    cat_eff = {"Odd One Out": 0.0, "Match (Figure)": -0.4, "Reasoning by Analogy": 0.3}
    items = []
    for i in range(n_items):
        sk = tuple(s for s in skills if rng.random() < 0.35)
        items.append((f"{'xy'[i % 2]}/q{i}", "xy"[i % 2], list(cat_eff)[i % 3], sk))
    rows, eta1, eta0 = [], [], []
    for m, a in ability.items():
        for key, ds, cat, sk in items:
            base = a + cat_eff[cat] + 0.2 * (ds == "y") + sum(beta[s] for s in sk if s != "Rotation")
            eta = base + beta["Rotation"] * ("Rotation" in sk)
            rows.append((float(rng.random() < expit(eta)), key, m, ds, cat, sk))
            eta1.append(base + beta["Rotation"])
            eta0.append(base)
    true_ame = 100 * float(np.mean(expit(np.array(eta1)) - expit(np.array(eta0))))
    return rows, skills, true_ame


def test_recovers_a_known_skill_effect() -> None:
    rows, skills, true_ame = _synthetic()
    out = skill_effects(answers(rows), skills, n_resamples=200)
    rot = out["effects"]["Rotation"]
    assert true_ame == pytest.approx(-25, abs=5)  # the effect we planted, on the probability scale
    assert rot["ame_pp"] == pytest.approx(true_ame, abs=4)
    assert rot["ci95_pp"][0] < true_ame < rot["ci95_pp"][1]
    assert rot["ci95_pp"][1] < 0 and out["effects"]["Counting"]["ci95_pp"][0] > 0
    for s in ("Folding", "Layering"):  # no effect planted
        assert abs(out["effects"][s]["ame_pp"]) < 5
    assert out["n_answers"] == 2000 and out["n_items"] == 500 and out["converged"]


def test_ame_and_fit_match_statsmodels_per_answer_logit() -> None:
    """Our grouped fit and AME equal statsmodels' per-answer Logit and its discrete-change margins."""
    rows, skills, _ = _synthetic(seed=5, n_items=200)
    out = skill_effects(answers(rows), skills, n_resamples=2)
    y = np.array([r[0] for r in rows])
    cols = [[float(s in r[5]) for s in skills] for r in rows]
    fe = [[float(r[2] == m) for m in ("m1", "m2", "m3")] + [float(r[3] == "y")]
          + [float(r[4] == c) for c in ("Odd One Out", "Reasoning by Analogy")] for r in rows]  # fmt: skip
    X = np.column_stack([np.array(cols), np.array(fe), np.ones(len(y))])
    fit = sm.Logit(y, X).fit(disp=0)
    margeff = fit.get_margeff(at="overall", method="dydx", dummy=True)
    for j, s in enumerate(skills):
        assert out["effects"][s]["log_odds"] == pytest.approx(fit.params[j], abs=1e-6)
        assert out["effects"][s]["se"] == pytest.approx(fit.bse[j], rel=1e-5)
        assert out["effects"][s]["ame_pp"] == pytest.approx(100 * margeff.margeff[j], abs=1e-6)


def test_batched_newton_matches_statsmodels() -> None:
    rng = np.random.default_rng(2)
    Zq = np.column_stack([[0, 1, 0, 1, 1], [0, 0, 1, 1, 0], [0, 0, 0, 0, 1], np.ones(5)])  # 5 patterns
    d = Design(Zq, 4)  # x 4 levels of an absorbed fixed effect
    trials = rng.integers(0, 9, 20).astype(float)  # some empty cells
    succ = rng.binomial(trials.astype(int), 0.4).astype(float)
    used = trials > 0
    ref = sm.GLM(np.column_stack([succ, trials - succ])[used], d.X[used], family=sm.families.Binomial()).fit()
    tr = np.stack([trials, 2 * trials]).reshape(2, 4, 5)  # doubling every count leaves the MLE unchanged
    got = newton_logit(d, np.stack([succ, 2 * succ]).reshape(2, 4, 5), tr, np.zeros(d.X.shape[1]))
    assert got == pytest.approx(np.stack([ref.params, ref.params]), abs=1e-7)
    X1, X0 = d.X.copy(), d.X.copy()
    X1[:, 0], X0[:, 0] = 1, 0
    direct = np.average(ref.predict(X1) - ref.predict(X0), weights=trials)
    assert ames(d, got, tr, [0])[:, 0] == pytest.approx([direct, direct], abs=1e-9)


def test_not_estimable_cases_are_reported() -> None:
    rows, skills, _ = _synthetic(seed=8, n_items=160)
    rows = [r for r in rows if r[2] != "m3"]
    # Folding only on Match (Figure) items and always there: collinear with the category
    rows = [(y, k, m, d, c, tuple(s for s in sk if s != "Folding") + (("Folding",) if c == "Match (Figure)" else ()))
            for y, k, m, d, c, sk in rows]  # fmt: skip
    # Layering: every answer to its items is right
    rows = [(1.0 if "Layering" in sk else y, k, m, d, c, sk) for y, k, m, d, c, sk in rows]
    rows += [(0.0, key, "broken", ds, cat, sk) for _, key, m, ds, cat, sk in rows if m == "m0"]  # all wrong
    out = skill_effects(answers(rows), [*skills, "Other", "Scaling"], n_resamples=20)
    eff = out["effects"]
    assert out["dropped_levels"] == {"model": ["broken"]}
    assert "collinear" in eff["Folding"]["note"] and eff["Folding"]["ame_pp"] is None
    assert "every answer to items with this skill is right" in eff["Layering"]["note"]
    assert "never or always" in eff["Scaling"]["note"]
    assert "Other" not in eff  # the remainder category is not an indicator
    assert eff["Rotation"]["ame_pp"] < 0 and eff["Counting"]["ame_pp"] is not None


def test_separated_single_model_fit_is_not_reported() -> None:
    """Counting-without-Rotation always right, Rotation-without-Counting always wrong: log-odds
    +t for Counting and -t for Rotation raise the likelihood for every t, so the MLE does not exist."""
    cr = [
        ((1, 0), 1),
        ((1, 0), 1),
        ((1, 1), 0),
        ((1, 1), 1),
        ((0, 0), 0),
        ((0, 0), 1),
        ((0, 1), 0),
        ((0, 1), 0),
    ]
    rows = [
        (float(y), f"d/q{i}", "m", "d", "c", ("Counting",) * c + ("Rotation",) * r)
        for i, ((c, r), y) in enumerate(cr)
    ]
    out = skill_effects(
        answers(rows), ["Counting", "Rotation"], fixed=("dataset", "category"), n_resamples=20
    )
    for e in out["effects"].values():
        assert e["ame_pp"] is None and "(quasi-)separated" in e["note"]


def test_score_reports_pooled_and_per_model_effects(tmp_path: Path) -> None:
    from suites.vrb.synthetic import write_dataset

    root = write_dataset(tmp_path / "syn", {"zambia": 60, "india": 40})
    items = SUITE.build(RunSpec(suite="vrb", options={"data_dir": str(root)}))
    rng = np.random.default_rng(0)
    rows = [row(m, r.item, r.sim["correct"] if rng.random() < p else r.sim["wrong"][0])
            for r in items for m, p in (("good", 0.8), ("poor", 0.4))]  # fmt: skip
    rep = run(rows, root, tmp_path)
    pooled = rep.extra["skill_effects"]
    assert pooled["models"] == ["good", "poor"] and pooled["formula"].endswith(
        "C(model) + C(dataset) + C(category)"
    )
    assert set(pooled["effects"]) == set(SUITE_SKILLS) - {"Other"}
    for m in ("good", "poor"):
        assert set(rep.models[m]["skill_effects"]) == set(pooled["effects"])
    assert any(t.title.startswith("vrb: skill effects") for t in rep.tables)


SUITE_SKILLS = __import__("suites.vrb.data", fromlist=["SKILLS"]).SKILLS


def test_skill_accuracy_is_the_references_set() -> None:
    """Per-skill accuracy as visualisations_paper.py §2: an image-error item of any severity is dropped, and
    Other is no column; a clean item counts once per skill."""
    from suites.vrb.data import Item
    from suites.vrb.score import breakdowns

    def it(i: str, skills: tuple[str, ...], sev: str | None) -> Item:
        return Item("d", i, "q", "alpha_upper", ("A", "B", "C", "D"), "A", Path("x.png"), "Odd One Out", skills, sev)

    items = {x.key: x for x in (it("1", ("Counting", "Other"), "no_error"), it("2", ("Counting",), None),
                                it("3", ("Counting", "Rotation"), "minor"), it("4", ("Other",), "no_error"))}  # fmt: skip
    out = breakdowns({"d/1": 1.0, "d/2": 0.0, "d/3": 1.0, "d/4": 1.0}, items)
    assert {k: (v["accuracy"], v["n"]) for k, v in out["by_skill"].items()} == {"Counting": (0.5, 2)}
    assert out["by_category"]["Odd One Out"]["n"] == 4  # categories keep minor/medium items


def test_empty_answer_cut_at_the_limit_is_wrong(root: Path, tmp_path: Path) -> None:
    """#38: a reasoning model's empty answer cut by the token limit (the runner's `reasoning_exhausted` row,
    finish_reason length, no text) is scored wrong as the reference does; a failed call stays unscored."""
    cut = row("m", "x/Q2", None, error="reasoning exhausted the token limit before any answer (finish_reason=length)")
    cut.update(error_kind="reasoning_exhausted", finish_reason="length")
    rows = [row("m", "x/Q1", "A"), cut, row("m", "y/Q2", None, error="HTTP 500 after 6 attempts")]
    rep = run(rows, root, tmp_path)
    m = rep.models["m"]
    assert m["accuracy"] == pytest.approx(1 / 2) and m["n"] == 2  # x/Q1 right, x/Q2 wrong; y/Q2 out
    assert (m["no_answer"], m["errors"]) == (1, 1)
    by_item = {s["item"]: s for s in rep.scored}
    q2 = by_item["x/Q2"]
    assert (q2["score"], q2["error"], q2["extracted"], q2["cut_at_limit"]) == (0.0, None, None, True)
    assert by_item["y/Q2"]["score"] is None and by_item["y/Q2"]["error_kind"] == "error"


def test_gap_beside_the_papers_accuracy(root: Path, tmp_path: Path) -> None:
    """#38: where the paper's text gives a model's accuracy, the table prints ours − the paper's in points;
    '≈45' reads 45, 'mid-20s' and no value give '-'."""
    rows = [row(m, k, t) for m in ("google/gemini-3-flash", "qwen/qwen3-vl-30b-a3b-thinking", "gemma-3-4b", "other",
                                   "qwen/qwen3-vl-8b", "z-ai/glm-4.6v-flash", "z-ai/glm-4.6v")
            for k, t in (("x/Q1", "A"), ("x/Q2", "C"), ("y/Q1", "4"), ("y/Q2", "A"))]  # fmt: skip
    acc = next(t for t in run(rows, root, tmp_path).tables if t.title.startswith("vrb: accuracy % (chance"))
    assert acc.columns[-2:] == ["paper", "gap"]
    got = {r[0]: (r[2], r[-2], r[-1]) for r in acc.rows}
    assert got["google/gemini-3-flash"] == ("50.0", "78", "-28.0")
    assert got["qwen/qwen3-vl-30b-a3b-thinking"] == ("50.0", "≈45", "+5.0")
    assert got["z-ai/glm-4.6v"][1] == "≈45"
    # #38: the paper's Qwen3-VL and GLM-4.6V are models.csv's fw-qwen3-vl-30b-a3b-thinking and glm-4.6v; another
    # size or the Flash variant is another model (before: any qwen3-vl or glm-4.6v* got the paper's ≈45)
    assert got["qwen/qwen3-vl-8b"][1:] == ("-", "-") and got["z-ai/glm-4.6v-flash"][1:] == ("-", "-")
    assert got["gemma-3-4b"][1:] == ("mid-20s", "-") and got["other"][1:] == ("-", "-")


def test_accuracy_note_carries_the_papers_range_and_the_unmatched_model(root: Path, tmp_path: Path) -> None:
    """#38: the text's numbers no row carries are said under the accuracy table: §4.1's 23-78% over its 45
    models beside this run's range, and §4.1.1's "Mistral Small 2.1 3B", which names no model of the reference's
    models.csv; Fig. 7's ≈23% at the lowest prices and 15-20 point spread per cost band go to the frontier note."""
    from suites.vrb import paper

    rows = [row(m, k, t) for m, ans in (("a", ("A", "B", "4", "D")), ("b", ("A", "C", "1", "A")))
            for k, t in zip(("x/Q1", "x/Q2", "y/Q1", "y/Q2"), ans, strict=True)]  # fmt: skip
    rep = run(rows, root, tmp_path)
    acc = next(t for t in rep.tables if t.title.startswith("vrb: accuracy % (chance"))
    assert "range: the paper's 45 models 23-78% (§4.1), 25.0-100.0% over these 2" in acc.note
    assert "Mistral Small 2.1 3B" in acc.note and "ministral-3b" in acc.note
    assert any("≈23%" in s for s in paper.FRONTIER_TEXT) and any("15-20 points" in s for s in paper.FRONTIER_TEXT)
    assert rep.extra["frontier"]["paper"] == list(paper.FRONTIER_TEXT)


def test_fig8_task_spread_per_model(root: Path, tmp_path: Path) -> None:
    """#38: Fig. 8 as a table: each model's overall accuracy, best and worst task category and their range in
    points, beside the text's "nearly 35 points" for Kimi-K2.5 and Qwen3-VL with the gap (before: no such view
    in the suite's tables, the text's figures nowhere)."""
    answers = {"moonshotai/kimi-k2.5": ("A", "B", "4", "A"), "other": ("B", "B", "1", "D")}
    rows = [row(m, k, t) for m, ans in answers.items()
            for k, t in zip(("x/Q1", "x/Q2", "y/Q1", "y/Q2"), ans, strict=True)]  # fmt: skip
    rep = run(rows, root, tmp_path)
    (t,) = [t for t in rep.tables if t.title == "vrb: task spread per model (Fig. 8)"]
    assert t.columns == ["model", "overall", "best", "worst", "range pp", "paper range", "gap pp"]
    got = {r[0]: r[1:] for r in t.rows}
    cat = rep.models["moonshotai/kimi-k2.5"]["by_category"]  # x/Q3 unanswered: Odd One Out 2/3, Match (Figure) 1/1
    assert {c: x["accuracy"] for c, x in cat.items()} == {"Odd One Out": pytest.approx(2 / 3), "Match (Figure)": 1.0}
    assert got["moonshotai/kimi-k2.5"] == ["75.0", "Match (Figure)", "Odd One Out", "33.3", "≈35", "-1.7"]
    assert got["other"][1:] == ["Odd One Out", "Match (Figure)", "66.7", "-", "-"]  # 2/3 vs 0/1
    assert "nearly" not in t.note and "10-25 points" in t.note and "Match (Process)" in t.note
