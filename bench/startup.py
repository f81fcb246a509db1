"""Start-up benchmark (issue 28): launch -> first request of a 45-model sweep, fresh and resumed.

A mock OpenAI-compatible server (tests.mock_openai, its own process) stamps each request's arrival on
the host's monotonic clock; `evalsweep sweep` is launched as a subprocess and the time from launch to
the first chat request the server sees is taken, then the runner is killed (only start-up is measured).
Two cases, each repeated (the machine is shared: min / median / max are printed):
  fresh    3 runs x 45 models x ITEMS items, nothing done yet (an empty cache)
  resume   the same sweep with (1 - LEFT) of every (run, model)'s rows already in results.jsonl
           (3 x 45 x 1,500 x 0.9 = 182k finished rows by default): what a rerun after a crash scans
Printed per case: launch -> the first request, and launch -> every model calling (a request from each
of the 45 since launch). `--against CHECKOUT` times another checkout's runner too, side by side.

Each model has its own lane (an endpoint of concurrency 4 on the mock): when a model first calls
depends on start-up, not on its turn in a lane shared with 44 others. The pre-flight (GET /models,
once per lane, on localhost) is part of the measured time.

    python bench/startup.py [--models 45] [--runs 3] [--items 1500] [--left 0.1] [--repeat 5]
                            [--dir DIR] [--against CHECKOUT]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from core.types import row_identity  # noqa: E402


def start_mock(latency: float) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.mock_openai", "--latency", str(latency)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def stats(port: int, t: float) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats?since={t!r}", timeout=5) as r:
        return json.loads(r.read())


def write_inputs(root: Path, port: int, n_models: int, n_runs: int, items: int) -> tuple[Path, list[str]]:
    models = [f"ok-m{i:02d}" for i in range(n_models)]
    cfg = [f'[[endpoints]]\nname = "mock-{m}"\nbase_url = "http://127.0.0.1:{port}/v1"\napi_key_env = "BENCH_KEY"\n'
           f'max_concurrency = 4\n\n[[models]]\nname = "{m}"\nendpoint = "mock-{m}"\nprice_in = 1.0\nprice_out = 2.0\n'
           for m in models]  # fmt: skip
    (root / "evalsweep.toml").write_text("\n".join(cfg))
    sweep = ['config = "evalsweep.toml"', f'out = "{root / "runs"}"']
    for k in range(n_runs):
        data = root / f"data{k}.jsonl"
        with data.open("wb") as f:
            for i in range(items):
                f.write(orjson.dumps({"id": f"q{i}", "prompt": f"[run {k}] Question {i}: which option?",
                                      "choices": ["alpha", "beta", "gamma", "delta"], "answer": "B"}) + b"\n")
        sweep.append(f'\n[[runs]]\nsuite = "jsonl:{data}"\nmodels = {json.dumps(models)}\nout = "{root / "runs" / f"r{k}"}"')
    (root / "sweep.toml").write_text("\n".join(sweep) + "\n")
    return root / "sweep.toml", models


def finished_rows(run_dir: Path, models: list[str], done_items: int, suite: str) -> None:
    """results.jsonl with a success row per (model, item < done_items), shaped like the runner's."""
    with (run_dir / "results.jsonl").open("wb") as f:
        for m in models:
            buf = bytearray()
            for i in range(done_items):
                ident = row_identity(m, f"q{i}", 0, "answer")
                buf += orjson.dumps({
                    "model": m, "suite": suite, "item": f"q{i}", "sample": 0, "pass": "answer",
                    "key": hashlib.sha256(ident.encode()).hexdigest(), "text": "The answer is B.",
                    "usage": {"input_tokens": 120, "output_tokens": 40}, "cost_usd": 0.00012, "latency_s": 0.8,
                    "attempts": 1, "cached": False, "error": None, "error_kind": None, "via": None,
                    "lane": "mock/BENCH_KEY", "finish_reason": "stop", "t": 1_760_000_000.0 + i,
                }, option=orjson.OPT_APPEND_NEWLINE)  # fmt: skip
            f.write(buf)


def launch(root: Path, sweep: Path, port: int, cache: Path, repo: Path, n_models: int) -> tuple[float, float]:
    """Seconds from launch to the server's first chat request, and to every model's first (a request
    from each); the runner is then killed. `repo`: the checkout whose runner is launched."""
    env = {**os.environ, "PYTHONPATH": str(repo), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "BENCH_KEY": "bench"}
    cmd = [sys.executable, "-m", "cli", "sweep", str(sweep), "--no-live", "--no-score", "--cache-dir", str(cache)]
    base = stats(port, 0.0)["per_model"]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=open(root / "stderr.txt", "w"))
    first = None
    try:
        while True:
            st = stats(port, t0)
            now = time.monotonic()
            first = first or st["first_since"]
            if first is not None and sum(st["per_model"].get(m, 0) > n for m, n in base.items()) + sum(
                m not in base for m in st["per_model"]
            ) >= n_models:
                return first - t0, now - t0
            if p.poll() is not None:
                raise SystemExit(f"the runner exited ({p.returncode}) before every model called:\n"
                                 + (root / "stderr.txt").read_text()[-2000:])
            time.sleep(0.005)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()


def spread(xs: list[float]) -> str:
    return f"{min(xs):5.2f} {statistics.median(xs):5.2f} {max(xs):5.2f}"


def measure(a: argparse.Namespace, root: Path, port: int, sweep: Path, models: list[str], repo: Path) -> dict:
    """{case: ([first request s], [every model calling s])} for the fresh and the resumed sweep."""
    out: dict[str, tuple[list[float], list[float]]] = {"fresh": ([], []), "resume": ([], [])}
    done_items = round(a.items * (1 - a.left))
    for _ in range(a.repeat):
        shutil.rmtree(root / "runs", ignore_errors=True)
        shutil.rmtree(root / "cache", ignore_errors=True)
        for xs, x in zip(out["fresh"], launch(root, sweep, port, root / "cache", repo, len(models)), strict=True):
            xs.append(x)
    for _ in range(a.repeat):  # the killed fresh run left the manifests: finished rows go beside them
        shutil.rmtree(root / "cache", ignore_errors=True)
        for k in range(a.runs):
            finished_rows(root / "runs" / f"r{k}", models, done_items, f"jsonl:{root / f'data{k}.jsonl'}")
        for xs, x in zip(out["resume"], launch(root, sweep, port, root / "cache", repo, len(models)), strict=True):
            xs.append(x)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=int, default=45)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--items", type=int, default=1500, help="items per run (each model: one call per item)")
    ap.add_argument("--left", type=float, default=0.1, help="share of each (run, model)'s rows still to do")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", type=Path, help="work folder (default: a new temporary one, removed after)")
    ap.add_argument("--against", type=Path, metavar="CHECKOUT",
                    help="also time the runner of another checkout (e.g. `git worktree add /tmp/old <commit>`), "
                    "after this one, on the same inputs")  # fmt: skip
    a = ap.parse_args()
    root = a.dir or Path(tempfile.mkdtemp(prefix="evalsweep-startup-"))
    root.mkdir(parents=True, exist_ok=True)
    mock, port = start_mock(0.5)
    repos = {"this": REPO, **({"against": a.against.resolve()} if a.against else {})}
    try:
        sweep, models = write_inputs(root, port, a.models, a.runs, a.items)
        got = {name: measure(a, root, port, sweep, models, repo) for name, repo in repos.items()}
        done_items = round(a.items * (1 - a.left))
        print(f"{a.runs} runs x {a.models} models x {a.items} items ({a.runs * a.models * a.items:,} calls; resume: "
              f"{a.runs * a.models * done_items:,} rows finished, {a.runs * a.models * (a.items - done_items):,} "
              f"left), mock latency 0.5 s, n={a.repeat}")
        print(f"seconds from launch to the server's {'':<8} first request     every model calling")
        print(f"{'runner':<8} {'case':<8} {'min':>5} {'med':>5} {'max':>5}       {'min':>5} {'med':>5} {'max':>5}")
        for name, res in got.items():
            for case, (first, every) in res.items():
                print(f"{name:<8} {case:<8} {spread(first)}       {spread(every)}")
    finally:
        mock.terminate()
        mock.wait(10)
        if a.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
