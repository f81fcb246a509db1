"""Long calls as server-sent events (SSE): OpenAI chat completions and Anthropic Messages.

Why stream: a non-streamed answer comes in one piece after the whole generation, so a long one (a
64,000-token Claude answer, a long reasoning run) outlives a total timeout, and a call that timed out
has been paid for and is sent again. Streamed, the timeout is an idle one (no byte for N s) and a call
cut mid-answer is known to be one.

Which calls stream: a Messages call whose `max_tokens` Anthropic's SDK would refuse to send without
streaming (it refuses when 3600 s x max_tokens / 128,000 > 600 s, i.e. max_tokens > 21,333, and above
8,192 for Claude Opus 4 / 4.1: anthropic-sdk-python `src/anthropic/_base_client.py`
`_calculate_nonstreaming_timeout`, `src/anthropic/_constants.py` `MODEL_NONSTREAMING_TOKENS`), or above
the endpoint's `stream_above_tokens` when that is lower; a chat call whose maximum output (its
`max_completion_tokens`/`max_tokens`, else the model's maximum in litellm's map) is above the
endpoint's `stream_above_tokens`, by default the same 21,333. Short calls stay on the non-streamed
path, which is cheaper per call.

Each stream is assembled into the body the non-streamed call returns (a chat.completion, a Message)
and parsed by providers.parse, so texts, finish reasons and usage are those of the non-streamed path.
Usage: OpenAI's final chunk when asked with `stream_options: {"include_usage": true}`; Anthropic's
`message_start` (input, cache) updated by `message_delta` (output).

A stream cut after the provider began answering (an idle timeout, a dropped connection, an error event
after output, an end without the final event) is a *partial* answer: it is not re-sent (the provider
generated, and bills, what it sent; the same long answer may be cut again). It is logged at once and
ends as one error row with finish_reason "partial" and the usage the stream reported before the cut
(the input in full; output only as far as the provider had counted it). Rerunning the command sends it again,
as it does every row without an answer. A choice that finished before the cut (n > 1) keeps its answer.
A failure before any output (an `overloaded_error` event first, a drop before any text) is retried
like any transient error.

Streams end: the idle timeout counts content (events), not SSE comments (`: keep-alive`), so a stream
that keeps the connection warm with comments alone is cut after `idle_s` of no content; and every
streamed call has a total deadline (`stream_deadline_s`, by default the idle timeout plus its token
limit at 10 tokens a second). A malformed event (undecodable, not an object) is skipped and counted:
a stream that goes on to deliver is kept, never re-sent.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from typing import Any

import aiohttp
import orjson

from core.types import Completion
from providers.base import ProviderError, header_secrets, scrub
from providers.http import host_port, parse_limits, refusal
from providers.parse import anthropic_message, checked, openai_chat
from providers.responses import responses_completion

log = logging.getLogger("evalsweep")

BEGUN: ContextVar[Callable[[], None] | None] = ContextVar("evalsweep_begun", default=None)
"""Set around a call whose start others wait for (runner.calls.fanout): called once a streamed answer has
begun (its first bytes), when the prompt cache it wrote becomes readable (Anthropic: "a cache entry
only becomes available after the first response begins")."""

LONG_OUTPUT_TOKENS = 21_333
"""Above this maximum output a call streams (Anthropic's SDK figure: 10 minutes at 128,000 tokens/hour)."""
OPUS_4_NONSTREAMING = (("claude-opus-4-0", 8192), ("claude-opus-4-1", 8192), ("claude-opus-4-2025", 8192),
                       ("claude-4-opus", 8192))
"""The SDK's smaller per-model limits (MODEL_NONSTREAMING_TOKENS): Claude Opus 4 and 4.1."""
PARTIAL = "partial"
"""The finish reason of a choice whose stream was cut before it finished."""
_REASONING_DELTAS = ("reasoning_content", "reasoning")
"""Chat deltas of visible reasoning (DeepSeek and vLLM `reasoning_content`, OpenRouter `reasoning`)."""
_RETRYABLE_EVENTS = ("overloaded_error", "api_error", "rate_limit_error", "timeout_error")


def anthropic_streams(max_tokens: int, model_id: str, above: int | None = None) -> bool:
    """Whether a Messages call streams: whenever Anthropic's SDK would refuse it unstreamed, or above
    the endpoint's `stream_above_tokens` when that is lower."""
    limit = LONG_OUTPUT_TOKENS if above is None else min(above, LONG_OUTPUT_TOKENS)
    bare = model_id.rsplit("/", 1)[-1].removeprefix("anthropic.").lower()
    for prefix, n in OPUS_4_NONSTREAMING:
        if bare.startswith(prefix):
            limit = min(limit, n)
    return max_tokens > limit


DEADLINE_TOKENS_PER_S = 10.0
"""The slowest generation a default total deadline allows for: a token limit's worth at this rate."""


class Malformed(Exception):
    """An event that is not a JSON object: skipped (and counted), the stream read on."""


def deadline_for(body: dict[str, Any], idle_s: float) -> float:
    """A streamed call's default total deadline: its idle timeout plus its token limit at the slowest
    rate (no limit: 32,768 tokens' worth)."""
    limit = next((body[k] for k in ("max_completion_tokens", "max_tokens", "max_output_tokens")
                  if isinstance(body.get(k), int)), 32_768)
    return idle_s + limit / DEADLINE_TOKENS_PER_S


class StreamCut(ProviderError):
    """A stream that ended before its final event. `idle`: no byte for the idle timeout."""

    def __init__(self, why: str, *, idle: bool = False, event: str | None = None) -> None:
        super().__init__(why, retryable=True)
        self.idle = idle
        self.event = event
        """The provider's error type when an error event cut it (e.g. overloaded_error)."""


async def sse_events(chunks: AsyncIterator[bytes]) -> AsyncIterator[tuple[str, bytes]]:
    """(event, data) per server-sent event (https://html.spec.whatwg.org/multipage/server-sent-events.html):
    `data:` lines joined by newlines, comments skipped; an event without its closing blank line is dropped."""
    buf = bytearray()  # appends in place: a long line arriving in many chunks is not copied over and over
    event, data = "", []
    async for chunk in chunks:
        buf += chunk
        if b"\n" not in chunk:
            continue
        *lines, buf = buf.split(b"\n")
        for line in lines:
            line = line.removesuffix(b"\r")
            if not line:
                if data:
                    yield event or "message", bytes(b"\n".join(data))
                event, data = "", []
            elif not line.startswith(b":"):
                name, _, value = line.partition(b":")
                value = value.removeprefix(b" ")
                if name == b"data":
                    data.append(value)
                elif name == b"event":
                    event = value.decode("utf-8", "replace")


async def post_sse(
    session: aiohttp.ClientSession,
    url: str,
    data: bytes,
    headers: dict[str, str],
    feed: Callable[[str, bytes], None],
    idle_s: float,
    deadline_s: float | None = None,
) -> tuple[bytes | None, dict[str, float] | None]:
    """POST a streamed request; each event goes to `feed`. Timeouts: connect; idle, counted on content
    (events), not on bytes (keep-alive comments); and the total `deadline_s`. Returns (None, limits), or
    the body when the server answered JSON (a gateway ignoring `stream`). Errors before the answer
    starts are those of providers.http; a cut afterwards is a StreamCut."""
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=min(30.0, idle_s), sock_read=idle_s)
    try:
        async with session.post(url, data=data, headers=headers, timeout=timeout) as resp:
            limits = parse_limits(resp.headers)
            if resp.status != 200:
                err = refusal(resp, await resp.read(), headers, limits)
                err.request = data if isinstance(data, bytes) else None
                raise err
            if resp.content_type != "text/event-stream":
                return await resp.read(), limits
            if (begun := BEGUN.get()) is not None:  # the answer began: the prompt cache it wrote is readable
                begun()
            loop = asyncio.get_running_loop()
            end = loop.time() + (deadline_s if deadline_s is not None else float("inf"))
            malformed = 0
            try:
                async with asyncio.timeout_at(min(loop.time() + idle_s, end)) as clock:
                    async for event, payload in sse_events(resp.content.iter_any()):
                        clock.reschedule(min(loop.time() + idle_s, end))  # content came: idle counts anew
                        try:
                            feed(event, payload)
                        except Malformed as e:
                            malformed += 1
                            if malformed == 1:
                                log.warning("%s: a malformed event skipped (%s); reading on", host_port(url), e)
            except StreamCut as e:
                e.limits = limits
                if malformed:
                    e.args = (f"{e} ({malformed} malformed events skipped)",)
                raise
            except TimeoutError:
                if loop.time() >= end - 1e-3:
                    raise _cut(f"no end after {deadline_s:g} s (the streamed call's total deadline)", limits,
                               idle=True) from None
                raise _cut(f"no content for {idle_s:g} s (idle timeout; keep-alive comments do not count)",
                           limits, idle=True) from None
            except (aiohttp.ClientError, ConnectionResetError) as e:
                raise _cut(f"connection dropped mid-stream ({type(e).__name__})", limits) from None
            return None, limits
    except ProviderError:
        raise
    except TimeoutError:
        raise ProviderError(
            f"request timed out: {host_port(url)} (no byte in {idle_s:g} s, a streamed call's idle timeout)",
            retryable=True,
        ) from None
    except (aiohttp.ClientError, ConnectionResetError) as e:
        from providers.http import connection_cause

        raise ProviderError(
            f"connection error: {host_port(url)}: {connection_cause(e)}", retryable=True
        ) from None


def _cut(why: str, limits: dict[str, float] | None, idle: bool = False) -> StreamCut:
    cut = StreamCut(why, idle=idle)
    cut.limits = limits
    return cut


def _json(data: bytes) -> dict[str, Any]:
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise Malformed(f"undecodable event ({len(data)} bytes): {data[:80]!r}") from None
    if not isinstance(obj, dict):
        raise Malformed(f"event is {type(obj).__name__}, not an object")
    return obj


def _error_event(obj: dict[str, Any]) -> StreamCut:
    err = obj.get("error")
    err = err if isinstance(err, dict) else {"message": str(err)}
    kind = err.get("type") or err.get("code")
    return StreamCut(f"error event mid-stream: {kind}: {str(err.get('message'))[:200]}", event=str(kind))


class ChatStream:
    """chat.completion.chunk events → the chat.completion body of the same call."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.parts: dict[int, list[str]] = {}
        self.calls: dict[int, dict[int, dict[str, Any]]] = {}
        """Per choice, its tool calls by their `index`, assembled from fragments (`tool_call`)."""
        self.reasons: dict[int, str] = {}
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None
        self.done = False
        self.chars = 0
        """Characters of output received, visible reasoning included (a cut answer's size, for the log)."""

    def feed(self, event: str, data: bytes) -> None:
        if data == b"[DONE]":
            self.done = True
            return
        obj = _json(data)
        if "error" in obj:
            raise _error_event(obj)
        self.model = obj.get("model") or self.model
        for i, ch in enumerate(obj.get("choices") or []):
            if not isinstance(ch, dict):
                raise StreamCut(f"choices[{i}] is {type(ch).__name__}, not an object")
            idx = ch.get("index", 0)
            idx = idx if isinstance(idx, int) and not isinstance(idx, bool) else 0
            delta = ch.get("delta")
            text = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(text, str):
                self.parts.setdefault(idx, []).append(text)
                self.chars += len(text)
            for field in _REASONING_DELTAS if isinstance(delta, dict) else ():
                if isinstance(delta.get(field), str):  # generated (and billed) output, not the answer
                    self.chars += len(delta[field])
            frags = delta.get("tool_calls") if isinstance(delta, dict) else None
            for frag in frags if isinstance(frags, list) else ():
                if isinstance(frag, dict):
                    self.chars += self.tool_call(self.calls.setdefault(idx, {}), frag)
            if ch.get("finish_reason") is not None:
                self.reasons[idx] = ch["finish_reason"]
        if isinstance(obj.get("usage"), dict):
            self.usage = obj["usage"]  # the last one counts (vLLM's continuous usage stats send several)

    @staticmethod
    def tool_call(calls: dict[int, dict[str, Any]], frag: dict[str, Any]) -> int:
        """One `delta.tool_calls[]` fragment into its call (https://platform.openai.com/docs/guides/
        function-calling#streaming: the first carries index, id, type and the name, the next ones pieces of
        `arguments`); returns the characters it added. Lenient where servers differ: no `index` (one call
        per fragment, a new id a new call), a name or id repeated in every fragment (kept once: Fireworks,
        DeepSeek and Qwen repeat the id, MiniMax on NVIDIA NIM the name), arguments
        sent whole as an object (Ollama's, vLLM's object form: kept as it came). Any other field of the call
        is kept as it came (Gemini's `extra_content` thought signature, which must go back with the call)."""
        k = frag.get("index")
        if not isinstance(k, int) or isinstance(k, bool):
            last = max(calls, default=-1)
            new = last < 0 or (frag.get("id") and calls[last].get("id") not in (None, frag.get("id")))
            k = last + 1 if new else last
        call = calls.setdefault(k, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        if isinstance(frag.get("id"), str) and frag["id"] and not call["id"]:
            call["id"] = frag["id"]
        if isinstance(frag.get("type"), str):
            call["type"] = frag["type"]
        call.update({key: v for key, v in frag.items()
                     if key not in ("index", "id", "type", "function") and v is not None})
        fn, got = frag.get("function"), 0
        if isinstance(fn, dict):
            name, args = fn.get("name"), fn.get("arguments")
            if isinstance(name, str) and name != call["function"]["name"]:
                call["function"]["name"] += name
                got += len(name)
            if isinstance(args, str) and isinstance(call["function"]["arguments"], str):
                call["function"]["arguments"] += args
                got += len(args)
            elif isinstance(args, dict):
                call["function"]["arguments"] = args
                got += len(orjson.dumps(args))
        return got

    @property
    def complete(self) -> bool:
        """[DONE], or every choice finished (a server that omits [DONE] ends with the connection)."""
        return self.done or (bool(self.reasons) and len(self.reasons) >= min(self.n, len(self.parts) or 1))

    @property
    def answered(self) -> bool:
        return self.chars > 0 or bool(self.reasons)

    def body(self, cut: bool = False) -> dict[str, Any]:
        """The chat.completion the non-streamed call returns; `cut`: every unfinished choice of the n asked
        is PARTIAL (none is left unseen: the runner would take that for a server ignoring `n`)."""
        choices = []
        seen = set(self.parts) | set(self.calls) | set(self.reasons)
        for i in sorted(seen | (set(range(self.n)) if cut else set())):
            reason = self.reasons.get(i, PARTIAL if cut else None)
            text = "".join(self.parts[i]) if i in self.parts and reason != PARTIAL else None
            msg: dict[str, Any] = {"role": "assistant", "content": text}
            if self.calls.get(i) and reason != PARTIAL:  # a call cut mid-arguments is never run
                msg["tool_calls"] = [self.calls[i][k] for k in sorted(self.calls[i])]
            choices.append({"index": i, "message": msg, "finish_reason": reason})
        body: dict[str, Any] = {"object": "chat.completion", "model": self.model, "choices": choices}
        if self.usage is not None:
            body["usage"] = self.usage
        return body

    def completion(self, cut: bool = False) -> Completion:
        return openai_chat(self.body(cut), self.n)


class MessageStream:
    """Messages stream events (https://docs.anthropic.com/en/docs/build-with-claude/streaming) → the
    Message of the same call: content blocks by index, stop_reason and usage from message_delta."""

    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.done = False
        self.chars = 0

    def feed(self, event: str, data: bytes) -> None:
        obj = _json(data)
        kind = obj.get("type", event)
        if kind == "error":
            raise _error_event(obj)
        if kind == "message_start":
            msg = obj.get("message")
            self.message = dict(msg) if isinstance(msg, dict) else {}
            self.message["usage"] = dict(self.message.get("usage") or {})
            return
        if self.message is None:
            if kind == "ping":
                return
            raise StreamCut(f"{kind} before message_start")
        idx = obj.get("index", 0)
        if kind == "content_block_start":
            self.blocks[idx] = dict(obj.get("content_block") or {})
        elif kind == "content_block_delta":
            block, delta = self.blocks.setdefault(idx, {}), obj.get("delta") or {}
            for field, dtype in (("text", "text_delta"), ("thinking", "thinking_delta")):
                if delta.get("type") == dtype and isinstance(delta.get(field), str):
                    block[field] = block.get(field, "") + delta[field]
                    self.chars += len(delta[field])
            if delta.get("type") == "signature_delta":
                block["signature"] = delta.get("signature")
            if delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
                block[_PARTIAL_JSON] = block.get(_PARTIAL_JSON, "") + delta["partial_json"]  # a tool_use's input
                self.chars += len(delta["partial_json"])
        elif kind == "message_delta":
            delta = obj.get("delta") or {}
            for k in ("stop_reason", "stop_sequence"):
                if k in delta:
                    self.message[k] = delta[k]
            usage = obj.get("usage") or {}
            self.message["usage"].update({k: v for k, v in usage.items() if v is not None})
        elif kind == "message_stop":
            self.done = True

    @property
    def complete(self) -> bool:
        return self.done

    @property
    def answered(self) -> bool:
        return self.chars > 0 or bool(self.message and self.message.get("stop_reason"))

    def body(self, cut: bool = False) -> dict[str, Any]:
        msg = dict(self.message or {"usage": {}})
        msg["content"] = [] if cut else [_tool_input(self.blocks[i]) for i in sorted(self.blocks)]
        if cut:
            msg["stop_reason"] = PARTIAL
        return msg

    def completion(self, cut: bool = False) -> Completion:
        return anthropic_message(self.body(cut))


_PARTIAL_JSON = "_partial_json"


def _tool_input(block: dict[str, Any]) -> dict[str, Any]:
    """A block as the unstreamed Message has it: a `tool_use` block's input_json_delta pieces joined and
    decoded into its `input` (https://docs.anthropic.com/en/docs/build-with-claude/streaming#input-json-delta);
    pieces that do not make a JSON object stay the string they make (the suite answers it as malformed)."""
    if _PARTIAL_JSON not in block:
        return block
    out = {k: v for k, v in block.items() if k != _PARTIAL_JSON}
    raw = block[_PARTIAL_JSON]
    if raw.strip():
        try:
            out["input"] = orjson.loads(raw)
        except orjson.JSONDecodeError:
            out["input"] = raw
        if not isinstance(out["input"], dict):
            out["input"] = raw
    return out


class ResponsesStream:
    """Responses API events (https://platform.openai.com/docs/api-reference/responses-streaming) → the
    final Response object, which `response.completed` / `response.incomplete` carry whole."""

    def __init__(self) -> None:
        self.response: Any = None
        self.done = False
        self.chars = 0

    def feed(self, event: str, data: bytes) -> None:
        obj = _json(data)
        kind = obj.get("type", event)
        if kind in ("response.output_text.delta", "response.reasoning_summary_text.delta") and isinstance(
            obj.get("delta"), str
        ):
            self.chars += len(obj["delta"])
        elif kind in ("response.completed", "response.incomplete"):
            self.response, self.done = obj.get("response"), True
        elif kind == "error":
            raise _error_event({"error": {"type": obj.get("code"), "message": obj.get("message")}})
        elif kind == "response.failed":
            failed = obj.get("response") if isinstance(obj.get("response"), dict) else {}
            raise _error_event({"error": failed.get("error") or {"message": "response.failed"}})

    @property
    def complete(self) -> bool:
        return self.done

    @property
    def answered(self) -> bool:
        return self.chars > 0

    def completion(self, cut: bool = False) -> Completion:
        return checked([None], [PARTIAL], None, None) if cut else responses_completion(self.response)


Assembler = ChatStream | MessageStream | ResponsesStream


async def call(
    session: aiohttp.ClientSession,
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    asm: Assembler,
    idle_s: float,
    counter: Counter[str],
    whole: Callable[[bytes], Completion],
    deadline_s: float | None = None,
) -> Completion:
    """One streamed call, assembled (`whole` parses a JSON answer to it), its limits attached.
    `deadline_s`: its total deadline (None: `deadline_for` its token limit)."""
    cut = None
    deadline = deadline_s if deadline_s is not None else deadline_for(body, idle_s)
    try:
        raw, limits = await post_sse(session, url, orjson.dumps(body), headers, asm.feed, idle_s, deadline)
    except StreamCut as e:
        raw, limits, cut = None, e.limits, e
    comp = whole(raw) if raw is not None else finished(asm, cut, str(body.get("model")), counter, headers)
    comp.limits = limits
    return comp


def timed_out(long: set[str], model: str, timeout_s: float, idle_s: float) -> None:
    """An unstreamed call of `model` got no answer within its total timeout: its calls stream from now
    on (the re-send of this one too), so a long call is not sent again and again into the same timeout."""
    if model not in long:
        long.add(model)
        log.warning(
            "%s: a call got no answer in %g s (the total timeout of an unstreamed call; the provider may "
            "bill it); it is sent again streamed, and so are this model's calls from now on (idle timeout "
            "%g s)", model, timeout_s, idle_s,
        )


def finished(asm: Assembler, cut: StreamCut | None, model: str, counter: Counter[str], secrets: dict[str, str]
             ) -> Completion:
    """The completion of a stream that ended (`cut`: how it was cut, if it was). Cut before any output:
    the StreamCut is raised (retried when transient); after: logged, counted and returned as a
    partial completion (see the module's docstring)."""
    if cut is None and asm.complete:
        return asm.completion()
    if cut is None:
        cut = StreamCut("the stream ended before its final event")
    cut.args = (scrub(str(cut), header_secrets(secrets)),)
    if not asm.answered and not cut.idle:
        if cut.event is not None and cut.event not in _RETRYABLE_EVENTS:
            cut.retryable = False
        raise cut
    counter[model] += 1
    comp = asm.completion(cut=True)
    comp.cut, comp.received_chars = str(cut), asm.chars
    log.warning(
        "%s: answer cut mid-stream (%s) after %d characters of output; kept as an error row "
        "(finish_reason %r) with the usage reported before the cut, not re-sent (a rerun keeps it; "
        "--resend-partial sends it again)",
        model, cut, asm.chars, PARTIAL,
    )
    return comp
