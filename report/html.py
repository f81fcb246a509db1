"""One self-contained page: inline CSS, PNGs as base64 data URLs, a few lines of JS to sort tables.
Nothing is fetched from a network, so the page works from a laptop, an archive, or an email."""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.term import plural
from report.paper import paper_tables_html
from report.rows import best_worst_rows, group_rows, leaderboard_rows, level_means, levels
from report.tables import AXES, SuiteView, is_fraction
from suites.base import has_paper

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1300px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{margin-top:2.2em;border-bottom:2px solid #ddd}h3{margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}
th,td{padding:3px 8px;border-bottom:1px solid #e5e5e5;text-align:right;white-space:nowrap}
th{background:#f4f4f4;cursor:pointer;user-select:none;position:sticky;top:0;white-space:normal;vertical-align:bottom}
th[data-dir=asc]::after{content:" \\25B2"}th[data-dir=desc]::after{content:" \\25BC"}
td.t,th.t{text-align:left}.na{color:#aaa}.yes{color:#1b7c3c;font-weight:600}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}.note{color:#666;font-size:13px}
details{margin:.5em 0}summary{cursor:pointer;color:#335}
.scroll{overflow-x:auto;max-width:100%}td.w{white-space:normal;overflow-wrap:break-word;max-width:30em;min-width:12em}
.warn{background:#fff6e5;border-left:3px solid #e0a030;padding:.35em .8em;margin:.5em 0;font-size:13px}
.warn ul{margin:.2em 0;padding-left:1.4em}.badge{font-size:12px;font-weight:normal;background:#eef;
border-radius:3px;padding:1px 6px;margin-left:.6em;color:#334}nav a{margin-right:.2em}
"""

# Click a header to sort; again to reverse. Numbers sort as numbers (data-v), unknowns always last.
JS = """
document.querySelectorAll('table.sortable th').forEach(function(th){th.addEventListener('click',function(){
var t=th.closest('table'),b=t.tBodies[0],i=Array.prototype.indexOf.call(th.parentNode.children,th);
var asc=th.dataset.dir!=='asc';t.querySelectorAll('th').forEach(function(h){delete h.dataset.dir});
th.dataset.dir=asc?'asc':'desc';
function key(r){var c=r.cells[i],v=c.hasAttribute('data-v')?c.getAttribute('data-v'):c.textContent.trim();
if(v==='')return null;var n=Number(v);return isNaN(n)?v.toLowerCase():n}
var rows=Array.prototype.slice.call(b.rows);rows.sort(function(r,s){var x=key(r),y=key(s);
if(x===null)return y===null?0:1;if(y===null)return -1;
if(typeof x!==typeof y)return typeof x==='number'?-1:1;var c=x<y?-1:x>y?1:0;return asc?c:-c});
rows.forEach(function(r){b.appendChild(r)})})});
"""

Fmt = Callable[[Any], str]


def esc(s: Any) -> str:
    return html.escape(str(s), quote=True)


def num(digits: int = 3) -> Fmt:
    return lambda x: f"{x:.{digits}g}" if abs(x) < 10**digits else f"{x:,.0f}"


def pct(scale: float) -> Fmt:
    return lambda x: f"{x * scale:.1f}"


def usd(x: float) -> str:
    """Three significant digits without exponents: $0.0000287, $0.0412, $2.5, $1,234."""
    if x == 0 or x >= 100:
        return f"${x:,.0f}"
    decimals = max(2, 2 - math.floor(math.log10(abs(x))))
    return f"${x:.{decimals}f}"


def flag(yes: str, no: str) -> Fmt:
    return lambda x: yes if x else no


def score_columns(metric: str, scale: float) -> list[tuple[str, str, Any]]:
    """The columns every leaderboard starts with: rank, model, the headline with its CI, n."""
    unit = " (%)" if scale == 100 else ""
    return [
        ("rank", "#", str),
        ("display_name", "model", None),
        ("accuracy", metric + unit, pct(scale)),
        ("ci", "95% CI", ci_text(scale)),
        ("n", "n", str),
    ]


def table(rows: list[dict[str, Any]], cols: list[tuple[str, str, Fmt | None]]) -> str:
    """A sortable table; each cell keeps its raw value in data-v so sorting is numeric and exact."""
    head = "".join(f'<th class="{"t" if f is None else ""}">{esc(h)}</th>' for _, h, f in cols)
    body = []
    for r in rows:
        cells = []
        for key, _, f in cols:
            v = r.get(key)
            if v is None or v == "":
                cells.append('<td class="na" data-v="">unknown</td>' if f else '<td class="t na"></td>')
            elif f is None:  # text: long values may wrap, short ones stay on one line
                cells.append(f'<td class="t{" w" if len(str(v)) > 24 else ""}">{esc(v)}</td>')
            else:
                raw = int(v) if isinstance(v, bool) else v[0] if isinstance(v, tuple) else v
                cells.append(f'<td data-v="{esc(raw)}">{esc(f(v))}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        f'<div class="scroll"><table class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def ci_text(scale: float) -> Fmt:
    return lambda r: f"[{r[0] * scale:.1f}, {r[1] * scale:.1f}]"


def _leaderboard(v: SuiteView, scale: float) -> str:
    rows = leaderboard_rows(v)
    for r in rows:
        r["ci"] = (r["ci_lo"], r["ci_hi"]) if r["ci_lo"] is not None else None
        r["weights"] = {True: "open", False: "proprietary"}.get(r["open_weights"], "unknown")
        r["kind"] = {True: "reasoning", False: "non-reasoning"}.get(r["reasoning"], "unknown")
        r["cost_cover"] = f"{r['priced_calls']}/{r['calls']}"
        r["display_name"] = v.name(r["model"])  # † on a model the paper's figures leave out
        if r["run_cost_usd"] is None and r["priced_calls"]:
            r["cost_cover"] += f" (≥ {usd(r['priced_cost_usd'])})"  # the known part, never the total
    return table(
        rows,
        [
            *score_columns(v.metric, scale),
            ("weights", "weights", None),
            ("kind", "type", None),
            ("release_date", "released", None),
            ("price_in", "$/M in", usd),
            ("price_out", "$/M out", usd),
            ("run_cost_usd", "run cost", usd),
            ("cost_cover", "priced calls", None),
            ("cached_input_share", "input from cache (%)", pct(100.0)),
            ("cache_write_tokens", "cache writes", lambda x: f"{x:,}"),
            ("cache_saved_usd", "saved by caching", usd),
            ("error_calls", "errors", str),
            ("on_frontier_price", "frontier (price)", flag("✓", "")),
            ("on_frontier_run_cost", "frontier (run cost)", flag("✓", "")),
        ],
    )


def _named(v: SuiteView, rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Display names on the page (the CSVs keep the run's model names); CI pairs as one cell."""
    out = []
    for r in rows:
        r = {**r, key: v.name(r[key])}
        if r.get("best_ci_lo") is not None:
            r["best_ci"] = (r["best_ci_lo"], r["best_ci_hi"])
        out.append(r)
    return out


def _pivot(
    per: dict[str, dict[str, Any]], v: SuiteView, fmt: Fmt, extra: dict[str, float] | None = None, kind: str = ""
) -> str:
    keys = levels(per, kind)
    rows = [{"model": v.name(m), **{k: d[k].value for k in d}} for m, d in per.items()]
    if extra:
        rows.append({"model": "mean over models", **extra})
    return table(rows, [("model", "model", None)] + [(k, k, fmt) for k in keys])


def _frontier_section(v: SuiteView, scale: float) -> str:
    out = []
    for axis, label in AXES.items():
        front = v.front[axis]
        rows = [
            {
                "model": v.name(p.name),
                "cost": p.cost,
                "acc": p.accuracy,
                "released": p.released.isoformat() if p.released else None,
            }
            for p in front
        ]
        out.append(f"<h4>Pareto-optimal by {esc(label)}: {len(front)} model(s)</h4>")
        out.append(
            table(
                rows,
                [
                    ("model", "model", None),
                    ("cost", "cost", usd),
                    ("acc", v.metric, pct(scale)),
                    ("released", "released", None),
                ],
            )
        )
        if v.unplaced[axis]:
            out.append(
                f'<p class="note">Not placed (cost unknown, so excluded from this frontier): '
                f"{esc(', '.join(v.name(m) for m in v.unplaced[axis]))}.</p>"
            )
        if v.paper_frontier and axis == "price_in":
            out.append(f'<p class="note">Paper: {esc("; ".join(v.paper_frontier))}.</p>')
        if v.left_out:
            out.append(f'<p class="note">Left out, as the paper\'s figures leave them out: '
                       f"{esc(', '.join(v.name(m) for m in v.left_out))}.</p>")  # fmt: skip
        snaps = v.snaps[axis]
        if snaps:
            srows = [
                {
                    "when": s.when.isoformat(),
                    "n": len(s.frontier),
                    "models": ", ".join(v.name(p.name) for p in s.frontier),
                    "new": ", ".join(v.name(m) for m in s.new),
                }
                for s in snaps
            ]
            when = "at the paper's dates" if v.snapshot_dates else "change(s) at release dates"
            out.append(f"<details><summary>Frontier over time ({len(snaps)} {when})</summary>")
            out.append(
                table(
                    srows,
                    [
                        ("when", "as of", None),
                        ("n", "on frontier", str),
                        ("new", "new entrants", None),
                        ("models", "frontier (cheapest first)", None),
                    ],
                )
            )
            undated = [
                e.model for e in v.entries if e.info.release_date is None and v.cost(e, axis) is not None
            ]
            if undated:
                out.append(
                    f'<p class="note">No release date, so not in the snapshots: '
                    f"{esc(', '.join(v.name(m) for m in undated))}.</p>"
                )
            out.append("</details>")
    return "\n".join(out)


def suite_section(v: SuiteView, images: dict[str, Path]) -> str:
    scale = 100.0 if is_fraction(v) else 1.0
    p = pct(scale)
    dirs = sorted({str(e.run_dir) for e in v.entries})
    chance = "" if v.chance is None else f" chance {pct(scale)(v.chance)};"
    out = [
        f'<h2 id="{esc(v.slug)}">Details: {esc(v.label)}</h2>',
        f'<p class="note">Headline metric <b>{esc(v.metric)}</b>{" in %" if scale == 100 else ""}; '
        f"{plural(len(v.entries), 'model')};{chance} run dir(s): {esc(', '.join(dirs))}.</p>",
        "<details><summary>Leaderboard with every column (prices, release dates, priced calls)</summary>",
        _leaderboard(v, scale),
        "</details>",
    ]
    if f"leaderboard_{v.slug}" in images:
        out.append(img(images[f"leaderboard_{v.slug}"], f"{v.label} leaderboard"))
    out += [
        "<h3>Groups</h3>",
        table(
            _named(v, group_rows(v), "best_model"),
            [
                ("grouping", "grouping", None),
                ("group", "group", None),
                ("models", "models", str),
                ("best_model", "best model", None),
                ("best_accuracy", "best", p),
                ("best_ci", "best: 95% CI", ci_text(scale)),
                ("median_accuracy", "median", p),
                ("on_price_frontier", "on price frontier", str),
            ],
        ),
    ]
    if v.left_out:
        out.append(f'<p class="note">† Left out of the groups, the leaderboard plot, the category ranges and '
                   f"the severity lines, as the paper's figures leave them out (scored with "
                   f"<code>--exclude-models none</code> they are kept): "
                   f"{esc(', '.join(v.name(m) for m in v.left_out))}.</p>")  # fmt: skip
    out += ["<h3>Value frontier</h3>", _frontier_section(v, scale)]
    if "by_category" in v.breakdowns:
        out += [
            "<h3>Task categories: best and worst per model</h3>",
            img(images[f"categories_{v.slug}"], "ranges"),
            table(
                _named(v, best_worst_rows(v), "model"),
                [
                    ("model", "model", None),
                    ("best", "best category", None),
                    ("best_value", "best", p),
                    ("worst", "worst category", None),
                    ("worst_value", "worst", p),
                    ("range", "range", p),
                ],
            ),
            "<details><summary>All categories</summary>",
            _pivot(v.breakdowns["by_category"], v, p),
            "</details>",
        ]
    if v.skill_effects:
        out += [
            "<h3>Skill effects (average marginal effect, percentage points)</h3>",
            *(
                img(images[k], "skill effects")
                for k in (f"skills_{v.slug}", f"skill_models_{v.slug}")
                if k in images
            ),
        ]
        rows = [
            {
                "who": v.name(m),
                "skill": s,
                "ame": st.value,
                "ci": (st.lo, st.hi) if st.lo is not None else None,
            }
            for m, d in v.skill_effects.items()
            for s, st in d.items()
        ]
        out.append("<details><summary>Table</summary>" if len(rows) > 20 else "<div>")
        out.append(
            table(
                rows,
                [
                    ("who", "model", None),
                    ("skill", "skill", None),
                    ("ame", "AME (pp)", num(3)),
                    ("ci", "95% CI (pp)", ci_text(1.0)),
                ],
            )
        )
        out.append("</details>" if len(rows) > 20 else "</div>")
        if v.skill_notes:
            out.append(
                '<p class="note">Not estimated: '
                + esc("; ".join(f"{k} ({why})" for k, why in v.skill_notes.items()))
                + ".</p>"
            )
    if "by_skill" in v.breakdowns:
        out += [
            "<details><summary>Accuracy by skill</summary>",
            _pivot(v.breakdowns["by_skill"], v, p),
            "</details>",
        ]
    if "by_severity" in v.breakdowns:
        out += [
            "<h3>Image-quality severity</h3>",
            img(images[f"severity_{v.slug}"], "severity"),
            _pivot(v.breakdowns["by_severity"], v, p, level_means(v, "by_severity"), "by_severity"),
        ]
    if "by_dataset" in v.breakdowns:
        out += ["<h3>By dataset</h3>", _pivot(v.breakdowns["by_dataset"], v, p)]
    if f"thresholds_{v.slug}" in images:
        out += [
            "<h3>Confidence thresholding: validation marks along each threshold</h3>",
            img(images[f"thresholds_{v.slug}"], "thresholding curves"),
        ]
    if f"threshold_marks_{v.slug}" in images:
        out += [
            "<h3>Threshold v/s marks per MCQ type, every year (the authors' released plots)</h3>",
            img(images[f"threshold_marks_{v.slug}"], "threshold v/s marks"),
        ]
    if v.factor_correlation:
        fc = v.factor_correlation
        out += [
            "<h3>Correlation of CHC factor accuracies across models</h3>",
            img(images[f"factors_{v.slug}"], "factor correlation"),
            table([{"factor": a, **fc[a]} for a in fc], [("factor", "factor", None)] + [(b, b, num(2)) for b in fc]),
        ]
    whose = "The paper's" if has_paper(v.suite) else "The suite's"  # (jsonl:, a user's suite: no paper)
    if v.figures:
        out += [f"<h3>{whose} figures, drawn for these runs</h3>", *(img(path, name) for name, path in v.figures)]
    if v.paper_tables:
        out += [f"<h3>{whose} tables</h3>", paper_tables_html(v.paper_tables)]
    return "\n".join(out)
