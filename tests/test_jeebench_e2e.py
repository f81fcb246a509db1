"""End to end through the real CLI: a small `sim` sweep of every variant (critique and judge passes
included), then scoring; and the authors' released responses replayed through the `replay` provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from suites.jeebench.devtools import load_dev, replay_lines
from suites.jeebench.extract import extract
from suites.jeebench.metrics import aggregate, score_answer
from suites.jeebench.prompts import VARIANTS

MODELS = "sim/strong,sim/weak"


def _types(out: Path, s: dict) -> list[str]:
    """Question types of the answered questions of one model's run (every model answers the same ones)."""
    scored = [r for r in _rows(out / "scored.jsonl") if r["score"] is not None]
    return [r["type"] for r in scored][: s["n"]]


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("variant", VARIANTS)
def test_sim_sweep_every_variant(tmp_path: Path, variant: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / variant
    args = ["run", "jeebench", "--models", MODELS, "--out", str(out), "--limit", "12", "--variant", variant]
    if variant == "cot-critique":
        args += ["--judge", "sim/medium"]
    assert main(args) == 0
    # the deviations are said before the run, kept in the manifest, scores.json and under every table
    said = capsys.readouterr().err
    assert "] --limit 12: a subset of the 515 questions" in said and str(out / "deviations.txt") in said
    manifest = json.loads((out / "manifest.json").read_text())
    assert main(["score", str(out)]) == 0
    scores = json.loads((out / "scores.json").read_text())
    devs = scores["protocol"]["deviations"]
    # the reading line gains each model's unread count when scored; the rest is said as before the run
    assert manifest["protocol"]["deviations"][:-1] == devs[:-1] and scores["protocol"]["protocol"] == "custom"
    assert manifest["protocol"]["deviations"][-1].endswith("(unread answers are counted when scored; they score 0)")
    unread = {m: s["unread"] for m, s in scores["models"].items()}
    assert devs[-1].endswith(", ".join(f"{m} {u}/{sum(scores['models'][m]['stages'].values())}"
                                       for m, u in sorted(unread.items())))  # fmt: skip
    assert devs[-2] == "--limit 12: a subset of the 515 questions"
    assert ("Table 6's CoT row" in devs[0]) == (variant == "cot-sc")
    assert "Deviations from the paper's protocol" in capsys.readouterr().out
    for s in scores["models"].values():
        assert s["truncated"] == 0 and s["truncation_rate"] == 0.0
        assert {int(y) for y in s["by_year"]} <= set(range(2016, 2024))  # §4.7
        assert s["marks_mcq"]["questions"] == sum(t.startswith("MCQ") for t in _types(out, s))  # Table 5
    assert 0.0 < scores["random_baseline"]["overall"] < 0.25
    titles = [t["title"] for t in scores["tables"]]  # the printed tables, kept for the report
    assert any("Table 2's Random row" in t for t in titles) and any("by exam year" in t for t in titles)
    if variant == "cot":  # the report shows them in the suite's section, deviations under each
        assert main(["report", str(out), "--out", str(tmp_path / "report")]) == 0
        page = (tmp_path / "report" / "index.html").read_text()
        assert "The paper&#x27;s tables" in page or "The paper's tables" in page
        assert "random baseline (Table 2" in page and "score by exam year (§4.7)" in page
        assert "a subset of the 515 questions" in page
    assert scores["suite"] == "jeebench" and scores["variant"] == variant
    assert set(scores["models"]) == {"sim/strong", "sim/weak"}
    for s in scores["models"].values():
        assert {"overall", "by_subject", "by_type", "marks"} <= s.keys()
        assert set(s["marks"]) == {"positive", "negative", "total"}
        assert 0.0 <= s["overall"] <= 1.0 and s["n"] == 12
    results = _rows(out / "results.jsonl")
    scored = _rows(out / "scored.jsonl")
    assert len(scored) == 24 and all(
        {"subject", "type", "year", "gold", "extracted"} <= r.keys() for r in scored
    )
    passes = {r["pass"] for r in results}
    if variant == "cot-exam":
        assert {r["type"] for r in scored} <= {"MCQ", "MCQ(multiple)"}
    if variant == "cot-sc":
        answers = [r for r in results if r["pass"] == "answer"]
        assert len(answers) == 2 * 12 * 8  # 8 samples per question by default
        for s in scores["models"].values():
            assert {"MCE", "ACE"} <= s["calibration"].keys()
            assert (out / s["calibration"]["png"]).read_bytes()[:4] == b"\x89PNG"
            assert {"cot_sc", "cot_sc_thresholding", "single_sample"} == s["thresholding"]["test"].keys()
    if variant == "cot-critique":
        assert "critique" in passes
        assert sum(r["pass"] == "critique" for r in results) == 24
        assert all(r.get("source") in ("critique", "original") for r in scored)
        # the weaker model gives hedges the rules cannot read: the judge pass runs on those
        assert passes & {"judge", "critique-judge"}
    else:
        assert passes == {"answer"}


def test_replay_released_responses(tmp_path: Path, shared_data: Path) -> None:
    """The released gpt-3.5 responses through the replay provider score exactly as our extractor
    scores them directly (and within 0.005 overall of the authors' hand extracts, 0.177)."""
    dev = shared_data / "jeebench" / "dev_responses" / "gpt-3.5-turbo-0301_normal.json"
    rows = load_dev(dev)
    replay = tmp_path / "gpt35.jsonl"
    replay.write_text("".join(line + "\n" for line in replay_lines(rows)))
    cfg = tmp_path / "evalsweep.toml"
    cfg.write_text(f'[[models]]\nname = "released-gpt35"\nprovider = "replay"\npath = "{replay}"\n')
    out = tmp_path / "run"
    assert (
        main(
            [
                "run",
                "jeebench",
                "--variant",
                "normal",
                "--models",
                "released-gpt35",
                "--config",
                str(cfg),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert main(["score", str(out)]) == 0
    got = json.loads((out / "scores.json").read_text())["models"]["released-gpt35"]
    direct = aggregate(
        [
            {
                "score": score_answer(r["gold"], extract(r["text"], r["type"], r["question"]), r["type"]),
                "subject": r["subject"],
                "type": r["type"],
            }
            for r in rows
        ]
    )
    assert got["n"] == 515
    assert got["overall"] == pytest.approx(direct["overall"])
    assert got["by_type"] == pytest.approx(direct["by_type"])
    assert abs(got["overall"] - 0.177) < 0.005


def test_report_keeps_every_run_dirs_deviations_and_tables(tmp_path: Path) -> None:
    """Two run directories of one experiment (same options, models run apart): the report keeps each one's
    deviations (here each model's unread count) and each one's suite tables, not only the later's."""
    from report.load import load_runs

    dirs = [tmp_path / "a", tmp_path / "b"]
    for d, m in zip(dirs, ("sim/strong", "sim/weak"), strict=True):
        assert main(["run", "jeebench", "--models", m, "--out", str(d), "--limit", "20", "--no-live"]) == 0
        assert main(["score", str(d)]) == 0
    unread = [json.loads((d / "scores.json").read_text())["protocol"]["deviations"][-1] for d in dirs]
    assert "sim/strong" in unread[0] and "sim/weak" in unread[1] and unread[0] != unread[1]
    loaded = load_runs(dirs)
    (extra,) = loaded.extras.values()
    assert unread[0] in extra["protocol"]["deviations"] and unread[1] in extra["protocol"]["deviations"]
    titles = [t["title"] for t in extra["tables"]]
    n = len(json.loads((dirs[0] / "scores.json").read_text())["tables"])
    assert len(titles) == 2 * n and all(t.endswith(f"(run {dirs[i // n]})") for i, t in enumerate(titles))
    assert main(["report", *map(str, dirs), "--out", str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "index.html").read_text()
    assert all(u.split(": ")[-1] in page for u in unread)
