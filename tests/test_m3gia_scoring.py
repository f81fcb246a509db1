"""M3GIA scoring on synthetic parquet in the hub's schema: every rule of the metric (stage-1 rules,
judge letters, random fallback, iterations), cluster and factor accuracy, GIA from a full language."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suites.base import ranked
from suites.m3gia import SUITE, extract, gia
from suites.m3gia.data import answer_key
from tests.test_m3gia_suite import make_parquet, spec


def _rows(
    model: str, answers: dict[tuple[str, int], Any], judges: dict[tuple[str, int], str] | None = None
) -> list:
    out = []
    for (item, s), text in answers.items():
        err = text if isinstance(text, Exception) else None
        out.append(
            {
                "model": model,
                "item": item,
                "sample": s,
                "pass": "answer",
                "text": None if err else text,
                "error": str(err) if err else None,
            }
        )
    for (item, s), text in (judges or {}).items():
        out.append({"model": model, "item": item, "sample": s, "pass": "judge", "text": text, "error": None})
    return out


def test_score_rules_of_the_metric(tmp_path: Path) -> None:
    qids = ["1", "2", "16", "46", "151", "211"]  # OV, OV, GI, Logo, Algebra, Number Seres; keys D D D D D B
    make_parquet(tmp_path, "en", qids)
    s = spec(tmp_path, languages="en", samples=2)
    rows = _rows(
        "m",
        {
            ("en/1", 0): "D",
            ("en/2", 0): "(A)",
            ("en/16", 0): RuntimeError("HTTP 500"),
            ("en/46", 0): "I am not sure",
            ("en/151", 0): "??",  # en/211 iteration 0: missing
            ("en/1", 1): "The answer is A.",
            ("en/2", 1): "D",
            ("en/16", 1): "yellow star is the answer here",
            ("en/46", 1): "no idea",
            ("en/151", 1): "(D)",
            ("en/211", 1): "B",
        },
        judges={("en/46", 0): "D", ("en/46", 1): "Z"},
    )
    report = SUITE.score(rows, s, tmp_path)
    m = report.models["m"]
    letters = ("A", "B", "C", "D")
    r0 = float(extract.random_letter("m", "en/151", 0, letters) == "D")  # stage 3, iteration 0
    r1 = 0.0  # judge said Z: scored wrong, as the authors do (no random letter)
    it0 = [1, 0, 1, r0]  # answered in iteration 0: en/16 failed (HTTP 500), en/211 missing: not scored
    it1 = [0, 1, 1, r1, 1, 1]
    assert m["accuracy"] == pytest.approx((sum(it0) / 4 + sum(it1) / 6) / 2)
    assert m["iterations"] == 2 and m["n_questions"] == 6
    assert m["by_type"] == pytest.approx(
        {
            "Oral Vocabulary": 0.5,
            "General Information": 1.0,  # answered in iteration 1 only
            "Logo Problem": (1 + r1) / 2,
            "Algebra": (r0 + 1) / 2,
            "Number Seres": 1.0,  # answered in iteration 1 only
        }
    )
    assert m["by_cluster"] == pytest.approx(
        {
            "Common Sense": (2 / 3 + (2 + r1) / 4) / 2,
            "Mathematics": (r0 + 1) / 2,
            "Reasoning": 1.0,
        }
    )
    assert m["by_factor"] == pytest.approx(
        {
            "Gc": (2 / 3 + (2 + r1) / 4) / 2,
            "Gv": (1 + r1) / 2,
            "Gf": (r0 + 1) / 2,
            "Gq": (r0 + 1) / 2,
            "RQ": (r0 + 1) / 2,
            "I": 1.0,
        }
    )  # Grw and RG involve none of these questions
    assert m["by_language"] == pytest.approx({"en": m["accuracy"]})
    assert m["stages"] == {"rule": 7, "judge": 2, "random": 1, "error": 1, "missing": 1}
    assert m["gia"] == {"en": None} and m["gia_normalized"] == {"en": None}  # 6 of 300 questions: no GIA
    assert len(report.scored) == 12 and all(r["stage"] for r in report.scored)
    by_key = {(r["item"], r["sample"]): r for r in report.scored}
    assert by_key[("en/46", 0)]["stage"] == "judge" and by_key[("en/46", 0)]["extracted"] == "D"
    assert by_key[("en/46", 1)]["stage"] == "judge" and by_key[("en/46", 1)]["extracted"] is None
    assert by_key[("en/16", 0)]["error"] == "HTTP 500" and by_key[("en/16", 0)]["score"] is None
    assert by_key[("en/16", 0)]["error_kind"] == "error"
    assert by_key[("en/211", 0)]["stage"] == "missing"
    [t1] = [t for t in report.tables if "Table 1 layout" in t.title]
    assert t1.columns[1:] == ["I", "RG", "RQ", "Gf", "Gc", "Gq", "Grw", "Gv", "Overall", "vs paper", "paper Overall", "gap"]
    assert t1.rows[0][9] == m["accuracy"] and t1.rows[0][4] == m["by_factor"]["Gf"] and by_key[("en/211", 0)]["score"] is None


def test_cluster_and_factor_accuracy_pool_questions(tmp_path: Path) -> None:
    make_parquet(tmp_path, "en", ["1", "2", "16"])  # OV, OV, GI: all Gc, all Common Sense
    rows = _rows("m", {("en/1", 0): "D", ("en/2", 0): "D", ("en/16", 0): "A"})
    m = SUITE.score(rows, spec(tmp_path, languages="en", samples=1), tmp_path).models["m"]
    # sum F_i T_i / sum F_i = 2/3, not the mean of the type accuracies (1 + 0) / 2
    assert m["by_cluster"]["Common Sense"] == pytest.approx(2 / 3)
    assert m["by_factor"] == pytest.approx({"Gc": 2 / 3})


# per-type correct counts for the full-language GIA test (written by score-sheet column)
K = {
    "General_Info": 17,
    "Oral_Vocab": 12,
    "Logo": 10,
    "Visualization": 9,
    "Pic_Recog": 6,
    "RW_Spatial": 8,
    "Readings_text": 13,
    "Readings_VL": 4,
    "Comic": 7,
    "Math_Facts": 11,
    "Algebra": 3,
    "Geom": 2,
    "Applied_Problem": 5,
    "Number_Series": 9,
    "Concept": 6,
    "Raven": 1,
    "Syllogism": 10,
    "RW_Reason": 14,
}


def _pattern_rows(model: str, k: dict[str, int], shift: int, samples: int = 1) -> list:
    """Correct on the first k[column] questions of each type (iteration 0), all wrong afterwards."""
    key, seen, rows = answer_key("en"), {}, []
    for qid, (qtype, ans) in key.items():
        col = gia.TYPE_TO_COLUMN[qtype]
        n = seen[col] = seen.get(col, 0) + 1
        right = n <= max(0, min(k[col] + shift, 30))
        wrong = "A" if ans != "A" else "B"
        for s in range(samples):
            rows.append(
                {
                    "model": model,
                    "item": f"en/{qid}",
                    "sample": s,
                    "pass": "answer",
                    "text": ans if right and s == 0 else wrong,
                    "error": None,
                }
            )
    return rows


def test_gia_from_a_full_language(tmp_path: Path) -> None:
    make_parquet(tmp_path, "en", image_every=0)
    rows = _pattern_rows("m1", K, 0, samples=2) + _pattern_rows("m2", K, 3, 2) + _pattern_rows("m3", K, -2, 2)
    report = SUITE.score(rows, spec(tmp_path, languages="en", samples=2), tmp_path)
    cols = list(K)  # the score-sheet order
    for m, shift in (("m1", 0), ("m2", 3), ("m3", -2)):
        counts = np.array([[max(0, min(K[c] + shift, n)) / 2 for c, n in zip(cols, SIZES, strict=True)]])
        expected = gia.factor_scores(counts, "en")[0, 5]  # mean over the 2 iterations: half the counts
        s = report.models[m]
        assert s["gia"]["en"] == pytest.approx(expected, abs=1e-9)
        assert s["gia_normalized"]["en"] == pytest.approx(100 * expected / 16.01, abs=1e-7)
        assert s["per_language"]["en"]["type_counts"]["Oral Vocabulary"] == counts[0, 1]
    corr = report.extra["gia_accuracy_pearson"]
    assert corr["en"]["n_models"] == 3 and -1 <= corr["en"]["r"] <= 1
    xs = [report.models[m]["gia"]["en"] for m in ("m1", "m2", "m3")]
    ys = [report.models[m]["accuracy"] for m in ("m1", "m2", "m3")]
    assert corr["en"]["r"] == pytest.approx(float(np.corrcoef(xs, ys)[0, 1]))
    gia_table = next(t for t in report.tables if t.title.startswith("m3gia: GIA"))
    assert [r[0] for r in gia_table.rows] == [*ranked(report.models, "accuracy"), "human (average)", "paper: GPT-4o", "paper: GPT-4v"]
    assert gia_table.rows[-3][1] == 16.01 and "human-average GIA" in gia_table.note  # the paper's base


SIZES = [20, 15, 15, 30, 15, 15, 15, 10, 15, 25, 15, 10, 10, 20, 20, 10, 20, 20]  # questions per sheet column


