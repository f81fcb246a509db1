"""One rich Console policy (the terminal's width on a TTY, `$COLUMNS` or 200 columns elsewhere) and the
score tables fitted to it: a table wider than the console is wrapped into panels that each repeat the
row label (the model) and the headline columns, the others in the table's order, so no cell is ever cut."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

LOG_WIDTH = 200
LABEL_MAX = 28
"""A row label wider than this is shortened (`abbreviate`) when the table would not fit otherwise."""
PROSE_MAX = 24
"""A text column (cells with spaces) wider than this wraps when the table would not fit otherwise."""
ROOM_MIN = 16
"""Each panel keeps room for a column this wide beside its label and key columns."""
HEADER_MAX = 16
"""A header's word longer than this (a model's name over a column) is broken over lines."""
HEADLINES = ("overall", "accuracy", "pattern", "avr", "95% CI", "ci95")
"""Columns kept beside the label when a table names no `key` columns itself."""
MARK = "*"
ELLIPSIS = "…"


def abbreviate(names: list[str], width: int) -> tuple[dict[str, str], str]:
    """Each name shortened to at most `width` characters, all still distinct; returns the mapping and
    the prefix taken off every name (shown once, in the header). Rule: drop a `provider/` prefix all
    share, then keep each name's head and tail around an ellipsis (the tail tells versions apart)."""
    if not names:
        return {}, ""
    prefix = ""
    heads = {n.split("/", 1)[0] + "/" for n in names if "/" in n}
    if max(map(len, names)) > width and len(heads) == 1 and all("/" in n for n in names):
        prefix = heads.pop()
    short = {n: n[len(prefix) :] for n in names}
    if max(map(len, short.values())) <= width:
        return short, prefix
    width = max(width, 3)
    out = {n: _cut(v, width, max((_lcp(v, o) for o in short.values() if o is not v), default=0))
           for n, v in short.items()}
    if len(set(out.values())) == len(out):
        return out, prefix
    for tail in range(max(1, (width - 1) // 3), width - 1):
        head = width - 1 - tail
        out = {n: s if len(s) <= width else s[:head] + ELLIPSIS + s[-tail:] for n, s in short.items()}
        if len(set(out.values())) == len(out):
            return out, prefix
    return {n: s[: width - 1] + ELLIPSIS if len(s) > width else s for n, s in short.items()}, prefix


def _lcp(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _cut(s: str, width: int, lcp: int) -> str:
    """`s` in `width` characters: head and tail around an ellipsis, or, when it shares a long start with
    another name, its head, then the stretch where the two part (`lcp`: their common prefix)."""
    if len(s) <= width:
        return s
    keep = width - 1
    if lcp < keep - keep // 3:  # differs inside the head: head and tail
        tail = keep // 3
        return s[: keep - tail] + ELLIPSIS + s[-tail:]
    head = min(8, keep // 3)
    start = min(max(head, lcp - 2), len(s) - (keep - head))
    return s[:head] + ELLIPSIS + s[start : start + keep - head]


# (key, header, formatter) in the order shown; the first MANDATORY are always kept.
def plural(n: int, word: str, many: str | None = None) -> str:
    """`1 model`, `3 models` (`many` for irregular plurals)."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    cols = os.environ.get("COLUMNS", "")
    return Console(stderr=stderr, width=int(cols) if cols.isdigit() and int(cols) > 0 else LOG_WIDTH)


def tables_text(tables: list[Any], models: Mapping[str, Mapping[str, Any]] | None = None, width: int = 100) -> str:
    """The tables as plain text `width` columns wide (no colour), as the terminal shows them: what a
    run directory keeps in tables.txt, so the terminal need not print them."""
    import io

    buf = io.StringIO()
    con = Console(file=buf, width=width, color_system=None, force_terminal=False, legacy_windows=False)
    for t in tables:
        for part in render(t, width, models or {}, whole_labels=True):  # (a file is searched for names)
            con.print(part)
        con.print()
    return buf.getvalue()


def print_table(t: Any, con: Console | None = None, whole_labels: bool = False) -> None:
    """`t` (a suites.base.Table) on the console, fitted to its width (`render`): panels, never a cut cell."""
    con = con or console()
    for part in render(t, con.width, whole_labels=whole_labels):
        con.print(part)


def cell(v: Any, whole: bool = True) -> str:
    """One value; `whole`: a whole-number float beyond ±1 prints as an integer (see `column_cells`)."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.0f}" if whole and v.is_integer() and abs(v) >= 2 else f"{v:.3f}"
    if isinstance(v, list | tuple) and v and all(isinstance(x, float) for x in v):
        return "[" + ", ".join(f"{x:.3f}" for x in v) + "]"
    return str(v)


def _integral(v: Any) -> bool:
    return isinstance(v, float) and v.is_integer()


def column_cells(values: list[Any]) -> list[str]:
    """A column's cells, formatted alike: whole-number floats print as integers only when every value of
    the column is one and some are beyond ±1 (marks: `-1` beside `-35`), else all keep 3 decimals
    (accuracies: `1.000` beside `0.875`)."""
    nums = [v for v in values if isinstance(v, float)]
    whole = bool(nums) and all(map(_integral, nums)) and any(abs(v) >= 2 for v in nums)
    return [f"{v:.0f}" if whole and isinstance(v, float) else cell(v, whole=False) for v in values]


def _partial(models: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {
        m: s for m, s in models.items() if isinstance(s.get("coverage"), float | int) and s["coverage"] < 1
    }


def _mark(label: str, partial: Mapping[str, Any]) -> str:
    for m in partial:
        if label == m or label.startswith(m + " "):
            return label.replace(m, m + MARK, 1)
    return label


def coverage_note(partial: Mapping[str, Mapping[str, Any]]) -> str:
    """`* below full coverage: m 412/515 answered (80%), 103 errors` for the models marked."""
    parts = [
        f"{m} {s['n_scored']}/{s['n_planned']} answered ({100 * s['coverage']:.0f}%), {s['n_errors']} errors"
        for m, s in partial.items()
    ]
    return f"{MARK} below full coverage, metrics over answered items: " + "; ".join(parts)


def _panels(widths: list[int], keep: list[int], width: int) -> list[list[int]]:
    """Column indices per panel: the label (index 0) and the `keep` columns in each (in the first only
    when they leave no room for another), every other column once, filled in the table's order (next fit),
    so that reading the panels in turn reads the columns in order."""

    def cost(cols: list[int]) -> int:
        return 1 + sum(widths[c] + 3 for c in cols)

    head = [0, *keep] if cost([0, *keep]) <= width - ROOM_MIN - 3 else [0]
    panels = [[0, *keep]]
    for c in range(1, len(widths)):
        if c in keep:
            continue
        if cost([*panels[-1], c]) > width and len(panels[-1]) > len(head if len(panels) > 1 else [0, *keep]):
            panels.append(list(head))
        panels[-1].append(c)
    return [sorted(p) for p in panels]


def _header(text: str, width: int) -> str:
    """A header in lines of at most `width` (a word longer than that is broken), so no header is cut."""
    return "\n".join(textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False)) or text


def render(
    t: Any, width: int, models: Mapping[str, Mapping[str, Any]] | None = None, whole_labels: bool = False
) -> list[RichTable | Text]:
    """The table (a suites.base.Table) as one or more rich tables no wider than `width`, then its note; models below full
    coverage marked.

    Too wide: columns holding one value in every row move into the note, prose columns wrap at
    `PROSE_MAX`, long row labels are shortened to `LABEL_MAX` by `abbreviate` (the live view's rule: a
    shared `provider/` prefix into the header, then the middle of a name), and what still does not fit goes on into
    further panels that repeat the label; numbers are never wrapped or cut."""
    partial = _partial(models or {})
    ncol = max((len(r) for r in t.rows), default=0)
    by_col = [column_cells([r[i] if i < len(r) else None for r in t.rows]) for i in range(ncol)]
    rows = [[by_col[i][k] for i in range(len(r))] for k, r in enumerate(t.rows)]
    cols = [str(c) for c in t.columns]
    marked: dict[str, Mapping[str, Any]] = {}
    if partial and cols and cols[0] in ("model", "model (judge)"):
        rows = [[_mark(r[0], partial), *r[1:]] for r in rows]
        marked = {m: s for m, s in partial.items() if any(r[0].startswith(m + MARK) for r in rows)}
    notes = [t.note] if t.note else []
    names = t.key or tuple(c for c in cols[1:] if c in HEADLINES)

    def natural(i: int) -> int:  # a header's long word (a model's name over a column) breaks at HEADER_MAX
        words = [min(len(w), HEADER_MAX) if i > 0 else len(w) for w in cols[i].split()]
        return max([0, *words, *(len(r[i]) for r in rows)])

    widths = [natural(i) for i in range(len(cols))]
    if cols and 1 + sum(w + 3 for w in widths) > width and len(rows) > 1:
        const = [i for i in range(1, len(cols)) if cols[i] not in names and len({r[i] for r in rows}) == 1]
        if const:
            notes.insert(0, "in every row: " + ", ".join(f"{cols[i]} {rows[0][i]}" for i in const))
            cols = [c for i, c in enumerate(cols) if i not in const]
            rows = [[v for i, v in enumerate(r) if i not in const] for r in rows]
            widths = [w for i, w in enumerate(widths) if i not in const]
    wrap = set()
    if cols and 1 + sum(w + 3 for w in widths) > width:
        if widths[0] > LABEL_MAX and not whole_labels:  # shortened as the live view does, never folded
            short, prefix = abbreviate(list(dict.fromkeys(r[0] for r in rows)), LABEL_MAX)
            rows = [[short[r[0]], *r[1:]] for r in rows]
            cols[0] += f" ({prefix}*)" if prefix else ""
            widths[0] = max([len(cols[0].split()[0]), *(len(r[0]) for r in rows)])
        else:  # names a person types next (`evalsweep models`), a file's tables: whole, folded where the
            # label would leave the key columns and one more no room beside it
            keys = [i for i, c in enumerate(cols) if i > 0 and c in names]
            other = max([ROOM_MIN, *(widths[i] for i in range(1, len(cols)) if i not in keys)])
            room = max(LABEL_MAX, width - 1 - sum(widths[i] + 3 for i in keys) - 3 - 3 - min(other, width // 3))
            if widths[0] > room:
                widths[0] = room
                wrap.add(0)
        for i in range(1, len(cols)):
            if widths[i] > PROSE_MAX and any(" " in r[i] for r in rows):
                widths[i] = PROSE_MAX
                wrap.add(i)
    keep = [i for i, c in enumerate(cols) if i > 0 and c in names]
    panels = _panels(widths, keep, width) if cols else [[]]
    if marked:
        notes.append(coverage_note(marked))
    note = "; ".join(notes)
    out = []
    for k, idx in enumerate(panels):
        title = t.title if k == 0 else f"{t.title} ({k + 1}/{len(panels)})"
        rt = RichTable(title=title)
        for i in idx:
            if i in wrap:
                rt.add_column(cols[i], overflow="fold", max_width=widths[i])
            else:  # (numbers never wrap: their header is broken into lines of the column's width instead)
                rt.add_column(_header(cols[i], widths[i]) if i > 0 else cols[i], no_wrap=i > 0,
                              min_width=min(widths[i], width - 4))
        for r in rows:
            rt.add_row(*(r[i] for i in idx))
        out.append(rt)
    if note:  # under the last panel, as wide as the terminal (a caption would wrap at the panel's width)
        out.append(Text(note, style="dim"))
    return out
