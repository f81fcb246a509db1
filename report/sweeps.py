"""Tables across a sweep's runs of one suite (JEEBench: Table 2 across variants, Table 5 side by side,
§4.6's exam view), added to the first view of that suite and printed on the terminal."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from report.tables import SuiteView


def add_sweep_tables(views: list[SuiteView], show: bool = True, text: Path | None = None) -> list[dict]:
    """Build the cross-run tables of the JEEBench views, put them first in the first JEEBench view's paper
    tables (the report), write them to `text` as plain text, print them (`show`), and return them as
    dicts."""
    jee = [v for v in views if v.suite == "jeebench"]
    if not jee:
        return []
    from suites.jeebench.sweep import sweep_tables

    runs = [
        {
            "label": v.label,
            "variant": (v.entries[0].spec.get("options") or {}).get("variant") or "cot",
            "models": {e.model: e.scores for e in v.entries},
            "deviations": v.deviations,
        }
        for v in jee
        if v.entries
    ]
    tables = sweep_tables(runs)
    if text is not None and tables:
        from core.term import tables_text

        text.write_text(tables_text(tables), encoding="utf-8")
    if show and tables:
        from core.term import console, print_table

        con = console(stderr=True)
        for t in tables:
            print_table(t, con)
    out = [asdict(t) for t in tables]
    jee[0].paper_tables[:0] = out
    return out
