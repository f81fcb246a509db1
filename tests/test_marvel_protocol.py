"""MARVEL: every suite option and the deviation each value records; coarse questions on index-free images
built from the authors' panels; provider blocks (content_filter) counted as refusals, end to end against
the mock server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from suites.base import RunSpec, SuiteError
from suites.marvel import deviations
from suites.marvel.data import Puzzle, load
from suites.marvel.panels import compose, ensure
from suites.marvel.score import score_row
from tests.helpers import rows, write_config
from tests.mock_openai import MockServer

NO_JUDGE = "no --judge: responses the rules cannot read count as wrong"
REFUSALS = "the headline figures count refusals (provider blocks included) as wrong"

# tests/test_protocol_options.py checks these cover every option.
# option dest -> [(value, substring of the deviation it records, or None for the paper's setting)]
CASES: dict[str, list[tuple[object, str | None]]] = {
    "questions": [(None, None), ("avr,fine,coarse", None), ("avr", None), ("coarse", None)],
    "shots": [(None, None), (0, None), (1, "few-shot CoT rationales are built from the one-line explanations"),
              (2, "few-shot CoT rationales")],
    "demos": [(None, None), ("same", None), ("ood", None), ("mix", None)],
    "task": [(None, None), ("puzzles", None), ("pattern", "--judge gpt-4: pattern answers the rules cannot read")],
    "panels": [(None, None), ("whole", None), ("one-by-one", "--panels one-by-one: {index} is sent as an ordinal word")],
    "coarse_images": [(None, None), ("index-free", None), ("numbered", "--coarse-images numbered: coarse perception")],
    "judge": [(None, NO_JUDGE), ("gpt-4", None), ("gpt-4-turbo-2024-04-09", None), ("openai/gpt-4-0613", None),
              ("gpt-4o", "judge gpt-4o (the paper re-extracts with GPT-4)"), ("sim/strong", "judge sim/strong (the paper")],
    "data_dir": [(None, None), ("/data/marvel", None)],
}  # fmt: skip


@pytest.mark.parametrize("dest,value,want", [(d, v, w) for d, cs in CASES.items() for v, w in cs])
def test_option_value_records_its_deviation(dest: str, value: object, want: str | None) -> None:
    opts = {"judge": "gpt-4", dest: value} if dest != "judge" else {dest: value}
    devs = deviations(RunSpec("marvel", opts))
    always = [REFUSALS] if opts.get("task") != "pattern" else []  # the headline's refusals: always said
    others = [d for d in devs if not any(d.startswith(a) for a in always)]
    assert len(devs) - len(others) == len(always)
    if want is None:
        assert others == []
    else:
        assert len(others) == 1 and want in others[0], devs


def test_pattern_task_says_only_what_is_true_of_it() -> None:
    """Appendix G extracts pattern answers by "regex mapping" only: no GPT-4 re-extraction is claimed, and a
    judge (even a GPT-4) is the departure; Table 13's prompt itself is sent as printed."""
    (d,) = deviations(RunSpec("marvel", {"task": "pattern"}))
    assert "GPT-4" not in d and "regex mapping only" in d and "count as wrong" in d
    for judge in ("gpt-4", "gpt-4o"):
        (d,) = deviations(RunSpec("marvel", {"task": "pattern", "judge": judge}))
        assert d.startswith(f"--judge {judge}: pattern answers") and "regex mapping only" in d and "GPT-4" not in d


def test_samples_say_the_paper_states_no_decoding() -> None:
    """The paper gives no temperature or sample count: other samples are recorded against our default."""
    (d,) = deviations(RunSpec("marvel", {"judge": "gpt-4"}, samples=3, temperature=0.7))[1:]
    assert d == "samples 3 at temperature 0.7 (this suite's default: one answer at temperature 0; the paper states neither)"
    assert "greedy" not in d
    assert deviations(RunSpec("marvel", {"judge": "gpt-4"}, limit=5))[1:] == [
        "--limit 5: a subset of the 770 puzzles"
    ]


def test_two_shot_mix_records_only_the_rationales() -> None:
    """Table 10's mix is the paper's setting: only the few-shot rationale line (shared with every --shots run)."""
    (d,) = [x for x in deviations(RunSpec("marvel", {"shots": 2, "demos": "mix", "judge": "gpt-4"})) if "refusals" not in x]
    assert d.startswith("few-shot CoT rationales")


def _panels(root: Path, pid: int, n_ctx: int, n_ans: int) -> None:
    (root / "Panel_data").mkdir(parents=True, exist_ok=True)
    for part, n, base in (("question", n_ctx, 40), ("answer", n_ans, 160)):
        for k in range(n):  # a distinct grey per panel, to find it in the composed image
            Image.new("RGB", (100, 100), (base + 10 * k,) * 3).save(root / "Panel_data" / f"{part}_{pid}_{k}.png")


def _puzzle(pid: int, question: str, counts: tuple[int, int]) -> Puzzle:
    p = load()[0]
    return Puzzle(**{**p.__dict__, "id": pid, "avr_question": question,
                     "coarse_answers": (counts[0], counts[1], sum(counts))})  # fmt: skip


def _greys(img: Image.Image) -> list[int]:
    """Panel greys in reading order (row by row, first seen): values covering a panel's 100 x 100 pixels."""
    px = img.convert("L")
    counts = dict(enumerate(px.histogram()))  # grey level -> pixels
    big = {v for v, c in counts.items() if c >= 5000 and 0 < v < 255}
    seen: list[int] = []
    for y in range(0, img.height, 4):
        for x in range(0, img.width, 4):
            v = px.getpixel((x, y))
            solid = x + 6 < img.width and y + 6 < img.height and px.getpixel((x + 6, y + 6)) == v
            if v in big and solid and v not in seen:
                seen.append(v)
    return seen


def test_index_free_image_lays_out_the_authors_panels(tmp_path: Path) -> None:
    _panels(tmp_path, 7, 6, 4)
    img = compose(tmp_path, 7, "a set of visual panels arranged in a 2 by 3 matrix, with ...", (6, 4))
    assert _greys(img) == [40, 50, 60, 70, 80, 90, 160, 170, 180, 190]  # context 2 x 3, then the 4 choices
    one_row = compose(tmp_path, 7, "arranged in a 1 by 6 sequence", (6, 4))
    assert one_row.width > img.width  # six context panels side by side
    with pytest.raises(SuiteError, match=r"puzzle 7: .*holds 6 context and 4 choice panels; its coarse answers say 5 and 4"):
        compose(tmp_path, 7, "", (5, 4))
    ensure(tmp_path, [_puzzle(7, "in a 2 by 3 matrix", (6, 4))])  # writes coarse/7.png once
    assert (tmp_path / "coarse" / "7.png").is_file() and not list((tmp_path / "coarse").glob("*.tmp"))


def test_blocks_count_as_refusals() -> None:
    p = load()[0]
    row = {"model": "m", "item": f"{p.id}/avr", "sample": 0, "pass": "answer", "text": None,
           "error": "no text in the response (finish_reason=content_filter)", "error_kind": "fatal",
           "finish_reason": "content_filter"}  # fmt: skip
    s = score_row(row, p, "avr", None)
    assert (s["score"], s["stage"], s["refused"], s["error"]) == (0.0, "blocked", True, None)
    http = {**row, "finish_reason": None, "error": "HTTP 400 content-policy refusal: filtered"}
    assert score_row(http, p, "avr", None)["stage"] == "blocked"
    failed = {**row, "finish_reason": None, "error": "HTTP 500 after 6 attempts", "error_kind": "transient"}
    f = score_row(failed, p, "avr", None)
    assert f["score"] is None and f["stage"] == "error"  # a failed call is never a wrong answer


def test_blocks_end_to_end(tmp_path: Path, marvel_data: Path) -> None:
    from cli.main import main

    srv = MockServer(faults={"content_filter": 0.2, "policy_400": 0.1}, seed=3).start()
    try:
        cfg = write_config(tmp_path / "c.toml", srv.base_url, ["m"])
        out = tmp_path / "run"
        argv = ["run", "marvel", "--models", "m", "--out", str(out), "--limit", "8", "--config", str(cfg),
                "--data-dir", str(marvel_data / "marvel"), "--judge", "m", "--no-live"]  # fmt: skip
        code = main(argv)
        injected = dict(srv.injected)
    finally:
        srv.stop()
    every = rows(out)  # answers and judge passes: the mock blocks both
    answers = [r for r in every if r["pass"] == "answer"]
    assert len(answers) == 8 * 5 and injected.get("content_filter") and injected.get("policy_400")
    assert sum(r.get("finish_reason") == "content_filter" for r in every) == injected["content_filter"]
    assert sum("content-policy refusal" in (r["error"] or "") for r in every) == injected["policy_400"]
    blocked = [r for r in answers if r["error"]]
    assert blocked and all(r["error_kind"] == "fatal" for r in blocked)  # never retried: nothing paid twice
    assert code != 0  # the blocked calls are error rows: the exit code says so
    assert main(["score", str(out)]) == 0
    scores = json.loads((out / "scores.json").read_text())["models"]["m"]
    assert scores["n_blocked"] == len(blocked)  # a blocked judge pass is a failed call, not a refusal
    left = scores["left_set"]
    assert sum(left[f"{k}_blocked"] for k in ("avr", "fine", "coarse_context", "coarse_choices", "coarse_whole")) == scores["n_blocked"]


def test_unwritable_coarse_directory_is_a_clear_error(tmp_path: Path) -> None:
    """A data directory where coarse/ cannot be made (here a file of that name; read-only mounts alike)."""
    _panels(tmp_path, 7, 6, 4)
    (tmp_path / "coarse").write_text("not a directory")
    with pytest.raises(SuiteError, match=r"cannot write the index-free puzzle images to .*coarse"):
        ensure(tmp_path, [_puzzle(7, "in a 2 by 3 matrix", (6, 4))])
