"""Small builders shared by the runner tests: a config file, a jsonl dataset, a CLI call."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from runner.budgets.local import LocalBudget

REPO = Path(__file__).resolve().parents[1]


def write_dataset(path: Path, n: int, *, prefix: str = "Question") -> Path:
    with path.open("wb") as f:
        for i in range(n):
            f.write(
                orjson.dumps(
                    {
                        "id": f"q{i}",
                        "prompt": f"{prefix} {i}: which letter?",
                        "choices": ["w", "x", "y", "z"],
                        "answer": "ABCD"[i % 4],
                    }
                )
                + b"\n"
            )
    return path


def write_config(
    path: Path,
    base_url: str,
    models: list[str],
    *,
    key_env: str | None = None,
    extra_endpoint: str = "",
    extra_model: str = "",
) -> Path:
    key = f'api_key_env = "{key_env}"\n' if key_env else ""
    text = f'[[endpoints]]\nname = "mock"\nkind = "openai"\nbase_url = "{base_url}"\n{key}{extra_endpoint}\n'
    for m in models:
        text += (
            f'[[models]]\nname = "{m}"\nendpoint = "mock"\nmodel = "{m}"\nprice_in = 1.0\n'
            f"price_out = 2.0\n{extra_model}\n"
        )
    path.write_text(text)
    return path


def run_args(data: Path, models: str, cfg: Path | None, out: Path | str, *extra: str) -> list[str]:
    """`evalsweep run jsonl:DATA ...` arguments, as every runner test spells them (the calls only:
    scoring and the report are tested on their own)."""
    cfg_args = ["--config", str(cfg)] if cfg is not None else []
    return [
        "run",
        f"jsonl:{data}",
        "--models",
        models,
        *cfg_args,
        "--out",
        str(out),
        "--no-live",
        "--no-score",
        *extra,
    ]


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=timeout,
    )


def spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """`evalsweep ARGS` as a background process (text pipes), for tests that run several or kill one."""
    return subprocess.Popen(
        [sys.executable, "-m", "cli", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def rows(run_dir: Path) -> list[dict]:
    p = run_dir / "results.jsonl"
    return [orjson.loads(line) for line in p.read_bytes().splitlines() if line.strip()]


def closed_port() -> int:
    """A port on 127.0.0.1 with nothing listening (bound, then closed): connections are refused."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@contextlib.contextmanager
def serving(*args: str) -> Iterator[str]:
    """`evalsweep view ARGS --port 0` in a subprocess; yields its index.html URL, Ctrl-C at the end."""
    import re
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "view", *args, "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = ""
        while "viewer:" not in line:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            assert line, proc.stderr.read()  # type: ignore[union-attr]
        yield re.search(r"http://127\.0\.0\.1:\d+/index.html", line).group(0)  # type: ignore[union-attr]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)


def fake_key(tag: str) -> str:
    """A made-up key shaped like a provider's (`sk-<tag>`), for the secrets tests. Built at run time so that
    no key-shaped literal is tracked in git (secret scanners); no test ever holds a real key."""
    return "-".join(("sk", tag))


def complete_once(prov: Any, req: Any, model: str) -> Any:
    """One `prov.complete` of `req` (one sample, a test key), the provider closed after: a provider test's call."""
    import asyncio

    async def send() -> Any:
        try:
            return await prov.complete(req, model, 1, 0, "sk-test", {})
        finally:
            await prov.close()

    return asyncio.run(send())


async def slot(b: Any) -> None:
    """Wait for a call's request slot on a lane budget (local or Redis), as a Lane does once it holds a lease."""
    wait = b.reserve(0)
    while wait > 0:
        await asyncio.sleep(wait)
        wait = b.confirm()


def key_refusals(calls: Any, tpm: float, slack: float = 1.0) -> int:
    """Calls a key would refuse, replayed on its TPM bucket (a second of its TPM deep, full at the start):
    each call (admitted at, answered at, charge, usage) is charged at admission and settled to its usage at
    its answer; a call finding less than `slack` x its charge in it is refused. tests/test_redis_tpm.py and
    bench/shared_limits_tpm.py judge the shared TPM account by it."""
    per_s = tpm / 60
    moves = sorted([(t0, 0, c, u) for t0, _, c, u in calls] + [(t1, 1, c, u) for _, t1, c, u in calls])
    level, at, refused = per_s, moves[0][0], 0
    for t, kind, c, u in moves:
        level, at = min(per_s, level + (t - at) * per_s), t
        if kind == 0:
            refused += level < c * slack
            level -= c
        else:
            level += c - u
    return refused


def lease_order(works: list[tuple[str, Any]]) -> str:
    """The names of `works`' calls in the order a one-slot lane grants them its lease (all queued while the
    slot is held, then freed one call at a time)."""

    async def go() -> str:
        lane = LocalBudget(None, None, 1)
        await lane.acquire()  # the slot is busy: every call below waits
        order: list[str] = []

        async def call(name: str, work: Any) -> None:
            await lane.acquire(work)
            order.append(name)
            lane.release()

        tasks = [asyncio.create_task(call(name, w)) for name, w in works]
        await asyncio.sleep(0)  # (each queued)
        lane.release()
        await asyncio.gather(*tasks)
        return "".join(order)

    return asyncio.run(go())


def redis_tpm_lane(url: str, key: str, name: str, tpm: float, lease_s: float = 5.0) -> Any:
    """A lane on a key shared through the Redis at `url` (no RPM, a concurrency of 16), paced by `tpm`: the
    Redis TPM account's tests' process, one per `name`."""
    from runner.budgets.redis import RedisBudget, lane_id
    from runner.budgets.redis_call import connect
    from runner.config import Endpoint
    from runner.lanes import Lane

    lane = Lane(Endpoint(name="e", kind="sim"), None, None, provider=None)
    lane.budget = RedisBudget(connect(url), lane_id("u", key), name, None, tpm, 16, lease_s, local_factory=LocalBudget)
    return lane


async def close_lanes(*lanes: Any) -> None:
    """Close `redis_tpm_lane`s: their budgets (heartbeats, queue entries), then their Redis clients."""
    for lane in lanes:
        await lane.budget.aclose()
    for lane in lanes:
        await lane.budget.client.aclose()
