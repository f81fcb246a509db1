"""MARVEL suite: data, requests, few-shot demos, checks, judge follow-up, and a `sim` sweep via the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import orjson
import pytest

from core.types import ImagePart, TextPart
from suites.base import RunSpec, SuiteError, get_suite
from suites.marvel import SUITE, follow_up
from suites.marvel.data import DATA_ENV, KINDS, LABEL_FILE, data_dir, load
from suites.marvel.extract import extract
from suites.marvel.prompts import pick_demos
from suites.marvel.sim import responses


def spec(shared: Path | None = None, limit: int | None = None, **opts: object) -> RunSpec:
    if shared is not None:
        opts["data_dir"] = str(shared / "marvel")
    return RunSpec(suite="marvel", options=opts, limit=limit)


def test_bundled_labels_match_shared_data(shared_data: Path) -> None:
    assert LABEL_FILE.read_bytes() == (shared_data / "marvel" / "marvel_label.json").read_bytes()
    assert (LABEL_FILE.parent / "NOTICE").read_text().count("Apache") >= 1
    assert "Apache License" in (LABEL_FILE.parent / "LICENSE").read_text()
    ps = load()
    assert len(ps) == 770 and get_suite("marvel") is SUITE and SUITE.headline == "avr"


def test_bad_label_file_names_file_and_field(tmp_path: Path) -> None:
    bad = json.loads(LABEL_FILE.read_text())[:3]
    bad[2]["answer"] = 7
    f = tmp_path / "labels.json"
    f.write_text(json.dumps(bad))
    with pytest.raises(SuiteError, match=r"labels\.json: puzzle #2 \(id 3\): 'answer' must be 1, 2, 3 or 4"):
        load(f)
    del bad[2]["answer"]
    f.write_text(json.dumps(bad))
    with pytest.raises(SuiteError, match=r"puzzle #2 \(id 3\): field 'answer'"):
        load(f)


def test_requests_item_ids_and_messages(marvel_data: Path) -> None:
    reqs = list(SUITE.build(spec(marvel_data, limit=3)))
    assert [r.item for r in reqs[:5]] == [
        f"1/{k}" for k in ("avr", "fine", "coarse-context", "coarse-choices", "coarse-whole")
    ]
    assert len(reqs) == 15 and len({r.item for r in reqs}) == 15
    p = load()[0]
    for r in reqs[:5]:
        kind = r.item.split("/")[1]
        (msg,) = r.messages
        img, q = msg.content
        where = "coarse/1.png" if kind.startswith("coarse") else "images/1.png"  # index-free for coarse
        assert isinstance(img, ImagePart) and img.path == str(marvel_data.resolve() / "marvel" / where)
        assert isinstance(q, TextPart) and q.text == p.question(kind)  # the question string as given
        assert r.decoding.temperature == 0.0 and r.decoding.n == 1 and r.model == ""
        assert r.sim and r.sim["correct"] and r.sim["wrong"]
    assert reqs[2].messages[0].content[1].text == p.coarse_questions[0]


def test_questions_subset_and_pattern_task(marvel_data: Path) -> None:
    items = [r.item for r in SUITE.build(spec(marvel_data, limit=2, questions="avr,coarse"))]
    assert items == ["1/avr", "1/coarse-context", "1/coarse-choices", "1/coarse-whole", "2/avr",
                     "2/coarse-context", "2/coarse-choices", "2/coarse-whole"]  # fmt: skip
    reqs = list(SUITE.build(spec(marvel_data, limit=2, task="pattern")))
    assert [r.item for r in reqs] == ["1/pattern", "2/pattern"]
    text = reqs[0].messages[0].content[1].text
    assert text == TABLE13_PATTERN  # puzzle 1 is Table 13's example: the paper's prompt, character for character
    other = reqs[1].messages[0].content[1].text  # another puzzle: its own description, the same patterns and ask
    assert other.startswith(load()[1].avr_question.split(" Which choice")[0] + " The puzzle contains one of")
    assert other.endswith(TABLE13_PATTERN.split("4). ", 1)[1].split("patterns:", 1)[1])
    assert not any("Table 13" in d for d in SUITE.deviations(spec(marvel_data, task="pattern", judge="gpt-4")))
    assert SUITE.run_name(spec(task="pattern")) == "marvel-pattern"
    assert SUITE.run_name(spec(shots=2, demos="ood")) == "marvel-2shot-ood"
    assert SUITE.run_name(spec(questions="avr")) == "marvel-avr" and SUITE.run_name(spec()) == "marvel"


TABLE13_PATTERN = (  # Table 13, "Pattern Classification", as printed (line breaks where the paper breaks the list)
    "You are given a puzzle. The puzzle consists of a question part on the top and the choices part in the bottom. "
    "The question part on the top is a set of visual panels arranged in a 1 by 5 sequence, with the last piece "
    "missing. Choices part on the bottom contains 4 choices (marked by 1, 2, 3, or 4). The puzzle contains one of "
    "the following patterns:\n"
    "Temporal Movement patterns focus on the related position change or movement.\n"
    "Spatial Relationship patterns focus on the objects' relative positional relationship.\n"
    "Quantity patterns focus on the accuracy of number comprehension.\n"
    "Mathematical patterns focus on elementary mathematical operations.\n"
    "2D-Geometry patterns focus on the 2D-geometric shape and its properties.\n"
    "3D-Geometry patterns focus on the 3D-geometric shape and its properties.\n"
    "Please answer which pattern the puzzle is mostly related to. Output your final answer with the pattern name "
    "strictly."
)


@pytest.mark.parametrize("mode", ["same", "ood", "mix"])
def test_demos_never_the_target_and_from_the_right_pool(mode: str) -> None:
    ps = load()
    for p in ps:
        demos = pick_demos(p, ps, 2, mode)
        assert len(demos) == 2 and len({d.id for d in demos}) == 2
        assert p.id not in {d.id for d in demos}
        assert demos == pick_demos(p, ps, 2, mode)  # deterministic per puzzle
        # no rationale names a lettered choice ("Only item B is consistent") against a numbered answer
        assert not any(re.search(r"\b(?:item|option|choice|only)\s+[A-D]\b", d.explanation) for d in demos)
        if mode == "same":
            assert all(d.pattern == p.pattern for d in demos)
            if p.pattern != "3D-Geometry":  # the only pattern without Sequence puzzles
                assert all(d.configuration == "Sequence" for d in demos)
        elif mode == "mix":  # Table 10: one Sequence and one Two-row demo of the same pattern
            assert all(d.pattern == p.pattern for d in demos)
            if p.pattern != "3D-Geometry":
                assert [d.configuration for d in demos] == ["Sequence", "Two-row"]
        else:
            assert all(d.pattern != p.pattern and d.configuration == "Sequence" for d in demos)
            assert demos[0].pattern == demos[1].pattern
    # seeded per puzzle: different puzzles do not all get the same demos
    assert len({tuple(d.id for d in pick_demos(p, ps, 1, "same")) for p in ps[:30]}) > 5


def test_few_shot_message_is_interleaved(marvel_data: Path) -> None:
    reqs = list(SUITE.build(spec(marvel_data, limit=1, shots=2)))
    avr, fine = reqs[0], reqs[1]
    parts = avr.messages[0].content
    assert len(avr.messages) == 1 and avr.messages[0].role == "user"
    assert [type(x).__name__ for x in parts] == ["ImagePart", "TextPart", "TextPart"] * 2 + [
        "ImagePart",
        "TextPart",
    ]
    demos = [load()[[p.id for p in load()].index(i)] for i in avr.meta["demos"]]
    for k, d in enumerate(demos):
        assert parts[3 * k].path.endswith(f"images/{d.id}.png") and parts[3 * k + 1].text == d.avr_question
        rationale = parts[3 * k + 2].text
        assert d.explanation.rstrip(".") in rationale and rationale.endswith(
            f"the answer is choice {d.answer}."
        )
        assert extract("avr", rationale, d) == d.answer
    assert parts[6].path.endswith("images/1.png") and parts[7].text == load()[0].avr_question
    assert len(fine.messages[0].content) == 2  # perception questions stay zero-shot


def test_check_names_missing_data(tmp_path: Path, shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SuiteError, match=r"no images/ folder .*--data-dir DIR.*EVALSWEEP_MARVEL_DATA"):
        SUITE.check(RunSpec(suite="marvel", options={"data_dir": str(tmp_path)}))
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "1.png").write_bytes((shared_data / "marvel/images/1.png").read_bytes())
    with pytest.raises(SuiteError, match=r"coarse/1\.png is missing and .*Panel_data is absent.*--coarse-images numbered"):
        SUITE.check(RunSpec(suite="marvel", options={"data_dir": str(tmp_path)}, limit=1))
    SUITE.check(RunSpec(suite="marvel", options={"data_dir": str(tmp_path), "coarse_images": "numbered"}, limit=1))
    SUITE.check(RunSpec(suite="marvel", options={"data_dir": str(tmp_path), "questions": "avr,fine"}, limit=1))
    with pytest.raises(SuiteError, match=r"images/2\.png not found and 766 more"):
        SUITE.check(RunSpec(suite="marvel", options={"data_dir": str(tmp_path)}, limit=768))
    with pytest.raises(SuiteError, match=r"images/\d+\.png not found"):  # the demos' images are needed too
        SUITE.check(RunSpec(suite="marvel", options={"data_dir": str(tmp_path), "shots": 1}, limit=1))
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    assert data_dir(RunSpec(suite="marvel")) == tmp_path.resolve()
    monkeypatch.delenv(DATA_ENV)
    monkeypatch.chdir(tmp_path)
    assert data_dir(RunSpec(suite="marvel")) == tmp_path.resolve() / "data" / "marvel"


@pytest.mark.parametrize(
    "opts, msg",
    [
        ({"questions": "avr,colour"}, "unknown colour"),
        ({"shots": 3}, "--shots must be 0, 1 or 2"),
        ({"demos": "random"}, "--demos must be"),
        ({"task": "pattern", "shots": 1}, "neither combines with --task pattern"),
        ({"task": "pattern", "panels": "one-by-one"}, "neither combines with --task pattern"),
        ({"questions": "fine", "shots": 1}, "include avr"),
        ({"questions": "fine", "panels": "one-by-one"}, "include avr"),
        ({"demos": "mix", "shots": 1}, "use --shots 2"),
        ({"panels": "one-by-one", "shots": 2}, "cannot be combined with --shots"),
        ({"panels": "all"}, "--panels must be 'whole' or 'one-by-one'"),
    ],
)
def test_bad_options(opts: dict, msg: str, marvel_data: Path) -> None:
    with pytest.raises(SuiteError, match=msg):
        SUITE.check(spec(marvel_data, **opts))


def test_one_by_one_sends_each_panel_with_the_papers_strings(marvel_data: Path) -> None:
    """Table 11 (Appendix I): each context panel, then each choice, each with its string; then the AVR question."""
    reqs = list(SUITE.build(spec(marvel_data, limit=1, panels="one-by-one")))
    avr, fine = reqs[0], reqs[1]
    p = load()[0]  # 5 context panels (the blank one included), 4 choices
    parts = avr.messages[0].content
    assert len(parts) == 2 * (5 + 4) + 1 and avr.meta["panels"] == "one-by-one"
    root = marvel_data.resolve() / "marvel" / "Panel_data"
    assert [x.path for x in parts[0:18:2]] == [str(root / f"question_1_{k}.png") for k in range(5)] + [
        str(root / f"answer_1_{k}.png") for k in range(4)
    ]
    texts = [x.text for x in parts[1:18:2]]
    assert texts[0] == "This is the first panel in the context of the puzzle"
    assert texts[4] == "This is the fifth panel in the context of the puzzle"
    assert texts[5] == "This is the first choice of the puzzle" and texts[8] == "This is the fourth choice of the puzzle"
    assert parts[-1].text == p.avr_question
    assert [type(x).__name__ for x in fine.messages[0].content] == ["ImagePart", "TextPart"]  # whole image
    assert SUITE.run_name(spec(panels="one-by-one")) == "marvel-onebyone"
    assert SUITE.run_name(spec(shots=2, demos="mix")) == "marvel-2shot-mix"


def test_one_by_one_needs_the_panels(tmp_path: Path, marvel_data: Path) -> None:
    (tmp_path / "images").symlink_to(marvel_data / "marvel" / "images")
    with pytest.raises(SuiteError, match="--panels one-by-one sends the authors' panels: .*Panel_data is absent"):
        SUITE.check(RunSpec("marvel", {"data_dir": str(tmp_path), "panels": "one-by-one", "questions": "avr"}, limit=1))


def test_authors_panels_match_the_coarse_answers(shared_data: Path) -> None:
    """The released Panel_data/ holds, for all 770 puzzles, as many panels as the coarse answers count."""
    from suites.marvel.panels import check_panels

    if not (shared_data / "marvel" / "Panel_data").is_dir():
        pytest.skip("the authors' Panel_data/ is not in ../shared")
    check_panels(shared_data / "marvel", load())


def test_judge_follow_up(marvel_data: Path) -> None:
    # a puzzle whose simulated wrong answers include one only a judge can read
    p, vague, meant = next(
        (p, t, a) for p in load() for t, a in responses(p, "avr")[1] if t.startswith("Going by the pattern")
    )
    req = next(r for r in SUITE.build(spec(marvel_data, limit=p.id)) if r.item == f"{p.id}/avr")
    row = {"model": "m", "item": req.item, "sample": 0, "pass": "answer", "text": vague, "error": None}
    assert follow_up(req, row, spec(marvel_data)) == []  # no --judge
    with_judge = spec(marvel_data, judge="sim/strong")
    (j,) = follow_up(req.model_copy(update={"model": "m"}), row, with_judge)
    assert j.pass_ == "judge" and j.via == "sim/strong" and j.model == "m" and j.item == f"{p.id}/avr"
    assert vague in j.messages[0].content and "1, 2, 3 or 4" in j.messages[0].content
    assert j.sim == {"correct": str(meant), "wrong": ["None"]}  # what that response meant
    (j,) = follow_up(req, {**row, "text": "I'm sorry, I can't see the image."}, with_judge)
    assert j.sim == {"correct": "None", "wrong": ["None"]}
    ok = {**row, "text": f"The answer is choice {p.answer}."}
    assert follow_up(req, ok, with_judge) == []  # the rules read it
    assert follow_up(req, {**row, "text": None, "error": "timeout"}, with_judge) == []
    assert follow_up(j, {**row, "pass": "judge", "text": "None"}, with_judge) == []  # no judge of a judge


def _results(run: Path) -> list[dict]:
    return [orjson.loads(line) for line in (run / "results.jsonl").read_bytes().splitlines() if line.strip()]


def test_end_to_end_sim_sweep(tmp_path: Path, marvel_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cli.main import main

    out = tmp_path / "run"
    argv = ["run", "marvel", "--models", "sim/strong,sim/weak", "--out", str(out), "--limit", "10",
            "--data-dir", str(marvel_data / "marvel"), "--judge", "sim/strong", "--no-live"]  # fmt: skip
    assert main(argv) == 0
    rows = _results(out)
    answers = [r for r in rows if r["pass"] == "answer"]
    assert len(answers) == 2 * 10 * 5 and not any(r["error"] for r in answers)
    assert {r["item"] for r in answers} == {f"{i}/{k}" for i in range(1, 11) for k in KINDS}
    by_id = {p.id: p for p in load()}
    unreadable = {
        (r["model"], r["item"])
        for r in answers
        if extract(r["item"].split("/")[1], r["text"], by_id[int(r["item"].split("/")[0])]) is None
    }  # noqa: E501
    judged = {(r["model"], r["item"]) for r in rows if r["pass"] == "judge"}
    assert (
        judged
        and judged == unreadable
        and all(r["via"] == "sim/strong" for r in rows if r["pass"] == "judge")
    )

    assert main(["score", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "MARVEL: instance accuracy" in printed and "human" in printed and "68.86" in printed
    scores = json.loads((out / "scores.json").read_text())
    assert scores["suite"] == "marvel" and scores["headline"] == "avr"
    keys = {"avr", "fine", "coarse_context", "coarse_choices", "coarse_whole", "perc_c", "perc_cf", "perc_cf_avr",
            "by_pattern", "by_configuration", "by_pattern_configuration", "choice_distribution", "chi2_p", "biased"}  # fmt: skip
    for m in ("sim/strong", "sim/weak"):
        s = scores["models"][m]
        assert keys <= set(s), keys - set(s)
        for k in ("avr", "fine", "coarse_context", "perc_c", "perc_cf", "perc_cf_avr"):
            assert 0.0 <= s[k] <= 1.0
        assert s["perc_cf_avr"] <= s["perc_cf"] <= s["perc_c"] <= min(s["coarse_context"], s["coarse_whole"])
        assert s["n_puzzles"] == 10 and s["n_unparsed"] == 0
        assert s["n_judged"] == sum(1 for mm, _ in judged if mm == m)
    assert scores["models"]["sim/strong"]["avr"] > scores["models"]["sim/weak"]["avr"]
    scored = [orjson.loads(x) for x in (out / "scored.jsonl").read_bytes().splitlines()]
    assert len(scored) == 100 and {x["stage"] for x in scored} <= {"rules", "judge"}


def test_cli_refuses_missing_images_before_sending(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli.main import main

    out = tmp_path / "run"
    argv = ["run", "marvel", "--models", "sim/strong", "--out", str(out), "--limit", "2",
            "--data-dir", str(tmp_path / "nowhere"), "--no-live"]  # fmt: skip
    assert main(argv) == 2
    assert "nowhere/images" in capsys.readouterr().err
    assert not (out / "results.jsonl").exists() or not _results(out)
