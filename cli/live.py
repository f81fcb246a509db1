"""The live view's layout, fitted to the terminal: pure functions from counters to lines of text.

At any width every model's name, done/total, rate, cost, errors and ETA stay whole: low-value columns
(lane state, retries, resumed, cached, tokens, batches) are dropped first, then long model names are
abbreviated by rule (a prefix every model shares goes into the header, then the middle of a name gives
way, never two names alike). Models are grouped under their run. When the rows do not fit the
terminal's height, each run keeps its summary line and the rows that matter are shown: models with
errors or a lane in trouble first, then the slowest (latest ETA); a last line counts the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.term import ELLIPSIS, abbreviate  # noqa: F401  (names shortened as every table does)
from runner.lanes import STATE_RANK, worst_state  # noqa: F401  (the view ranks lane states)

NAME_MIN = 12


def fmt_tokens(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(n)


def fmt_cost(x: float | None) -> str:
    if x is None:
        return "?"
    if x >= 1000:
        return f"${x:,.0f}"
    return f"${x:.2f}" if x >= 1 or x == 0 else f"${x:.3f}" if x >= 0.001 else "<$0.001"


def cost_cell(d: dict[str, Any]) -> str:
    """A model's cost, and the share of its input read from the providers' prompt caches: `$1.20 c40%`."""
    return fmt_cost(d["cost"]) + (f" c{d['cached_in']:.0%}" if d.get("cached_in") else "")


def fmt_eta(s: float | None) -> str:
    """`done`, `?` (no rate yet) or the time left."""
    if s is None:
        return "?"
    if s <= 0:
        return "done"
    return f"{s / 3600:.1f}h" if s >= 3600 else f"{s / 60:.1f}m" if s >= 60 else f"{max(1, round(s))}s"


def eta_range(eta_s: float | None, low: float | None, most: float | None) -> str:
    """` (low-high)` after an ETA where the forecast's range is wider than its rounding, else nothing."""
    if not eta_s or most is None:
        return ""
    lo = eta_s if low is None else min(low, eta_s)
    if most <= eta_s * 1.05 and lo >= eta_s * 0.95:
        return ""
    return f" ({fmt_eta(lo)}-{fmt_eta(max(most, eta_s))})"


def fmt_rate(r: float) -> str:
    return f"{r:.0f}/s" if r >= 100 else f"{r:.1f}/s"


COLUMNS: list[tuple[str, str, Callable[[dict[str, Any]], str]]] = [
    ("done", "done/total", lambda d: f"{d['done']}/{d['total']}"),
    ("rate", "rate", lambda d: fmt_rate(d["rps"])),
    ("cost", "cost", lambda d: cost_cell(d)),
    ("errors", "err", lambda d: str(d["errors"]) + (f"({d['exhausted']}x)" if d.get("exhausted") else "")
     + (f"+{d['skipped']}s" if d["skipped"] else "")),
    ("eta", "ETA", lambda d: fmt_eta(d["eta_s"])),
    ("state", "lane", lambda d: d["state"] or "-"),
    ("retries", "retry", lambda d: str(d["retries"])),
    ("resumed", "resumed", lambda d: str(d["resumed"])),
    ("cached", "cached", lambda d: str(d["cached"])),
    ("tokens", "tokens", lambda d: fmt_tokens(d["tokens"])),
    ("batches", "batches", lambda d: d["batches"] or "-"),
]
MANDATORY = 5
NAME_WANT = 24
"""A name column narrower than this (or than the longest name) is widened before optional columns."""


def _fit_columns(rows: list[dict[str, Any]], width: int) -> tuple[list[int], list[int], int]:
    """Which columns are shown, their widths, and the name column's width."""
    cells = [[f(d) for d in rows] for _, _, f in COLUMNS]
    widths = [max([len(h), *map(len, c)]) for (_, h, _), c in zip(COLUMNS, cells, strict=True)]
    longest = max([len("model"), *(len(d["model"]) for d in rows)])
    shown = list(range(MANDATORY))
    empty = {"batches": not any(d["batches"] for d in rows), "state": not any(d["state"] for d in rows)}

    def name_room(cols: list[int]) -> int:
        return width - sum(widths[i] + 1 for i in cols)

    for i in range(MANDATORY, len(COLUMNS)):
        if empty.get(COLUMNS[i][0]):  # no batches, no lanes to watch (simulated models)
            continue
        if name_room([*shown, i]) >= min(longest, NAME_WANT):
            shown.append(i)
    return shown, widths, max(NAME_MIN, min(longest, name_room(shown)))


def _row(name: str, vals: list[str], widths: list[int], name_w: int) -> str:
    return name.ljust(name_w) + "".join(" " + v.rjust(w) for v, w in zip(vals, widths, strict=True))


def summary_parts(rows: list[dict[str, Any]], eta_s: float | None, spend: str = "", most_s: float | None = None,
                  low_s: float | None = None) -> list[tuple[int, str]]:
    """(priority, text) pieces of a summary (a run's or the sweep's); lower priority is kept longer.
    `spend`: the spend ceilings (`spent $0.12/$0.20`), kept as long as the cost; `low_s`-`most_s`: the
    forecast's range (runner.forecast), said after the ETA where there is room."""
    done, total = sum(d["done"] for d in rows), sum(d["total"] for d in rows)
    known = sum(d["cost"] for d in rows if d["cost"] is not None)
    cost = fmt_cost(known) + ("+?" if any(d["cost"] is None for d in rows) else "")  # +?: a model unpriced
    errors = sum(d["errors"] + d["skipped"] for d in rows)  # (calls a Ctrl-C left unsent are neither)
    halted = sum(d.get("halted", 0) for d in rows)
    resumed, cached = sum(d["resumed"] for d in rows), sum(d["cached"] for d in rows)
    pct = f" ({100 * done / total:.0f}%)" if total else ""
    parts = [
        (0, f"{done}/{total}{pct}"),
        (1, fmt_rate(sum(d["rps"] for d in rows))),
        (1, cost),
        (1, f"spent {spend}") if spend else (9, ""),
        (0, f"err {errors}"),
        (2, f"not sent {halted}") if halted else (9, ""),
        (3, f"retry {sum(d['retries'] for d in rows)}"),
        (2, f"resumed {resumed}") if resumed else (9, ""),
        (2, f"cached {cached}") if cached else (9, ""),
        (0, f"ETA {fmt_eta(eta_s)}"),
        (4, eta_range(eta_s, low_s, most_s).strip()) if eta_range(eta_s, low_s, most_s) else (9, ""),
    ]
    return [p for p in parts if p[1]]


def fit_line(head: str, parts: list[tuple[int, str]], width: int) -> str:
    """`head` and the parts that fit in `width`, the least important dropped first, order kept."""
    keep = list(parts)
    while True:
        line = "  ".join([head, *(t for _, t in keep)])
        if len(line) <= width or not keep:
            return line[:width]
        worst = max(range(len(keep)), key=lambda i: (keep[i][0], i))
        keep.pop(worst)


def sweep_eta(rows: list[dict[str, Any]], most: bool = False, low: bool = False) -> float | None:
    """A sweep's (or run's) ETA. From the forecast (every row has one: `eta_most_s` set), its latest
    model's, every pass and lane counted (runner.eta.Live; `most`, `low`: its range's ends);
    else its first-pass rows left at its present rate of fresh answers (its models share lanes, so a
    model not started yet waits for the others, not forever), and no sooner than the forecast of those
    that have one; 0 when all are done, None while a row's is unknown (a run's plan not counted yet: its
    total of 0 is no `done`)."""
    known = [d for d in rows if d.get("eta_most_s") is not None]
    if rows and len(known) == len(rows):
        key = "eta_most_s" if most else "eta_low_s" if low else "eta_s"
        return max(d["eta_s"] if d.get(key) is None else d[key] for d in rows)
    if most or low:
        return None
    left = sum(max(0, d["total"] - d["done"]) for d in rows)
    if left == 0:
        return 0.0 if all(d["eta_s"] is not None for d in rows) else None
    rate = sum(d["rps"] for d in rows)
    return max([left / rate, *(d["eta_s"] for d in known)]) if rate > 0 else None


def _urgency(d: dict[str, Any]) -> tuple[int, float]:
    """Trouble first (errors, a lane down or retrying), then the slowest running models, then those
    not started, then the finished."""
    trouble = d["errors"] + d["skipped"] > 0 or STATE_RANK.get(d["state"], 0) < STATE_RANK["slowed"]
    if trouble:
        return (0, 0.0)
    if d["eta_s"] is None:
        return (2, 0.0)
    return (1, -d["eta_s"]) if d["eta_s"] > 0 else (3, 0.0)


def screen(
    rows: list[dict[str, Any]], lanes: list[dict[str, Any]], width: int, height: int, spend: str = ""
) -> list[str]:
    """The live view as lines of at most `width` characters, at most `height` of them; `spend`: the
    spend ceilings on the sweep's line."""
    width = max(width, 40)
    runs = list(dict.fromkeys(d["run"] for d in rows))
    shown, widths, name_w = _fit_columns(rows, width - 2)
    names, prefix = abbreviate(list(dict.fromkeys(d["model"] for d in rows)), name_w)
    head = "model" + (f" ({prefix}*)" if prefix else "")
    header = "  " + _row(head[:name_w], [COLUMNS[i][1] for i in shown], [widths[i] for i in shown], name_w)
    out = [fit_line("evalsweep", summary_parts(rows, sweep_eta(rows), spend, sweep_eta(rows, most=True),
                                               sweep_eta(rows, low=True)), width),
           header]
    bad = [ln for ln in lanes if ln.get("state", "ok") not in ("ok", "")]
    lane_lines = [_lane_line(ln, width) for ln in bad[:4]]
    if lanes:
        more = len(bad) - len(lane_lines)
        ok = len(lanes) - len(bad)
        lane_lines.append(f"lanes: {ok} ok" + (f", {more} more in trouble" if more > 0 else ""))
    room = height - len(out) - len(runs) - len(lane_lines)
    picked = rows
    if len(rows) > room:
        room = max(0, room - 1)  # the "+N more" line
        picked = sorted(rows, key=_urgency)[:room]
    keep = {id(d) for d in picked}
    for run in runs:
        mine = [d for d in rows if d["run"] == run]
        out.append(fit_line(f"▸ {run}", summary_parts(mine, sweep_eta(mine), most_s=sweep_eta(mine, most=True),
                                                      low_s=sweep_eta(mine, low=True)),
                            width))
        for d in mine:
            if id(d) in keep:
                vals = [COLUMNS[i][2](d) for i in shown]
                out.append("  " + _row(names[d["model"]], vals, [widths[i] for i in shown], name_w))
    if len(picked) < len(rows):
        rest = [d for d in rows if id(d) not in keep]
        fine = sum(1 for d in rest if _urgency(d)[0])
        waiting = sum(1 for d in rest if d["eta_s"] is None)
        done = sum(1 for d in rest if d["eta_s"] == 0)
        # no ETA of their own here: a model's rate alone disagrees with the sweep's ETA on the first line
        # (models share lanes), and two ETAs on one screen leave the reader to guess which is true
        out.append(
            f"+ {len(rest)} more models ({fine} without errors"
            + (f", {waiting} not started" if waiting else "")
            + (f", {done} done" if done else "")
            + ")"
        )
    return out + lane_lines


def _lane_line(ln: dict[str, Any], width: int) -> str:
    why = ln.get("error") or ln.get("stopped") or ""
    return (f"lane {ln['lane']}: {ln.get('state')}" + (f": {why}" if why else ""))[:width]
