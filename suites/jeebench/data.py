"""Load the bundled JEEBench data (515 problems, MIT, see data/LICENSE) and name its items.

The data ships inside the package so the suite runs without `../shared`. Everything is validated once
at load: a bad entry raises SuiteError naming the file, the entry and the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from suites.base import SuiteError

DATA_DIR = Path(__file__).resolve().parent / "data"
SUBJECTS = ("chem", "math", "phy")
TYPES = ("Integer", "MCQ", "MCQ(multiple)", "Numeric")
MCQ_TYPES = ("MCQ", "MCQ(multiple)")
VALIDATION_YEARS = range(2016, 2022)
TEST_YEARS = range(2022, 2024)
ALL_YEARS = range(VALIDATION_YEARS.start, TEST_YEARS.stop)

_DESC = re.compile(r"^JEE Adv (\d{4}) Paper (\d+)$")
_GOLD_LETTERS = re.compile(r"^[A-D]+$")


@dataclass(frozen=True)
class Item:
    id: str
    year: int
    paper: int
    index: int
    subject: str
    type: str
    question: str
    gold: str


def item_id(description: str, index: int) -> str:
    """`"JEE Adv 2016 Paper 1"`, 1 → `"2016-p1-1"` (the suite's stable item id)."""
    m = _DESC.match(description.strip())
    if not m:
        raise ValueError(f"description {description!r} is not like 'JEE Adv 2016 Paper 1'")
    return f"{m.group(1)}-p{m.group(2)}-{index}"


def _item(d: Any, where: str) -> Item:
    if not isinstance(d, dict):
        raise SuiteError(
            f"{where}: expected an object with description, index, subject, type, question, gold"
        )
    for key in ("description", "index", "subject", "type", "question", "gold"):
        if key not in d:
            raise SuiteError(f"{where}: missing field {key!r}")
    try:
        iid = item_id(str(d["description"]), int(d["index"]))
    except ValueError as e:
        raise SuiteError(f"{where}: field 'description'/'index': {e}") from None
    if d["subject"] not in SUBJECTS:
        raise SuiteError(f"{where}: field 'subject' is {d['subject']!r}; expected one of {SUBJECTS}")
    if d["type"] not in TYPES:
        raise SuiteError(f"{where}: field 'type' is {d['type']!r}; expected one of {TYPES}")
    gold = str(d["gold"]).strip()
    if d["type"] in MCQ_TYPES:
        ok = bool(_GOLD_LETTERS.match(gold)) and (d["type"] == "MCQ(multiple)" or len(gold) == 1)
    else:
        try:
            float(gold)
            ok = True
        except ValueError:
            ok = False
    if not ok:
        raise SuiteError(f"{where}: field 'gold' is {gold!r}, not a valid answer for type {d['type']!r}")
    year, paper = (int(x) for x in _DESC.match(str(d["description"]).strip()).groups())  # type: ignore[union-attr]
    return Item(iid, year, paper, int(d["index"]), d["subject"], d["type"], str(d["question"]), gold)


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise SuiteError(
            f"{path}: JEEBench data file not found (it ships with the package; reinstall evalsweep)"
        )
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise SuiteError(f"{path}: not valid JSON ({e})") from None


@lru_cache(maxsize=4)
def load_items(data_dir: Path = DATA_DIR) -> tuple[Item, ...]:
    """All problems in dataset order; ids are checked unique."""
    path = data_dir / "dataset.json"
    raw = _read_json(path)
    if not isinstance(raw, list):
        raise SuiteError(f"{path}: expected a JSON list of problems")
    items = tuple(_item(d, f"{path}: entry {i}") for i, d in enumerate(raw))
    seen: dict[str, int] = {}
    for i, it in enumerate(items):
        if it.id in seen:
            raise SuiteError(
                f"{path}: entry {i}: duplicate item id {it.id} (also entry {seen[it.id]}); "
                "(description, index) must be unique"
            )
        seen[it.id] = i
    return items


@lru_cache(maxsize=4)
def items_by_id(data_dir: Path = DATA_DIR) -> dict[str, Item]:
    return {it.id: it for it in load_items(data_dir)}


@lru_cache(maxsize=4)
def load_few_shot(data_dir: Path = DATA_DIR) -> dict[str, dict[str, dict[str, str]]]:
    """`{subject: {type: {problem, solution}}}`: the 12 one-shot examples."""
    path = data_dir / "few_shot_examples.json"
    raw = _read_json(path)
    for s in SUBJECTS:
        for t in TYPES:
            ex = raw.get(s, {}).get(t) if isinstance(raw, dict) else None
            if not isinstance(ex, dict) or not {"problem", "solution"} <= ex.keys():
                raise SuiteError(f"{path}: missing [{s!r}][{t!r}] with 'problem' and 'solution'")
    return raw
