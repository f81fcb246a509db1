"""The suites' own tables (the papers' layouts: Table 2's Random row, per-year scores, Table 1's factors,
the left set, category effects...), as `evalsweep score` prints them and scores.json keeps them
(`tables`), rendered in each suite's section of the report."""

from __future__ import annotations

import html
from typing import Any

from core.term import column_cells


def _cell(v: Any, text: str) -> str:
    """`text`: the terminal's cell for `v` (core.term.column_cells: one format per column)."""
    if v is None:
        return "–"
    if isinstance(v, float):
        return text
    if isinstance(v, list) and len(v) == 2 and all(isinstance(x, int | float) for x in v):
        return f"[{v[0]:.3f}, {v[1]:.3f}]"
    return html.escape(str(v))


def paper_tables_html(tables: list[dict[str, Any]]) -> str:
    """One collapsible block per table: title, the table, its note (deviations included)."""
    out = []
    for t in tables:
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in t.get("columns", []))
        rows = t.get("rows", [])
        ncol = max((len(r) for r in rows), default=0)
        by_col = [column_cells([r[i] if i < len(r) else None for r in rows]) for i in range(ncol)]
        body = "".join(
            "<tr>" + "".join(f"<td>{_cell(v, by_col[i][k])}</td>" for i, v in enumerate(row)) + "</tr>"
            for k, row in enumerate(rows)
        )
        note = t.get("note") or ""
        out.append(
            f"<details><summary>{html.escape(str(t.get('title', '')))}</summary>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            + (f"<p class='note'>{html.escape(note).replace(chr(10), '<br>')}</p>" if note else "")
            + "</details>"
        )
    return "\n".join(out)
