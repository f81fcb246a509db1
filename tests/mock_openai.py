"""A mock OpenAI-compatible server on 127.0.0.1 for tests and benchmarks (aiohttp).

Behaviour by the requested model's name, so one server covers every case:
  ok-*          answer at once (plus the server's latency)
  flaky-500     per prompt: HTTP 500 twice, then answer
  ratelimit     per prompt: HTTP 429 with Retry-After once, then answer
  always-500    HTTP 500 forever
  bad-400       HTTP 400
  auth-401      HTTP 401 whose body echoes the bearer token (as some providers do)
  policy        HTTP 400 content-policy refusal
  timeout-once  per prompt: hang past the client's timeout once, then answer
  reset-once    per prompt: drop the connection once, then answer
  garbage-once  per prompt: a truncated JSON body once, then answer
  overloaded-once  per prompt: HTTP 529 `overloaded_error` (Anthropic's) once, then answer
  ratelimit-ms  per prompt: HTTP 429 with only `retry-after-ms` once, then answer
  ratelimit-reset  per prompt: HTTP 429 with only `x-ratelimit-remaining-requests: 0` and
                `x-ratelimit-reset-requests` once, then answer
  no-n-*        ignores `n`: always one choice (llama.cpp, Ollama)
A key containing `dry` gets OpenAI's HTTP 429 `insufficient_quota` (a key without credit).
Server-wide `storm_429`: that fraction of all requests (by a hash of prompt and attempt) gets HTTP 429
with Retry-After, whatever the rate; `report_limits = (rpm, tpm)` adds OpenAI's x-ratelimit-* headers.
Server-wide: `latency_s`, and `rpm_per_key`, enforced over sliding 1-second windows (at most
rpm/60 requests in any second, per Authorization header) with HTTP 429 beyond.
It counts what it receives: per prompt text, per key, with arrival times.

Run standalone (for bench/): `python -m tests.mock_openai --port 0 [--rpm N] [--latency S]`; prints the port.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import threading
import time
from collections import Counter, defaultdict, deque
from typing import Any

import orjson
from aiohttp import web


def answer_text(model: str, prompt: str, i: int) -> str:
    """Deterministic: the same prompt always gets the same answer (choice i varies for n > 1)."""
    h = hashlib.sha256(f"{model}\x1f{prompt}\x1f{i}".encode()).digest()
    letter = "ABCD"[h[0] % 4]
    return f"Let me think step by step about this.\nThe answer is {letter}."


def chat_completion(model: str, prompt: str, n: int) -> dict[str, Any]:
    """The body of a chat.completion answer with n choices (live and batch mocks alike)."""
    return {
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": i,
                "message": {"role": "assistant", "content": answer_text(model, prompt, i)},
                "finish_reason": "stop",
            }
            for i in range(n)
        ],
        "usage": {
            "prompt_tokens": len(prompt) // 4 + 1,
            "completion_tokens": 12 * n,
            "total_tokens": len(prompt) // 4 + 1 + 12 * n,
        },
    }


class MockServer:
    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        rpm_per_key: float | None = None,
        retry_after: float = 1.0,
        timeout_hang_s: float = 5.0,
        storm_429: float = 0.0,
        report_limits: tuple[float, float] | None = None,
    ) -> None:
        self.storm_429 = storm_429
        self.report_limits = report_limits
        self.storm_rejected = 0
        self.latency_s = latency_s
        self.rpm_per_key = rpm_per_key
        self.retry_after = retry_after
        self.timeout_hang_s = timeout_hang_s
        self.prompts: Counter[str] = Counter()
        self.per_model: Counter[str] = Counter()
        self.keys: Counter[str] = Counter()
        self.times: dict[str, list[float]] = defaultdict(list)
        self.rejected_429 = 0
        self.rejections: list[float] = []
        self.last_body: dict[str, dict[str, Any]] = {}
        self.total = 0
        self.arrivals: list[tuple[float, str, str, int]] = []  # (time, model, prompt, n)
        self._windows: dict[str, deque[float]] = defaultdict(deque)
        self._seen: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # --- the app -------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_post("/v1/chat/completions", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        now = time.monotonic()
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        body = orjson.loads(raw)
        model = body.get("model", "")
        prompt = _last_user_text(body.get("messages", []))
        with self._lock:
            self.total += 1
            self.prompts[prompt] += 1
            self.per_model[model] += 1
            self.keys[key] += 1
            self.times[key].append(now)
            self._seen[(model, prompt)] += 1
            self.arrivals.append((now, model, prompt, int(body.get("n", 1))))
            self.last_body[model] = body
            seen = self._seen[(model, prompt)]
            limited = self._over_limit(key, now)
        if "dry" in key:
            return web.json_response(_QUOTA, status=429)
        if self.storm_429 and _unit(f"{prompt}\x1f{seen}") < self.storm_429:
            self.storm_rejected += 1
            return web.json_response(
                {"error": {"message": "Rate limit reached", "type": "requests"}},
                status=429,
                headers={"Retry-After": f"{self.retry_after:g}"},
            )
        if limited:
            self.rejected_429 += 1
            self.rejections.append(now)
            return web.json_response(
                {"error": {"message": "Rate limit reached", "type": "requests"}},
                status=429,
                headers={"Retry-After": f"{self.retry_after:g}"},
            )
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if model == "flaky-500" and seen <= 2 or model == "always-500":
            return web.json_response({"error": {"message": "internal error"}}, status=500)
        if model == "ratelimit" and seen == 1:
            return web.json_response(
                {"error": {"message": "slow down"}},
                status=429,
                headers={"Retry-After": f"{self.retry_after:g}"},
            )
        if seen == 1 and model == "overloaded-once":
            return web.json_response(
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, status=529
            )
        if seen == 1 and model == "ratelimit-ms":
            return web.json_response(
                {"error": {"message": "slow down"}}, status=429, headers={"retry-after-ms": "300"}
            )
        if seen == 1 and model == "ratelimit-reset":
            return web.json_response(
                {"error": {"message": "slow down"}},
                status=429,
                headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "300ms"},
            )
        if model == "bad-400":
            return web.json_response({"error": {"message": "invalid parameter 'foo'"}}, status=400)
        if model == "auth-401":
            return web.json_response({"error": {"message": f"Incorrect API key provided: {key}"}}, status=401)
        if model == "policy":
            return web.json_response(
                {"error": {"message": "blocked", "code": "content_policy_violation"}}, status=400
            )
        if model == "timeout-once" and seen == 1:
            await asyncio.sleep(self.timeout_hang_s)
        if model == "reset-once" and seen == 1:
            assert request.transport is not None
            request.transport.abort()
            return web.Response(status=500)
        n = 1 if model.startswith("no-n-") else int(body.get("n", 1))
        out = chat_completion(model, prompt, n)
        data = orjson.dumps(out)
        if model == "garbage-once" and seen == 1:
            data = data[: len(data) // 2]
        return web.Response(body=data, content_type="application/json", headers=self._limit_headers(key, now))

    def _limit_headers(self, key: str, now: float) -> dict[str, str] | None:
        if not self.report_limits:
            return None
        rpm, tpm = self.report_limits
        recent = sum(1 for t in self.times.get(key, [])[-int(rpm) - 1 :] if now - t < 60.0)
        return {
            "x-ratelimit-limit-requests": f"{rpm:g}",
            "x-ratelimit-remaining-requests": f"{max(0, int(rpm) - recent)}",
            "x-ratelimit-reset-requests": "6m0s",
            "x-ratelimit-limit-tokens": f"{tpm:g}",
            "x-ratelimit-remaining-tokens": f"{int(tpm) - 100}",
            "x-ratelimit-reset-tokens": "20ms",
        }

    def _over_limit(self, key: str, now: float) -> bool:
        if not self.rpm_per_key:
            return False
        w = self._windows[key]
        while w and now - w[0] >= 1.0:
            w.popleft()
        if len(w) >= self.rpm_per_key / 60.0:
            return True
        w.append(now)
        return False

    # --- lifecycle: a background thread with its own loop, usable from sync and async tests ------

    def start(self) -> MockServer:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            self._runner = web.AppRunner(self.app(), access_log=None)
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def max_in_window(self, key: str, window_s: float = 1.0) -> int:
        """The most requests this key sent in any sliding window of `window_s` seconds."""
        ts = sorted(self.times.get(key, []))
        best, lo = 0, 0
        for hi, t in enumerate(ts):
            while t - ts[lo] >= window_s:
                lo += 1
            best = max(best, hi - lo + 1)
        return best


_QUOTA = {
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
}


def _unit(text: str) -> float:
    """A deterministic number in [0, 1) for a text (the storm's dice)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            return "".join(p.get("text", "") for p in c or [] if p.get("type") == "text")
    return ""


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--rpm", type=float)
    p.add_argument("--latency", type=float, default=0.0)
    a = p.parse_args()
    srv = MockServer(latency_s=a.latency, rpm_per_key=a.rpm)

    async def run() -> None:
        runner = web.AppRunner(srv.app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", a.port)
        await site.start()
        print(site._server.sockets[0].getsockname()[1], flush=True)  # type: ignore[union-attr]
        while True:
            await asyncio.sleep(1.0)
            print(f"stats total={srv.total} rejected_429={srv.rejected_429}", flush=True)

    asyncio.run(run())


if __name__ == "__main__":
    main()
