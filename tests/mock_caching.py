"""A mock of Anthropic's Messages API that caches prompts by Anthropic's documented rules, on 127.0.0.1.

The rules (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching), as applied here:
- The prompt is rendered system, then messages, block by block (a string content is one text block).
  A block carrying `cache_control: {"type": "ephemeral"}` is a breakpoint: the prefix up to and
  including it may be cached. More than 4 breakpoints: HTTP 400 invalid_request_error.
- A read: the longest prefix, ending at a breakpoint or at one of the 20 blocks before a breakpoint
  (the automatic lookback), that has a readable, live entry. Every read refreshes the entry's lifetime.
- A write: each breakpoint past the read whose prefix reaches the minimum (1,024 tokens; 2,048 for a
  Haiku model) gets an entry; shorter prefixes are processed without caching, at no charge.
- An entry is readable only once the response of the call that wrote it has begun (an unstreamed
  answer: when it is sent; a stream: at its first event), so calls sent together all write.
- An entry lives 5 minutes from its last use (`advance(s)` moves the mock's clock for tests).
- usage: `cache_read_input_tokens`, `cache_creation_input_tokens`, and `input_tokens` for the rest.
Tokens are counted as ceil(characters / 4) per text block and IMAGE_TOKENS per image.

It logs every request (arrival, when its answer began, the breakpoints, the usage) for tests to check
the fan-out order, and sums the billed input: writes at 1.25x, reads at 0.1x, the rest at 1x.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from tests.mock_sse import message_events
from tests.threaded import Threaded

MAX_BREAKPOINTS = 4
LOOKBACK = 20
TTL_S = 300.0
IMAGE_TOKENS = 1600
WRITE, READ = 1.25, 0.1


@dataclass
class Call:
    """One request as the mock saw it."""

    arrived: float
    model: str
    prompt: str
    """The last user text (identifies an item in tests)."""
    breakpoints: list[tuple[str, int, int]]
    """(where, message, block): ("system", -1, i) or ("messages", m, i)."""
    stream: bool
    began: float = 0.0
    ended: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)


@dataclass
class _Entry:
    readable_at: float | None  # None: its writer's answer has not begun
    expires: float = 0.0


def tokens(block: dict[str, Any]) -> int:
    if block.get("type") == "image":
        return IMAGE_TOKENS
    return -(-len(block.get("text") or "") // 4)


def min_tokens(model: str) -> int:
    return 2048 if "haiku" in model.lower() else 1024


def _blocks(body: dict[str, Any]) -> list[tuple[tuple[str, int, int], dict[str, Any]]]:
    out: list[tuple[tuple[str, int, int], dict[str, Any]]] = []
    system = body.get("system")
    if isinstance(system, str):
        system = [{"type": "text", "text": system}] if system else []
    for i, b in enumerate(system or []):
        out.append((("system", -1, i), b))
    for mi, m in enumerate(body.get("messages") or []):
        content = m["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for bi, b in enumerate(content):
            out.append((("messages", mi, bi), {**b, "_role": m["role"]}))
    return out


def _last_user_text(body: dict[str, Any]) -> str:
    for m in reversed(body.get("messages") or []):
        if m["role"] == "user":
            c = m["content"]
            return c if isinstance(c, str) else "".join(b.get("text", "") for b in c if b.get("type") == "text")
    return ""


class CachingMock(Threaded):
    def __init__(
        self, *, latency_s: float = 0.2, ttfb_s: float = 0.02, answer_chars: int = 400, hold_streams: bool = False,
        hold_s: float = 5.0, hold_until: int = 0,
    ) -> None:
        self.hold_until = hold_until
        """Every answer waits until this many requests have arrived (at most `hold_s`): what a client sends
        while its first calls are unanswered shows, with no clock in the test."""
        self._enough: asyncio.Event | None = None
        self.hold_streams = hold_streams
        """A stream pauses after its first event until another request with its prompt arrives (at most
        `hold_s`): a client that waits for the whole answer before sending siblings shows it by their
        arriving after the end (`Call.ended`), with no clock in the test."""
        self.hold_s = hold_s
        self._arrived: dict[str, asyncio.Event] = {}
        self.latency_s = latency_s
        self.ttfb_s = ttfb_s
        self.answer_chars = answer_chars
        self.calls: list[Call] = []
        self.entries: dict[tuple[str, str], _Entry] = {}
        self.refused = 0
        self._offset = 0.0
        self._lock = threading.Lock()

    # --- the rules -------------------------------------------------------------------------------

    def now(self) -> float:
        return time.monotonic() + self._offset

    def advance(self, seconds: float) -> None:
        """Move the mock's clock on (entries expire as if `seconds` had passed)."""
        self._offset += seconds

    def _account(self, model: str, blocks: list[tuple[tuple[str, int, int], dict[str, Any]]]) -> tuple[
        dict[str, int], list[_Entry]
    ]:
        """(usage, entries this call writes): the read, the writes and the rest, by the rules above."""
        chain, cum, h, total = [], [], hashlib.sha256(model.encode()), 0
        for _, b in blocks:
            h.update(orjson.dumps({k: v for k, v in b.items() if k != "cache_control"}, option=orjson.OPT_SORT_KEYS))
            chain.append(h.hexdigest())
            total += tokens(b)
            cum.append(total)
        marks = [i for i, (_, b) in enumerate(blocks) if "cache_control" in b]
        now, read_at = self.now(), -1
        for k in marks:
            for p in range(k, max(-1, k - LOOKBACK), -1):
                e = self.entries.get((model, chain[p]))
                if p > read_at and e is not None and e.readable_at is not None and e.expires > now:
                    read_at = p
        read = cum[read_at] if read_at >= 0 else 0
        if read_at >= 0:
            self.entries[(model, chain[read_at])].expires = now + TTL_S
        written, wrote = [], read
        for k in marks:
            if k > read_at and cum[k] >= min_tokens(model):
                e = self.entries.get((model, chain[k]))
                if e is None or e.readable_at is None or e.expires <= now:
                    e = self.entries[(model, chain[k])] = _Entry(None)
                written.append(e)
                wrote = cum[k]
        usage = {"input_tokens": total - wrote, "cache_creation_input_tokens": wrote - read,
                 "cache_read_input_tokens": read}
        return usage, written

    def _begin(self, call: Call, written: list[_Entry]) -> None:
        with self._lock:
            call.began = now = self.now()
            for e in written:
                if e.readable_at is None:
                    e.readable_at, e.expires = now, now + TTL_S

    # --- the app ---------------------------------------------------------------------------------

    async def messages(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        model = body["model"]
        blocks = _blocks(body)
        for where, b in blocks:
            cc = b.get("cache_control")
            if cc is not None and cc.get("type") != "ephemeral":
                return _invalid(f"{where}: cache_control.type must be 'ephemeral'")
            if b.get("type") == "text" and not b.get("text"):
                return _invalid("text content blocks must be non-empty")
        marks = [w for w, b in blocks if "cache_control" in b]
        if len(marks) > MAX_BREAKPOINTS:
            with self._lock:
                self.refused += 1
            return _invalid(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                            f"Found {len(marks)}.")
        prompt = _last_user_text(body)
        if self.hold_streams and prompt in self._arrived:
            self._arrived[prompt].set()  # a sibling is here: the held stream goes on
        elif self.hold_streams:
            self._arrived[prompt] = asyncio.Event()
        with self._lock:
            call = Call(self.now(), model, prompt, marks, bool(body.get("stream")))
            self.calls.append(call)
            usage, written = self._account(model, blocks)
        if self.hold_until:
            if self._enough is None:
                self._enough = asyncio.Event()
            if len(self.calls) >= self.hold_until:
                self._enough.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._enough.wait(), self.hold_s)
        text = _answer(prompt, self.answer_chars)
        usage["output_tokens"] = -(-len(text) // 4)
        call.usage = usage
        answer = {"id": f"msg_{len(self.calls)}", "type": "message", "role": "assistant", "model": model,
                  "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                  "stop_sequence": None, "usage": usage}
        if not call.stream:
            await asyncio.sleep(self.latency_s)
            self._begin(call, written)
            call.ended = call.began
            return web.json_response(answer)
        frames = message_events(answer)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await asyncio.sleep(self.ttfb_s)
        await resp.prepare(request)
        self._begin(call, written)
        await resp.write(frames[0])
        if self.hold_streams:
            ev = self._arrived.setdefault(prompt, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ev.wait(), self.hold_s)
        await asyncio.sleep(max(0.0, self.latency_s - self.ttfb_s))
        for f in frames[1:]:
            await resp.write(f)
        await resp.write_eof()
        call.ended = self.now()
        return resp

    # --- what it billed --------------------------------------------------------------------------

    def billed(self) -> dict[str, float]:
        """Input tokens sent, and billed in input-price units (writes 1.25x, reads 0.1x): their ratio."""
        with self._lock:
            us = [c.usage for c in self.calls]
        rest = sum(u["input_tokens"] for u in us)
        w = sum(u["cache_creation_input_tokens"] for u in us)
        r = sum(u["cache_read_input_tokens"] for u in us)
        sent = rest + w + r
        units = rest + WRITE * w + READ * r
        return {"input": sent, "written": w, "read": r, "billed": units, "ratio": units / sent if sent else 0.0}

    async def stats(self, request: web.Request) -> web.Response:
        """`GET /stats`: billed() and the number of calls (bench/prompt_caching.py runs the mock apart)."""
        return web.json_response({**self.billed(), "calls": len(self.calls)})

    async def reset(self, request: web.Request) -> web.Response:
        """`POST /reset`: forget every call and cache entry (the next workload starts cold)."""
        with self._lock:
            self.calls.clear()
            self.entries.clear()
        return web.json_response({})

    # --- lifecycle -------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_post("/v1/messages", self.messages)
        app.router.add_get("/stats", self.stats)
        app.router.add_post("/reset", self.reset)
        return app

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _invalid(message: str) -> web.Response:
    return web.json_response({"type": "error", "error": {"type": "invalid_request_error", "message": message}},
                             status=400)


def _answer(prompt: str, chars: int) -> str:
    """A deterministic answer of about `chars` characters ending with a choice."""
    seed = hashlib.sha256(prompt.encode()).hexdigest()
    head = f"Working through it ({seed[:8]}). "
    body = ("Step by step, each quantity follows from the previous one. " * (chars // 60 + 1))[: max(0, chars - 60)]
    return head + body + f" The answer is ({'ABCD'[int(seed[0], 16) % 4]})."


def main() -> None:
    """`python -m tests.mock_caching [--latency S] [--answer-chars N]`: serve until killed; prints the port."""
    import argparse
    import sys

    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--answer-chars", type=int, default=400)
    a = ap.parse_args()
    mock = CachingMock(latency_s=a.latency, ttfb_s=a.latency / 10, answer_chars=a.answer_chars).start()
    print(mock.port, flush=True)
    try:
        sys.stdin.read()  # until the parent closes our stdin (or kills us)
    finally:
        mock.stop()


if __name__ == "__main__":
    main()
