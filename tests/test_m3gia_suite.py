"""M3GIA suite: synthetic parquet in the hub's schema -> build, check, follow-up, scoring, GIA, end to end."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from core.types import ImagePart, Request, TextPart
from suites.base import RunSpec, SuiteError, get_suite
from suites.m3gia import SUITE, extract
from suites.m3gia.data import LANGS, answer_key
from suites.m3gia.prompts import PREFIX

WORDS = ["red circle", "blue square", "green triangle", "yellow star", "black hexagon", "white arrow"]
SCHEMA = pa.schema(
    [
        ("index", pa.int64()),
        ("question", pa.string()),
        ("hint", pa.string()),
        *((c, pa.string()) for c in "ABCDEF"),
        ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
        ("QuestionTypes", pa.string()),
    ]
)


def png(seed: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (seed * 37 % 256, seed * 91 % 256, 120)).save(buf, format="PNG")
    return buf.getvalue()


def make_parquet(
    d: Path, lang: str, qids: list[str] | None = None, image_every: int = 2, **overrides: dict[str, Any]
) -> Path:
    """A parquet file like the hub's `<language>_v1.parquet`, for the given question ids of the real key."""
    key = answer_key(lang)
    rows = []
    for i, qid in enumerate(qids or list(key)):
        qtype, ans = key[qid]
        n_opts = max(4, "ABCDEF".index(ans) + 1)
        row: dict[str, Any] = {
            "index": int(qid),
            "question": f"Which shape is shown in picture {qid}?",
            "hint": None,
            **{c: (WORDS[j] if j < n_opts else None) for j, c in enumerate("ABCDEF")},
            "image": {"bytes": png(int(qid)), "path": f"{qid}.png"}
            if image_every and i % image_every == 0
            else None,
            "QuestionTypes": qtype,
        }
        row.update(overrides.get(qid, {}))
        rows.append(row)
    path = d / f"{LANGS[lang]}_v1.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)
    return path


def spec(data_dir: Path, **opts: Any) -> RunSpec:
    samples = opts.pop("samples", None)
    limit = opts.pop("limit", None)
    return RunSpec(suite="m3gia", options={"data_dir": str(data_dir), **opts}, samples=samples, limit=limit)


# --- build


def test_build_requests(tmp_path: Path) -> None:
    make_parquet(
        tmp_path,
        "en",
        ["1", "2", "3"],
        **{
            "2": {"hint": "Look carefully.", "E": None, "F": "stray option after a gap"},
            "3": {"hint": "nan"},
        },
    )
    reqs = list(SUITE.build(spec(tmp_path, languages="en", samples=5)))
    assert [r.item for r in reqs] == ["en/1", "en/2", "en/3"]
    r1, r2, r3 = reqs
    # image first, as raw bytes, then the prompt
    content = r1.messages[0].content
    assert (
        isinstance(content, list) and isinstance(content[0], ImagePart) and isinstance(content[1], TextPart)
    )
    assert content[0].data == png(1)
    assert content[1].text == (
        PREFIX + "\nQuestion: Which shape is shown in picture 1?\n"
        "Choices: (A) red circle  (B) blue square  (C) green triangle  (D) yellow star\nAnswer: "
    )
    # no image: a plain text message; hint joined before the question; options stop at the first empty one
    assert r2.messages[0].content == (
        PREFIX + "\nQuestion: Look carefully.\nWhich shape is shown in picture 2?\n"
        "Choices: (A) red circle  (B) blue square  (C) green triangle  (D) yellow star\nAnswer: "
    )
    assert "nan" not in str(r3.messages[0].content)  # the authors' absent-cell strings are no hint
    assert r1.decoding.temperature == 0.0 and r1.decoding.n == 5
    assert r1.meta["options"] == WORDS[:4] and r1.meta["answer"] == answer_key("en")["1"][1]


def test_sim_responses_parse_to_their_letters(tmp_path: Path) -> None:
    make_parquet(tmp_path, "en", [str(i) for i in range(1, 301, 7)])
    for r in SUITE.build(spec(tmp_path, languages="en")):
        letters, options = tuple("ABCDEF"[: len(r.meta["options"])]), tuple(r.meta["options"])
        assert extract.by_rules(r.sim["correct"], letters, options) == r.meta["answer"]
        for w in r.sim["wrong"]:
            assert extract.by_rules(w, letters, options) != r.meta["answer"]


def test_no_images_languages_limit_suffix(tmp_path: Path) -> None:
    make_parquet(tmp_path, "en", ["1", "2", "3"], image_every=1)
    make_parquet(tmp_path, "fr", ["1", "2", "3"], image_every=1)
    reqs = list(SUITE.build(spec(tmp_path, languages="fr,en", limit=2, no_images=True, prompt="suffix")))
    assert [r.item for r in reqs] == [
        "en/1",
        "en/2",
        "fr/1",
        "fr/2",
    ]  # canonical language order, K per language
    for r in reqs:
        assert isinstance(r.messages[0].content, str)  # no image parts at all
        assert r.messages[0].content.endswith(
            "\nAnswer: \nAnswer with the option's letter from the given choices directly."
        )
    assert (
        SUITE.run_name(spec(tmp_path, languages="fr,en", no_images=True, prompt="suffix"))
        == "m3gia-suffix-noimg-en-fr"
    )
    assert SUITE.run_name(spec(tmp_path)) == "m3gia"
    assert get_suite("m3gia") is SUITE and SUITE.headline == "accuracy"


# --- check: clear errors before anything is sent


def test_check_missing_language_file(tmp_path: Path) -> None:
    make_parquet(tmp_path, "en", ["1"])
    SUITE.check(spec(tmp_path, languages="en"))
    with pytest.raises(SuiteError) as e:
        SUITE.check(spec(tmp_path, languages="en,zh"))
    msg = str(e.value)
    assert "'zh'" in msg and "chinese*.parquet" in msg and str(tmp_path.resolve()) in msg
    assert "huggingface.co/datasets/Songweii/M3GIA" in msg
    with pytest.raises(SuiteError, match="--data-dir"):
        SUITE.check(RunSpec(suite="m3gia", options={"languages": "en"}))
    with pytest.raises(SuiteError, match="no such directory"):
        SUITE.check(spec(tmp_path / "nope", languages="en"))


@pytest.mark.parametrize(
    ("opts", "match"),
    [({"languages": "en,xx"}, "unknown language 'xx'"), ({"prompt": "middle"}, "--prompt")],
)
def test_check_bad_options(tmp_path: Path, opts: dict, match: str) -> None:
    make_parquet(tmp_path, "en", ["1"])
    with pytest.raises(SuiteError, match=match):
        SUITE.check(spec(tmp_path, **opts))


def test_check_bad_files(tmp_path: Path) -> None:
    make_parquet(tmp_path, "en", ["1"])
    (tmp_path / "english_v2.parquet").write_bytes((tmp_path / "english_v1.parquet").read_bytes())
    with pytest.raises(SuiteError, match="several files"):
        SUITE.check(spec(tmp_path, languages="en"))
    (tmp_path / "english_v2.parquet").unlink()
    pq.write_table(pa.table({"index": [1], "prompt": ["x"]}), tmp_path / "english_v1.parquet")
    with pytest.raises(SuiteError, match=r"english_v1.parquet: missing column\(s\) question, A"):
        SUITE.check(spec(tmp_path, languages="en"))
    make_parquet(tmp_path, "en", ["1", "2", "3"], **{"3": {"index": 999}})  # a bad row anywhere in the file
    with pytest.raises(SuiteError, match="row 3: index '999' is not in the english answer key"):
        SUITE.check(spec(tmp_path, languages="en"))
    make_parquet(tmp_path, "en", ["1"], **{"1": {"QuestionTypes": "Algebra"}})
    with pytest.raises(SuiteError, match="QuestionTypes 'Algebra' but the answer key says 'Oral Vocabulary'"):
        SUITE.check(spec(tmp_path, languages="en"))
    (tmp_path / "english_v1.parquet").write_text("not parquet")
    with pytest.raises(SuiteError, match="not a readable parquet file"):
        SUITE.check(spec(tmp_path, languages="en"))


# --- follow-up: the judge pass (stage 2)


def _row(
    req: Request, text: str | None, sample: int = 0, error: str | None = None, pass_: str = "answer"
) -> dict:
    return {"model": "m", "item": req.item, "sample": sample, "pass": pass_, "text": text, "error": error}


def test_defaults_are_the_papers(tmp_path: Path) -> None:
    """5 iterations (App. F) and the authors' 2048 max new tokens, greedy."""
    make_parquet(tmp_path, "en", ["1"])
    [req] = SUITE.build(spec(tmp_path, languages="en"))
    assert (req.decoding.n, req.decoding.max_tokens, req.decoding.temperature) == (5, 2048, 0.0)


def test_follow_up_judge_only_for_unparseable_answers(tmp_path: Path) -> None:
    make_parquet(tmp_path, "en", ["1"])
    s = spec(tmp_path, languages="en", judge="sim/medium")
    req = next(iter(SUITE.build(s))).model_copy(update={"model": "m"})
    assert SUITE.follow_up(req, _row(req, "(B)"), s) == []
    assert SUITE.follow_up(req, _row(req, None, error="HTTP 500"), s) == []
    assert SUITE.follow_up(req, _row(req, "yellow star"), spec(tmp_path, languages="en")) == []  # no --judge
    [j] = SUITE.follow_up(req, _row(req, "yellow star", sample=3), s)
    assert (j.pass_, j.via, j.model, j.sample, j.decoding.temperature) == ("judge", "sim/medium", "m", 3, 0.0)
    system, prompt = j.messages
    assert (system.role, system.content) == ("system", "You are a helpful assistant.")
    assert j.decoding.max_tokens == 10  # the authors' API_MAX_OUTPUT
    text = prompt.content
    # the authors' choice_extraction prompt, worked examples included, {options} as their printed list
    assert text.startswith("You are an AI assistant who will help me to match an answer with several options")
    assert "\nExample 1: \nQuestion: What is the main object in image? \nOptions: (A) teddy bear" in text
    assert "Answer: Spider \nYour output: Z \nNow it's your turn: \nQuestion: " in text
    assert "\nOptions: ['(A) " in text and "'(D) yellow star']" in text
    assert text.endswith("\nAnswer:  yellow star  \nYour output:")
    assert j.sim["correct"] == "D"  # a good judge maps the option text to its letter
    assert SUITE.follow_up(j, _row(req, "D", pass_="judge"), s) == []


# --- end to end through the CLI


def test_cli_sim_sweep_and_score(tmp_path: Path) -> None:
    from cli.main import main

    data = tmp_path / "m3gia"
    data.mkdir()
    make_parquet(data, "en", ["1", "2", "46", "151", "211", "281"])
    make_parquet(data, "fr", ["1", "2", "16", "186"])
    out = tmp_path / "run"
    argv = [
        "run",
        "m3gia",
        "--models",
        "sim/strong,sim/weak",
        "--out",
        str(out),
        "--samples",
        "2",
        "--data-dir",
        str(data),
        "--languages",
        "en,fr",
        "--judge",
        "sim/medium",
        "--no-live",
    ]
    assert main(argv) == 0
    assert main(["score", str(out)]) == 0
    scores = json.loads((out / "scores.json").read_text())
    assert scores["suite"] == "m3gia" and set(scores["models"]) == {"sim/strong", "sim/weak"}
    for m in scores["models"].values():
        assert {
            "accuracy",
            "by_type",
            "by_cluster",
            "by_factor",
            "by_language",
            "gia",
            "gia_normalized",
            "stages",
        } <= set(m)
        assert set(m["by_language"]) == {"en", "fr"} and m["iterations"] == 2
        assert sum(m["stages"].values()) == 10 * 2 and m["stages"]["missing"] == 0
        assert m["gia"] == {"en": None, "fr": None}
    assert scores["models"]["sim/strong"]["accuracy"] > scores["models"]["sim/weak"]["accuracy"]
    assert "gia_accuracy_pearson" in scores
    scored = [json.loads(x) for x in (out / "scored.jsonl").read_text().splitlines()]
    assert len(scored) == 2 * 10 * 2 and all(r["stage"] in ("rule", "judge", "random") for r in scored)
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert {r["item"] for r in results} >= {"en/1", "fr/186"}
    # every answer the rules cannot parse got exactly one judge pass, on the judge model
    answers = [r for r in results if r["pass"] == "answer"]
    judged = {(r["model"], r["item"], r["sample"]) for r in results if r["pass"] == "judge"}
    assert all(r["via"] == "sim/medium" for r in results if r["pass"] == "judge")
    key = {f"{lang}/{q}": (lang, q) for lang in ("en", "fr") for q in answer_key(lang)}
    unparsed = set()
    for r in answers:
        n = max(4, "ABCDEF".index(answer_key(key[r["item"]][0])[key[r["item"]][1]][1]) + 1)
        if extract.by_rules(r["text"], tuple("ABCDEF"[:n]), tuple(WORDS[:n])) is None:
            unparsed.add((r["model"], r["item"], r["sample"]))
    assert judged == unparsed
    assert sum(m["stages"]["judge"] + m["stages"]["random"] for m in scores["models"].values()) == len(
        unparsed
    )


def test_cli_missing_language_file_fails_before_sending(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from cli.main import main

    make_parquet(tmp_path, "en", ["1"])
    out = tmp_path / "run"
    argv = [
        "run",
        "m3gia",
        "--models",
        "sim/strong",
        "--out",
        str(out),
        "--data-dir",
        str(tmp_path),
        "--no-live",
    ]
    assert main([*argv, "--languages", "en,ko"]) == 2
    err = capsys.readouterr().err
    assert "korean*.parquet" in err and "Songweii/M3GIA" in err
    assert not (out / "results.jsonl").exists() or not (out / "results.jsonl").read_text()
