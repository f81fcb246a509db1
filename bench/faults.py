"""Issue 39's faults at the issue's scale, each measured through the real CLI (a subprocess) against the
local mock server (tests.mock_openai, its stream faults in tests.mock_sse): what the provider billed by
its own count, requests paid twice, tracebacks, exit codes and the time a stream took to end.

  cut        100 streams cut mid-answer under --max-cost 10, then going on with a higher ceiling
  inflated   a provider billing 3,000 output tokens for max_tokens 1,024, under --max-cost 40
  absurd     the same, and one answer claiming 10^9 prompt tokens: the suggested ceiling
  keepalive  content, then only `: keep-alive` comments for 60 s, idle_timeout_s = 3
  ka-only    `: keep-alive` comments alone for 60 s, idle_timeout_s = 3
  deadline   content every 1.5 s (longer than 5 s in all), stream_deadline_s = 5
  malformed  a malformed first event, then the whole answer
  error-200  a 200 whose JSON is an error; choices-flood: 50,000 choices for n = 1
  second     a second launch on a running run directory (requests and pre-flights it sent)
  ctrl-c     SIGINT mid-run with calls waiting for pacing slots: their skipped rows said in how many
             lines, counted as errors or not

The disk-full case needs a tmpfs: tests/test_diskfull.py measures it (0 paid twice, root only).

    python bench/faults.py [--only cut,inflated,...]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers import write_dataset  # noqa: E402
from tests.mock_openai import InflatedUsage, MockServer  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def config(path: Path, url: str, price: tuple[float, float] = (1.0, 2.0), endpoint: str = "") -> Path:
    path.write_text(
        f'[[endpoints]]\nname = "mock"\nkind = "openai"\nbase_url = "{url}"\n{endpoint}\n'
        f'[[models]]\nname = "ok-a"\nendpoint = "mock"\nmodel = "ok-a"\nprice_in = {price[0]}\nprice_out = {price[1]}\n'
    )
    return path


def run(tmp: Path, data: Path, cfg: Path, *extra: str, out: str = "run") -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "cli", "run", f"jsonl:{data}", "--models", "ok-a", "--config", str(cfg),
            "--out", str(tmp / out), "--no-live", "--no-score", "--cache-dir", str(tmp / "cache"), *extra]
    return subprocess.run(args, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=600)


def rows(tmp: Path, out: str = "run") -> list[dict[str, Any]]:
    p = tmp / out / "results.jsonl"
    return [orjson.loads(x) for x in p.read_bytes().splitlines() if x.strip()] if p.exists() else []


def twice(srv: MockServer) -> int:
    """Prompts the server answered (billed) more than once: unstreamed answers, or streams served."""
    served = Counter(p for (_, p), k in srv.answered.items() for _ in range(k))
    if not served:
        served = srv.prompts
    return sum(1 for k in served.values() if k > 1)


def tracebacks(*procs: subprocess.CompletedProcess[str]) -> int:
    return sum(p.stderr.count("Traceback") for p in procs)


def case_cut(tmp: Path) -> dict[str, Any]:
    srv = MockServer().start()
    try:
        data = write_dataset(tmp / "d.jsonl", 100, prefix="Explain at length [[stream:cut]] question")
        cfg = config(tmp / "c.toml", srv.base_url, (5000.0, 10000.0), "stream_above_tokens = 0\nmax_concurrency = 4\n")
        a = run(tmp, data, cfg, "--max-tokens", "50", "--max-cost", "10")
        first = rows(tmp)
        bill1 = srv.sse.bill(5000.0, 10000.0)
        skipped = {r["item"] for r in first if r.get("error_kind") == "skipped"}
        sent1 = srv.total
        b = run(tmp, data, cfg, "--max-tokens", "50", "--max-cost", "100")
        again = {r["item"] for r in rows(tmp)[len(first):]}
        return {"exit": f"{a.returncode}, {b.returncode}", "sent": f"{sent1} + {srv.total - sent1}",
                "paid twice": sum(1 for k in srv.prompts.values() if k > 1), "tracebacks": tracebacks(a, b),
                "figure": f"bill ${bill1:.2f} under $10; {len(skipped)} skipped naming the ceiling; going on sent "
                          f"{'exactly those' if again == skipped else f'{len(again)} (skipped {len(skipped)})'}"}
    finally:
        srv.stop()


def case_inflated(tmp: Path, absurd: bool = False) -> dict[str, Any]:
    srv = InflatedUsage()
    srv.absurd = absurd
    srv.start()
    try:
        data = write_dataset(tmp / "d.jsonl", 100)
        price = (1.0, 400.0)  # USD per million: 3,000 output tokens bill $1.20, the limit's 1,024 $0.41
        cfg = config(tmp / "c.toml", srv.base_url, price, "max_concurrency = 8\n")
        a = run(tmp, data, cfg, "--max-tokens", "1024", "--max-cost", "40")
        got = rows(tmp)
        big = 10**9 * price[0] / 1e6 if absurd and srv.total >= 3 else 0.0
        bill = big + srv.total * (3000 * price[1] + 30 * price[0]) / 1e6
        said = a.stderr
        m = re.search(r"--max-cost (\S+)", said.split("Go on with a higher ceiling")[-1])
        return {"exit": str(a.returncode), "sent": str(srv.total), "paid twice": twice(srv),
                "tracebacks": tracebacks(a),
                "figure": f"flagged rows {sum(1 for r in got if r.get('usage_flag'))}, warnings "
                          f"{said.count('reports usage the request cannot explain')}; the mock's bill ${bill:,.2f}"
                          f"{' (its one absurd row $1,000)' if big else ''} for a $40 ceiling; suggested --max-cost "
                          f"{m.group(1) if m else '-'}"}
    finally:
        srv.stop()


def _stream_case(tmp: Path, marker: str, endpoint: str, gap: float, stall: float, n: int = 4) -> dict[str, Any]:
    srv = MockServer().start()
    srv.sse.gap_s, srv.sse.stall_s = gap, stall
    try:
        data = write_dataset(tmp / "d.jsonl", n, prefix=f"Explain [[stream:{marker}]] question")
        cfg = config(tmp / "c.toml", srv.base_url, endpoint=f"stream_above_tokens = 0\n{endpoint}")
        t0 = time.monotonic()
        a = run(tmp, data, cfg, "--max-tokens", "50")
        wall = time.monotonic() - t0
        got = rows(tmp)
        lat = [r.get("latency_s") or 0.0 for r in got]
        kinds = Counter(r.get("finish_reason") or r.get("error_kind") or "ok" for r in got)
        return {"exit": str(a.returncode), "sent": str(srv.total), "paid twice": twice(srv),
                "tracebacks": tracebacks(a),
                "figure": f"{len(got)} rows for {n} items ({dict(kinds)}); latency {min(lat):.1f}-{max(lat):.1f} s; "
                          f"command {wall:.1f} s"}
    finally:
        srv.stop()


def case_error_rows(tmp: Path) -> dict[str, Any]:
    srv = MockServer().start()
    try:
        out = []
        procs = []
        for kind in ("error_200", "choices_flood"):
            data = write_dataset(tmp / f"{kind}.jsonl", 2, prefix=f"[[fault:{kind}*]] question")
            cfg = config(tmp / "c.toml", srv.base_url, endpoint="max_attempts = 1\n")
            procs.append(run(tmp, data, cfg, out=kind))
            got = rows(tmp, kind)
            warned = next((ln for ln in procs[-1].stderr.splitlines() if "choices" in ln), "")
            what = got[0].get("error") or f"answered; {warned.split('WARNING')[-1].strip()}"
            out.append(f"{kind}: {what[:150]!r}" if got else f"{kind}: no row")
        return {"exit": ", ".join(str(p.returncode) for p in procs), "sent": str(srv.total), "paid twice": "-",
                "tracebacks": tracebacks(*procs), "figure": " | ".join(out)}
    finally:
        srv.stop()


def case_second(tmp: Path) -> dict[str, Any]:
    srv = MockServer().start()
    try:
        data = write_dataset(tmp / "d.jsonl", 20)
        cfg = config(tmp / "c.toml", srv.base_url, endpoint="max_concurrency = 2\n")
        srv.held = True
        args = [sys.executable, "-m", "cli", "run", f"jsonl:{data}", "--models", "ok-a", "--config", str(cfg),
                "--out", str(tmp / "run"), "--no-live", "--no-score", "--cache-dir", str(tmp / "cache")]
        first = subprocess.Popen(args, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while srv.total < 1:
            time.sleep(0.05)
        before = (srv.total, srv.models_requests)
        b = run(tmp, data, cfg)
        after = (srv.total, srv.models_requests)
        srv.held = False
        _, err = first.communicate(timeout=120)
        said = next((ln for ln in b.stderr.splitlines() if "lock" in ln or "running" in ln), b.stderr.strip()[-120:])
        return {"exit": f"{first.returncode}, {b.returncode}", "sent": str(srv.total), "paid twice": twice(srv),
                "tracebacks": tracebacks(b) + err.count("Traceback"),
                "figure": f"second launch sent {after[0] - before[0]} requests, {after[1] - before[1]} pre-flights: "
                          f"{said[:100]!r}"}
    finally:
        srv.stop()


def case_ctrl_c(tmp: Path) -> dict[str, Any]:
    srv = MockServer(latency_s=0.2).start()
    try:
        data = write_dataset(tmp / "d.jsonl", 400)
        cfg = config(tmp / "c.toml", srv.base_url, endpoint="max_concurrency = 64\nrpm = 600\n")
        args = [sys.executable, "-m", "cli", "run", f"jsonl:{data}", "--models", "ok-a", "--config", str(cfg),
                "--out", str(tmp / "run"), "--no-live", "--no-score", "--cache-dir", str(tmp / "cache"),
                "--grace", "5"]
        p = subprocess.Popen(args, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while srv.total < 20:
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
        got = rows(tmp)
        skipped = sum(1 for r in got if r.get("error_kind") == "skipped")
        per_row = [ln for ln in err.splitlines() if "interrupted before it was sent" in ln]
        told = next((ln for ln in err.splitlines() if ln.startswith("interrupted;")), "")
        errs = re.findall(r"err (\d+)", err)
        return {"exit": str(p.returncode), "sent": str(srv.total), "paid twice": twice(srv),
                "tracebacks": err.count("Traceback"),
                "figure": f"{len(got)} rows for {len({r['item'] for r in got})} items, {skipped} skipped (waiting, never sent); "
                          f"{len(per_row)} lines per row; last progress 'err {errs[-1] if errs else '-'}'; "
                          f"{told.strip()[:90]!r}"}
    finally:
        srv.stop()


CASES = {
    "cut": case_cut,
    "inflated": case_inflated,
    "absurd": lambda t: case_inflated(t, absurd=True),
    "keepalive": lambda t: _stream_case(t, "keepalive", "idle_timeout_s = 3\n", 0.5, 60.0),
    "ka-only": lambda t: _stream_case(t, "keepalive_only", "idle_timeout_s = 3\n", 0.5, 60.0),
    "deadline": lambda t: _stream_case(t, "slow", "stream_deadline_s = 5\n", 1.5, 60.0),
    "malformed": lambda t: _stream_case(t, "malformed", "", 0.0, 0.0, n=20),
    "error-200": case_error_rows,
    "second": case_second,
    "ctrl-c": case_ctrl_c,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=",".join(CASES), help="comma-separated cases")
    a = ap.parse_args()
    print(f"{'fault':<10} {'exit':<6} {'sent':<9} {'twice':>5} {'tb':>3}  what happened")
    for name in a.only.split(","):
        with tempfile.TemporaryDirectory() as d:
            r = CASES[name](Path(d))
        print(f"{name:<10} {r['exit']:<6} {r['sent']:<9} {r['paid twice']!s:>5} {r['tracebacks']:>3}  {r['figure']}",
              flush=True)


if __name__ == "__main__":
    main()
