"""What a person watching an overnight sweep sees: a rich live table per model on a terminal, plain log
lines elsewhere (CI, nohup, a log file). Reads the scheduler's counters; never touches the hot path."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

from runner.state import RunCtx, Stats

log = logging.getLogger("evalsweep")


def _fmt_tokens(n: int) -> str:
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(n)


def _eta(st: Stats) -> str:
    elapsed = time.monotonic() - st.started
    fresh = st.done - st.cached
    remaining = st.total - st.done - st.resumed
    if remaining <= 0:
        return "done"
    if fresh <= 0 or elapsed <= 0:
        return "?"
    s = remaining / (fresh / elapsed)
    return f"{s / 3600:.1f}h" if s >= 3600 else f"{s / 60:.1f}m" if s >= 60 else f"{s:.0f}s"


def snapshot(runs: list[RunCtx]) -> list[dict[str, Any]]:
    out = []
    for r in runs:
        for m in r.models:
            st = r.stats.setdefault(m, Stats())
            elapsed = max(1e-9, time.monotonic() - st.started)
            out.append(
                {
                    "run": r.name,
                    "model": m,
                    "done": st.done + st.resumed,
                    "total": st.total,
                    "rps": (st.done - st.cached) / elapsed,
                    "tokens": st.input_tokens + st.output_tokens,
                    "cost": st.cost_usd if st.cost_known else None,
                    "errors": st.errors,
                    "skipped": st.skipped,
                    "retries": st.retries,
                    "cached": st.cached + st.resumed,
                    "eta": _eta(st),
                    "batches": r.batcher.describe(m) if r.batcher is not None else "",
                }
            )
    return out


def _line(d: dict[str, Any]) -> str:
    cost = "?" if d["cost"] is None else f"${d['cost']:.4f}"
    return (
        f"[{d['run']}] {d['model']}: {d['done']}/{d['total']} {d['rps']:.1f} req/s "
        f"tok {_fmt_tokens(d['tokens'])} {cost} err {d['errors']} skip {d['skipped']} "
        f"retry {d['retries']} cached {d['cached']} ETA {d['eta']}"
        + (f" batches: {d['batches']}" if d["batches"] else "")
    )


def _table(runs: list[RunCtx]) -> Any:
    from rich.table import Table

    t = Table(title="evalsweep", expand=False)
    batches = any(r.batcher is not None for r in runs)
    for col in (
        "run",
        "model",
        "done/total",
        "req/s",
        "tokens",
        "cost",
        "errors",
        "retries",
        "cached",
        "ETA",
        *(["batches"] if batches else []),
    ):
        t.add_column(col, justify="left" if col in ("run", "model", "batches") else "right")
    for d in snapshot(runs):
        cost = "?" if d["cost"] is None else f"${d['cost']:.4f}"
        err = f"{d['errors']}" + (f" (+{d['skipped']} skipped)" if d["skipped"] else "")
        t.add_row(
            d["run"],
            d["model"],
            f"{d['done']}/{d['total']}",
            f"{d['rps']:.1f}",
            _fmt_tokens(d["tokens"]),
            cost,
            err,
            str(d["retries"]),
            str(d["cached"]),
            d["eta"],
            *([d["batches"]] if batches else []),
        )
    return t


def _lanes_table(lanes: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    t = Table(title="lanes", expand=False)
    for col in ("lane", "limit", "source", "use", "429s", "factor", "state"):
        t.add_column(col, justify="left" if col in ("lane", "source", "state") else "right")
    for d in lanes:
        t.add_row(*_lane_cells(d))
    return t


def _lane_cells(d: dict[str, Any]) -> list[str]:
    lim = " ".join(f"{d[k]:g} {k}" for k in ("rpm", "tpm") if d[k]) or "none"
    src = "/".join(sorted({d[f"{k}_source"] for k in ("rpm", "tpm") if d[k]})) or "-"
    use = f"{d['rpm_used']:.0f}/min" + (f" ({d['use']:.0%})" if d["use"] is not None else "")
    state = d["stopped"] or ("slowed" if d["factor"] < 1 else "ok")
    return [d["lane"], lim, src, use, str(d["rate_limited"]), f"{d['factor']:.2f}", state]


async def watch(
    runs: list[RunCtx],
    *,
    live: bool | None = None,
    every_s: float = 10.0,
    lanes: Callable[[], list[dict[str, Any]]] | None = None,
) -> None:
    """Until cancelled: refresh the live view (TTY) or log a line per model every `every_s`; with
    `lanes`, also each lane's limit, its source and use."""
    lanes = lanes or list
    live = sys.stderr.isatty() if live is None else live
    if live:
        from rich.console import Console, Group
        from rich.live import Live

        def view() -> Any:
            ls = lanes()
            return Group(_table(runs), _lanes_table(ls)) if ls else _table(runs)

        with Live(view(), console=Console(stderr=True), refresh_per_second=2, transient=False) as lv:
            try:
                while True:
                    await asyncio.sleep(0.5)
                    lv.update(view())
            finally:
                lv.update(view())
    else:
        try:
            while True:
                await asyncio.sleep(every_s)
                for d in snapshot(runs):
                    log.info(_line(d))
                for ln in lanes():
                    log.info("lane %s", " ".join(_lane_cells(ln)))
        finally:
            for d in snapshot(runs):
                log.info(_line(d))
