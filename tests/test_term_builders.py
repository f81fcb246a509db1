"""Text tables whole at any width (#38): a table wider than the terminal goes into panels that each
repeat the row label and the key columns, keep every column once, in the table's order, and cut no
header, label or value. Built from the suites' real table builders over 45 synthetic models, at 80, 100, 120 and 200
columns (labels may fold over lines, whole; key columns in every panel where they leave room for another)."""

from __future__ import annotations

import importlib
import random
from typing import Any

import pytest

from core.term import column_cells, tables_text
from suites.base import Table
from suites.jeebench.data import SUBJECTS as JEE_SUBJECTS
from suites.jeebench.data import TYPES as JEE_TYPES
from suites.m3gia.data import CLUSTERS as M3GIA_CLUSTERS
from suites.m3gia.data import LANGS
from suites.m3gia.data import TYPES as M3GIA_TYPES
from suites.m3gia.factors import TABLE1
from suites.marvel.data import PATTERNS
from suites.marvel.paper_tables import ZERO_SHOT, table4
from suites.vrb.data import CATEGORIES, SKILLS

vrb_score = importlib.import_module("suites.vrb.score")
jeebench_report = importlib.import_module("suites.jeebench.report")
m3gia_score = importlib.import_module("suites.m3gia.score")
N_MODELS = 45


def _names(n: int = N_MODELS) -> list[str]:
    """Names as a router spells them: a shared `openrouter/` prefix, 40-odd characters after it."""
    return [f"openrouter/vendor{i % 7}/some-long-model-name-{i:02d}-instruct{'-v2' * (i % 2)}"
            for i in range(n)]


def _vrb_models(seed: int = 38) -> dict[str, dict[str, Any]]:
    rnd = random.Random(seed)

    def acc() -> dict[str, float]:
        return {"accuracy": rnd.random()}

    return {
        m: {"n": 100 + i, "accuracy": rnd.random(), "ci95": [0.1 + i / 1000, 0.9], "no_answer": i, "errors": i % 3,
            "by_dataset": {"set-a": acc(), "set-b": acc()}, "accuracy_failures_wrong": rnd.random(),
            "by_category": {c: acc() for c in CATEGORIES}, "by_skill": {s: acc() for s in SKILLS},
            "by_severity": {}}  # fmt: skip
        for i, m in enumerate(_names())
    }


def _vrb_tables() -> list[Table]:
    return vrb_score.tables(_vrb_models(), {"chance": 0.25})


def _parse(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Each panel in `text` as (headers without their spaces, rows of cells), from rich's heavy-head box."""
    panels: list[tuple[list[str], list[list[str]]]] = []
    head: list[list[str]] = []
    rows: list[list[str]] = []
    state = ""
    for line in text.splitlines():
        if line.startswith("┏"):
            state, head, rows = "head", [], []
        elif line.startswith("┡"):
            state = "body"
        elif line.startswith("└"):
            headers = ["".join(parts).replace(" ", "") for parts in zip(*head, strict=True)]  # folded or not
            panels.append((headers, rows))
            state = ""
        elif state == "head":
            head.append([c.strip() for c in line.split("┃")[1:-1]])
        elif state == "body":
            cells = [c.strip() for c in line.split("│")[1:-1]]
            if rows and len(cells) > 1 and not any(cells[1:]):  # a label folded onto the next line: the same row
                rows[-1][0] += cells[0]
            else:
                rows.append(cells)
    return panels


def _n(s: object) -> str:
    """A label as printed, folded over lines or not: compared without its spaces."""
    return "".join(str(s).split())


def _check(t: Table, width: int, whole_names: bool = True) -> None:
    """`whole_names`: every label shown whole (the shared prefix once, in the header); else a label too
    wide beside the key columns may be cut, visibly (…), all still distinct."""
    text = tables_text([t], width=width)
    assert max(map(len, text.splitlines())) <= width
    panels = _parse(text)
    assert panels, text
    cols = [str(c).replace(" ", "") for c in t.columns]
    cells = [column_cells([r[i] for r in t.rows]) for i in range(len(cols))]
    want = {r[0]: {cols[i]: cells[i][k] for i in range(1, len(cols))} for k, r in enumerate(t.rows)}
    keys = [c for c in cols[1:] if c in [k.replace(" ", "") for k in t.key or ()]]
    seen: list[str] = []
    got: dict[str, dict[str, str]] = {}
    for headers, rows in panels:
        label, _, prefix = headers[0].partition("(")
        prefix = prefix.removesuffix("*)")
        first = not seen
        assert label == cols[0] and [h for h in headers if h in keys] in ([keys] if first else [keys, []]), headers
        # (the key columns in every panel where they leave room for another column, always in the first)
        seen += [h for h in headers[1:] if h not in keys]
        shown = [prefix + r[0] for r in rows]
        if whole_names or not any("…" in x for x in shown):
            assert [_n(x) for x in shown] == [_n(r[0]) for r in t.rows]  # every label, whole, in each panel
        else:
            assert len(set(shown)) == len(shown) and all(x in t.rows[k][0] or "…" in x for k, x in enumerate(shown))
        shown = [next((str(r[0]) for r in t.rows if _n(r[0]) == _n(x)), x) for x in shown]  # (folded: its spaces)
        for x, r in zip(shown, rows, strict=True):
            got.setdefault(x, {}).update(zip(headers[1:], r[1:], strict=True))
    rest = [c for c in cols[1:] if c not in keys]
    assert seen == [c for c in rest if c in seen], "columns reordered across panels"
    for c in rest:  # a column absent from the panels holds one value in every row, named in the note
        if c not in seen:
            assert f"{c}{cells[cols.index(c)][0]}".replace(" ", "") in text.replace("\n", "").replace(" ", "")
    if whole_names:
        assert {m: {c: v for c, v in row.items() if c in got[m]} for m, row in want.items()} == got
    else:  # rows in the table's order
        assert [{c: v for c, v in row.items() if c in seen or c in keys} for row in want.values()] == list(got.values())


@pytest.mark.parametrize("width", [80, 100, 120, 200])
@pytest.mark.parametrize("which", ["(chance", "by task category", "by skill"])
def test_vrb_tables_whole(which: str, width: int) -> None:
    (t,) = [t for t in _vrb_tables() if t.title.startswith("vrb: accuracy % " + which)]
    _check(t, width, whole_names=which != "(chance")


def _marvel_pattern_table() -> Table:
    """Table 4: the patterns as rows, the 45 models as columns (headers wider than a panel fold)."""
    rnd = random.Random(38)
    ms = [(m, {"by_pattern": {p: rnd.random() for p in PATTERNS}}) for m in _names()]
    return table4(ms, "note", ZERO_SHOT)


@pytest.mark.parametrize("width", [80, 100, 120, 200])
def test_marvel_pattern_table_whole(width: int) -> None:
    t = _marvel_pattern_table()
    assert [r[0] for r in t.rows][2] == "Quantities"
    _check(t, width)


def _jeebench_models(seed: int = 38) -> dict[str, dict[str, Any]]:
    rnd = random.Random(seed)
    return {
        m: {"n": 515 - i, "overall": rnd.random(), "ci95": [0.1, 0.2 + i / 1000], "answered": 500 - i,
            "by_subject": {s: rnd.random() for s in JEE_SUBJECTS}, "by_type": {q: rnd.random() for q in JEE_TYPES},
            "marks": {"positive": 100 + i, "negative": -i, "total": 100 + 2 * i}}  # fmt: skip
        for i, m in enumerate(_names())
    }


@pytest.mark.parametrize("width", [80, 100, 120, 200])
@pytest.mark.parametrize("which", ["scores", "95% CIs", "exam marks"])
def test_jeebench_tables_whole(which: str, width: int) -> None:
    """The scores table also holds the paper's rows, whose long labels are cut (…) beside its three keys."""
    (t,) = [t for t in jeebench_report.tables(_jeebench_models(), "cot") if t.title.startswith(f"jeebench (cot): {which}")]
    _check(t, width, whole_names=which != "scores")


def _m3gia_tables(seed: int = 38) -> list[Table]:
    rnd = random.Random(seed)
    models = {
        m: {"n": 300, "n_questions": 300 - i, "iterations": 3, "accuracy": rnd.random(), "ci95": [0.1, 0.2 + i / 1000],
            "stages": {s: i + k for k, s in enumerate(m3gia_score.STAGES)},
            "by_cluster": {c: rnd.random() for c in M3GIA_CLUSTERS}, "by_language": {x: rnd.random() for x in LANGS},
            "ci95_by_language": {x: [0.1, 0.9] for x in LANGS}, "by_factor": {f: rnd.random() for f in TABLE1},
            "by_type": {q: rnd.random() for q in M3GIA_TYPES}, "gia": {x: rnd.random() for x in LANGS},
            "gia_normalized": {x: 90 + rnd.random() for x in LANGS}}  # fmt: skip
        for i, m in enumerate(_names())
    }
    return m3gia_score.tables(models, {}, "note")


@pytest.mark.parametrize("width", [80, 100, 120, 200])
@pytest.mark.parametrize("which", ["accuracy (mean", "accuracy by language", "accuracy by question type", "GIA"])
def test_m3gia_tables_whole(which: str, width: int) -> None:
    """The main table's 44-character stages header leaves the labels less room: cut (…) there, visibly."""
    (t,) = [t for t in _m3gia_tables() if t.title.startswith(f"m3gia: {which}")]
    _check(t, width, whole_names=which != "accuracy (mean")
