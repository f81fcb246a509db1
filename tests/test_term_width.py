"""Text tables whole at any width (#38): 45 models through each suite, every table of its scores
rendered at 80 columns — panels repeat the row label, every column appears once and in the table's
order (key columns pinned in front; a column with one value in every row said in the note), every header
word and row label is printed, no line is wider than the terminal. Real runs of the simulated models
(JEEBench bundled, M3GIA on a parquet of the hub's shape; VRB and MARVEL on ../shared)."""

from __future__ import annotations

from pathlib import Path

import orjson
from rich.console import Console

from cli.main import main
from core.term import HEADER_MAX, HEADLINES, render, tables_text
from suites.base import Table
from tests.test_term_builders import _parse

MODELS = [f"sim/lab-{i:02d}-{'preview-' if i % 3 else ''}2025" for i in range(45)]
WIDTH = 80


def _run(tmp: Path, suite: str, *extra: str) -> list[Table]:
    cfg = tmp / "c.toml"
    cfg.write_text('[[endpoints]]\nname = "sim"\nkind = "sim"\nlatency_ms = 0\nmax_concurrency = 512\n')
    out = tmp / suite
    code = main(["run", suite, "--models", ",".join(MODELS), "--config", str(cfg), "--out", str(out),
                 "--no-live", *extra])
    assert code in (0, 3), code
    doc = orjson.loads((out / "scores.json").read_bytes())
    return [Table(title=t["title"], columns=t["columns"], rows=t["rows"], note=t["note"]) for t in doc["tables"]]


def _n(s: str) -> str:
    """A header as printed over lines, compared whole (a long word is broken without a space)."""
    return "".join(str(s).split())


def _text(part: object) -> str:
    con = Console(width=WIDTH, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    con.print(part)
    return con.export_text()


def _check(t: Table) -> None:
    parts = render(t, WIDTH, whole_labels=True)
    panels = [p for p in parts if hasattr(p, "columns")]
    note = "".join(_text(p) for p in parts if not hasattr(p, "columns"))
    text = "".join(_text(p) for p in panels)
    assert max(map(len, text.splitlines())) <= WIDTH, t.title
    label = str(t.columns[0])
    shown: list[str] = []
    for p in panels:
        heads = [" ".join(str(c.header).split()) for c in p.columns]
        assert heads[0].startswith(label.split()[0]), (t.title, heads)  # every panel repeats the label
        shown += [h for h in heads[1:] if h not in shown]
        for word in " ".join(heads).split():
            assert word[:HEADER_MAX] in _text(p), (t.title, word)  # printed, not cropped
    cols = [str(c) for c in t.columns[1:]]
    joined = [c for c in cols if _n(c) in [_n(h) for h in shown]]
    moved = [c for c in cols if c not in joined]
    flat = _n(note)
    assert all(_n(c) in flat for c in moved), (t.title, moved, note)  # a column with one value in every row: in the note
    order = [c for c in cols if c in joined]
    firsts = [c for c in [_n(h) for h in shown]]
    assert sorted(firsts) == sorted(_n(c) for c in order)
    pinned = {_n(c) for c in (t.key or [c for c in cols if c in HEADLINES])}  # kept in front
    assert [h for h in firsts if h not in pinned] == [_n(c) for c in order
                                                      if _n(c) not in pinned]  # in the table's order
    for _, got in _parse(text):  # every row label whole in every panel (folded over lines where too long)
        assert [_n(r[0]) for r in got] == [_n(r[0]) for r in t.rows], t.title
    whole = tables_text([t], width=WIDTH)
    assert max(map(len, whole.splitlines())) <= WIDTH


def _widest(tables: list[Table]) -> list[Table]:
    assert tables
    return sorted(tables, key=lambda t: -sum(max([len(str(c)), *(len(str(r[i])) for r in t.rows if i < len(r))])
                                             for i, c in enumerate(t.columns)))[:3]


def test_jeebench_tables_whole_at_80(tmp_path: Path):
    for t in _widest(_run(tmp_path, "jeebench", "--limit", "24")):
        _check(t)


def test_vrb_tables_whole_at_80(tmp_path: Path, shared_data: Path):
    for t in _widest(_run(tmp_path, "vrb", "--data-dir", str(shared_data / "vrb"), "--limit", "120")):
        _check(t)


def test_marvel_tables_whole_at_80(tmp_path: Path, shared_data: Path):
    for t in _widest(_run(tmp_path, "marvel", "--data-dir", str(shared_data / "marvel"), "--limit", "60")):
        _check(t)


def test_m3gia_tables_whole_at_80(tmp_path: Path):
    from tests.test_m3gia_suite import make_parquet  # (the hub's parquet shape, over the bundled answer key)

    make_parquet(tmp_path, "en")
    for t in _widest(_run(tmp_path, "m3gia", "--data-dir", str(tmp_path), "--languages", "en")):
        _check(t)
