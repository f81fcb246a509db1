"""`--dry-run`: what an overnight sweep will send and roughly cost, before a cent is spent."""

from __future__ import annotations

from typing import Any

from runner.config import Config
from runner.pool import build_models, estimate_tokens
from suites.base import get_suite


def estimate(
    plans: list[Any], cfg: Config, batch: str = "off", deadline_s: float = 8 * 3600.0, prefer: str = "latency"
) -> list[dict[str, Any]]:
    from runner.batch.plan import batch_discount, decide, live_seconds
    from runner.run import judges_of

    models = build_models(cfg, [m for p in plans for m in [*p.models, *judges_of(p.spec)]])
    out = []
    for p in plans:
        suite = get_suite(p.spec.suite)
        if suite.check is not None:
            suite.check(p.spec)
        calls = tin = tout = 0
        for r in suite.build(p.spec):
            n = r.decoding.n
            calls += n
            est = estimate_tokens(r)
            mx = r.decoding.max_tokens or 256
            tin += (est - mx) * n
            tout += mx * n
        for name in p.models:
            m = models[name]
            cost = m.cost(tin, tout)
            live_s = live_seconds(m, calls, tin / max(calls, 1), tout / max(calls, 1))
            disc = batch_discount(m)
            out.append(
                {
                    "run": suite.run_name(p.spec),
                    "model": name,
                    "calls": calls,
                    "input_tokens": tin,
                    "max_output_tokens": tout,
                    "est_cost_usd_max": cost,
                    "est_input_cost_usd": m.cost(tin, 0),
                    "est_live_s": live_s,
                    "batch_cost_usd_max": None if disc is None or cost is None else cost * (1 - disc),
                    "batch_supported": disc is not None,
                    "mode": "batch" if decide(m, batch, deadline_s, prefer, live_s) else "live",
                }
            )
    return out


def dry_run(
    plans: list[Any], cfg: Config, batch: str = "off", deadline_s: float = 8 * 3600.0, prefer: str = "latency"
) -> int:
    from rich.table import Table

    from runner.batch.plan import BATCH_WALL, fmt_duration
    from runner.term import console

    rows = estimate(plans, cfg, batch, deadline_s, prefer)
    t = Table(title="dry run: first-pass calls (follow-up passes such as critique/judge come on top)")
    for c in (
        "run",
        "model",
        "calls",
        "input tokens (est)",
        "output tokens (max)",
        "input cost",
        "cost (max)",
        "live time",
        "batch cost (max)",
        "batch time",
        "mode",
    ):
        t.add_column(c)
    money = lambda x: "?" if x is None else f"${x:,.2f}"  # noqa: E731
    for d in rows:
        t.add_row(
            d["run"],
            d["model"],
            f"{d['calls']:,}",
            f"{d['input_tokens']:,}",
            f"{d['max_output_tokens']:,}",
            money(d["est_input_cost_usd"]),
            money(d["est_cost_usd_max"]),
            fmt_duration(d["est_live_s"]),
            money(d["batch_cost_usd_max"]) if d["batch_supported"] else "-",
            BATCH_WALL if d["batch_supported"] else "-",
            d["mode"],
        )
    console().print(t)
    total = [d["est_cost_usd_max"] for d in rows]
    if all(x is not None for x in total):
        print(
            f"total (max): ${sum(total):,.2f}; unknown prices show '?' (set price_in/price_out in the config)"
        )
    chosen = [d["batch_cost_usd_max"] if d["mode"] == "batch" else d["est_cost_usd_max"] for d in rows]
    if any(d["mode"] == "batch" for d in rows) and all(x is not None for x in chosen):
        print(f"total (max) with --batch {batch}: ${sum(chosen):,.2f}")
    print(
        "live time: rough, from RPM/TPM/concurrency and ~1 s + output at 50 tok/s per call; "
        "batches finish within 24 h, most within about an hour"
    )
    return 0
