"""M3GIA stage 2: the judge's reply is compared raw with the gold letter, as the authors' `eval_multi_choice`
does (`gold == pred`): a reply carrying whitespace or a newline is no letter. End to end through the CLI,
the answers and the judge's replies coming from the replay provider, so the texts reach scoring untouched."""

from __future__ import annotations

import json
from pathlib import Path

from suites.m3gia import extract
from suites.m3gia.data import answer_key
from tests.test_m3gia_suite import make_parquet

UNREAD = "I would rather describe the picture than pick one."
"""An answer stage 1 cannot read (no letter, no option text): it goes to the judge."""


def test_judge_reply_is_compared_raw(tmp_path: Path) -> None:
    from cli.main import main

    qids = ["1", "2", "46", "151", "211"]
    data = tmp_path / "m3gia"
    data.mkdir()
    make_parquet(data, "en", qids)
    gold = {f"en/{q}": answer_key("en")[q][1] for q in qids}
    replies = {"en/1": "{}", "en/2": " {}", "en/46": "{}\n", "en/151": "\n{} \n", "en/211": "{}."}
    lines = [{"item": i, "sample": 0, "pass": "answer", "text": UNREAD} for i in gold]
    lines += [{"item": i, "sample": 0, "pass": "judge", "text": replies[i].format(g)} for i, g in gold.items()]
    (tmp_path / "replay.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    cfg = tmp_path / "models.toml"
    cfg.write_text(
        f'[[models]]\nname = "m"\nprovider = "replay"\npath = "{tmp_path / "replay.jsonl"}"\n'
        f'[[models]]\nname = "judge"\nprovider = "replay"\npath = "{tmp_path / "replay.jsonl"}"\n'
    )
    out = tmp_path / "run"
    argv = ["run", "m3gia", "--models", "m", "--config", str(cfg), "--out", str(out), "--samples", "1",
            "--data-dir", str(data), "--languages", "en", "--judge", "judge", "--no-live"]  # fmt: skip
    assert main(argv) == 0
    results = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    sent = {r["item"]: r["text"] for r in results if r["pass"] == "judge"}
    assert sent == {i: replies[i].format(g) for i, g in gold.items()}  # every reply kept as sent
    scored = {r["item"]: r for r in map(json.loads, (out / "scored.jsonl").read_text().splitlines())}
    assert {i: (r["stage"], r["extracted"]) for i, r in scored.items()} == {
        "en/1": ("judge", gold["en/1"]),
        **{i: ("judge", None) for i in ("en/2", "en/46", "en/151", "en/211")},
    }
    assert json.loads((out / "scores.json").read_text())["models"]["m"]["accuracy"] == 0.2


def test_exact_and_lenient_judge_parse() -> None:
    letters = ("A", "B", "C", "D")
    assert [extract.from_judge(t, letters) for t in ("B", " B", "B\n", "\tB ", "Z", None)] == ["B"] + [None] * 5
    assert [extract.from_judge(t, letters, lenient=True) for t in (" B", "B\n", "B.", "Z")] == ["B", "B", "B", None]
