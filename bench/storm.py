"""Fault storm: exact accounting and wall time under a seeded storm vs the same run without faults.

The mock OpenAI-compatible server runs in its own process and injects, per attempt, 30% HTTP 429
(Retry-After 1 s), 10% HTTP 500, 3% connections reset mid-body, 3% truncated JSON and 2% malformed
200s (tests/mock_openai.py). evalsweep runs as the user would (`evalsweep run`, default retry
settings, a fresh cache), once against the storm and once against a fault-free server. Printed: rows
ok / error / lost, requests sent vs needed, the server's well-formed answers, and the wall times.

    python bench/storm.py [--items 500] [--models 2] [--latency 0.05] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runner.results import final_rows, scan  # noqa: E402
from suites.jsonl import prompt_of  # noqa: E402
from tests.mock_openai import answer_text  # noqa: E402

STORM = "429=0.3,500=0.1,reset=0.03,truncated=0.03,garbage=0.02"


def start_mock(faults: str, seed: int, latency: float) -> tuple[subprocess.Popen[str], int]:
    args = [sys.executable, "-m", "tests.mock_openai", "--latency", str(latency), "--seed", str(seed)]
    if faults:
        args += ["--faults", faults, "--retry-after", "1"]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def server_stats(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as r:
        return json.loads(r.read())


def run(tmp: Path, name: str, faults: str, items: int, models: list[str], seed: int, latency: float) -> dict:
    proc, port = start_mock(faults, seed, latency)
    try:
        cfg = tmp / f"{name}.toml"
        text = f'[[endpoints]]\nname = "mock"\nkind = "openai"\nbase_url = "http://127.0.0.1:{port}/v1"\n'
        text += "max_concurrency = 64\n"
        for m in models:
            text += f'\n[[models]]\nname = "{m}"\nendpoint = "mock"\nprice_in = 1.0\nprice_out = 2.0\n'
        cfg.write_text(text)
        out = tmp / name
        cmd = [
            sys.executable,
            "-m",
            "cli",
            "run",
            f"jsonl:{tmp / 'data.jsonl'}",
            "--models",
            ",".join(models),
            "--config",
            str(cfg),
            "--out",
            str(out),
            "--no-live",
            "--cache-dir",
            str(tmp / f"{name}-cache"),
        ]
        t0 = time.perf_counter()
        p = subprocess.run(
            cmd, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True
        )
        wall = time.perf_counter() - t0
        st = server_stats(port)
    finally:
        proc.terminate()
        proc.wait(10)
    prompts = {f"q{i}": prompt_of(_item(i)) for i in range(items)}
    final = list(final_rows(out / "results.jsonl"))
    ok = [r for r in final if r["error"] is None]
    wrong_text = sum(r["text"] != answer_text(r["model"], prompts[r["item"]], 0) for r in ok)
    written = sum(1 for _ in scan(out / "results.jsonl"))
    kinds: dict[str, int] = {}
    for r in final:
        if r["error"] is not None:
            kinds[r["error_kind"]] = kinds.get(r["error_kind"], 0) + 1
    return {
        "exit": p.returncode,
        "wall_s": wall,
        "planned": items * len(models),
        "ok": len(ok),
        "error": len(final) - len(ok),
        "error_kinds": kinds,
        "lost": items * len(models) - len({(r["model"], r["item"]) for r in final}),
        "rows_written": written,
        "wrong_text": wrong_text,
        "sent": st["total"],
        "injected": st["injected"],
        "answered": st["answered"],
        "attempts_in_rows": sum(r["attempts"] for _, r in scan(out / "results.jsonl")),
        "status": json.loads((out / "manifest.json").read_text())["status"],
    }


def _item(i: int) -> dict:
    return {
        "id": f"q{i}",
        "prompt": f"Storm item {i}: which option fits?",
        "choices": ["w", "x", "y", "z"],
        "answer": "ABCD"[i % 4],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=500)
    ap.add_argument("--models", type=int, default=2)
    ap.add_argument("--latency", type=float, default=0.05, help="server latency per request, seconds")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    models = [f"storm-{chr(97 + k)}" for k in range(a.models)]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        with (tmp / "data.jsonl").open("w") as f:
            for i in range(a.items):
                f.write(json.dumps(_item(i)) + "\n")
        clean = run(tmp, "clean", "", a.items, models, a.seed, a.latency)
        storm = run(tmp, "storm", STORM, a.items, models, a.seed, a.latency)
    print(
        f"storm: {a.models} models x {a.items} items, per attempt {STORM} (seed {a.seed}), "
        f"server latency {a.latency * 1000:.0f} ms, max_concurrency 64, default retries"
    )
    for name, r in (("fault-free", clean), ("storm", storm)):
        print(
            f"{name:>10}: exit {r['exit']} ({r['status']}), rows ok {r['ok']} / error {r['error']} "
            f"{r['error_kinds'] or ''}/ lost {r['lost']} of {r['planned']} planned "
            f"(rows written {r['rows_written']}, successes with a wrong text {r['wrong_text']}); "
            f"requests sent {r['sent']} vs needed {r['planned']} (attempts in rows {r['attempts_in_rows']}, "
            f"well-formed answers {r['answered']}); wall {r['wall_s']:.1f} s"
        )
    print(f"    faults injected: {storm['injected']}")
    print(f"    wall time storm / fault-free: {storm['wall_s'] / clean['wall_s']:.2f}x")


if __name__ == "__main__":
    main()
