"""The page, in reading order: every suite's leaderboard with CIs first (coverage, partial runs and
protocol deviations beside the numbers), then the value frontier, then each suite's details, the
per-sample viewer, and the runs. A figure with nothing to draw is left out with one line saying why."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from core.term import plural
from report import viewer
from report.html import CSS, JS, esc, flag, img, pct, score_columns, suite_section, table, usd
from report.rows import leaderboard_rows
from report.samples import ViewData
from report.tables import AXES, SuiteView, is_fraction
from suites.base import protocol_of

WHY_NO_COST = {
    "price_in": "no model has a known list price (set price_in in the config or pass --models-table)",
    "run_cost_usd": "no model has a known run cost (some calls have no price)",
}


def _coverage(r: dict[str, Any]) -> str | None:
    c = r.get("coverage")
    if c is None:
        return f"? ({r['error_calls']} errors)" if r.get("error_calls") else None
    return f"{c * 100:.0f}%" + (" ⚠" if c < 1 else "")


def _below(v: SuiteView, rows: list[dict[str, Any]]) -> str:
    low = []
    for r in rows:
        c, planned, scored = r.get("coverage"), r.get("n_planned"), r.get("n_scored")
        if c is not None and c < 1:
            detail = f"{scored} of {planned} scored" if planned is not None else f"coverage {c:.0%}"
            if r.get("n_errors"):
                detail += f", {r['n_errors']} errors"
            if r.get("n_reasoning_exhausted"):
                detail += f" ({r['n_reasoning_exhausted']} reasoning exhausted: raise its thinking budget)"
            low.append(f"{r['display_name']} ({detail})")
    if not low:
        return ""
    return (
        "<p class='warn'>⚠ Below full coverage: "
        + esc("; ".join(low))
        + ". Their scores are over the answered items only; failed calls are not counted as wrong.</p>"
    )


def _unreadable(v: SuiteView) -> str:
    """Models most of whose answers no extraction rule read (scores.json `unreadable` over UNREADABLE)."""
    from runner.score import UNREADABLE

    low = [f"{e.info.display_name} ({e.scores['unreadable']:.0%})" for e in v.entries
           if isinstance(e.scores.get("unreadable"), int | float) and e.scores["unreadable"] > UNREADABLE]
    if not low:
        return ""
    return ("<p class='warn'>⚠ Answers no rule could read: " + esc("; ".join(low)) + ". They score as wrong: "
            "check the prompt and the extraction (scored.jsonl) before reading these scores.</p>")


def headline(v: SuiteView) -> str:
    """One suite's leaderboard: rank, score with its 95% CI, n, coverage, cost, and the groups."""
    scale = 100.0 if is_fraction(v) else 1.0
    rows = leaderboard_rows(v)
    for r in rows:
        r["ci"] = (r["ci_lo"], r["ci_hi"]) if r["ci_lo"] is not None else None
        r["weights"] = {True: "open", False: "proprietary"}.get(r["open_weights"])
        r["kind"] = {True: "reasoning", False: "non-reasoning"}.get(r["reasoning"])
        r["cover"] = _coverage(r)
        r["front"] = r["on_frontier_price"] or r["on_frontier_run_cost"]
    badge = f"<span class='badge'>{esc(v.partial)}</span>" if v.partial else ""
    out = [f"<h3>{esc(v.label)}{badge} <a class='note' href='#{esc(v.slug)}'>details</a></h3>"]
    own = _own_deviations(v)
    if own or v.shaping:
        parts = [plural(len(own), "deviation") + " of the protocol"] if own else []
        parts += [f"request shaping for {plural(len(v.shaping), 'model')}"] if v.shaping else []
        out.append(
            f"<p class='warn'>⚠ These numbers depart from {protocol_of(v.suite)}: {esc('; '.join(parts))} "
            f"(<a href='#dev-{esc(v.slug)}'>below the table</a>).</p>"
        )
    unit = " (%)" if scale == 100 else ""
    chance = "" if v.chance is None else f"; chance {pct(scale)(v.chance)}"
    out.append(f"<p class='note'>{esc(v.metric)}{unit}, 95% CI{esc(chance)}.</p>")
    out.append(
        table(
            rows,
            [
                *score_columns(v.metric, scale),
                ("cover", "coverage", None),
                ("run_cost_usd", "run cost", usd),
                ("price_in", "$/M in", usd),
                ("weights", "weights", None),
                ("kind", "type", None),
                ("front", "on a frontier", flag("✓", "")),
            ],
        )
    )
    out.append(_below(v, rows))
    out.append(_unreadable(v))
    out.append(_deviations(v, own))
    return "\n".join(out)


def _own_deviations(v: SuiteView) -> list[str]:
    """The protocol deviations that are not a row of the request-shaping table."""
    return [d for d in v.deviations if not any(d.startswith(f"{m}: ") for m in v.shaping)]


def _deviations(v: SuiteView, own: list[str]) -> str:
    """Every deviation, collapsed under the leaderboard: the protocol's as a list, request shaping as one
    table (model × field) instead of a sentence per model and fact."""
    if not own and not v.shaping:
        return ""
    out = [f"<details id='dev-{esc(v.slug)}'><summary>Protocol deviations ({len(own)}) and request shaping "
           f"({plural(len(v.shaping), 'model')})</summary>"]
    if own:
        out.append("<ul>" + "".join(f"<li>{esc(d)}</li>" for d in own) + "</ul>")
    if v.shaping:
        fields = list(dict.fromkeys(f for r in v.shaping.values() for f in r))
        rows = [{"model": m, **r} for m, r in v.shaping.items()]
        out.append(table(rows, [("model", "model", None), *((f, f, None) for f in fields)]))
    out.append("</details>")
    return "".join(out)


def _omitted(views: list[SuiteView], drawn: set[tuple[str, str]], why: dict[str, str]) -> str:
    gone = [
        f"{v.label} by {AXES[axis].split(' (')[0]}: {why[axis]}"
        for v in views
        for axis in AXES
        if (v.slug, axis) not in drawn
    ]
    return f"<p class='note'>Not drawn — {esc('; '.join(gone))}.</p>" if gone else ""


def frontier_block(views: list[SuiteView], images: dict[str, Path | None], chosen: dict) -> str:
    out = ["<h2 id='frontier'>Value frontier</h2>"]
    drawn = {(v.slug, a) for v in views for a in AXES if any(
        e.accuracy is not None and v.cost(e, a) is not None for e in v.entries)}  # fmt: skip
    if images.get("frontier") is None:
        out.append("<p class='note'>No frontier plot: no model has a known list price or run cost.</p>")
    else:
        out += [
            "<p class='note'>Each model at (cost, score), cost on a log scale. A model is Pareto-optimal "
            "iff no other model costs at most as much and scores at least as well, one of them strictly. "
            "Models whose cost is unknown are listed under each suite's details.</p>",
            img(images["frontier"], "value frontier"),  # type: ignore[arg-type]
            _omitted(views, drawn, WHY_NO_COST),
        ]
    out.append("<h3>Frontier over time</h3>")
    timed = {k for k, s in chosen.items() if s}
    if images.get("frontier_time") is None:
        out.append(
            "<p class='note'>No frontier-over-time plot: no model has both a release date and a known "
            "cost (set release_date in the config or pass --models-table).</p>"
        )
    else:
        why = {
            a: "no model with both a release date and a known "
            + ("list price" if a == "price_in" else "run cost")
            for a in AXES
        }
        out += [
            "<p class='note'>The frontier as it stood at each release date where it changed (only models "
            "released by then); up to six dates per panel, all of them in the tables.</p>",
            img(images["frontier_time"], "frontier over time"),  # type: ignore[arg-type]
            _omitted(views, timed, why),
        ]
    return "\n".join(out)


def render(
    views: list[SuiteView],
    images: dict[str, Path | None],
    notes: list[str],
    runs: list[dict[str, Any]],
    csvs: list[str],
    samples: list[ViewData] | None = None,
    chosen: dict | None = None,
) -> str:
    nmodels = len({e.model for v in views for e in v.entries})
    nav = " · ".join(
        [
            "<a href='#leaderboards'>leaderboards</a>",
            "<a href='#frontier'>value frontier</a>",
            *(f'<a href="#{esc(v.slug)}">{esc(v.label)}</a>' for v in views),
            *(["<a href='#samples'>samples</a>"] if samples and any(s.models for s in samples) else []),
            "<a href='#runs'>runs and notes</a>",
        ]
    )
    run_rows = table(
        runs,
        [
            ("run_dir", "run directory", None),
            ("suite", "suite", None),
            ("models", "models", str),
            ("status", "status", None),
            ("updated", "updated", None),
            ("command", "command", None),
        ],
    )
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'><title>evalsweep report</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>evalsweep report</h1><p class='note'>{plural(nmodels, 'model')}, {plural(len(views), 'suite')}; generated "
        f"{datetime.now().isoformat(timespec='seconds')}. Click a column header to sort.</p>",
        f"<nav class='note'>{nav}</nav>",
        "<h2 id='leaderboards'>Leaderboards</h2>",
        *(headline(v) for v in views),
        frontier_block(views, images, chosen or {}),
        *(suite_section(v, images) for v in views),  # type: ignore[arg-type]
        viewer.section(samples or []),
        "<h2 id='runs'>Runs and notes</h2>" + run_rows,
    ]
    if notes:
        parts.append("<ul class='note'>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>")
    parts.append(
        "<p class='note'>Every number on this page, unrounded: "
        + ", ".join(f'<a href="{esc(c)}">{esc(c)}</a>' for c in csvs)
        + " (next to this page).</p>"
    )
    parts.append(f"<script>{JS}</script></body></html>")
    return "\n".join(parts)
