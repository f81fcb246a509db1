"""A mock OpenAI-compatible server on 127.0.0.1 for tests and benchmarks (aiohttp).

Behaviour by the requested model's name, so one server covers every case:
  ok-*          answer at once (plus the server's latency)
  flaky-500     per prompt: HTTP 500 twice, then answer
  ratelimit     per prompt: HTTP 429 with Retry-After once, then answer
  always-500    HTTP 500 forever
  bad-400       HTTP 400
  auth-401      HTTP 401 whose body echoes the bearer token (as some providers do)
  missing-*     HTTP 404 `model_not_found`, OpenAI's body for an id it does not have (or this key may not use)
  policy        HTTP 400 content-policy refusal
  timeout-once  per prompt: hang past the client's timeout once, then answer
  reset-once    per prompt: drop the connection once, then answer
  garbage-once  per prompt: a truncated JSON body once, then answer
  overloaded-once  per prompt: HTTP 529 `overloaded_error` (Anthropic's) once, then answer
  ratelimit-ms  per prompt: HTTP 429 with only `retry-after-ms` once, then answer
  ratelimit-reset  per prompt: HTTP 429 with only `x-ratelimit-remaining-requests: 0` and
                `x-ratelimit-reset-requests` once, then answer
  no-n-*        ignores `n`: always one choice (llama.cpp, Ollama)
A key containing `dry` gets OpenAI's HTTP 429 `insufficient_quota` (a key without credit);
`report_limits = (rpm, tpm)` adds OpenAI's x-ratelimit-* headers to every answer.
Fault injection (deterministic), for any model:
  a marker `[[fault:KIND]]` in the prompt injects KIND on the first attempt, `[[fault:KIND*N]]` on the
  first N attempts, `[[fault:KIND*]]` on every attempt; without a marker, `faults={KIND: rate}` draws a
  fault per (model, prompt, attempt) from a hash of `seed` (the same seed always gives the same storm).
  KINDS: 429 (Retry-After), 500, reset (connection dropped mid-body), hang (past the client timeout),
  truncated (half a JSON body), the malformed 200s of MALFORMED (content an object/int, usage counts as
  strings, message a string, choices a list of ints, null content with finish_reason "stop"), garbage
  (one of MALFORMED, by hash), big (a valid 5 MB answer), bad_utf8 (invalid UTF-8 in the content),
  echo_error (HTTP 500 whose body echoes the Authorization header after 200 chars of text),
  echo_success (a 200 whose text echoes it), echo_spellings (a non-JSON 200 echoing it in every spelling
  of tests/echoes.py), echo_spellings_text (a completion whose text does), error_200 (a 200 whose JSON is
  an error), choices_flood (50,000 choices, whatever `n`), content_filter (a 200 with null content and
  finish_reason content_filter), policy_400 (Azure's HTTP 400 `code: content_filter` for a filtered
  prompt) and 404 (the `missing-*` answer: a model withdrawn mid-run).
Server-wide: `held` (while True, answers wait, but a `[[now]]` prompt's: a test decides when they may
come), `latency_s`, `latency_of` (model, prompt, that model's requests before this one) -> seconds (a
test's latency law per model), and `rpm_per_key`, enforced over sliding 1-second windows (at most
rpm/60 requests in any second, per Authorization header) with HTTP 429 beyond.
It counts what it receives: per prompt text, per key, with arrival times, and per request how many of
its model's requests were answered before it and in flight with it (`seen_on_arrival`). A request with
`stream: true` gets its answer as server-sent events (tests.mock_sse, which also injects stream faults).
`GET /v1/models` lists `listed` (OpenAI's `{"object": "list", "data": [{"id", "object": "model"}]}`),
or answers `models_status` with a non-JSON body when that is set (a server without the route).

Run standalone (for bench/): `python -m tests.mock_openai --port 0 [--rpm N] [--latency S] [--realtime]`;
prints the port.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import gc
import hashlib
import os
import sys
import threading
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from tests import mock_faults
from tests.mock_faults import MALFORMED, _not_found, malformed  # noqa: F401  (re-exported for tests)
from tests.mock_sse import StreamFaults
from tests.threaded import Threaded, _Listening


def answer_text(model: str, prompt: str, i: int) -> str:
    """Deterministic: the same prompt always gets the same answer (choice i varies for n > 1)."""
    h = hashlib.sha256(f"{model}\x1f{prompt}\x1f{i}".encode()).digest()
    letter = "ABCD"[h[0] % 4]
    return f"Let me think step by step about this.\nThe answer is {letter}."


_MODEL = web.RequestKey("model", str)


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


class MockServer(Threaded):
    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        rpm_per_key: float | None = None,
        retry_after: float = 1.0,
        timeout_hang_s: float = 5.0,
        faults: dict[str, float] | None = None,
        seed: int = 0,
        report_limits: tuple[float, float] | None = None,
        keys: set[str] | None = None,
    ) -> None:
        self.valid_keys = keys
        self.sse = StreamFaults()
        """`stream: true` requests get their answer as SSE (tests.mock_sse, with its stream faults)."""
        self.held = False
        """When set, any other key gets 401 (chat and `GET /v1/models` alike)."""
        self.models_requests = 0
        self.listed: list[str] = []
        self.models_status: int | None = None
        self.report_limits = report_limits
        self.latency_s = latency_s
        self.latency_of: Callable[[str, str, int], float] | None = None
        self.rpm_per_key = rpm_per_key
        self.retry_after = retry_after
        self.timeout_hang_s = timeout_hang_s
        self.faults = dict(faults or {})
        self.seed = seed
        self.injected: Counter[str] = Counter()
        """Faults sent, by kind."""
        self.answered: Counter[tuple[str, str]] = Counter()
        """Usable answers sent, per (model, prompt) (usage counts as strings included)."""
        self.prompts: Counter[str] = Counter()
        self.per_model: Counter[str] = Counter()
        self.in_flight: Counter[str] = Counter()
        self.finished: Counter[str] = Counter()
        """Requests of each model answered (any status), as the server wrote its answer."""
        self.seen_on_arrival: list[tuple[str, int, int]] = []
        """Per request: (model, that model's requests already answered, its requests in flight with this one)."""
        self.keys: Counter[str] = Counter()
        self.times: dict[str, list[float]] = defaultdict(list)
        self.rejected_429 = 0
        self.rejections: list[float] = []
        self.last_body: dict[str, dict[str, Any]] = {}
        self.total = 0
        self.arrivals: list[tuple[float, str, str, int]] = []  # (time, model, prompt, n)
        self._windows: dict[str, list[float]] = defaultdict(list)
        self._seen: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        self.port = 0

    # --- the app -------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 2**20, middlewares=[self.sse.middleware])
        app.router.add_post("/v1/chat/completions", self.handle)
        app.router.add_get("/stats", self.handle_stats)
        app.router.add_get("/v1/models", self.handle_models)
        return app

    def _refused(self, request: web.Request) -> web.Response | None:
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if self.valid_keys is not None and key not in self.valid_keys:
            err = {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}
            return web.json_response(err, status=401)
        return None

    async def handle_models(self, request: web.Request) -> web.Response:
        """`GET /v1/models` (the pre-flight's request): not a paid call, not counted in `total`."""
        with self._lock:
            self.models_requests += 1
        no = self._refused(request)
        if no is not None:
            return no
        if self.models_status is not None:
            return web.Response(status=self.models_status, text="Not Found")
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "mock"} for m in self.listed]
        return web.json_response({"object": "list", "data": data})

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._handle(request)
        finally:
            if (model := request.get(_MODEL)) is not None:
                with self._lock:
                    self.in_flight[model] -= 1
                    self.finished[model] += 1

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if (no := self._refused(request)) is not None:
            return no
        raw = await request.read()
        now = self.arrived(request)  # when the client sent it, however late this thread reads it
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        body = orjson.loads(raw)
        model = body.get("model", "")
        prompt = _last_user_text(body.get("messages", []))
        with self._lock:
            self.total += 1
            self.prompts[prompt] += 1
            before = self.per_model[model]
            self.per_model[model] += 1
            request[_MODEL] = model
            self.in_flight[model] += 1
            self.seen_on_arrival.append((model, self.finished[model], self.in_flight[model]))
            self.keys[key] += 1
            self.times[key].append(now)
            self._seen[(model, prompt)] += 1
            bisect.insort(self.arrivals, (now, model, prompt, int(body.get("n", 1))))  # read out of order
            self.last_body[model] = body
            seen = self._seen[(model, prompt)]
            limited = self._over_limit(key, now)
        if "dry" in key:
            return web.json_response(_QUOTA, status=429)
        fault = self._fault(model, prompt, seen)
        if fault is not None:
            with self._lock:
                self.injected[fault] += 1
            return await self._inject(fault, request, model, prompt, int(body.get("n", 1)), key)
        if limited:
            self.rejected_429 += 1
            bisect.insort(self.rejections, now)
            return web.json_response(
                {"error": {"message": "Rate limit reached", "type": "requests"}},
                status=429,
                headers={"Retry-After": f"{self.retry_after:g}"},
            )
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if self.latency_of is not None:
            await asyncio.sleep(self.latency_of(model, prompt, before))
        while self.held and "[[now]]" not in prompt:  # a `[[now]]` prompt is answered even when held
            await asyncio.sleep(0.02)
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
        if model.startswith("missing-"):
            return _not_found(model)
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
        if body.get("tools") and (unsigned := missing_signature(model, body)) is not None:
            return unsigned
        out = tool_completion(model, body) if body.get("tools") else chat_completion(model, prompt, n)
        data = orjson.dumps(out)
        if model == "garbage-once" and seen == 1:
            data = data[: len(data) // 2]
        else:
            with self._lock:
                self.answered[(model, prompt)] += 1
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

    # --- fault injection (tests.mock_faults) -------------------------------------------------------

    def _fault(self, model: str, prompt: str, seen: int) -> str | None:
        return mock_faults.pick(self, model, prompt, seen)

    async def _inject(
        self, kind: str, request: web.Request, model: str, prompt: str, n: int, key: str
    ) -> web.StreamResponse:
        return await mock_faults.inject(self, kind, request, model, prompt, key, chat_completion(model, prompt, n))

    async def handle_stats(self, request: web.Request) -> web.Response:
        """What the server saw (for bench/ scripts running it in its own process); `?since=T` (this
        host's time.monotonic) adds `first_since`: the arrival time of the first request at or after T."""
        since = float(request.query.get("since", "nan"))
        with self._lock:
            i = bisect.bisect_left(self.arrivals, (since,)) if since == since else len(self.arrivals)
            return web.json_response(
                {
                    "first_since": self.arrivals[i][0] if i < len(self.arrivals) else None,
                    "total": self.total,
                    "per_model": dict(self.per_model),
                    "injected": dict(self.injected),
                    "answered": sum(self.answered.values()),
                    "distinct_answered": len(self.answered),
                    "rejected_429": self.rejected_429,
                }
            )

    def _over_limit(self, key: str, now: float) -> bool:
        """Whether admitting a request sent at `now` would put more than rpm/60 admitted requests in a
        1-second window (t-1, t]. A starved server reads requests late and out of order (their stamps
        are the client's), so the windows after `now` count too, not only the one ending at it."""
        if not self.rpm_per_key:
            return False
        cap = self.rpm_per_key / 60.0
        w = self._windows[key]  # admitted stamps, sorted
        near = w[bisect.bisect_right(w, now - 1.0) : bisect.bisect_left(w, now + 1.0)]
        at = bisect.bisect_right(near, now)
        near.insert(at, now)
        lo = 0
        for hi in range(at, len(near)):  # each window ending at a stamp >= now holds `now`
            while near[lo] <= near[hi] - 1.0:
                lo += 1
            if hi - lo >= cap:  # the others in it already reach rpm/60 (100 RPM: 2 a second, as before)
                return True
        bisect.insort(w, now)
        if len(w) > 4 * cap + 64:  # forget what no window can reach any more
            del w[: bisect.bisect_left(w, w[-1] - 5.0)]
        return False

    # --- lifecycle: tests.threaded (a background thread with its own loop) -----------------------

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


def tool_completion(model: str, body: dict[str, Any]) -> dict[str, Any]:
    """An answer when `tools` are offered: a call to the first tool (multiply 12.5 by 8) until a `tool`
    message came back, then a final answer quoting its content. `tool-bad-args` sends arguments that
    are not JSON, `tool-never` never calls (a model that ignores the tools), `tool-always` never stops calling."""
    last = (body.get("messages") or [{}])[-1]
    if (last.get("role") == "tool" and model != "tool-always") or model == "tool-never":
        msg: dict[str, Any] = {"role": "assistant", "content": f"The answer is {last.get('content', '7')}."}
        reason = "stop"
    else:
        name = body["tools"][0]["function"]["name"]
        args = '{"a": 12.5, "b": ' if model == "tool-bad-args" else '{"a": 12.5, "b": 8}'
        call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}
        if model == "tool-signed":  # Gemini 3 on its OpenAI-compatible endpoint: missing_signature
            call["extra_content"] = {"google": {"thought_signature": SIGNATURE}}
        msg, reason = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    return {
        "id": "chatcmpl-tools",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": reason}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


SIGNATURE = "c2lnbmVkIGJ5IHRoZSBtb2Nr"
"""The thought signature `tool-signed` puts on its calls."""


def missing_signature(model: str, body: dict[str, Any]) -> web.Response | None:
    """`tool-signed` refuses a turn whose earlier calls came back without the thought signature it gave them,
    as Gemini 3 does on its OpenAI-compatible endpoint (https://ai.google.dev/gemini-api/docs/thought-signatures:
    "you must pass back thought signatures during function calling, otherwise you will get a validation
    error"; its body as quoted in https://github.com/openai/codex/issues/7519)."""
    if model != "tool-signed":
        return None
    for k, m in enumerate(body.get("messages") or []):
        for c in m.get("tool_calls") or []:
            if ((c.get("extra_content") or {}).get("google") or {}).get("thought_signature") != SIGNATURE:
                msg = (f"Unable to submit request because function call default_api:{(c.get('function') or {}).get('name')}"
                       f" in the {k}. content block is missing a thought_signature. Learn more: "
                       "https://docs.cloud.google.com/vertex-ai/generative-ai/docs/thought-signatures")
                return web.json_response([{"error": {"code": 400, "message": msg, "status": "INVALID_ARGUMENT"}}],
                                         status=400)
    return None


def tool_message(model: str, body: dict[str, Any]) -> dict[str, Any]:
    """tool_completion's behaviours on Anthropic's Messages API (https://docs.anthropic.com/en/docs/
    agents-and-tools/tool-use/implement-tool-use): a short text and a `tool_use` block calling the first
    tool (multiply 12.5 by 8) until a user turn of `tool_result` blocks came back, then the answer quoting
    the first result. `tool-bad-args` leaves out `b` (Claude's input is always an object)."""
    last = (body.get("messages") or [{}])[-1]
    blocks = last.get("content") if isinstance(last.get("content"), list) else []
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if (results and model != "tool-always") or model == "tool-never":
        said = results[0].get("content") if results else "7"
        content: list[dict[str, Any]] = [{"type": "text", "text": f"The answer is {said}."}]
        reason = "end_turn"
    else:
        name = body["tools"][0]["name"]
        args = {"a": 12.5} if model == "tool-bad-args" else {"a": 12.5, "b": 8}
        turn = sum(m.get("role") == "assistant" for m in body.get("messages") or [])
        content = [{"type": "text", "text": "I'll use the calculator."},
                   {"type": "tool_use", "id": f"toolu_{turn + 1:02d}", "name": name, "input": args}]
        if (body.get("thinking") or {}).get("type") == "enabled":
            content.insert(0, {"type": "thinking", "thinking": "12.5 and 8: the calculator adds.",
                               "signature": THINKING_SIGNATURE})
        reason = "tool_use"
    return {"id": "msg_tools", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": reason, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}


THINKING_SIGNATURE = "RXh0ZW5kZWQgdGhpbmtpbmcgc2lnbmF0dXJl"


def unthought(body: dict[str, Any]) -> web.Response | None:
    """With extended thinking on, Anthropic refuses a final assistant turn of tool_use blocks that does not
    start with its thinking block, unmodified (docs.anthropic.com/en/docs/build-with-claude/extended-thinking
    #preserving-thinking-blocks; the 400 as quoted in deepset-ai/haystack-core-integrations#2146)."""
    if (body.get("thinking") or {}).get("type") != "enabled":
        return None
    turns = [(k, m) for k, m in enumerate(body.get("messages") or []) if m.get("role") == "assistant"]
    if not turns or not isinstance(turns[-1][1].get("content"), list):
        return None
    k, last = turns[-1]
    first = last["content"][0] if last["content"] else {}
    if any(b.get("type") == "tool_use" for b in last["content"]) and not (
            first.get("type") == "thinking" and first.get("signature") == THINKING_SIGNATURE):
        msg = (f"messages.{k}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
               f"`{first.get('type')}`. When `thinking` is enabled, a final `assistant` message must start with a "
               "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend "
               "you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. "
               "Please consult our documentation at https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking")
        return web.json_response({"type": "error", "error": {"type": "invalid_request_error", "message": msg}},
                                 status=400)
    return None


class MessagesServer(MockServer):
    """MockServer plus Anthropic's `POST /v1/messages`, answering `tool_message` when offered tools (else
    a text block of `answer_text`); counted in `total`, `per_model` and `last_body` like a chat call, and
    streamed when asked (tests.mock_sse)."""

    def app(self) -> web.Application:
        app = super().app()
        app.router.add_post("/v1/messages", self.handle_messages)
        return app

    async def handle_messages(self, request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        model = body.get("model", "")
        with self._lock:
            self.total += 1
            self.per_model[model] += 1
            self.last_body[model] = body
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if (refused := unthought(body)) is not None:
            return refused
        if body.get("tools"):
            return web.json_response(tool_message(model, body))
        text = answer_text(model, _last_user_text(body.get("messages") or []), 0)
        return web.json_response({"id": "msg_mock", "type": "message", "role": "assistant", "model": model,
                                  "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                                  "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 12}})


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            return "".join(p.get("text", "") for p in c or [] if p.get("type") == "text")
    return ""


class InflatedUsage(MockServer):
    """A provider whose usage the request cannot explain (#39): 3,000 output tokens billed whatever the
    limit, and with `absurd` the 3rd request 10^9 prompt tokens."""

    absurd = False

    async def _handle(self, request: web.Request) -> web.StreamResponse:  # type: ignore[override]
        resp = await super()._handle(request)
        body = orjson.loads(resp.body)  # type: ignore[attr-defined]
        if "usage" in body:
            body["usage"]["completion_tokens"] = 3000
            if self.absurd and self.total == 3:  # one absurd bill, among sane ones
                body["usage"]["prompt_tokens"] = 10**9
            body["usage"]["total_tokens"] = body["usage"]["prompt_tokens"] + 3000
        return web.json_response(body, status=resp.status)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--rpm", type=float)
    p.add_argument("--latency", type=float, default=0.0)
    p.add_argument("--faults", default="", help="KIND=RATE,... e.g. 429=0.3,500=0.1")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--retry-after", type=float, default=1.0)
    p.add_argument("--hang", type=float, default=5.0, help="seconds a `hang` fault holds the request")
    p.add_argument(
        "--realtime",
        action="store_true",
        help="run at real-time priority when permitted: the rate limit's clock is then not starved by "
        "the client it judges on a machine with few cores (a real provider's runs on its own machines)",
    )
    a = p.parse_args()
    if a.realtime:
        try:
            os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(10))
        except (AttributeError, PermissionError) as e:
            print(f"mock: no real-time priority ({e}); arrival stamps may lag under CPU contention", file=sys.stderr)
    faults = {k: float(v) for k, v in (kv.split("=") for kv in a.faults.split(",") if kv)}
    srv = MockServer(
        latency_s=a.latency,
        rpm_per_key=a.rpm,
        faults=faults,
        seed=a.seed,
        retry_after=a.retry_after,
        timeout_hang_s=a.hang,
    )

    async def run() -> None:
        # The server's clock is the rate limit's judge: a 25 ms gen-2 collection (its arrival log
        # grows by 1,000 entries a second at 60k RPM) would stamp the requests that arrived during
        # it late, bunched into the next window. Long-lived objects leave the collector's scans.
        gc.collect()
        gc.freeze()
        runner = web.AppRunner(srv.app(), access_log=None)
        await runner.setup()
        sock = _Listening()  # requests stamped by the kernel as they arrive (tests.threaded), as in-process
        sock.bind(("127.0.0.1", a.port))
        srv._listening = sock
        site = web.SockSite(runner, sock)
        await site.start()
        print(sock.getsockname()[1], flush=True)
        while True:
            await asyncio.sleep(1.0)
            print(f"stats total={srv.total} rejected_429={srv.rejected_429}", flush=True)

    asyncio.run(run())


if __name__ == "__main__":
    main()
