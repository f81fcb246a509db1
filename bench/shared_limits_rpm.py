"""bench/shared_limits.py's RPM mode: K = 1, 2, 4 `evalsweep run` processes on one key against the mock
(its own process) enforcing the key's RPM, with and without `[shared] redis_url`: achieved rate / limit,
429s, CPU per call; then the Redis path's CPU per call in one process (`in_process`)."""

from __future__ import annotations

import os
import resource
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

from bench.throughput import start_mock, stop_mock
from tests.helpers import spawn


def write_inputs(d: Path, i: int, n: int, port: int, rpm: float, redis_url: str | None) -> tuple[Path, Path]:
    data = d / f"data{i}.jsonl"
    with data.open("wb") as f:
        for j in range(n):
            f.write(orjson.dumps({"id": f"q{j}", "prompt": f"[p{i}] Question {j}?", "answer": "A"}) + b"\n")
    cfg = d / f"c{i}.toml"
    shared = f'\n[shared]\nredis_url = "{redis_url}"\n' if redis_url else ""
    cfg.write_text(
        f'[[endpoints]]\nname = "mock"\nbase_url = "http://127.0.0.1:{port}/v1"\napi_key_env = "BENCH_KEY"\n'
        f'rpm = {rpm}\ntpm = 1e12\nmax_concurrency = 64\n\n[[models]]\nname = "ok-bench"\nendpoint = "mock"\n'
        f"price_in = 1.0\nprice_out = 2.0\n{shared}"
    )
    return data, cfg


def stats(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as r:
        return orjson.loads(r.read())


def one(k: int, rpm: float, seconds: float, redis_url: str | None, per: int | None = None) -> dict:
    mock, port = start_mock(rpm, 0.01)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            per = per or max(1, int(rpm / 60 * seconds))  # each alone could fill the key for `seconds`
            env = {
                **os.environ,
                "BENCH_KEY": "bench-key",
                "EVALSWEEP_CACHE_DIR": str(d / "cache"),
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            }
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            procs = []
            for i in range(k):
                data, cfg = write_inputs(d, i, per, port, rpm, redis_url)
                args = ["run", f"jsonl:{data}", "--models", "ok-bench", "--config", str(cfg)]
                args += ["--out", str(d / f"run{i}"), "--no-live", "--no-cache"]
                procs.append(spawn(args, env))
            for p in procs:
                _, err = p.communicate(timeout=seconds * 20 + 120)
                if p.returncode != 0:
                    raise SystemExit(f"run failed ({p.returncode}): {err[-2000:]}")
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
            times = [
                [orjson.loads(x)["t"] for x in (d / f"run{i}" / "results.jsonl").read_bytes().splitlines() if x]
                for i in range(k)
            ]
            n_ok = sum(map(len, times))
            # over the span when all K were sending (start-up skew excluded): every answer in it
            lo, hi = max(min(ts) for ts in times), min(max(ts) for ts in times)
            inside = sum(lo <= t <= hi for ts in times for t in ts)
            span_rate = (inside - 1) / (hi - lo) if hi - lo > 1.0 else float("nan")
            st = stats(port)
            return {
                "k": k,
                "shared": bool(redis_url),
                "calls": n_ok,
                "sent": st["total"],
                "r429": st["rejected_429"],
                "util": span_rate / (rpm / 60),
                "cpu_per_call_ms": cpu / n_ok * 1000,
                "cpu_s": cpu,
            }
    finally:
        stop_mock(mock)


async def _admit_many(b: object, n: int = 2000, conc: int = 64, tokens: int = 0,
                      used: int | None = None) -> tuple[float, float]:
    """CPU us per call and calls/s through a Lane on budget `b` (each call sleeps 10 ms; `tokens`: what
    each is expected to use, charged to the key's TPM account when it has one; `used`: each call's answer
    settles it at that usage, as a real answer does)."""
    import asyncio

    sem = asyncio.Semaphore(conc)

    from runner.config import Endpoint
    from runner.lanes import Lane

    lane = Lane(Endpoint(name="bench", kind="sim"), None, None, provider=None)
    lane.budget = b

    async def noop() -> None:
        await asyncio.sleep(0.01)

    async def one() -> None:
        async with sem:
            await lane.call(noop, tokens)
            if used is not None:
                lane.reconcile(tokens, used)

    t0, w0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return (time.process_time() - t0) / n * 1e6, n / (time.perf_counter() - w0)


def in_process(redis_url: str) -> None:
    """The same admissions through the local budget and the Redis one, in one process: the CPU
    difference is what the shared budget costs per call, without process start-up noise. The fourth line
    settles each call at 60 of its 100 tokens (a credit per answer, as real usage is); `--in-process` runs
    these lines alone."""
    import asyncio

    import redis.asyncio as aioredis

    from runner.budgets.redis import RedisBudget, lane_id
    from runner.lanes import LocalBudget

    async def go() -> None:  # with a TPM too, as the runs' config has (tpm = 1e12): the key's TPM account's cost
        for rpm, tpm, used in ((12000, None, None), (60000, None, None), (12000, 1e12, None), (12000, 1e12, 60)):
            tokens = 100 if tpm else 0
            lo = await _admit_many(LocalBudget(rpm, tpm, 64), tokens=tokens, used=used)
            rb = RedisBudget(aioredis.Redis.from_url(redis_url), lane_id("bench", f"{rpm}-{tpm}-{used}"), "bench", rpm,
                             tpm, 64, 5.0, local_factory=LocalBudget)
            sh = await _admit_many(rb, tokens=tokens, used=used)
            await rb.aclose()
            settled = f", settled at {used}" if used is not None else ""
            print(f"in-process at {rpm:g} RPM{f', TPM {tpm:g}' if tpm else ''}{settled}: local {lo[0]:.0f} us/call "
                  f"({lo[1]:.0f}/s), redis {sh[0]:.0f} us/call ({sh[1]:.0f}/s, {rb.calls} + {rb._tpm.calls} TPM round trips): "
                  f"+{sh[0] - lo[0]:.0f} us per call")

    asyncio.run(go())


def runs(redis_url: str, rpm: float, seconds: float, ks: list[int]) -> None:
    """Each K without and with Redis, printed as it ends; then the extra CPU per call of the Redis path."""
    results = []
    for k in ks:
        for url in (None, redis_url):
            time.sleep(0.5)
            r = one(k, rpm, seconds, url)
            results.append(r)
            print(
                f"K={r['k']} {'shared' if r['shared'] else 'local '}: {r['calls']} calls, achieved/limit "
                f"{r['util']:.3f}, 429s {r['r429']}, sent {r['sent']}, CPU/call {r['cpu_per_call_ms']:.3f} ms",
                flush=True,
            )
    # process start-up (imports, connecting) is most of a short run's CPU: measure it with 1-call
    # runs and take it out, so the difference is the per-call cost of the Redis round trips
    base = {url is not None: one(1, rpm, seconds, url, per=1)["cpu_s"] for url in (None, redis_url)}
    in_process(redis_url)
    by = {(r["k"], r["shared"]): r for r in results}
    if (1, False) in by and (1, True) in by:
        sh, lo = by[(1, True)], by[(1, False)]
        extra = ((sh["cpu_s"] - base[True]) - (lo["cpu_s"] - base[False])) / sh["calls"] * 1000
        print(
            f"start-up CPU: {base[False]:.2f} s local, {base[True]:.2f} s shared; extra CPU per call from the "
            f"Redis round trips (K=1, shared - local, start-up removed): {extra:.3f} ms"
        )
