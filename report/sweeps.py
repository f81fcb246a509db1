"""Tables across a sweep's runs of one suite (JEEBench: Table 2 across variants, Table 5 side by side,
§4.6's exam view; M3GIA: Table 4 side by side), added to the first view of that suite and printed on the
terminal."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from report.tables import SuiteView


def add_sweep_tables(views: list[SuiteView], show: bool = True, text: Path | None = None) -> list[dict]:
    """Build the cross-run tables of the JEEBench views, put them first in the first JEEBench view's paper
    tables (the report), write them to `text` as plain text, print them (`show`), and return them as
    dicts; M3GIA's likewise."""
    tables = _jeebench(views, show) + _m3gia(views, show)
    if text is not None and tables:
        from core.term import tables_text
        from suites.base import Table

        text.write_text(tables_text([Table(**t) for t in tables]), encoding="utf-8")
    return tables


def _show(tables: list, show: bool) -> None:
    if show and tables:
        from core.term import console, print_table

        con = console(stderr=True)
        for t in tables:
            print_table(t, con)


def _m3gia(views: list[SuiteView], show: bool) -> list[dict]:
    """M3GIA's Table 4 side by side (a run with images and its --no-images run)."""
    m3 = [v for v in views if v.suite == "m3gia" and v.entries]
    if len(m3) < 2:
        return []
    from suites.m3gia.sweep import sweep_tables

    runs = [
        {
            "label": v.label,
            "images": not (v.entries[0].spec.get("options") or {}).get("no_images"),
            "models": {e.model: e.scores for e in v.entries},
            "deviations": v.deviations,
        }
        for v in m3
    ]
    tables = sweep_tables(runs)
    _show(tables, show)
    out = [asdict(t) for t in tables]
    m3[0].paper_tables[:0] = out
    return out


def _jeebench(views: list[SuiteView], show: bool) -> list[dict]:
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
    _show(tables, show)
    out = [asdict(t) for t in tables]
    jee[0].paper_tables[:0] = out
    return out
