"""Streaming for the mock servers: an aiohttp middleware that turns the JSON answer of a request sent
with `stream: true` into the server-sent events the provider would send, so every mock streams exactly
what it would have answered whole.

Formats: OpenAI Responses (https://platform.openai.com/docs/api-reference/responses-streaming: text
deltas, then `response.completed` or `response.incomplete` carrying the whole response), OpenAI chat (https://platform.openai.com/docs/api-reference/chat-streaming: `data:` chunks of
`chat.completion.chunk`, a final chunk with `usage` and no choices only when the request asked
`stream_options.include_usage`, then `data: [DONE]`) and Anthropic Messages
(https://docs.anthropic.com/en/docs/build-with-claude/streaming: message_start with the input usage,
content_block_start/delta/stop per block, ping, message_delta with stop_reason and output usage,
message_stop; `event: error` with an `overloaded_error` body mid-stream).

Stream faults, by a marker in the prompt (on every attempt unless `*1`: the first only):
  [[stream:slow]]   every event `gap_s` apart (the whole answer takes longer than an idle timeout)
  [[stream:stall]]  half the events, then silence for `stall_s`
  [[stream:cut]]    half the events, then the connection is dropped
  [[stream:error]]  half the events, then an error event (Anthropic's overloaded_error)
  [[stream:eof]]    half the events, then a clean end of the body (no final event)
  [[stream:error_first*1]]  the error event before any output, on the first attempt only
  [[stream:hang*1]]  no answer at all (not even headers) for `stall_s`, on the first attempt only
  [[stream:keepalive]]  half the events, then only `: keep-alive` comments every `gap_s` for `stall_s`,
                    then the rest (a provider holding the connection warm while it stalls)
  [[stream:keepalive_only]]  `: keep-alive` comments every `gap_s` for `stall_s`, then the answer
  [[stream:malformed]]  a malformed event first (not JSON), then the whole answer
`enabled = False` answers JSON to streamed requests, as a gateway ignoring `stream` does. It counts streamed requests per model and the bodies' `stream_options`.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

_MARK = re.compile(rb"\[\[stream:([a-z_]+)(\*1)?\]\]")
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
"""Anthropic's mid-stream error (https://docs.anthropic.com/en/api/errors#errors-during-streaming)."""


def _pieces(text: str, k: int = 4) -> list[str]:
    step = max(1, -(-len(text) // k))
    return [text[i : i + step] for i in range(0, len(text), step)]


def chat_events(answer: dict[str, Any], include_usage: bool) -> list[bytes]:
    """The SSE frames of a chat.completion answer."""
    base = {"id": answer.get("id", "chatcmpl-mock"), "object": "chat.completion.chunk", "created": 0,
            "model": answer.get("model")}
    out = []
    for ch in answer["choices"]:
        i, msg = ch.get("index", 0), ch.get("message") or {}
        first = {"role": "assistant", "content": ""}
        out.append({**base, "choices": [{"index": i, "delta": first, "finish_reason": None}]})
        for piece in _pieces(msg.get("content") or ""):
            out.append({**base, "choices": [{"index": i, "delta": {"content": piece}, "finish_reason": None}]})
        for delta in tool_call_deltas(msg.get("tool_calls") or []):
            out.append({**base, "choices": [{"index": i, "delta": delta, "finish_reason": None}]})
        out.append({**base, "choices": [{"index": i, "delta": {}, "finish_reason": ch.get("finish_reason")}]})
    if include_usage and "usage" in answer:
        out.append({**base, "choices": [], "usage": answer["usage"]})
    return [b"data: " + orjson.dumps(c) + b"\n\n" for c in out] + [b"data: [DONE]\n\n"]


def tool_call_deltas(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A message's `tool_calls` as OpenAI streams them (https://platform.openai.com/docs/guides/function-calling
    #streaming): per call, a delta with its index, id, type, name and empty arguments, then its arguments
    in pieces (`{"index", "function": {"arguments"}}`); an object `arguments` (Ollama's) goes whole."""
    out: list[dict[str, Any]] = []
    for k, c in enumerate(calls):
        fn = c.get("function") or {}
        args = fn.get("arguments")
        head = {**{f: v for f, v in c.items() if f not in ("id", "type", "function")},  # (Gemini's extra_content)
                "index": k, "id": c.get("id"), "type": "function",
                "function": {"name": fn.get("name"), "arguments": args if isinstance(args, dict) else ""}}
        out.append({"tool_calls": [head]})
        for piece in _pieces(args) if isinstance(args, str) else ():
            out.append({"tool_calls": [{"index": k, "function": {"arguments": piece}}]})
    return out


def message_events(answer: dict[str, Any]) -> list[bytes]:
    """The SSE frames of a Message answer."""
    usage = answer.get("usage") or {}
    start = {**answer, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**{k: v for k, v in usage.items() if k != "output_tokens"}, "output_tokens": 1}}
    ev: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(answer.get("content") or []):
        kind = block.get("type")
        if kind == "tool_use":
            ev.extend(tool_use_events(i, block))
            continue
        field, dtype = ("thinking", "thinking_delta") if kind == "thinking" else ("text", "text_delta")
        ev.append(("content_block_start", {"type": "content_block_start", "index": i,
                                           "content_block": {**block, field: ""}}))
        if i == 0:
            ev.append(("ping", {"type": "ping"}))
        for piece in _pieces(block.get(field) or ""):
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                               "delta": {"type": dtype, field: piece}}))
        if kind == "thinking":
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                               "delta": {"type": "signature_delta", "signature": block.get("signature")}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    ev.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": answer.get("stop_reason"),
               "stop_sequence": answer.get("stop_sequence")}, "usage": {"output_tokens": usage.get("output_tokens")}}))
    ev.append(("message_stop", {"type": "message_stop"}))
    return [f"event: {name}\n".encode() + b"data: " + orjson.dumps(d) + b"\n\n" for name, d in ev]


def tool_use_events(i: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A `tool_use` block as Anthropic streams it (https://docs.anthropic.com/en/docs/build-with-claude/
    streaming#input-json-delta): its start with an empty `input`, an empty first input_json_delta, then
    the input's JSON in pieces (a string `input` is sent as is: pieces that do not make JSON)."""
    raw = block.get("input")
    text = raw if isinstance(raw, str) else orjson.dumps(raw if raw is not None else {}).decode()
    ev: list[tuple[str, dict[str, Any]]] = [
        ("content_block_start", {"type": "content_block_start", "index": i,
                                 "content_block": {**block, "input": {}}})]
    for piece in ["", *_pieces(text)]:
        ev.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                           "delta": {"type": "input_json_delta", "partial_json": piece}}))
    ev.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    return ev


def responses_events(answer: dict[str, Any]) -> list[bytes]:
    """The SSE frames of a Responses answer: created, text deltas, then the whole response."""
    ev: list[dict[str, Any]] = [{"type": "response.created", "response": {
        **answer, "status": "in_progress", "output": [], "usage": None}}]
    for item in answer.get("output") or []:
        for part in item.get("content") or [] if item.get("type") == "message" else []:
            for piece in _pieces(part.get("text") or ""):
                ev.append({"type": "response.output_text.delta", "item_id": item.get("id"), "delta": piece})
    done = "response.completed" if answer.get("status") == "completed" else "response.incomplete"
    ev.append({"type": done, "response": answer})
    return [f"event: {e['type']}\n".encode() + b"data: " + orjson.dumps(e) + b"\n\n" for e in ev]


class StreamFaults:
    """`StreamFaults().middleware` is the middleware; `gap_s`/`stall_s` tune the faults."""

    def __init__(self, gap_s: float = 0.2, stall_s: float = 5.0) -> None:
        self.gap_s, self.stall_s = gap_s, stall_s
        self.streamed: Counter[str] = Counter()
        self.stream_options: list[Any] = []
        self.cut: Counter[str] = Counter()
        """Streams the mock cut (stall, cut, error), per fault."""
        self._seen: Counter[bytes] = Counter()
        self.enabled = True
        self.served: list[tuple[int, int]] = []
        """(input, output) tokens of every stream started, whole or cut: a provider bills what it
        generated, so a stream cut mid-answer is billed its whole answer (`bill`)."""

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.method != "POST" or not request.path.endswith(("/chat/completions", "/messages", "/responses")):
            return await handler(request)
        raw = await request.read()  # aiohttp keeps it: the handler reads it again
        if b'"stream"' not in raw or not self.enabled:
            return await handler(request)
        body = orjson.loads(raw)
        if body.get("stream") is not True:
            return await handler(request)
        resp = await handler(request)
        if not isinstance(resp, web.Response) or resp.status != 200 or resp.content_type != "application/json":
            return resp
        answer = orjson.loads(resp.body)  # type: ignore[arg-type]
        chat = request.path.endswith("/chat/completions")
        self.streamed[str(body.get("model"))] += 1
        usage = answer.get("usage") or {}
        self.served.append((int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)))
        if chat:
            self.stream_options.append(body.get("stream_options"))
            opts = body.get("stream_options")
            frames = chat_events(answer, isinstance(opts, dict) and opts.get("include_usage") is True)
        elif request.path.endswith("/responses"):
            frames = responses_events(answer)
        else:
            frames = message_events(answer)
        fault = self._fault(raw)
        if fault == "hang":
            await asyncio.sleep(self.stall_s)
        return await self._send(request, frames, fault, chat)

    def bill(self, price_in: float, price_out: float) -> float:
        """What the streams served would be billed, in USD, at these prices per million tokens."""
        return sum(i * price_in + o * price_out for i, o in self.served) / 1e6

    async def _keep_alive(self, out: web.StreamResponse) -> None:
        """SSE comments only (https://html.spec.whatwg.org/multipage/server-sent-events.html: a line
        starting with ':' is ignored; providers send them to keep proxies from closing an idle stream)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + self.stall_s
        while loop.time() < end:
            await out.write(b": keep-alive\n\n")
            await asyncio.sleep(self.gap_s)

    def _fault(self, raw: bytes) -> str | None:
        m = _MARK.search(raw)
        if m is None:
            return None
        self._seen[raw] += 1
        return m.group(1).decode() if not m.group(2) or self._seen[raw] == 1 else None

    async def _send(self, request: web.Request, frames: list[bytes], fault: str | None, chat: bool
                    ) -> web.StreamResponse:
        out = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        half = len(frames) // 2
        error = (b"data: " if chat else b"event: error\ndata: ") + orjson.dumps(OVERLOADED) + b"\n\n"
        try:
            await out.prepare(request)
            if fault == "malformed":
                self.cut[fault] += 1
                await out.write(b"data: {\"id\": \"chatcmpl-x\", \"choices\": [\n\n")
            if fault == "keepalive_only":
                self.cut[fault] += 1
                await self._keep_alive(out)
            for i, frame in enumerate(frames):
                if fault == "error_first" and i == 1:
                    self.cut[fault] += 1
                    await out.write(error)
                    return out
                if i == half and fault == "keepalive":
                    self.cut[fault] += 1
                    await self._keep_alive(out)
                if i == half and fault in ("stall", "cut", "error", "eof"):
                    self.cut[fault] += 1
                    if fault in ("error", "eof"):
                        await out.write(error if fault == "error" else b"")
                        await out.write_eof()
                        return out
                    if fault == "cut":
                        assert request.transport is not None
                        request.transport.abort()
                        return out
                    await asyncio.sleep(self.stall_s)
                await out.write(frame)
                if fault == "slow":
                    await asyncio.sleep(self.gap_s)
            await out.write_eof()
        except (ConnectionResetError, RuntimeError):  # the client hung up (its idle timeout)
            pass
        return out
