"""What a person watching an overnight sweep sees: on a terminal, a live view fitted to its width and
height (cli.live) with warnings printed above it, where they stay; elsewhere (CI, nohup, a log
file) one summary line per interval for the whole sweep, plus a line for each model or lane whose
state changed. Reads the scheduler's counters; never touches the hot path."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from cli.live import (
    cost_cell,
    eta_range,
    fit_line,
    fmt_eta,
    fmt_rate,
    fmt_tokens,
    screen,
    summary_parts,
    sweep_eta,
)
from runner.eta import Live
from runner.state import RunCtx, Stats

log = logging.getLogger("evalsweep")


def _eta_s(st: Stats, counted: bool = True) -> float | None:
    """Seconds left at this model's rate of fresh answers; 0 when done, None before any answer or before
    its run's plan is counted (`counted`: a total of 0 then is no `done`): the fallback until the forecast
    (runner.eta.Live) has one, and for a batched model."""
    if not counted:
        return None
    elapsed = time.monotonic() - st.started
    fresh = st.done - st.cached
    remaining = st.total - st.done - st.resumed
    if remaining <= 0:
        return 0.0
    if fresh <= 0 or elapsed <= 0:
        return None
    return remaining / (fresh / elapsed)


def snapshot(runs: list[RunCtx], state: Callable[[str], str] | None = None, eta: Live | None = None
             ) -> list[dict[str, Any]]:
    """One dict per (run, model): first-pass rows done (resumed included) of total, resumed and cached
    apart, `state`, the worst of the model's lanes (`down`, `retrying`...), and the ETA of all its passes
    from the forecast (`eta`: `eta_s` expected, its range `eta_low_s` to `eta_most_s`: runner.forecast), else
    at its rate of first-pass answers (the range None)."""
    out = []
    names = [r.name for r in runs]
    for i, r in enumerate(runs):
        label = r.name if names.count(r.name) == 1 else f"{r.name} ({r.run_dir.name})"
        counted = r.loaded is None or r.loaded.is_set()
        for m in r.models:
            st = r.stats.setdefault(m, Stats())
            elapsed = max(1e-9, time.monotonic() - st.started)
            fc = eta.eta(i, m) if eta is not None else None
            eta_s, low, most = (_eta_s(st, counted), None, None) if fc is None else fc
            out.append(
                {
                    "run": label,
                    "model": m,
                    "done": st.done + st.resumed,
                    "total": st.total,
                    "rps": (st.done - st.cached) / elapsed,
                    "tokens": st.input_tokens + st.output_tokens,
                    "cached_in": st.cached_input_tokens / st.input_tokens if st.input_tokens else 0.0,
                    "cost": st.cost_usd if st.cost_known else None,
                    "errors": st.errors,
                    "skipped": st.skipped - st.halted,
                    "halted": st.halted,
                    "exhausted": st.exhausted,
                    "retries": st.retries,
                    "cached": st.cached,
                    "resumed": st.resumed,
                    "eta_s": eta_s,
                    "eta_low_s": low,
                    "eta_most_s": most,
                    "eta": fmt_eta(eta_s) + eta_range(eta_s, low, most),
                    "state": state(m) if state is not None else "",
                    "batches": r.batcher.describe(m) if r.batcher is not None else "",
                }
            )
    return out


def _line(d: dict[str, Any]) -> str:
    """One model, for a log file."""
    return (
        f"[{d['run']}] {d['model']}: {d['done']}/{d['total']} {fmt_rate(d['rps'])} "
        f"tok {fmt_tokens(d['tokens'])} {cost_cell(d)} err {d['errors']} skip {d['skipped']} "
        f"retry {d['retries']} resumed {d['resumed']} cached {d['cached']} ETA {d['eta']}"
        + (f" not sent {d['halted']}" if d.get("halted") else "")  # (after a Ctrl-C: neither err nor skip)
        + (f" lane {d['state']}" if d["state"] not in ("", "ok") else "")
        + (f" batches: {d['batches']}" if d["batches"] else "")
    )


def sweep_line(rows: list[dict[str, Any]], spend: str = "") -> str:
    n_runs = len({d["run"] for d in rows})
    head = f"progress ({n_runs} run{'s' * (n_runs != 1)}, {len(rows)} model-runs):"
    return fit_line(head, summary_parts(rows, sweep_eta(rows), spend, sweep_eta(rows, most=True),
                                        sweep_eta(rows, low=True)), 10_000)


def _lanes_table(lanes: list[dict[str, Any]]) -> Any:
    """Every lane's limit, its source, use and state (tests and wide terminals)."""
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
    state = d["stopped"] or d.get("state") or ("slowed" if d["factor"] < 1 else "ok")
    if d.get("error"):
        state += f": {d['error']}"
    return [d["lane"], lim, src, use, str(d["rate_limited"]), f"{d['factor']:.2f}", state]


def _state_key(d: dict[str, Any]) -> tuple[bool, bool, str]:
    return (d["done"] >= d["total"], d["errors"] + d["skipped"] > 0, d["state"] or "ok")


class _ConsoleLog(logging.Handler):
    """Log records printed through the live view's console: above the live area, where they stay."""

    def __init__(self, console: Any) -> None:
        super().__init__(logging.INFO)
        self.console = console
        self.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.console.print(self.format(record), markup=False, highlight=False, soft_wrap=True)
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def _logs_above(console: Any) -> Iterator[None]:
    """While the live view runs, log lines meant for the terminal go through its console (a plain
    stream handler would write over the live area and leave stale copies of it behind), and typed
    keys (^C) are not echoed into it."""
    root = logging.getLogger()
    tty = [
        h
        for h in root.handlers
        if type(h) is logging.StreamHandler and getattr(h, "stream", None) in (sys.stderr, sys.stdout)
    ]
    for h in tty:
        root.removeHandler(h)
    mine = _ConsoleLog(console)
    root.addHandler(mine)
    echo = _no_echo()
    try:
        yield
    finally:
        echo()
        root.removeHandler(mine)
        for h in tty:
            root.addHandler(h)


def _no_echo() -> Callable[[], None]:
    """Turn off the terminal's echo of typed keys (^C included); returns the undo. Stdin that is no
    terminal (nohup, a pipe, </dev/null) has no echo to turn off: nothing to do, never an error."""
    try:
        import termios

        fd = sys.stdin.fileno()
        if not os.isatty(fd):
            return lambda: None
        old = termios.tcgetattr(fd)
        new = list(old)
        new[3] &= ~(termios.ECHO | getattr(termios, "ECHOCTL", 0))
        termios.tcsetattr(fd, termios.TCSANOW, new)
    except Exception:  # termios.error is no OSError; a closed or odd stdin: keep the echo
        return lambda: None

    def undo() -> None:
        with contextlib.suppress(Exception):  # the terminal may be gone by now (SIGHUP)
            termios.tcsetattr(fd, termios.TCSANOW, old)

    return undo


async def watch(
    runs: list[RunCtx],
    *,
    live: bool | None = None,
    every_s: float = 10.0,
    lanes: Callable[[], list[dict[str, Any]]] | None = None,
    state: Callable[[str], str] | None = None,
    spend: Callable[[], str] | None = None,
    eta: Live | None = None,
) -> None:
    """Until cancelled: refresh the live view (TTY), or every `every_s` log the sweep's summary line
    and a line per model or lane whose state changed. `lanes` describes each lane (limit, source,
    use, state); `state` gives a model's lane state; `spend` the spend ceilings (`spent $0.12/$0.20`);
    `eta` the live forecast, kept fresh here (runner.eta.Live.run) and read by every line."""
    lanes = lanes or list
    live = sys.stderr.isatty() if live is None else live
    keep = asyncio.create_task(eta.run()) if eta is not None else None
    try:
        if live:
            await _watch_live(runs, lanes, state, spend, eta)
        else:
            await _watch_log(runs, lanes, state, every_s, spend, eta)
    finally:
        if keep is not None:
            keep.cancel()


async def _watch_live(
    runs: list[RunCtx],
    lanes: Callable[[], list[dict[str, Any]]],
    state: Callable[[str], str] | None,
    spend: Callable[[], str] | None = None,
    eta: Live | None = None,
) -> None:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    console = Console(stderr=True)

    def view() -> Any:
        w, h = console.size
        # a few lines above the area stay for the latest warnings; never taller than the terminal
        lines = screen(snapshot(runs, state, eta), lanes(), w, max(3, min(h - 1, max(8, h - 6))), spend() if spend else "")
        return Text("\n".join(lines), no_wrap=True, overflow="crop")

    with _logs_above(console), Live(
        view(), console=console, refresh_per_second=2, transient=False, auto_refresh=False
    ) as lv:
        try:
            while True:
                await asyncio.sleep(0.5)
                lv.update(view(), refresh=True)
        finally:
            lv.update(view(), refresh=True)


async def _watch_log(
    runs: list[RunCtx],
    lanes: Callable[[], list[dict[str, Any]]],
    state: Callable[[str], str] | None,
    every_s: float,
    spend: Callable[[], str] | None = None,
    eta: Live | None = None,
) -> None:
    seen = {(d["run"], d["model"]): _state_key(d) for d in snapshot(runs, state, eta)}
    lane_seen = {ln["lane"]: ln.get("state", "ok") for ln in lanes()}

    def changes(rows: list[dict[str, Any]]) -> None:
        for d in rows:
            k = _state_key(d)
            if seen.get((d["run"], d["model"])) != k:
                seen[(d["run"], d["model"])] = k
                log.info(_line(d))
        for ln in lanes():
            if lane_seen.get(ln["lane"], "ok") != ln.get("state", "ok"):
                lane_seen[ln["lane"]] = ln.get("state", "ok")
                log.info("lane %s", " ".join(_lane_cells(ln)))

    try:
        while True:
            await asyncio.sleep(every_s)
            rows = snapshot(runs, state, eta)
            log.info(sweep_line(rows, spend() if spend else ""))
            changes(rows)
    finally:
        rows = snapshot(runs, state, eta)
        changes(rows)
        log.info(sweep_line(rows, spend() if spend else ""))
        for run in dict.fromkeys(d["run"] for d in rows):
            mine = [d for d in rows if d["run"] == run]
            log.info(fit_line(f"[{run}]", summary_parts(mine, sweep_eta(mine), most_s=sweep_eta(mine, most=True),
                                                        low_s=sweep_eta(mine, low=True)), 10_000))
        for d in rows:  # batch runs: where each model's batches stand
            if d["batches"]:
                log.info(_line(d))
