"""`--dry-run`: what an overnight sweep still has to send and roughly cost, before a cent is spent.

Plans the remaining work only: rows already finished in the run directory (what a rerun resumes) and
answers already in the cache (what a rerun replays for free) are counted, not priced. Cost comes as
expected (output tokens at this model's mean in the run so far, else the suite's typical answer plus
half of a reasoning model's budget, else half of the limit) and max (every call writes its whole limit,
reasoning budget included). A model without a price adds "+ unknown for models X" to the totals instead of
making them disappear. Where the history knows how a model's output tokens spread (runner.history.token_var),
the expected bill and the wall come with their 80% range (runner.forecast.LEVEL): reasoning models bill past their
limit, so "max" does not bound them, a TPM lane's end moves with its token total, and every lane's with its last
calls (where the history knows its latencies' spread).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cache.disk import probe
from runner.config import Config
from runner.forecast import LEVEL, Forecast, Z, around, wall
from runner.pool import build_models
from runner.remaining import remaining
from suites.base import get_suite

FORECAST: list[Forecast] = []
"""The last estimate's wall-time forecast (runner.forecast), for `dry_run` to print."""


def estimate(
    plans: list[Any],
    cfg: Config,
    batch: str = "off",
    deadline_s: float = 8 * 3600.0,
    prefer: str = "latency",
    cache_dir: Path | None = None,
    keep_going: bool = False,
    max_cost: float | None = None,
) -> tuple[list[dict[str, Any]], list[str], list[Any]]:
    """One dict per (run, model), each run's deviations from its paper as the run will say them, and the
    spend ceilings as the run would start them (runner.calls.spend: an unpriced model under one is refused);
    `cache_dir` None: no cache is read (`--no-cache`, `--refresh`)."""
    from runner import history
    from runner.batch.plan import batch_discount, decide, live_seconds
    from runner.calls import learned
    from runner.calls.spend import attach
    from runner.deviations import block, of_manifest
    from runner.preflight import preflight
    from runner.protocol import judges_of, protocol_deviations, request_shaping
    from runner.resume import check_settings
    from runner.settings import check_dir

    models = build_models(cfg, [m for p in plans for m in [*p.models, *judges_of(p.spec)]])
    learned.attach(models, cache_dir)  # what earlier runs learned from refusals, said as the run says it
    ceilings = attach(models, max_cost, [p.out or Path("runs") / get_suite(p.spec.suite).run_name(p.spec) for p in plans])
    said = []
    for p in plans:
        suite = get_suite(p.spec.suite)
        devs, per_model = protocol_deviations(suite, p.spec, models, list(p.models))
        man = {"run_name": suite.run_name(p.spec), "suite": p.spec.suite,
               "protocol": {"deviations": devs + per_model},
               "model_deviations": per_model,
               "request_shaping": request_shaping(suite, p.spec, models, list(p.models))}
        said.append(of_manifest(man, p.out))
    lines = block(said)
    for p in plans:  # what the real run refuses, refused here too, before any network
        if p.out is not None:
            check_settings(p.out, p.spec)
            check_dir(p.out, cfg, list(p.models))
    preflight(models, keep_going)
    with probe(cache_dir) as in_cache:
        todo = remaining(plans, models, in_cache,
                         prior=lambda m, out: history.prior(cache_dir, models[m].cache_id, out))
    FORECAST.clear()
    fc = wall(todo, models, fresh=True)
    if fc is not None:
        FORECAST.append(fc)
    rows = []
    for t in todo:
        m = models[t.model]
        exp_out = t.expected_output_tokens()
        f_calls, f_most, f_exp, f_max = _follow_costs(t, models)
        cost = _plus(m.cost(t.input_tokens, t.max_output_tokens), f_max)
        live_s = live_seconds(
            m, t.calls + f_calls, t.input_tokens / max(t.calls, 1), t.max_output_tokens / max(t.calls, 1)
        )
        disc = batch_discount(m)
        exp = _plus(m.cost(t.input_tokens, round(exp_out)), f_exp)
        var = _cost_var(t, models)
        rows.append(
            {
                "run": t.run,
                "model": t.model,
                "calls": t.calls,
                "follow_calls": f_calls,
                "follow_calls_max": f_most,
                "follow_passes": {k: v[:2] for k, v in t.follow.items()},
                "finished": t.finished,
                "cached": t.cached,
                "input_tokens": t.input_tokens,
                "max_output_tokens": t.max_output_tokens,
                "est_cost_usd": exp,
                "est_cost_usd_max": cost if cost is None or exp is None else max(cost, exp),  # (past the limit)
                "est_cost_usd_var": var,
                "est_input_cost_usd": m.cost(t.input_tokens, 0),
                "est_live_s": live_s,
                "batch_cost_usd_max": None if disc is None or cost is None else cost * (1 - disc),
                "batch_supported": disc is not None,
                "mode": "batch" if t.calls and decide(m, batch, deadline_s, prefer, live_s) else "live",
            }
        )
    return rows, lines, ceilings


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _follow_costs(t: Any, models: dict[str, Any]) -> tuple[int, int, float | None, float | None]:
    """The follow-up passes still to make: (calls expected, calls at most, expected cost, max cost),
    each pass priced at the model it calls (a judge at the judge's price)."""
    calls = most = 0
    exp: float | None = 0.0
    mx: float | None = 0.0
    for pass_, (n, n_most, tin, max_out) in t.follow.items():
        pm = models[t.follow_via.get(pass_) or t.model]
        calls, most = calls + n, most + n_most
        per_in = tin / n_most if n_most else 0
        exp = _plus(exp, pm.cost(round(per_in * n), round(t.follow_expected_output_tokens(pass_))))
        mx = _plus(mx, pm.cost(tin, max_out))
    return calls, most, exp, mx


def _cost_var(t: Any, models: dict[str, Any]) -> float | None:
    """The variance of the plan's expected cost: its passes' output totals' (runner.remaining.Plan.output_var)
    at the output price of the model each calls (input is counted, not drawn); None: a pass unpriced."""
    var = 0.0
    for pass_ in ["answer", *t.follow]:
        v = t.output_var(pass_)
        if v:
            per = models[t.follow_via.get(pass_) or t.model].cost(0, 1_000_000)
            if per is None:
                return None
            var += v * (per / 1e6) ** 2
    return var


def cost_range(rows: list[dict[str, Any]]) -> tuple[float, float] | None:
    """The expected bill's LEVEL range (runner.forecast.around on the rows' summed variance; the models'
    draws are independent); None: no spread known, or a model unpriced."""
    exp = [d["est_cost_usd"] for d in rows]
    var = [d.get("est_cost_usd_var") for d in rows]
    if any(v is None for v in exp + var) or not sum(v or 0.0 for v in var):
        return None
    m, v = sum(x or 0.0 for x in exp), sum(x or 0.0 for x in var)
    return around(m, v, -Z), around(m, v, Z)


def money(x: float | None) -> str:
    """Dollars; sub-cent amounts keep two significant digits instead of showing $0.00."""
    if x is None:
        return "?"
    return f"${x:,.2f}" if x >= 0.01 or x == 0 else f"${x:.2g}"


def total_line(label: str, rows: list[dict[str, Any]], values: list[float | None]) -> str:
    """`label: $X` with "+ unknown for models a, b" when some of them have no price."""
    unknown = sorted({d["model"] for d, v in zip(rows, values, strict=True) if v is None and d["calls"]})
    known = sum(v for v in values if v is not None)
    text = f"{label}: {money(known)}"
    if unknown:
        text += f" + unknown for models {', '.join(unknown)} (set price_in/price_out in the config)"
    return text


def dry_run(
    plans: list[Any],
    cfg: Config,
    batch: str = "off",
    deadline_s: float = 8 * 3600.0,
    prefer: str = "latency",
    cache_dir: Path | None = None,
    keep_going: bool = False,
    max_cost: float | None = None,
) -> int:
    from core.term import print_table
    from runner.batch.plan import BATCH_WALL, fmt_duration
    from suites.base import Table

    rows, said_lines, ceilings = estimate(plans, cfg, batch, deadline_s, prefer, cache_dir, keep_going, max_cost)
    for run in dict.fromkeys(d["run"] for d in rows):  # one table per run: fitted to the terminal
        follow = any(d["follow_passes"] for d in rows if d["run"] == run)  # (a column only where there are any)
        cols = ["model", "to do", *(["+ passes"] if follow else []), "done", "cached", "tokens in", "out (max)",
                "cost", "max", "live", "batch max", "mode"]
        t = Table(
            title=f"dry run {run}: remaining calls of every pass ('to do': first pass; '+ passes': the "
                  "follow-ups (critique, judge, tool rounds), expected-most; cost and max: all passes)",
            columns=cols,
            rows=[
                [
                    d["model"],
                    f"{d['calls']:,}",
                    *([_passes_cell(d)] if follow else []),
                    f"{d['finished']:,}",
                    f"{d['cached']:,}",
                    f"{d['input_tokens']:,}",
                    f"{d['max_output_tokens']:,}",
                    money(d["est_cost_usd"]),
                    money(d["est_cost_usd_max"]),
                    fmt_duration(d["est_live_s"]) if d["calls"] or d["follow_calls"] else "-",
                    money(d["batch_cost_usd_max"]) if d["batch_supported"] else "-",
                    d["mode"],
                ]
                for d in rows
                if d["run"] == run
            ],
            key=("to do", "cost", "max"),
        )
        print_table(t)
    calls, finished, cached = (sum(d[k] for d in rows) for k in ("calls", "finished", "cached"))
    f_calls, f_most = sum(d["follow_calls"] for d in rows), sum(d["follow_calls_max"] for d in rows)
    follow = "" if not f_most else (f" + {f_calls:,} follow-up calls" + (f" (at most {f_most:,})" if f_most != f_calls
                                                                          else ""))
    print(f"remaining: {calls:,} calls{follow} ({finished:,} finished rows and {cached:,} cache hits skipped)")
    span = cost_range(rows)
    print(total_line("total expected", rows, [d["est_cost_usd"] for d in rows])
          + ("" if span is None else f" ({LEVEL:.0%} range {money(span[0])}-{money(span[1])}, from the output tokens' "
                                    "spread in earlier runs)"))
    print(total_line("total max", rows, [d["est_cost_usd_max"] for d in rows]))
    if any(d["mode"] == "batch" for d in rows):
        chosen = [d["batch_cost_usd_max"] if d["mode"] == "batch" else d["est_cost_usd_max"] for d in rows]
        print(total_line(f"total max with --batch {batch}", rows, chosen))
    if FORECAST:
        f = FORECAST[0]
        band = ("" if f.high_s <= f.expected_s * 1.005 and f.least_s >= f.expected_s * 0.995 else
                f" ({LEVEL:.0%} range {fmt_duration(f.least_s)}-{fmt_duration(f.high_s)}, from the lanes' token totals, call-seconds and last calls)")
        rng = ("" if f.most_s <= max(f.high_s, f.expected_s * 1.05) else
               f"; to {fmt_duration(f.most_s)} if every call writes its limit")
        print(f"forecast wall: ~{fmt_duration(f.expected_s)}{band}{rng}; the lane that ends last: {f.lane} "
              f"(bound by its {f.bound})")
    for c in ceilings:
        print(reach_line(c, rows))
    print(
        "cost: expected uses each model's mean output so far in this run, else in its earlier runs (the cache "
        "folder's history), else the suite's typical answer "
        "plus half of a reasoning model's budget, else half of the token limit; max assumes every call "
        "writes its whole limit (reasoning budget included). live time: rough, from RPM/TPM/concurrency and "
        f"~1 s + output at 50 tok/s per call; batches: {BATCH_WALL}"
    )
    for line in said_lines:  # what the run will record in manifest.json and under every table
        print(line)
    return 0


def _passes_cell(d: dict[str, Any]) -> str:
    """`+515 critique`, `+0-515 judge`: each follow-up pass still to make, expected-most."""
    parts = [f"+{n:,} {p}" if n == most else f"+{n:,}-{most:,} {p}" for p, (n, most) in d["follow_passes"].items()]
    return ", ".join(parts) or "-"


def reach_line(c: Any, rows: list[dict[str, Any]]) -> str:
    """How far a spend ceiling reaches into the remaining calls, at their expected and at their max cost
    (batched ones at the batch price): what is left of it after what its run directories were billed."""
    model = c.what.removeprefix("max_cost of ") if c.what != "--max-cost" else None
    mine = [d for d in rows if d["calls"] and (model is None or d["model"] == model)]
    calls = sum(d["calls"] for d in mine)
    left = max(0.0, c.usd - c.spent)
    head = f"{c.what} {money(c.usd)}" + (f" ({money(c.spent)} billed already)" if c.spent else "")
    parts = []
    for label, key in (("expected", "est_cost_usd"), ("max", "est_cost_usd_max")):
        total = sum(
            (d["batch_cost_usd_max"] * (d[key] or 0) / d["est_cost_usd_max"])
            if d["mode"] == "batch" and d["batch_cost_usd_max"] is not None and d["est_cost_usd_max"]
            else d[key] or 0.0
            for d in mine
        )
        share = 1.0 if total <= left else left / total
        parts.append(
            f"all {calls:,} calls at their {label} cost ({money(total)})"
            if share >= 1
            else f"~{share:.0%} of the {calls:,} calls (~{int(calls * share):,}) at their {label} cost ({money(total)})"
        )
    return f"{head} reaches {parts[0]}; {parts[1]}"

