"""A 45-model sweep of heavy-tailed reasoning models at its physical limit (issue 28).

Two OpenAI-compatible servers (`bench/reasoning_server.py`, each its own process) serve five keys:
  tpm-a    TPM-bound, 10 reasoning models (lognormal) sharing the key with 3 chat models
  tpm-b    TPM-bound, 6 reasoning models (Lomax, a power-law tail) and 2 chat models
  rpm      RPM-bound, 8 chat models
  no-n     concurrency-bound, 8 reasoning models without `n` (mixture: quick answers and long thinkers),
           self-consistency = 8 calls per item
  shared   TPM + concurrency, 3 heavy-tailed reasoning models without `n` sharing the key (issue 40)
  rpm-f    RPM-bound at a rate that is not whole requests a second (100 RPM = 1.67/s), 2 chat models
  conc     concurrency-bound, 8 reasoning models with `n` (lognormal, wide)
Three runs in one `evalsweep sweep`: every model one sample per item, 8 samples for a subset, and
answer->critique chains (JEEBench `cot-critique` on its bundled questions: each answer is followed by a
critique call quoting it) for 4 models on each of tpm-a, no-n and conc (lognormal and mixture laws).
Output tokens are mostly reasoning (tok/s x latency), far from the suite's max_tokens either way.

The physical limit of a lane is the max of: (sum of its calls' latencies) / max_concurrency, calls /
RPM, tokens / TPM, its longest call and its longest chain (an item's answer + critique latencies:
the critique cannot start before its answer ends), all from the servers' own log of admitted requests
(429s excluded; the servers tag each request with its item and pass); the sweep's is the max over lanes. Printed per lane: wall (launch to its last answer) /
limit, 429s, the use of its binding limit while it had requests to send (work of the limit / span
from its first to its last request) and the share of its concurrency slots idle over that span (high
on a lane bound by RPM or TPM, by design), the chains' longest and end, and `cw` how long a chain's critique
waited from its answer's end to its send (median, max: a critique left for the lane's tail); then the sweep's wall / limit, the first request's delay, and the runner's CPU and peak
memory (rusage of the `evalsweep sweep` process).

Beside ours, what a scheduler could reach on the same draws (issue 40: is <= 1.15x reachable without knowing
latencies?): list scheduling of the lane's logged calls on its slots with zero overhead (`replay`), as ratios to
the same limit: `blind` a random order, `bymod` chains' answers first then the longest expected call by its
model's law (the mean of its n choices' longest, from draws no run uses), a model's calls in a random order (both
means of 50 orders: which draw comes last moves a lane's end by a tenth), `clairv` LPT knowing every
latency (a chain counts its answer + critique), which no real scheduler reaches. Exact for concurrency-bound lanes;
RPM as a fluid bucket; TPM as the server's bucket (starting full, charged ~prompt + max_tokens at admission and
settled to the real tokens at the end: `lane_replay._Tokens`; JEEBench's admission charge is approximated by the jsonl
runs'). The starting bucket (10 s of tpm-a's rate) is not in the limit, so a TPM lane's replays may come under 1.

With --forecast, two nights: the sweep, then a sweep of new questions on other draws of the same laws, each
forecast first by the dry run (cli.dryrun.estimate: the bill and the wall), the second from the first's history
(runner.history); forecast vs actual printed for both: the bill's and the wall's point, their 80% range (from the
output tokens' and the latencies' spread in the history: night 1, from priors, has none) and whether the actual is
inside it, also per lane.

    python bench/reasoning_sweep.py [--quick] [--seed 0] [--forecast] [--keep DIR]   # DIR: a new or empty folder
    python bench/reasoning_sweep.py --table DIR   # the lane table again from a kept run (its draws, new columns)
    python bench/reasoning_sweep.py --quick --reachable 60   # replays only, on 60 synthetic draws of the laws
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from lane_replay import schedules  # (bench/ is on the path when this script runs)

REPO = Path(__file__).resolve().parents[1]

CHAIN = {"item": ["Problem: ", "\nSolution: "], "follow": "\n-----------\n"}
"""How the servers tag JEEBench's requests (suites.jeebench.prompts): the answer prompt and the critique
prompt both hold "Problem: " + question + "\nSolution: "; only the critique holds CRITIQUE_SEPARATOR."""

# key: (server, rpm, tpm, concurrency, tpm bucket window s)
KEYS: dict[str, tuple[int, float | None, float | None, int, float]] = {
    "tpm-a": (0, 20000, 1_200_000, 64, 10.0),
    "tpm-b": (0, 20000, 600_000, 48, 2.0),
    "rpm": (1, 400, None, 64, 1.0),
    "no-n": (1, 20000, None, 24, 1.0),
    "conc": (1, 20000, None, 16, 1.0),
    "shared": (0, 20000, 600_000, 12, 2.0),
    "rpm-f": (1, 100, None, 64, 1.0),
}
HEDGE: float | None = None
"""--hedge X: every endpoint's `hedge_after` (runner.budgets.hedge; its losers billed on their rows, so in `bill`)."""
NO_N = {"no-n", "shared"}  # keys whose models have no `n` (`supports_n = false`)


def lineup() -> dict[str, dict[str, Any]]:
    """50 models: name -> law, median, shape, tok_s, answer, n, key, sc (in the 8-sample run), chain (in
    the answer->critique run)."""
    ms: dict[str, dict[str, Any]] = {}

    def add(
        prefix: str,
        k: int,
        key: str,
        law: str,
        med: tuple[float, float],
        shape: float,
        tok_s: int,
        answer: int,
        n: bool = True,
        sc: int = 0,
        chain: range = range(0),
    ) -> None:
        for i in range(k):
            ms[f"{prefix}{i:02d}"] = {
                "law": law,
                "median": round(med[0] + (med[1] - med[0]) * i / max(1, k - 1), 2),
                "shape": shape,
                "tok_s": tok_s,
                "answer": answer,
                "n": n,
                "key": key,
                "sc": i < sc,
                "chain": i in chain,
            }

    add("ra", 10, "tpm-a", "lognormal", (2.0, 3.0), 0.9, 500, 200, sc=4, chain=range(6, 10))
    add("ca", 3, "tpm-a", "lognormal", (0.6, 1.0), 0.4, 0, 250)
    add("rb", 6, "tpm-b", "lomax", (2.0, 3.0), 2.2, 450, 200, sc=2)
    add("cb", 2, "tpm-b", "lognormal", (0.6, 1.0), 0.4, 0, 250)
    add("cr", 8, "rpm", "lognormal", (0.4, 1.2), 0.5, 0, 200)
    add("nn", 8, "no-n", "mixture", (1.5, 2.5), 0.5, 250, 150, n=False, sc=8, chain=range(4, 8))
    add("ns", 3, "shared", "lognormal", (2.0, 3.0), 1.0, 400, 200, n=False, sc=3)
    add("cf", 2, "rpm-f", "lognormal", (0.4, 0.8), 0.5, 0, 200)
    add("cc", 8, "conc", "lognormal", (2.0, 3.0), 0.8, 250, 150, sc=8, chain=range(0, 4))
    return ms


def start_server(spec: dict[str, Any], tmp: Path, i: int) -> tuple[subprocess.Popen[str], int]:
    path = tmp / f"server{i}.json"
    path.write_text(json.dumps(spec))
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "reasoning_server.py"), str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def write_inputs(
    tmp: Path, ms: dict[str, dict[str, Any]], ports: list[int], items: int, sc_items: int, chain_items: int,
    tag: str = "",
) -> Path:
    """The sweep's data, config and sweep file in `tmp`; `tag` makes other questions (a second night)."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name, k in (("one", items), ("sc", sc_items)):
        with (tmp / f"{name}.jsonl").open("w") as f:
            for i in range(k):
                f.write(
                    json.dumps(
                        {
                            "id": f"q{i}",
                            "prompt": f"Problem {i}{tag} ({name}): a long derivation. " * 8,
                            "choices": ["w", "x", "y", "z"],
                            "answer": "ABCD"[i % 4],
                        }
                    )
                    + "\n"
                )
    cfg = ""
    for key, (srv, rpm, tpm, conc, _) in KEYS.items():
        cfg += (
            f'[[endpoints]]\nname = "{key}"\nkind = "openai"\nbase_url = "http://127.0.0.1:{ports[srv]}/v1"\n'
            f'api_key_env = "BENCH_KEY_{key.replace("-", "_").upper()}"\nmax_concurrency = {conc}\n'
            f"max_attempts = 10\n"
        )
        cfg += f"rpm = {rpm}\n" if rpm else ""
        cfg += f"tpm = {tpm}\n" if tpm else ""
        cfg += f"hedge_after = {HEDGE}\n" if HEDGE else ""
        cfg += "supports_n = false\n\n" if key in NO_N else "\n"
    for name, m in ms.items():
        cfg += f'[[models]]\nname = "{name}"\nendpoint = "{m["key"]}"\nprice_in = 1.0\nprice_out = 4.0\n\n'
    (tmp / "evalsweep.toml").write_text(cfg)
    sweep = f'config = "evalsweep.toml"\nout = "{tmp / "runs"}"\n'
    sweep += f'[[runs]]\nsuite = "jsonl:{tmp / "one.jsonl"}"\nmodels = {json.dumps(list(ms))}\nout = "{tmp / "runs/one"}"\n'
    sc = [n for n, m in ms.items() if m["sc"]]
    sweep += (
        f'[[runs]]\nsuite = "jsonl:{tmp / "sc.jsonl"}"\nmodels = {json.dumps(sc)}\nsamples = 8\n'
        f'out = "{tmp / "runs/sc"}"\n'
    )
    chain = [n for n, m in ms.items() if m["chain"]]
    sweep += (
        f'[[runs]]\nsuite = "jeebench"\nvariant = "cot-critique"\nlimit = {chain_items}\n'
        f'models = {json.dumps(chain)}\nout = "{tmp / "runs/chain"}"\n'
    )
    (tmp / "sweep.toml").write_text(sweep)
    return tmp / "sweep.toml"


def fetch(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/log", timeout=30) as r:
        return json.loads(r.read())


def idle_share(calls: list[tuple[float, float]], conc: int) -> float:
    """Slots idle between the lane's first and last request, as a share of conc x that span."""
    if not calls:
        return 0.0
    t0, t1 = min(a for a, _ in calls), max(a for a, _ in calls)
    if t1 <= t0:
        return 0.0
    busy = sum(min(a + lat, t1) - a for a, lat in calls if a < t1)
    return max(0.0, 1.0 - busy / (conc * (t1 - t0)))


def use_of(entries: list[list[Any]], bound: str, limit_s: float) -> float:
    """How much of its binding limit the lane used while it had requests to send: the limit's work
    (limit_s) over the span from its first to its last request (concurrency: busy slots / slots)."""
    if not entries or bound == "longest call":
        return 1.0
    span = max(e[0] for e in entries) - min(e[0] for e in entries)
    return min(1.0, limit_s / span) if span > 0 else 1.0


def expected_s(ms: dict[str, dict[str, Any]], scale: float, model: str, n: int, k: int = 400) -> float:
    """A call's expected latency knowing only its model's law: the mean over `k` prompts (draws no run
    uses) of the longest of its `n` choices."""
    sys.path.insert(0, str(REPO / "bench"))
    from reasoning_server import draw

    m = ms[model]
    return sum(max(draw(m, model, f"expect {j}", i, scale, 99991)[0] for i in range(n)) for j in range(k)) / k


def redraw(ms: dict[str, dict[str, Any]], scale: float) -> Any:
    """A new draw of a logged call's law (model, n, its index in the lane's log): the latency a re-sent call
    would get (the server's next sample of its prompt), for the `hedged` replay."""
    sys.path.insert(0, str(REPO / "bench"))
    from reasoning_server import draw

    return lambda model, n, i: max(draw(ms[model], model, f"again {i}", k, scale, 77777)[0] for k in range(n))


def synthetic_logs(
    ms: dict[str, dict[str, Any]], seed: int, scale: float, counts: tuple[int, int, int], rho: float = 0.0
) -> list[dict[str, Any]]:
    """The two servers' logs a sweep of `counts` would admit on draws of `seed` (`reasoning_server.draw`, on
    prompts of their own: other draws of the same laws; `rho`: the items' difficulty shared across models, as the
    server's `item_corr`), every call arriving at 0: for `--reachable`."""
    sys.path.insert(0, str(REPO / "bench"))
    from reasoning_server import draw

    items, sc_items, chain_items = counts
    logs: list[dict[str, Any]] = [{"log": [], "refused_by_key": {}} for _ in range(2)]
    for name, m in ms.items():
        calls = [(f"one {i}", 0, 1, "answer", "") for i in range(items)]  # (prompt, first choice, n, pass, item)
        for i in range(sc_items if m["sc"] else 0):
            calls += [(f"sc {i}", 0, 8, "answer", "")] if m["n"] else [(f"sc {i}", k, 1, "answer", "") for k in range(8)]
        for i in range(chain_items if m["chain"] else 0):
            calls += [(f"chain {i}", 0, 1, "answer", f"c{i}"), (f"critique {i}", 0, 1, "follow", f"c{i}")]
        for prompt, k, n, pass_, item in calls:
            got = [draw(m, name, prompt, k + j, scale, seed, item or prompt, rho) for j in range(n)]
            logs[KEYS[m["key"]][0]]["log"].append(
                [0.0, f"k-{m['key']}", name, n, max(g[0] for g in got), 77 + sum(g[1] for g in got), pass_, item,
                 item or prompt]
            )
    return logs


def reach_keys(row: dict[str, Any]) -> list[str]:
    """The replays' columns (bench/lane_replay.schedules)."""
    return [k for k in row if k in ("blind", "by model", "ours", "item", "item@w", "item+", "item+@w", "hedged",
                                    "clairvoyant")]


def reachable(
    ms: dict[str, dict[str, Any]], scale: float, counts: tuple[int, int, int], seeds: int, rho: float = 0.0
) -> None:
    """Per lane, over `seeds` synthetic draws of the laws: the mean and worst ratio to the limit `blind`, `by
    model` and `clairvoyant` reach, and how many seeds they keep <= 1.15x (no sweep is run)."""
    got: dict[str, dict[str, list[float]]] = {}
    for seed in range(seeds):
        rows, _ = lane_table(synthetic_logs(ms, 10_000 + seed, scale, counts, rho), 0.0, ms, scale)
        for r in rows:
            for k in reach_keys(r):
                got.setdefault(r["lane"], {}).setdefault(k, []).append(r[k])
        for k in reach_keys(rows[0]):  # the sweep's worst lane
            got.setdefault("worst", {}).setdefault(k, []).append(max(r[k] for r in rows))
    print(f"list scheduling on {seeds} synthetic draws, latency scale {scale}, item_corr {rho}: mean / worst / "
          "seeds <= 1.15x")
    for lane, by in got.items():
        print(f"{lane:<6} " + "  ".join(
            f"{k} {sum(v) / len(v):.3f} / {max(v):.2f} / {sum(x <= 1.15 for x in v)}" for k, v in by.items()
        ))


def lane_table(
    logs: list[dict[str, Any]], t_launch: float, ms: dict[str, dict[str, Any]] | None = None, scale: float = 1.0
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per lane: its limit, our wall and, with the lineup `ms`, what list scheduling reaches on the same
    draws (`schedules`), each over the limit."""
    rows = []
    memo: dict[tuple[str, int], float] = {}

    def expect(model: str, n: int) -> float:
        if (model, n) not in memo:
            memo[model, n] = expected_s(ms or {}, scale, model, n)
        return memo[model, n]

    for key, (srv, rpm, tpm, conc, window) in KEYS.items():
        entries = [e for e in logs[srv]["log"] if e[1] == f"k-{key}"]
        refused = logs[srv]["refused_by_key"].get(f"k-{key}", 0)
        if not entries:  # (a sweep that crashed before this lane's first answer: no limit to divide by)
            rows.append({"lane": key, "calls": 0, "tokens": 0, "429": refused, "empty": True})
            continue
        lat = [e[4] for e in entries]
        tokens = sum(e[5] for e in entries)
        chains: dict[tuple[str, str], float] = {}
        answered: dict[tuple[str, str], float] = {}  # a chain's answer's end
        for e in entries:
            if e[7]:  # an item of the chain run: its answer and critique, one after the other
                chains[(e[2], e[7])] = chains.get((e[2], e[7]), 0.0) + e[4]
                if e[6] != "follow":
                    answered[(e[2], e[7])] = e[0] + e[4]
        held = sorted(e[0] - answered[(e[2], e[7])] for e in entries if e[7] and e[6] == "follow"
                      and (e[2], e[7]) in answered)  # a critique's wait from its answer to its send
        bounds = {
            "concurrency": sum(lat) / conc,
            "rpm": len(entries) / rpm * 60 if rpm else 0.0,
            "tpm": tokens / tpm * 60 if tpm else 0.0,
            "longest call": max(lat, default=0.0),
            "longest chain": max(chains.values(), default=0.0),
        }
        bound = max(bounds, key=bounds.__getitem__)
        end = max(e[0] + e[4] for e in entries)
        rates = [(rpm / 60, rpm / 60, 0)] if rpm else []  # the server's buckets: RPM holds 1 s, TPM `window`
        rates += [(tpm / 60, tpm / 60 * window, 1)] if tpm else []
        again = redraw(ms or {}, scale) if bounds["concurrency"] == bounds[bound] else None
        reach = schedules(entries, conc, rates, expect, redraw=again) if ms else {}
        rows.append(
            {
                "lane": key,
                "calls": len(entries),
                "tokens": tokens,
                "bound": bound,
                "limit_s": bounds[bound],
                "wall_s": end - t_launch,
                "ratio": (end - t_launch) / bounds[bound],
                "429": refused,
                "idle": idle_share([(e[0], e[4]) for e in entries], conc),
                "first_s": min((e[0] for e in entries), default=t_launch) - t_launch,
                "use": use_of(entries, bound, bounds[bound]),
                "chain_s": bounds["longest chain"],
                "chains": len(chains),
                "crit_wait_s": (held[len(held) // 2], held[-1]) if held else (0.0, 0.0),
                "chain_end_s": max(
                    (e[0] + e[4] for e in entries if e[6] == "follow"), default=t_launch
                ) - t_launch,
                **{k: v / bounds[bound] for k, v in reach.items()},
            }
        )
    return rows, {"limit_s": max((r["limit_s"] for r in rows if not r.get("empty")), default=0.0)}


def sweep_once(
    tmp: Path, ms: dict[str, dict[str, Any]], seed: int, scale: float, counts: tuple[int, int, int], tag: str = "",
    before: Any = None, ports_from: list[int] | None = None, rho: float = 0.0,
) -> dict[str, Any]:
    """Start the servers (`seed`: their draws), write the sweep in `tmp` and run it: wall, server logs, rusage.
    `before(sweep)`: called with the sweep file once the servers are up, before the launch (the forecast)."""
    procs = []
    try:
        ports = []
        for srv in (0, 1):
            keys = {
                f"k-{k}": {"rpm": v[1], "tpm": v[2], "window_s": v[4]} for k, v in KEYS.items() if v[0] == srv
            }
            spec = {"keys": keys, "models": {n: m for n, m in ms.items()}, "scale": scale, "seed": seed, "chain": CHAIN,
                    "port": ports_from[srv] if ports_from else 0,  # (the same endpoints: a model's history is its URL's)
                    "item_corr": rho}
            tmp.mkdir(parents=True, exist_ok=True)
            p, port = start_server(spec, tmp, srv)
            procs.append(p)
            ports.append(port)
        sweep = write_inputs(tmp, ms, ports, *counts, tag=tag)
        os.environ.update(ENV)
        got = before(sweep) if before is not None else None
        cmd = [
            sys.executable,
            "-m",
            "cli",
            "sweep",
            str(sweep),
            "--no-live",
            "--no-score",
            "--progress-every",
            PROGRESS_EVERY,
            "--cache-dir",
            str(tmp / "cache"),
        ]
        t_launch = time.monotonic()
        runner = subprocess.Popen(
            cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL,
            stderr=open(tmp / "stderr.txt", "w"),
        )
        _, status, ru = os.wait4(runner.pid, 0)
        wall = time.monotonic() - t_launch
        logs = [fetch(port) for port in ports]
    finally:
        for p in procs:
            p.terminate()
            p.wait(10)
    (tmp / "server_logs.json").write_text(json.dumps({"t_launch": t_launch, "logs": logs}))
    return {"wall": wall, "logs": logs, "ru": ru, "status": status, "t_launch": t_launch, "sweep": sweep,
            "before": got, "ports": ports}


PROGRESS_EVERY = "30"
"""The summary lines' interval (`--eta`: 2 s, for eta_printout)."""
ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", **{f"BENCH_KEY_{k.replace('-', '_').upper()}": f"k-{k}" for k in KEYS}}


def forecast(sweep: Path) -> dict[str, float]:
    """What `evalsweep sweep --dry-run` forecasts for this sweep (cli.dryrun.estimate, in this process)."""
    sys.path.insert(0, str(REPO))
    from cli.dryrun import FORECAST, cost_range, estimate
    from cli.main import load_sweep

    cfg, plans = load_sweep(sweep)
    rows, _, _ = estimate(plans, cfg, cache_dir=sweep.parent / "cache")
    f = FORECAST[0]
    key = {m: v["key"] for m, v in lineup().items()}
    lanes: dict[str, list[float]] = {}  # per lane: [wall fc (its models' latest expected end), bill fc]
    for (_run, model), (e, _most, _least) in f.models.items():
        acc = lanes.setdefault(key[model], [0.0, 0.0])
        acc[0] = max(acc[0], e)
    for d in rows:
        lanes.setdefault(key[d["model"]], [0.0, 0.0])[1] += d["est_cost_usd"] or 0.0
    cost = sum(d["est_cost_usd"] or 0.0 for d in rows)
    span = cost_range(rows) or (cost, cost)
    return {"cost": cost, "cost_max": sum(d["est_cost_usd_max"] or 0.0 for d in rows),
            "wall": f.expected_s, "wall_max": f.most_s, "lane": f"{f.lane} ({f.bound})", "lanes": lanes,
            "cost_range": span, "wall_range": (f.least_s, f.high_s),
            "lane_range": {name.split("/")[0]: (lo, hi) for name, (_e, lo, hi, _b) in f.lanes.items()}}


def bill(sweep: Path) -> float:
    """What the sweep's rows cost, every pass (the provider's bill at the configured prices)."""
    return sum(bill_by_lane(sweep).values())


def bill_by_lane(sweep: Path) -> dict[str, float]:
    """The sweep's bill per lane (its models' key)."""
    key = {m: v["key"] for m, v in lineup().items()}
    out: dict[str, float] = {}
    for path in sweep.parent.glob("runs/**/results*.jsonl"):
        for line in path.read_bytes().splitlines():
            r = json.loads(line)
            out[key[r["model"]]] = out.get(key[r["model"]], 0.0) + (r.get("cost_usd") or 0.0)
    return out


def report(out: dict[str, Any], ms: dict[str, dict[str, Any]], counts: tuple[int, int, int], scale: float,
           seed: int) -> list[dict[str, Any]]:
    """Print the lane table and the sweep's line; returns the lane rows."""
    items, sc_items, chain_items = counts
    rows, sweep_lim = lane_table(out["logs"], out["t_launch"], ms, scale)
    n_calls = sum(r["calls"] for r in rows)
    n429 = sum(r["429"] for r in rows)
    wall, ru = out["wall"], out["ru"]
    print(
        f"reasoning sweep: {len(ms)} models, {items} items (+{sc_items} x 8 samples for {sum(m['sc'] for m in ms.values())} "
        f"models, +{chain_items} answer->critique chains for {sum(m['chain'] for m in ms.values())} models), "
        f"latency scale {scale}, seed {seed}; exit {os.waitstatus_to_exitcode(out['status'])}"
    )
    print(
        f"{'lane':<6} {'calls':>6} {'tokens':>9} {'bound':<12} {'limit s':>8} {'wall s':>7} {'ratio':>6} "
        f"{'429':>5} {'use':>5} {'idle':>5} {'1st s':>6} {'chain s':>7} {'chains':>6} {'ch end':>6} "
        f"{'cw med':>6} {'cw max':>6} {'blind':>6} {'bymod':>6} {'clairv':>6}"
    )
    for r in rows:
        if r.get("empty"):
            print(f"{r['lane']:<6} {0:>6} {0:>9} empty" + (f" ({r['429']} x 429)" if r["429"] else ""))
            continue
        print(
            f"{r['lane']:<6} {r['calls']:>6} {r['tokens']:>9,} {r['bound']:<12} {r['limit_s']:>8.1f} "
            f"{r['wall_s']:>7.1f} {r['ratio']:>6.2f} {r['429']:>5} {r['use']:>5.2f} {r['idle']:>5.2f} {r['first_s']:>6.2f}"
            f" {r['chain_s']:>7.1f} {r['chains']:>6} {r['chain_end_s']:>6.1f} {r['crit_wait_s'][0]:>6.1f}"
            f" {r['crit_wait_s'][1]:>6.1f} {r['blind']:>6.2f} {r['by model']:>6.2f}"
            f" {r['clairvoyant']:>6.2f}"
        )
    if not sweep_lim["limit_s"]:
        print(f"sweep: no finished call on any lane ({n429} x 429); wall {wall:.1f} s")
        return rows
    print(
        f"sweep: wall {wall:.1f} s / physical limit {sweep_lim['limit_s']:.1f} s = {wall / sweep_lim['limit_s']:.2f}x; "
        f"{n429} x 429 for {n_calls} admitted calls ({n429 / max(1, n_calls) * 1000:.1f} per 1,000); "
        f"first request {min(r['first_s'] for r in rows if not r.get('empty')):.2f} s after launch"
    )
    if ru is not None:
        print(
            f"runner: CPU {ru.ru_utime + ru.ru_stime:.1f} s ({(ru.ru_utime + ru.ru_stime) / max(1, n_calls) * 1000:.2f}"
            f" ms per call), peak RSS {ru.ru_maxrss / 1024:.0f} MB"
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="latencies x0.5, half the items (limit ~1 min)")
    ap.add_argument("--items", type=int, help="items per model in the one-sample run")
    ap.add_argument("--sc-items", type=int, help="items per model in the 8-sample run")
    ap.add_argument("--chain-items", type=int, help="JEEBench questions per model in the chain run")
    ap.add_argument("--keep", type=Path, help="keep the sweep's folder here (a new or empty folder: a kept "
                    "sweep is never re-run into, its answers would all come from its runs and cache)")
    ap.add_argument("--seed", type=int, default=0, help="other draws of the same latency laws (0: the default draws)")
    ap.add_argument("--forecast", action="store_true",
                    help="two nights: the sweep, then a sweep of new questions (other draws) forecast by the dry "
                         "run from the first night's history; forecast vs bill and wall printed for both")
    ap.add_argument("--table", type=Path, help="print the lane table again from a kept folder's server_logs.json")
    ap.add_argument("--reachable", type=int, metavar="SEEDS",
                    help="no sweep: what list scheduling reaches per lane on this many synthetic draws of the laws")
    ap.add_argument("--item-corr", type=float, default=0.0, metavar="RHO",
                    help="an item's difficulty shared by every model (reasoning_server's item_corr: two models' "
                         "log-latencies on an item correlate ~RHO^2; released JEEBench responses: ~0.47, so RHO ~0.7); "
                         "0: independent draws, as before")
    ap.add_argument("--eta", action="store_true", help="summary lines every 2 s; the live ETA at 10/50/90%% of "
                    "the run vs the real remaining time printed (eta_printout)")
    ap.add_argument("--hedge", type=float, metavar="X", help="hedge_after = X on every endpoint (off by default)")
    a = ap.parse_args()
    global HEDGE
    HEDGE = a.hedge
    if a.eta:
        global PROGRESS_EVERY
        PROGRESS_EVERY = "2"
    scale = 0.5 if a.quick else 1.0
    counts = (a.items or (30 if a.quick else 60), a.sc_items or (5 if a.quick else 9), a.chain_items or (10 if a.quick else 20))
    ms = lineup()
    if a.reachable:
        reachable(ms, scale, counts, a.reachable, a.item_corr)
        return
    if a.table is not None:  # the same draws: the servers' spec says their seed and scale
        spec = json.loads((a.table / "server0.json").read_text())
        kept = json.loads((a.table / "server_logs.json").read_text())
        wall = max((e[0] + e[4] for lg in kept["logs"] for e in lg["log"]), default=kept["t_launch"]) - kept["t_launch"]
        out = {**kept, "wall": wall, "ru": None, "status": 0}
        quick = (30, 5, 10) if spec["scale"] == 0.5 else counts  # (the header only)
        report(out, spec["models"], quick if not (a.items or a.sc_items or a.chain_items) else counts, spec["scale"],
               spec["seed"])
        return
    if a.keep is not None and a.keep.exists() and (not a.keep.is_dir() or any(a.keep.iterdir())):
        ap.error(f"--keep {a.keep}: not a new or empty folder. A kept sweep's runs would resume as done and its "
                 "cache answer every call: nothing would be measured (the folder is left as it is; --table "
                 f"{a.keep} prints a kept sweep's lane table again)")
    tmp = Path(tempfile.mkdtemp(prefix="reasoning-sweep-")) if a.keep is None else a.keep
    tmp.mkdir(parents=True, exist_ok=True)
    if not a.forecast:
        out = sweep_once(tmp, ms, a.seed, scale, counts, rho=a.item_corr)
        report(out, ms, counts, scale, a.seed)
        if a.eta:
            eta_printout(tmp, out["wall"])
        return
    nights = []
    for night, (seed, tag) in enumerate(((a.seed, ""), (a.seed + 1000, " (night 2)"))):
        d = tmp / f"night{night + 1}"
        if night:  # the second night's cache holds only the first's history (new questions: no answers to reuse)
            shutil.copytree(tmp / "night1" / "cache" / "history", d / "cache" / "history")
        out = sweep_once(d, ms, seed, scale, counts, tag, before=forecast,
                         ports_from=nights[0][3] if nights else None, rho=a.item_corr)
        print(f"--- night {night + 1}{' (priors from night 1)' if night else ' (no history: priors)'}")
        lanes = report(out, ms, counts, scale, seed)
        if a.eta:
            eta_printout(d, out["wall"])
        nights.append((out["before"], bill(out["sweep"]), out["wall"], out["ports"], lanes, bill_by_lane(out["sweep"])))
    forecast_printout([(fc, paid, wall) for fc, paid, wall, *_ in nights])
    for i, (fc, _paid, _wall, _ports, rows, paid_by) in enumerate(nights):  # (a lane's wall: launch to its last answer)
        print(f"night {i + 1} per lane: " + "  ".join(
            f"{r['lane']} bill {fc['lanes'].get(r['lane'], [0, 0])[1] / max(paid_by.get(r['lane'], 0.0), 1e-9):.2f}"
            f" wall {fc['lanes'].get(r['lane'], [0, 0])[0]:.1f}/{r['wall_s']:.1f}"
            f"={fc['lanes'].get(r['lane'], [0, 0])[0] / max(r['wall_s'], 1e-9):.2f}"
            + (f" [{lo:.1f}-{hi:.1f} {inside(r['wall_s'], lo, hi)}]" if (lo, hi) != (lo, lo) else "")
            for r in rows for lo, hi in [fc["lane_range"].get(r["lane"], (0.0, 0.0))]))
    print("(per lane: bill fc / bill, wall fc / the lane's last answer, [its 80% range from its token total, call-seconds "
          "and last calls, and whether the lane's wall is inside] where it has one)")


def forecast_printout(nights: list[tuple[dict[str, Any], float, float]]) -> None:
    """Forecast vs actual per night: the bill and the wall, each's point, its 80% range (runner.forecast.LEVEL:
    the output tokens' spread in the history; the point alone where none is known) and `in`: the actual inside it."""
    print(f"{'forecast vs actual':<28} {'bill fc':>8} {'80% range':>15} {'(max)':>8} {'bill':>8} {'ratio':>5} {'in':>3} "
          f"{'wall fc':>7} {'80% range':>13} {'(max)':>7} {'wall':>6} {'ratio':>5} {'in':>3}")
    for i, (fc, paid, wall) in enumerate(nights):
        label = "night 1 (priors)" if i == 0 else "night 2 (night 1's history)"
        (c0, c1), (w0, w1) = fc["cost_range"], fc["wall_range"]
        print(f"{label:<28} {fc['cost']:>8.2f} {f'{c0:.2f}-{c1:.2f}':>15} {fc['cost_max']:>8.2f} {paid:>8.2f} "
              f"{fc['cost'] / max(paid, 1e-9):>5.2f} {inside(paid, c0, c1):>3} {fc['wall']:>7.1f} "
              f"{f'{w0:.1f}-{w1:.1f}':>13} {fc['wall_max']:>7.1f} {wall:>6.1f} {fc['wall'] / wall:>5.2f} "
              f"{inside(wall, w0, w1):>3}  last: {fc['lane']}")
    print("actual inside the range: " + "; ".join(
        f"night {i + 1} bill {inside(paid, *fc['cost_range'])}, wall {inside(wall, *fc['wall_range'])}"
        for i, (fc, paid, wall) in enumerate(nights)))


def inside(x: float, lo: float, hi: float) -> str:
    return "yes" if lo <= x <= hi else "no"


def eta_printout(tmp: Path, wall: float) -> None:
    """The live ETA (the non-tty summary lines, with --eta every 2 s) at 10/50/90% of the run vs the real
    remaining time: when the calls ended (the last summary line) less when the line was said; its median over the
    lines in 5-20%, 20-50% and 50-90% of the run (one line near a point is luck); and the share of
    the lines whose range (`ETA x (low-high)`, earlier `(at most y)`: [x, y]) holds the real end."""
    import datetime as dt
    import re

    logs = sorted(tmp.glob("runs/*/log.txt"))
    if not logs:
        return
    said = []
    for line in logs[0].read_text().splitlines():
        m = re.match(r"(\S+ \S+) INFO progress \(.*ETA (\S+)(?:\s+\((?:at most (\S+)|(\S+)-(\S+))\))?", line)
        if m:
            at = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            said.append((at, m.group(2), m.group(4) or m.group(2), m.group(3) or m.group(5) or m.group(2)))
    if len(said) < 2:
        return
    end = said[-1][0]
    start = end - wall

    def secs(s: str | None) -> float | None:
        if s is None or s in ("?", "done"):
            return 0.0 if s == "done" else None
        return float(s[:-1]) * {"s": 1, "m": 60, "h": 3600}[s[-1]]

    print(f"{'live ETA':<10} {'at s':>6} {'ETA said':>9} {'range':>11} {'real left':>9} {'said/real':>9}")
    for share in (0.1, 0.5, 0.9):
        at, eta, low, high = min(said[:-1], key=lambda x: abs(x[0] - (start + share * wall)))
        real, e = end - at, secs(eta)
        ratio = f"{e / real:.2f}" if e is not None and real > 0 else "-"
        print(f"{f'{share:.0%} run':<10} {at - start:>6.1f} {eta:>9} {f'{low}-{high}':>11} {real:>9.1f} {ratio:>9}")
    for a, b in ((0.05, 0.2), (0.2, 0.5), (0.5, 0.9)):  # (one line near a point is luck: a 2 s line is 3% of a run)
        got = sorted(e / (end - at) for at, eta, _, _ in said[:-1]
                     if start + a * wall <= at < start + b * wall and (e := secs(eta)) is not None and end > at)
        if got:
            print(f"{f'{a:.0%}-{b:.0%}':<10} said/real over {len(got)} lines: median {got[len(got) // 2]:.2f}, "
                  f"{got[0]:.2f}-{got[-1]:.2f}")
    ranged = [(secs(lo), secs(hi), end - at) for at, _, lo, hi in said[:-1]]
    inside = sum(lo is not None and hi is not None and lo <= real + 0.5 and real - 0.5 <= hi for lo, hi, real in ranged)
    print(f"real end inside the said range (+-0.5 s, the rounding) at {inside}/{len(ranged)} lines "
          f"({inside / len(ranged):.0%}); 'done' said before the end at "
          f"{sum(eta == 'done' for _, eta, _, _ in said[:-1])}, '?' at {sum(eta == '?' for _, eta, _, _ in said[:-1])}")

if __name__ == "__main__":
    main()
