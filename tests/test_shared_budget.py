"""Lane budgets shared through a real Redis (started by the fixture) by several real processes on one key,
against the mock server enforcing that key's RPM over sliding 1-second windows."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import orjson
from aiohttp import web

from core.types import Decoding, Message, Request
from providers.openai import OpenAIProvider
from runner.budgets.local import LocalBudget
from runner.budgets.redis import RedisBudget, lane_id
from runner.budgets.redis_call import connect
from runner.config import Endpoint
from runner.lanes import Lane
from tests.helpers import rows, run_args, spawn, write_config, write_dataset
from tests.mock_openai import MockServer, _last_user_text
from tests.servers import RedisServer

KEY = "shared-key"


class Mock(MockServer):
    """The mock plus three prompt markers: `[[exhaust]]` answers its first attempt with a 429 saying the
    key's token budget is empty for 1 s (the provider's "everyone wait"); `[[keywide]]` refuses every
    request on the server for 3 s from its arrival (429, Retry-After and x-ratelimit-* saying until when);
    `[[slow]]` answers after 30 s."""

    refuse_until = 0.0
    keywide_refused = 0
    keywide_headers = True  # False: the refusal carries only its Retry-After

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        prompt = _last_user_text(body.get("messages", []))
        if "[[exhaust]]" in prompt and self._seen[(body.get("model", ""), prompt)] == 0:
            with self._lock:
                self._seen[(body.get("model", ""), prompt)] += 1
                self.arrivals.append((time.monotonic(), body.get("model", ""), prompt, 1))
                self.exhausted_at = time.monotonic()
            return web.json_response(
                {"error": {"message": "Rate limit reached for tokens", "type": "tokens"}},
                status=429,
                headers={
                    "Retry-After": "1",
                    "x-ratelimit-remaining-tokens": "0",
                    "x-ratelimit-reset-tokens": "1s",
                },
            )
        now = time.monotonic()
        if "[[keywide]]" in prompt and not self.refuse_until:
            self.refuse_until = now + 3.0
        if now < self.refuse_until:  # the whole key refused, the provider saying for how long
            left = self.refuse_until - now
            with self._lock:
                self.keywide_refused += 1
            return web.json_response(
                {"error": {"message": "Rate limit reached for requests", "type": "requests"}},
                status=429,
                headers={
                    "Retry-After": f"{left:.3f}",
                    "x-ratelimit-limit-requests": "1200",
                    "x-ratelimit-remaining-requests": "0",
                    "x-ratelimit-reset-requests": f"{left:.3f}s",
                } if self.keywide_headers else {"Retry-After": f"{left:.3f}"},
            )
        if "[[slow]]" in prompt:
            with self._lock:
                self.arrivals.append((time.monotonic(), body.get("model", ""), prompt, 1))
            await asyncio.sleep(30)
        return await super().handle(_Replay(request, body))


class _Replay:
    """The request again, its body already read."""

    def __init__(self, request: web.Request, body: dict) -> None:
        self._r, self._raw = request, orjson.dumps(body)
        self.headers, self.transport = request.headers, request.transport

    async def read(self) -> bytes:
        return self._raw

    def __setitem__(self, key: str, value: object) -> None:  # the mock's per-request state (web.Request's)
        self._r[key] = value

    def get(self, key: str, default: object = None) -> object:
        return self._r.get(key, default)


def _cfg(path: Path, base_url: str, models: list[str], redis_url: str | None, extra: str = "") -> Path:
    write_config(path, base_url, models, key_env="SHARED_TEST_KEY", extra_endpoint=extra)
    if redis_url:
        path.write_text(path.read_text() + f'\n[shared]\nredis_url = "{redis_url}"\nlease_s = 2\n')
    return path


def _start(args: list[str], tmp: Path, name: str) -> subprocess.Popen[str]:
    return spawn(args, {**os.environ, "SHARED_TEST_KEY": KEY, "EVALSWEEP_CACHE_DIR": str(tmp / f"cache-{name}")})


def _stderr_until(p: subprocess.Popen[str], words: str, guard_s: float = 120) -> str:
    """The process's stderr up to the line saying `words` (read as it writes it); a process that ends
    first fails the test, one that hangs silent is killed after `guard_s` (a guard, not a measure)."""
    guard = threading.Timer(guard_s, p.kill)
    guard.start()
    try:
        seen = ""
        while words not in seen:
            line = p.stderr.readline()  # type: ignore[union-attr]
            assert line, seen + p.communicate()[1]
            seen += line
        return seen
    finally:
        guard.cancel()


def _three(tmp: Path, srv: Mock, redis_url: str, n: int) -> list[subprocess.Popen[str]]:
    """Three processes on the key, each with its own dataset of n items and the key's full 1200 RPM."""
    procs = []
    for i in range(3):
        data = write_dataset(tmp / f"d{i}.jsonl", n, prefix=f"Process {i} question")
        cfg = _cfg(tmp / f"c{i}.toml", srv.base_url, [f"ok-{i}"], redis_url, "rpm = 1200\n")
        procs.append(_start(run_args(data, f"ok-{i}", cfg, tmp / f"run{i}"), tmp, str(i)))
    return procs


def _crowded(srv: MockServer) -> str:
    """What a failing run says about each refused request (the first 3): the arrivals in the server's second
    ending at it (ms before it, whose), so one failure tells a crowded second's cause (the processes, the
    regime: local pacing is ~100 ms apart per process here, Redis slots ~52 ms apart across them)."""
    out = []
    for x in srv.rejections[:3]:
        w = [(round(1000 * (t - x), 1), m) for t, m, _, _ in srv.arrivals if x - 1.0 < t <= x]
        out.append(f"429 at {x:.4f}: {len(w)} in its second: {w}")
    return "\n".join(out)


def _wait_all(procs: list[subprocess.Popen[str]], timeout: float = 120) -> list[str]:
    errs = []
    for p in procs:
        _, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err
        errs.append(err)
    return errs


def test_three_processes_on_one_key_stay_within_its_limit(tmp_path: Path, redis_server: RedisServer):
    """1200 RPM = 20 a second for the key, whoever sends: three processes, each with its own dataset and
    each configured with the key's full limit, together never exceed it in any 1 s window: 0 x 429."""
    srv = Mock(rpm_per_key=1200).start()
    try:
        _wait_all(_three(tmp_path, srv, redis_server.url, 40))
        for i in range(3):
            assert len(rows(tmp_path / f"run{i}")) == 40
        assert srv.rejected_429 == 0, _crowded(srv)
        assert srv.keys[KEY] == 120
        assert srv.max_in_window(KEY) <= 20
        ts = sorted(srv.times[KEY])
        assert (len(ts) - 1) / (ts[-1] - ts[0]) <= 20.5
    finally:
        srv.stop()


def test_shared_pause_is_seen_by_every_process(tmp_path: Path, redis_server: RedisServer):
    """Process A is told the key's budget is empty for 1 s; process B, on the same key, sends nothing
    during that second either (it learns through Redis, within ~0.1 s)."""
    srv = Mock().start()
    try:
        a_data = write_dataset(tmp_path / "a.jsonl", 30, prefix="A question")
        lines = a_data.read_bytes().splitlines()
        q = orjson.loads(lines[8])
        q["prompt"] = "[[exhaust]] " + q["prompt"]
        lines[8] = orjson.dumps(q)
        a_data.write_bytes(b"\n".join(lines) + b"\n")
        b_data = write_dataset(tmp_path / "b.jsonl", 80, prefix="B question")
        extra = "rpm = 600\nretry_initial_s = 0.01\n"
        ca = _cfg(tmp_path / "a.toml", srv.base_url, ["ok-a"], redis_server.url, extra)
        cb = _cfg(tmp_path / "b.toml", srv.base_url, ["ok-b"], redis_server.url, extra)
        pb = _start(run_args(b_data, "ok-b", cb, tmp_path / "rb"), tmp_path, "b")
        time.sleep(1.0)
        pa = _start(run_args(a_data, "ok-a", ca, tmp_path / "ra"), tmp_path, "a")
        _wait_all([pa, pb])
        t429 = srv.exhausted_at
        b_times = [t for t, m, _, _ in srv.arrivals if m == "ok-b"]
        a_times = [t for t, m, _, _ in srv.arrivals if m == "ok-a"]
        assert any(t < t429 for t in b_times) and any(t > t429 + 1.0 for t in b_times)  # B ran across it
        assert not [t for t in b_times if t429 + 0.2 < t < t429 + 0.95], [t - t429 for t in b_times]
        assert not [t for t in a_times if t429 < t < t429 + 0.95]
        assert len(rows(tmp_path / "ra")) == 30 and len(rows(tmp_path / "rb")) == 80
    finally:
        srv.stop()


def test_concurrency_leases_of_a_killed_process_expire(tmp_path: Path, redis_server: RedisServer):
    """A holds both of the key's concurrency slots (max_concurrency = 2) on calls that hang, and is
    SIGKILLed: B, on the same key, gets the slots only once A's leases expire (lease_s = 2), then runs."""
    srv = Mock().start()
    try:
        extra = "max_concurrency = 2\nrpm = 6000\ntpm = 100000000\n"  # limits known: no probing at cap 1
        # A's first call answers at once: the model has answered (runner.calls.gate lets the rest fan out)
        a_data = write_dataset(tmp_path / "a.jsonl", 5, prefix="[[slow]] A question")
        lines = a_data.read_text().splitlines()
        a_data.write_text("\n".join([lines[0].replace("[[slow]] ", ""), *lines[1:]]) + "\n")
        b_data = write_dataset(tmp_path / "b.jsonl", 6, prefix="B question")
        ca = _cfg(tmp_path / "a.toml", srv.base_url, ["ok-a"], redis_server.url, extra)
        cb = _cfg(tmp_path / "b.toml", srv.base_url, ["ok-b"], redis_server.url, extra)
        pa = _start(run_args(a_data, "ok-a", ca, tmp_path / "ra"), tmp_path, "a")
        t0 = time.monotonic()
        def slow() -> int:
            return sum(1 for _, m, p, _ in srv.arrivals if m == "ok-a" and "[[slow]]" in p)

        while slow() < 2:
            assert time.monotonic() - t0 < 60 and pa.poll() is None
            time.sleep(0.02)
        time.sleep(0.3)
        assert slow() == 2  # the cap holds the other two
        pa.send_signal(signal.SIGKILL)
        pa.wait(10)
        killed = time.monotonic()
        pb = _start(run_args(b_data, "ok-b", cb, tmp_path / "rb"), tmp_path, "b")
        _wait_all([pb])
        b_first = min(t for t, m, _, _ in srv.arrivals if m == "ok-b")
        assert b_first - killed >= 2 * 0.85, b_first - killed  # waited for A's leases to lapse
        assert len(rows(tmp_path / "rb")) == 6
    finally:
        srv.stop()


def test_redis_stopped_mid_run_falls_back_below_the_limit(tmp_path: Path, redis_server: RedisServer):
    """Redis dies while three processes share the key: each warns and paces at 1/3 of the limit, the
    runs complete, and the key never sees more than its limit in any second: 0 x 429."""
    srv = Mock(rpm_per_key=1200).start()
    try:
        # Redis goes only once all three share the key and have for a lease (lease_s = 2: a process that
        # falls back sooner may not yet know how many share it, and takes 1/8): answers are held until each
        # process's first call came (admitted through Redis), so a process slow to start (a loaded machine)
        # neither misses the outage nor finds the others' runs far ahead of its own.
        srv.held = True
        procs = _three(tmp_path, srv, redis_server.url, 50)
        t0 = time.monotonic()
        while len({m for _, m, _, _ in srv.arrivals}) < 3:
            assert all(p.poll() is None for p in procs) and time.monotonic() - t0 < 120
            time.sleep(0.02)
        time.sleep(2.5)
        srv.held = False
        t0 = time.monotonic()
        while srv.keys[KEY] < 45:
            assert time.monotonic() - t0 < 60
            time.sleep(0.02)
        redis_server.stop()
        stopped_at = srv.keys[KEY]
        errs = _wait_all(procs)
        assert stopped_at < 120  # really mid-run
        for i, err in enumerate(errs):
            assert "Redis unreachable" in err and "1/3" in err, err
            assert len(rows(tmp_path / f"run{i}")) == 50
        assert srv.rejected_429 == 0, _crowded(srv)
        assert srv.keys[KEY] == 150
        assert srv.max_in_window(KEY) <= 20
    finally:
        srv.stop()


def test_unreachable_redis_at_start_is_refused(tmp_path: Path):
    srv = Mock().start()
    try:
        data = write_dataset(tmp_path / "d.jsonl", 2)
        cfg = _cfg(tmp_path / "c.toml", srv.base_url, ["ok-a"], f"unix://{tmp_path}/no.sock")
        cfg.write_text(cfg.read_text() + "redis_wait_s = 1\n")
        p = _start(run_args(data, "ok-a", cfg, tmp_path / "r"), tmp_path, "x")
        _, err = p.communicate(timeout=60)
        assert p.returncode == 2 and "cannot reach Redis" in err and srv.total == 0
        assert "waiting up to 1s" in err and "after waiting 1s ([shared] redis_wait_s)" in err, err
        assert "Traceback" not in err
    finally:
        srv.stop()


def test_a_worker_started_during_a_redis_blip_waits_for_it(tmp_path: Path):
    """Redis down when the process starts and up 2 s later: the process says it waits, sends nothing
    meanwhile, then runs on the shared budget (it used to exit 2 at once)."""
    srv = Mock().start()
    redis = RedisServer()
    try:
        data = write_dataset(tmp_path / "d.jsonl", 5)
        cfg = _cfg(tmp_path / "c.toml", srv.base_url, ["ok-a"], redis.url)
        p = _start(run_args(data, "ok-a", cfg, tmp_path / "r"), tmp_path, "x")
        # Redis goes up once the process says it waits, not after a fixed 2 s: on a loaded machine its
        # start alone can take longer, and it then found Redis up and never waited.
        said = _stderr_until(p, "waiting up to 30s")
        time.sleep(1.0)  # a second of its waiting, in which it must send nothing
        assert p.poll() is None, p.communicate()
        assert srv.total == 0  # nothing sent while it waits
        redis.start()
        _, err = p.communicate(timeout=90)
        err = said + err
        assert p.returncode == 0, err
        assert "reached; starting" in err, err
        assert len(rows(tmp_path / "r")) == 5 and srv.total == 5
    finally:
        srv.stop()
        redis.close()


def _refuse_the_key_mid_run(tmp: Path, srv: Mock, redis_url: str) -> None:
    """Three processes on the key, 40 calls each; once 20 have arrived the server refuses the whole key
    for 3 s; every run still ends with 40 answered rows."""
    procs = _three(tmp, srv, redis_url, 40)
    t0 = time.monotonic()
    while srv.keys[KEY] < 20:
        assert time.monotonic() - t0 < 60
        time.sleep(0.01)
    srv.refuse_until = time.monotonic() + 3.0
    _wait_all(procs)
    for i in range(3):
        rs = rows(tmp / f"run{i}")
        assert len(rs) == 40 and all(r["error"] is None for r in rs)


def test_a_key_wide_refusal_pauses_every_process_for_the_time_given(tmp_path: Path, redis_server: RedisServer):
    """The provider refuses the whole key for 3 s (1200 RPM: its per-request reset would be 50 ms). Every
    process on the key waits the 3 s it was told, through Redis: a handful of refused calls, not one per
    slot of each process over those 3 s (~60)."""
    srv = Mock(rpm_per_key=1200).start()
    try:
        _refuse_the_key_mid_run(tmp_path, srv, redis_server.url)
        assert 1 <= srv.keywide_refused <= 6, srv.keywide_refused
    finally:
        srv.stop()


def test_a_key_wide_refusal_with_only_retry_after_costs_one_refused_call(tmp_path: Path, redis_server: RedisServer):
    """The same refusal of the whole key for 3 s, saying only Retry-After (no x-ratelimit-remaining-*: 0):
    told 3 s where the key's pace says 50 ms, the first process refused pauses the key for everyone at
    once. It cost 25 refused calls across the 3 processes (each waited for a second of its own refusals)."""
    srv = Mock(rpm_per_key=1200).start()
    srv.keywide_headers = False
    try:
        _refuse_the_key_mid_run(tmp_path, srv, redis_server.url)
        print(f"refused while the key was refused: {srv.keywide_refused}")
        assert 1 <= srv.keywide_refused <= 2, srv.keywide_refused
    finally:
        srv.stop()


def test_a_process_joining_a_busy_key_gets_its_share_of_the_concurrency(tmp_path: Path, redis_server: RedisServer):
    """A fills the key's concurrency (4) with a long run; B joins: the leases A frees go to B until each
    holds its fair share (2), so B runs beside A instead of waiting for A's spare leases to lapse."""
    srv = Mock(latency_s=0.2).start()
    try:
        extra = "max_concurrency = 4\nrpm = 60000\ntpm = 100000000\n"
        a_data = write_dataset(tmp_path / "a.jsonl", 200, prefix="A question")
        b_data = write_dataset(tmp_path / "b.jsonl", 30, prefix="B question")
        ca = _cfg(tmp_path / "a.toml", srv.base_url, ["ok-a"], redis_server.url, extra)
        cb = _cfg(tmp_path / "b.toml", srv.base_url, ["ok-b"], redis_server.url, extra)
        pa = _start(run_args(a_data, "ok-a", ca, tmp_path / "ra"), tmp_path, "a")
        t0 = time.monotonic()
        while sum(1 for _, m, _, _ in srv.arrivals if m == "ok-a") < 20:
            assert time.monotonic() - t0 < 60 and pa.poll() is None
            time.sleep(0.02)
        pb = _start(run_args(b_data, "ok-b", cb, tmp_path / "rb"), tmp_path, "b")
        _wait_all([pa, pb])
        a_t = [t for t, m, _, _ in srv.arrivals if m == "ok-a"]
        b_t = [t for t, m, _, _ in srv.arrivals if m == "ok-b"]
        assert len(b_t) == 30 and max(b_t) < max(a_t)  # B finished while A was still running
        both = [m for t, m, _, _ in srv.arrivals if min(b_t) <= t <= max(b_t)]
        share = both.count("ok-b") / len(both)
        assert share >= 0.35, (share, len(both))
    finally:
        srv.stop()


def test_redis_back_after_a_fallback_resumes_shared_pacing(tmp_path: Path, redis_server: RedisServer):
    """Redis dies under two processes on the key (each falls back to 1/2 of it, 10 a second) and comes
    back: the short run ends, and the long one returns to the shared budget, alone on the key at the full
    20 a second, instead of staying at 1/2 for the rest of its run."""
    srv = Mock(rpm_per_key=1200).start()
    try:
        procs = []
        for i, n in enumerate((40, 260)):
            data = write_dataset(tmp_path / f"d{i}.jsonl", n, prefix=f"Process {i} question")
            cfg = _cfg(tmp_path / f"c{i}.toml", srv.base_url, [f"ok-{i}"], redis_server.url, "rpm = 1200\n")
            procs.append(_start(run_args(data, f"ok-{i}", cfg, tmp_path / f"run{i}"), tmp_path, str(i)))
        t0 = time.monotonic()
        while srv.keys[KEY] < 30:
            assert time.monotonic() - t0 < 60
            time.sleep(0.02)
        redis_server.stop()
        time.sleep(1.5)
        redis_server.sock.unlink(missing_ok=True)
        redis_server.start()
        errs = _wait_all(procs)
        # one fallback each, not a second one seconds after Redis returned, on a stale pooled connection
        # ("Connection closed by server": 12 x 429 in one run)
        assert errs[1].count("Redis unreachable") == 1 and errs[1].count("shared pacing resumed") == 1, errs[1]
        assert errs[0].count("Redis unreachable") <= 1, errs[0]
        assert len(rows(tmp_path / "run0")) == 40 and len(rows(tmp_path / "run1")) == 260
        # Both fall back at the same instant: as fresh lanes their one-second bursts met at the next
        # window's edge (9-18 x 429 in half the runs); a fallback now starts on spaced slots (0 in 8 runs).
        # The one 429 still allowed here came in 3 of 32 runs beside a CPU hog: a first local send that
        # left ~14 ms after its admission, which the local window counted from, put 21 in a second; it
        # counts from the send now (test_a_fallbacks_local_window_counts_a_request_from_when_it_left).
        assert srv.rejected_429 == 0, _crowded(srv)
        last = sorted(t for t, m, _, _ in srv.arrivals if m == "ok-1")[-60:]
        assert 59 / (last[-1] - last[0]) > 15  # alone on the key at its full limit, not at 1/2 (10)
    finally:
        srv.stop()


async def test_a_fallbacks_local_window_counts_a_request_from_when_it_left(redis_server: RedisServer):
    """Redis gone, a process paces the key locally (alone on it here: its whole limit, 20 a second): its
    window must count a request from when its bytes left, as a lane's own budget does, not from its
    admission. The first call paced locally leaves 0.3 s after its admission (a new connection's handshake,
    a loaded loop). Counted from its admission, the 21st call went one window after that admission, into
    a second of the server's already holding 20: a 429 (what failed the test above, 2 x 429 3 ms apart:
    the fallback's shares add up to the key's limit with no margin beside the window's)."""
    srv = MockServer(rpm_per_key=1200).start()
    prov = OpenAIProvider(srv.base_url)
    b = RedisBudget(connect(redis_server.url), lane_id(srv.base_url, KEY), "e", 1200, None, 64, 0.5,
                    local_factory=LocalBudget)
    lane = Lane(Endpoint(name="e", base_url=srv.base_url, rpm=1200, max_attempts=1), None, KEY, prov)
    lane.budget = b
    slow: list[float] = []

    async def one(i: int) -> str:
        async def fn() -> object:
            if b._local is not None and not slow:  # the first call paced locally: held up on its way
                slow.append(time.monotonic())
                await asyncio.sleep(0.3)
            req = Request(suite="s", item=f"q{i}", messages=[Message(role="user", content=f"q{i}")],
                          decoding=Decoding(max_tokens=8))
            return await prov.complete(req, "ok-a", 1, 0, KEY, {})

        try:
            await lane.call(fn, 0)
            return "ok"
        except Exception as e:  # noqa: BLE001 - a 429 (max_attempts = 1): counted below, at the server too
            return type(e).__name__

    try:
        srv.held = True  # answers held: calls in flight hold the leases the fallback paces within
        await lane.call(lambda: asyncio.sleep(0), 0)  # (Redis tells N: it is alone on the key)
        await asyncio.sleep(0.7)  # (a lease's time since: N known, its whole limit locally)
        calls = [asyncio.create_task(one(i)) for i in range(60)]
        while srv.total < 12:
            await asyncio.sleep(0.01)
        redis_server.stop()
        while b._local is None:
            await asyncio.sleep(0.01)
        srv.held = False
        outcomes = await asyncio.gather(*calls)
        assert slow and b.fallbacks == 1
        assert srv.total == 60 and srv.rejected_429 == 0, f"{_crowded(srv)}\n{outcomes}"
        assert srv.max_in_window(KEY) <= 20
    finally:
        await b.aclose()
        await b.client.aclose()
        await prov.close()
        srv.stop()
