"""What the modes of bench/shared_limits.py share: their worker processes (started, told when to begin,
their figures read back) and a worker's Lane on a LocalBudget or on a Redis-shared key."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
ENTRY = REPO / "bench" / "shared_limits.py"  # runs a worker: `ENTRY --worker SPEC` / `--tpm-worker SPEC`


def spawn_workers(specs: list[dict], kind: str = "--worker") -> list[dict]:
    """One worker process per spec, all told the same start (wall clock) once every one is ready, so
    their import and connection times stay out of the figures; returns each one's result."""
    procs = [subprocess.Popen([sys.executable, str(ENTRY), kind, orjson.dumps(s).decode()], cwd=REPO,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
             for s in specs]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    start = f"{time.time() + 0.5}\n"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(start)
        p.stdin.flush()
    out = []
    for p in procs:
        so, _ = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"worker failed ({p.returncode})")
        out.append(orjson.loads(so.splitlines()[-1]))
    return out


async def budget_lane(spec: dict, rpm: float | None, tpm: float | None) -> tuple[Any, Any]:
    """A worker's budget (on the Redis key `spec["key"]` when `spec["url"]`, else local) and a sim Lane on
    it; a Redis one is on the key from now (its first script call made)."""
    from runner.budgets.redis import RedisBudget, lane_id
    from runner.budgets.redis_call import connect
    from runner.config import Endpoint
    from runner.lanes import Lane, LocalBudget

    cap = spec["cap"]
    if spec["url"]:
        b: Any = RedisBudget(connect(spec["url"]), lane_id("bench", spec["key"]), "bench", rpm, tpm, cap, 5.0,
                             local_factory=LocalBudget)
    else:
        b = LocalBudget(rpm, tpm, cap)
    lane = Lane(Endpoint(name="bench", kind="sim"), None, None, provider=None)
    lane.budget = b
    if spec["url"]:
        async with b._call.lock:
            await b._eval(0)
    return b, lane


async def ready_then_start() -> float:
    """Say ready, wait for the parent's start (wall clock) and for that moment; returns it."""
    print("ready", flush=True)
    start = float(await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline))
    await asyncio.sleep(max(0.0, start - time.time()))
    return start


async def close_budget(b: Any, spec: dict) -> None:
    if spec["url"]:
        await b.aclose()
        await b.client.aclose()
