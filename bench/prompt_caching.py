"""Prompt caching benchmark: what the runner's breakpoints and cache-aware fan-out save on a Claude model,
against the same run with `prompt_caching = false`, on a mock that caches by Anthropic's documented rules
(tests/mock_caching.py: breakpoints, 1,024-token minimum, readable only once the writer's answer began,
5-minute lifetime; writes billed 1.25x, reads 0.1x).

Two workloads, each run both ways through the real scheduler (tests/caching_run.py):
- SC@8: self-consistency, 8 samples of one prompt as 8 calls (Anthropic has no `n`);
- critique: one answer, then a second pass re-sending the prompt with the answer and a critique turn;
- image x5: MARVEL's shape, five questions on each image (the mock counts an image as 1,600 tokens).
Printed side by side: billed input / uncached input (the mock's usage) and the cost of the rows, and the
wall time with caching against without it (the fan-out order's cost; the mock's latency does not drop
on a cache hit, so this is the worst case). Targets: SC@8 billed <= 0.30x, wall <= 1.10x.

    python bench/prompt_caching.py [--quick] [--items 96] [--tokens 2400] [--latency 0.25] [--concurrency 32]
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
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from core.types import ImagePart, Message, Request, Row, user  # noqa: E402
from suites.base import RunSpec  # noqa: E402
from tests import caching_run  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 64
CRITIQUE = "Find any problems with the solution above. If there are errors, correct them and give the new answer."


def prompt(k: int, tokens: int) -> str:
    """~`tokens` tokens (4 characters each) of a distinct problem statement."""
    head = f"Problem {k}: a body of mass {k + 2} kg slides down an incline. "
    return (head + "Given the following data, reason step by step about each quantity. " * (tokens * 4 // 66))[
        : tokens * 4
    ] + "\nSolution: Let's think step by step."


def sc_requests(items: int, tokens: int) -> list[Request]:
    return [
        Request(suite="bench", item=f"p{k}", messages=[user(prompt(k, tokens))],
                decoding={"temperature": 0.5, "n": 8, "max_tokens": 1024})
        for k in range(items)
    ]


def critique_requests(items: int, tokens: int) -> list[Request]:
    return [
        Request(suite="bench", item=f"p{k}", messages=[user(prompt(k, tokens))], resent=True,
                decoding={"temperature": 0.0, "max_tokens": 1024})
        for k in range(items)
    ]


def image_requests(items: int) -> list[Request]:
    """MARVEL's shape: five questions on each puzzle image, the image their declared shared prefix."""
    out = []
    for k in range(items):
        img = ImagePart(data=PNG + k.to_bytes(4, "big"))
        out += [Request(suite="bench", item=f"{k}/{q}", messages=[user(img, f"Question {q} on puzzle {k}?")],
                        prefix=(0, 0), decoding={"temperature": 0.0, "max_tokens": 1024}) for q in range(5)]
    return out


def critique(req: Request, row: Row, spec: RunSpec) -> list[Request]:
    """The second pass: the same prompt, the first answer, and the critique instruction."""
    if row.get("error") or req.pass_ != "answer":
        return []
    msgs = [*req.messages, Message(role="assistant", content=row["text"]), user(CRITIQUE)]
    # its shared prefix is the first pass's prompt: read from the cache the first pass wrote
    return [req.model_copy(update={"pass_": "critique", "messages": msgs, "resent": False, "prefix": (0, 0)})]


def measure(base: str, reqs: list[Request], caching: bool, concurrency: int, follow_up: Any = None) -> dict:
    urllib.request.urlopen(urllib.request.Request(base + "/reset", method="POST")).read()
    out = Path(tempfile.mkdtemp(prefix="es-bench-cache-"))
    t0 = time.perf_counter()
    rows = caching_run.run(reqs, base, out, caching=caching, follow_up=follow_up, concurrency=concurrency)
    wall = time.perf_counter() - t0
    bad = sum(r["error"] is not None for r in rows)
    assert bad == 0, f"{bad} error rows"
    billed = json.loads(urllib.request.urlopen(base + "/stats").read())
    return {**billed, "wall": wall, "rows": len(rows), "cost": sum(r["cost_usd"] or 0 for r in rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer items, shorter latency (about 15 s)")
    ap.add_argument("--items", type=int, default=96)
    ap.add_argument("--tokens", type=int, default=2400, help="prompt tokens")
    ap.add_argument("--latency", type=float, default=0.25, help="the mock's answer time, s")
    ap.add_argument("--concurrency", type=int, default=32, help="the endpoint's max_concurrency")
    a = ap.parse_args()
    if a.quick:
        a.items, a.latency, a.concurrency = 64, 0.1, 16
    # the mock in its own process: its CPU is not the runner's
    mock = subprocess.Popen([sys.executable, "-m", "tests.mock_caching", "--latency", str(a.latency),
                             "--answer-chars", "2800"], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert mock.stdout is not None and mock.stdin is not None
    base = f"http://127.0.0.1:{int(mock.stdout.readline())}"
    try:
        table = []
        for name, reqs, fu in (
            ("SC@8", sc_requests(a.items, a.tokens), None),
            ("critique", critique_requests(a.items, a.tokens), critique),
            ("image x5", image_requests(a.items), None),
        ):
            off = measure(base, reqs, False, a.concurrency, fu)
            on = measure(base, reqs, True, a.concurrency, fu)
            table.append((name, on, off))
    finally:
        mock.stdin.close()
        mock.wait(10)
    print(f"{a.items} items, ~{a.tokens}-token prompts, {a.latency:g} s a call, max_concurrency {a.concurrency}")
    print(f"{'workload':<9} {'calls':>6} {'billed/uncached input':>22} {'row cost $ on/off':>18} "
          f"{'wall s on / off':>16} {'wall on/off':>11}")
    for name, on, off in table:
        print(f"{name:<9} {on['rows']:>6} {on['ratio']:>10.3f} vs {off['ratio']:<9.3f} "
              f"{on['cost'] / off['cost']:>18.3f} {on['wall']:>7.2f} / {off['wall']:<6.2f} "
              f"{on['wall'] / off['wall']:>11.3f}")


if __name__ == "__main__":
    main()
