"""Developer tools over the authors' released responses (`dev_responses/*.json`, not bundled).

    python -m suites.jeebench.devtools agreement FILE [--years 2020-2023] [--show]
    python -m suites.jeebench.devtools agreement extractor_dataset_val.csv --exclude DEV.json... [--part heldout]
    python -m suites.jeebench.devtools replay FILE OUT.jsonl
    python -m suites.jeebench.devtools critiques responses_old.json tests/data/extraction/jeebench/critiques.json --part dev
    python -m suites.jeebench.devtools table2 FILE --variant cot

`agreement` measures the rule extractor against the authors' hand extracts (both normalised to the
question type); `replay` writes the responses as a replay-provider JSONL for an end-to-end run.

A `.csv` of `response,extract` (the authors' extractor training data: GPT-3, GPT-3.5 and GPT-4 answers with
their hand extracts, no question) is read with the type inferred from the extract (several letters:
MCQ(multiple), one: MCQ, a number: Numeric; "None" rows are left out, their type unknown) and without the
question text. `--exclude` leaves out responses found in the given sets, JSON or CSV (those we tuned on); `--part`
keeps the `dev` or `heldout` half by SHA-256 of the response (tune on dev, report heldout).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from suites.base import SuiteError
from suites.jeebench.data import SUBJECTS, TYPES, item_id, items_by_id
from suites.jeebench.extract import Answer, extract, extract_critique, parse_answer


def load_dev(path: Path) -> list[dict[str, Any]]:
    """Rows of a released response file, each with `id`, `year`, `text` (the raw response) added."""
    try:
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise SuiteError(f"{path}: cannot read a JEEBench response file ({e})") from None
    for i, r in enumerate(rows):
        key = next((k for k in r if k.endswith("_response")), None)
        if key is None or "extract" not in r:
            raise SuiteError(f"{path}: entry {i}: needs a '<Model>_<mode>_response' object and 'extract'")
        choice = r[key]["choices"][0]
        r["text"] = choice["text"] if "text" in choice else choice["message"]["content"]
        r["id"] = item_id(r["description"], int(r["index"]))
        r["year"] = int(r["id"][:4])
    return rows


def _type_of(extract: str) -> str | None:
    e = extract.strip().strip(".").strip()
    if re.fullmatch(r"[A-D]{2,4}", e):
        return "MCQ(multiple)"
    if re.fullmatch(r"[A-D]", e):
        return "MCQ"
    try:
        float(e)
    except ValueError:
        return None
    return "Numeric"


def load_csv(path: Path) -> list[dict[str, Any]]:
    """Rows of a `response,extract` CSV as `load_dev` rows (no question; type from the extract)."""
    out = []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            for i, r in enumerate(csv.DictReader(f)):
                qtype = _type_of(r["extract"])
                if qtype is not None:
                    out.append({"id": f"{path.name}:{i + 2}", "year": 0, "type": qtype, "question": None,
                                "text": r["response"], "extract": r["extract"]})  # fmt: skip
    except (OSError, KeyError, csv.Error) as e:
        raise SuiteError(f"{path}: cannot read a response,extract CSV ({e})") from None
    return out


def part_of(text: str) -> str:
    """`dev` or `heldout`, by the first byte of SHA-256(text): a fixed split, independent of file order."""
    return "dev" if hashlib.sha256(text.encode()).digest()[0] % 2 == 0 else "heldout"


def same(a: Answer, b: Answer) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 0.01 + 1e-9  # the scoring tolerance: hand extracts are often rounded
    return a == b


def agreement(rows: list[dict[str, Any]]) -> tuple[int, int, list[dict[str, Any]]]:
    """(agreeing, total, disagreements) of `extract(text)` with the type-normalised hand extract."""
    bad = []
    for r in rows:
        mine, theirs = extract(r["text"], r["type"], r["question"]), parse_answer(r["extract"], r["type"])
        if not same(mine, theirs):
            bad.append(
                {"id": r["id"], "type": r["type"], "mine": mine, "theirs": theirs, "tail": r["text"][-300:]}
            )
    return len(rows) - len(bad), len(rows), bad


def replay_lines(rows: list[dict[str, Any]]) -> Iterator[str]:
    for r in rows:
        yield json.dumps({"item": r["id"], "sample": 0, "pass": "answer", "text": r["text"]})


def replay_scores(path: Path, variant: str) -> dict[str, Any]:
    """Our protocol (rule extraction, then our scorer) on one released response set: the replay row that
    isolates the protocol's gap from the model's (the same responses, read by the paper's hand)."""
    from suites.base import RunSpec, Sink
    from suites.jeebench import score

    rows = [{"model": "replay", "item": r["id"], "sample": 0, "pass": "answer", "text": r["text"]}
            for r in load_dev(path)]  # fmt: skip
    with tempfile.TemporaryDirectory() as d:
        return score(rows, RunSpec("jeebench", {"variant": variant}), Path(d), Sink()).models["replay"]


def critique_agreement(path: Path, labels: Path, part: str = "all") -> tuple[int, int, list[dict[str, Any]]]:
    """(agreeing, total, disagreements) of extract_critique on the authors' released self-critiques (the 191
    of the 515 in responses_old.json) against the hand-read answers in `labels` (tests/data/extraction/
    jeebench/critiques.json), over the `dev` or `heldout` half by SHA-256 of the critique."""
    items = items_by_id()
    want = json.loads(Path(labels).read_text(encoding="utf-8"))["labels"]
    bad, n = [], 0
    for r in json.loads(Path(path).read_text(encoding="utf-8")):
        it = items.get(item_id(r["description"], int(r["index"])))
        if it is None or it.id not in want:
            continue  # 9 critiques of an older dataset version, not among the 515
        choice = r["GPT4_CoT_self_refine_response"]["choices"][0]
        text = choice["message"]["content"]
        if part != "all" and part_of(text) != part:
            continue
        n += 1
        mine = extract_critique(text, it.type, it.question, choice.get("finish_reason"))
        theirs = parse_answer(want[it.id]["answer"], it.type)
        if not same(mine, theirs):
            bad.append({"id": it.id, "type": it.type, "mine": mine, "theirs": theirs, "tail": text[-300:]})
    return n - len(bad), n, bad


def _load(f: Path) -> list[dict[str, Any]]:
    return load_csv(f) if f.suffix == ".csv" else load_dev(f)


def _years(s: str) -> range:
    a, _, b = s.partition("-")
    return range(int(a), int(b or a) + 1)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m suites.jeebench.devtools")
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("agreement", help="extractor vs the authors' hand extracts")
    a.add_argument("files", nargs="+", type=Path)
    a.add_argument("--years", type=_years, default=None, help="e.g. 2020-2023 (default: all)")
    a.add_argument("--show", action="store_true", help="print the disagreements")
    a.add_argument("--exclude", nargs="*", type=Path, default=[], help="sets (JSON or CSV) whose responses to leave out")
    a.add_argument("--part", choices=("all", "dev", "heldout"), default="all", help="half by SHA-256 (default: all)")
    c = sub.add_parser("critiques", help="extract_critique vs hand-read answers of the authors' critiques")
    c.add_argument("file", type=Path, help="GPT4_CoT_self_refine_responses/responses_old.json")
    c.add_argument("labels", type=Path, help="tests/data/extraction/jeebench/critiques.json")
    c.add_argument("--part", choices=("all", "dev", "heldout"), default="all")
    c.add_argument("--show", action="store_true", help="print the disagreements")
    t = sub.add_parser("table2", help="Table 2's row of a released set read by our rules (the replay row)")
    t.add_argument("file", type=Path)
    t.add_argument("--variant", default="cot")
    r = sub.add_parser("replay", help="write a replay JSONL")
    r.add_argument("file", type=Path)
    r.add_argument("out", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "critiques":
        ok, n, bad = critique_agreement(args.file, args.labels, args.part)
        for b in bad if args.show else []:
            print(f"--- {b['id']} {b['type']} mine={b['mine']} theirs={b['theirs']}\n{b['tail']}")
        print(f"critiques ({args.part}): {ok}/{n} = {ok / max(n, 1):.3f}")
        return
    if args.cmd == "table2":
        s = replay_scores(args.file, args.variant)
        vals = [s["by_subject"].get(c) for c in SUBJECTS] + [s["by_type"].get(c) for c in TYPES] + [s["overall"]]
        print(" ".join(f"{c}={v:.3f}" for c, v in zip([*SUBJECTS, *TYPES, "overall"], vals, strict=True)))
        print(f"unread {s['unread']}/{s['n']}")
        return
    if args.cmd == "replay":
        args.out.write_text("".join(line + "\n" for line in replay_lines(load_dev(args.file))))
        return
    tot_ok = tot = 0
    seen = {x["text"].strip() for f in args.exclude for x in _load(f)}
    for f in args.files:
        rows = _load(f)
        rows = [x for x in rows if args.years is None or x["year"] in args.years]
        rows = [x for x in rows if x["text"].strip() not in seen]
        rows = [x for x in rows if args.part == "all" or part_of(x["text"]) == args.part]
        ok, n, bad = agreement(rows)
        tot_ok, tot = tot_ok + ok, tot + n
        print(f"{f.name}: {ok}/{n} = {ok / max(n, 1):.3f}")
        for b in bad if args.show else []:
            print(f"--- {b['id']} {b['type']} mine={b['mine']} theirs={b['theirs']}\n{b['tail']}")
    print(f"total: {tot_ok}/{tot} = {tot_ok / max(tot, 1):.3f}")


if __name__ == "__main__":
    main()
