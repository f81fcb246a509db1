"""M3GIA: the GIA port against R's lavPredict, extraction rules, prompt text, correlation statistic."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from suites.m3gia import extract, gia
from suites.m3gia.data import BUNDLED, LANGS, TYPES, Question, answer_key, factor_labels
from suites.m3gia.prompts import PREFIX, SUFFIX, prompt_text
from suites.m3gia.score import pearson

REF = json.loads((Path(__file__).parent / "data" / "m3gia" / "gia_reference.json").read_text())

# The mapping written out independently of gia.TYPE_TO_COLUMN: score-sheet column -> our question type.
SHEET = {
    "General_Info": "General Information",
    "Oral_Vocab": "Oral Vocabulary",
    "Logo": "Logo Problem",
    "Visualization": "Visualization",
    "Pic_Recog": "Picture Recognition",
    "RW_Spatial": "Real-world Spatial",
    "Readings_text": "Readings-text",
    "Readings_VL": "Readings-VL",
    "Comic": "Comic Problem",
    "Math_Facts": "Math Facts",
    "Algebra": "Algebra",
    "Geom": "Geometry",
    "Applied_Problem": "Applied Problem",
    "Number_Series": "Number Seres",
    "Concept": "Concept Formation",
    "Raven": "Raven's Matrices",
    "Syllogism": "Syllogism Problem",
    "RW_Reason": "Real-world Reasoning",
}


# --- GIA: numpy port vs lavaan


@pytest.mark.parametrize("lang", list(LANGS))
def test_factor_scores_match_lavpredict(lang: str) -> None:
    ref = REF[lang]
    assert tuple(ref["columns"]) == gia.SHEET_COLUMNS  # the score-sheet order the authors pass
    x = np.array(ref["rows"])
    assert x.shape == (15, 18)
    fs = gia.factor_scores(x, lang)
    np.testing.assert_allclose(fs, np.array(ref["factor_scores"]), rtol=0, atol=1e-6)
    np.testing.assert_allclose(fs[:, 5], ref["gia"], rtol=0, atol=1e-6)
    assert ref["lv_names"][5] == gia.model(lang)["gia_latent"] == "Cog"


@pytest.mark.parametrize("lang", list(LANGS))
def test_gia_from_type_counts_uses_the_right_columns(lang: str) -> None:
    ref = REF[lang]
    for row, expected in zip(ref["rows"], ref["gia"], strict=True):
        counts = {SHEET[c]: v for c, v in zip(ref["columns"], row, strict=True)}
        assert gia.gia(counts, lang) == pytest.approx(expected, abs=1e-6)


def test_type_mapping_is_complete_and_matches_the_sheet() -> None:
    assert {gia.TYPE_TO_COLUMN[t]: t for t in TYPES} == SHEET
    assert list(gia.SHEET_COLUMNS) == list(SHEET)


def test_exported_parameters_are_consistent() -> None:
    for lang in LANGS:
        p = gia.model(lang)
        # the fitted implied covariance is Lambda Psi Lambda' + Theta, and E[y] = nu + Lambda alpha
        np.testing.assert_allclose(
            p["lambda"] @ p["psi"] @ p["lambda"].T + p["theta"], p["sigma"], atol=1e-10
        )
        np.testing.assert_allclose(p["nu"] + p["lambda"] @ p["alpha"], p["ey"], atol=1e-12)
        assert len(p["ov_names"]) == 18 and sorted(p["ov_names"]) == sorted(gia.SHEET_COLUMNS)


def test_a_reordered_variable_order_is_respected() -> None:
    """lavaan matches newdata by name: the model's own order differs from the score sheet's."""
    p = gia.model("en")
    assert p["ov_names"] != list(gia.SHEET_COLUMNS)
    x = np.array(REF["en"]["rows"][:1])
    naive = p["eeta"] + (x - p["ey"]) @ p["fsc"].T  # columns taken in sheet order: wrong
    assert abs(naive[0, 5] - REF["en"]["gia"][0]) > 1e-3


def test_normalized_gia_uses_the_human_averages() -> None:
    assert gia.normalized(16.01, "en") == pytest.approx(100.0)
    assert gia.normalized(9.76, "fr") == pytest.approx(50.0)
    assert gia.HUMAN_GIA == {"en": 16.01, "zh": 16.69, "fr": 19.52, "es": 16.22, "pt": 16.00, "ko": 18.05}


def test_bundled_files_match_the_published_ones(shared_data: Path) -> None:
    src = shared_data / "m3gia"
    for f in ["ability_label_dict.json", *(f"answer_dict_{n}.jsonl" for n in LANGS.values())]:
        assert (BUNDLED / f).read_bytes() == (src / "ground_truth" / f).read_bytes(), f
    codes = {"en": "En", "zh": "Zh", "fr": "Fr", "es": "Sp", "pt": "Pt", "ko": "Ko"}
    for lang, code in codes.items():
        rdata = (src / "gia_cfa" / f"CFA_{code}.RData").read_bytes()
        assert gia.model(lang)["source_md5"] == hashlib.md5(rdata).hexdigest()


def test_answer_keys_and_factor_labels() -> None:
    for lang in LANGS:
        key = answer_key(lang)
        assert len(key) == 300 and {t for t, _ in key.values()} == set(TYPES)
        labels = factor_labels(lang)
        assert len(labels["Gf"]) == 125 and len(labels["RG"]) == 40 and labels["Gq"] <= set(key)


# --- stage 1: rules


L4 = ("A", "B", "C", "D")
O4 = ("Lean", "Gaunt", "Emaciated", "Obese")


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        ("D", "D"),  # ` X ` after padding
        ("(B)", "B"),
        ("The answer is C.", "C"),  # trailing '.' stripped, then ` C `
        ("B.", "B"),
        ("Answer: A", "A"),
        ("C) Emaciated", "C"),  # `X)`
        ("B: Gaunt", "B"),  # `X:`
        ("(A) is tempting but (C) is right", "C"),  # several `(X)`: the last occurrence wins
        ("(C) or (A)? I pick (C)", "C"),  # a letter's last occurrence counts
        ("(A) Lean. D. Obese", "A"),  # `(X)` beats the later `X.`
        ("A. no, D. is right", "D"),  # several `X.`: the last wins
        ("B, or maybe C", "C"),  # ` X `, last wins
        ("'D'", "D"),  # quote stripped from the ends
        ("D!\n", "D"),
        ("The word that best expresses it is obese, surely", "D"),  # > 5 words: option text
        ("Obese", None),  # option text alone, 1 word: not matched by rules
        ("I think lean, no wait, it should be gaunt", "B"),  # several option texts: last wins
        ("I cannot determine the answer from the image.", None),
        ("", None),
        (None, None),
        ("E", None),  # not one of this item's options
        ("Dog", None),  # a letter inside a word does not count
    ],
)
def test_rules(response: str | None, expected: str | None) -> None:
    assert extract.by_rules(response, L4, O4) == expected


def test_rules_only_consider_the_items_letters() -> None:
    assert extract.by_rules("(E)", ("A", "B", "C", "D", "E"), ("1", "2", "3", "4", "5")) == "E"
    assert extract.by_rules("(E)", L4, O4) is None


# --- stage 2 and 3


@pytest.mark.parametrize(
    ("text", "exact", "lenient"),
    [("C", "C", "C"), (" B\n", None, "B"), ("Your output: A", None, "A"), ("B.", None, "B"), ("Z", None, None),
     ("E", None, None), ("", None, None), (None, None, None)],
)
def test_judge_reply(text: str | None, exact: str | None, lenient: str | None) -> None:
    """The authors compare the raw reply with the gold: only an exact letter counts (" B\\n" does not); ours
    (`--judge-parse lenient`) reads more."""
    assert extract.from_judge(text, L4) == exact
    assert extract.from_judge(text, L4, lenient=True) == lenient


def test_m3gia_departures_are_named() -> None:
    from suites.base import RunSpec
    from suites.m3gia import deviations

    assert deviations(RunSpec("m3gia", {"judge": "gpt-4-turbo"})) == []
    assert deviations(RunSpec("m3gia", {"judge": "gpt-4o-mini"})) == [
        "judge gpt-4o-mini (the paper: GPT-4-turbo, gpt-4-turbo-2024-04-09; the authors' released code calls "
        '"gpt-3.5")']
    assert deviations(RunSpec("m3gia", {"judge": "gpt-4-turbo", "languages": "en"})) == [
        "--languages en: Overall and GIA over 1 of the paper's 6 languages"]
    assert deviations(RunSpec("m3gia", {"judge": "gpt-4-turbo", "judge_parse": "lenient"})) == [
        "judge replies read leniently ('B.' counts; the authors take only an exact letter)"]


def test_random_letter_is_seeded_by_model_question_iteration() -> None:
    a = extract.random_letter("m1", "en/7", 0, L4)
    assert a == extract.random_letter("m1", "en/7", 0, L4)  # no dependence on call order or process
    h = hashlib.sha256(b"m1\x1fen/7\x1f0").digest()
    assert a == L4[int.from_bytes(h[:8], "big") % 4]
    picks = [extract.random_letter("m1", f"en/{i}", s, L4) for i in range(200) for s in range(5)]
    assert set(picks) == set(L4)  # all options reachable, roughly uniform
    assert all(150 <= picks.count(x) <= 350 for x in L4)
    assert extract.random_letter("m1", "en/7", 0, ("A", "B")) in ("A", "B")


# --- prompt


def _q(**kw: object) -> Question:
    base = dict(
        lang="en", qid="1", qtype="Oral Vocabulary", question="corpulent", hint="", options=O4, answer="D"
    )
    return Question(**{**base, **kw})  # type: ignore[arg-type]


def test_prompt_prefix_exact() -> None:
    q = _q(question="corpulent", hint="Choose the word closest in meaning.")
    assert prompt_text(q) == (
        PREFIX + "\nQuestion: Choose the word closest in meaning.\ncorpulent\n"
        "Choices: (A) Lean  (B) Gaunt  (C) Emaciated  (D) Obese\nAnswer: "
    )
    assert PREFIX.startswith("Assuming you are an expert in multimodality.") and PREFIX.endswith(
        "Please only output options such as A, B, C, D, E, etc. without any explanation."
    )


def test_prompt_suffix_and_no_hint() -> None:
    q = _q(options=("1", "2", "3"))
    assert prompt_text(q, "suffix") == (
        "Question: corpulent\nChoices: (A) 1  (B) 2  (C) 3\nAnswer: \n"
        "Answer with the option's letter from the given choices directly."
    )
    assert SUFFIX == "Answer with the option's letter from the given choices directly."


# --- correlation


def test_pearson_known_values() -> None:
    def s(g: float, acc: float) -> dict:
        return {"gia": {"en": g}, "by_language": {"en": acc}, "gia_normalized": {"en": g}, "accuracy": acc}

    # x = 1, 2, 3; y = .1, .2, .4: r = 3 / sqrt(2 * 42/9) = 0.98198, two-sided p = 0.12103
    out = pearson({"a": s(1, 0.1), "b": s(2, 0.2), "c": s(3, 0.4)})
    assert out["en"]["r"] == pytest.approx(0.9819805, abs=1e-6)
    assert out["en"]["p"] == pytest.approx(0.1210377, abs=1e-6)
    assert out["en"]["n_models"] == 3 and out["overall"]["r"] == pytest.approx(0.9819805, abs=1e-6)
    two = pearson({"a": s(1, 0.1), "b": s(2, 0.2)})
    assert out["en"]["r2"] == pytest.approx(0.9819805**2, abs=1e-6)  # 27/28: the line's R² is r²
    assert two["en"] == {"r": None, "p": None, "n_models": 2, "r2": None}  # too few models for a correlation
    flat = pearson({"a": s(1, 0.3), "b": s(2, 0.3), "c": s(3, 0.3)})
    assert flat["en"]["r"] is None  # constant accuracy: undefined
