"""Long calls as server-sent events (SSE): OpenAI chat completions, Anthropic Messages and OpenAI Responses.

This module reads the events and ends a stream (cut handling); each format's events are assembled in
its own module (providers.stream_chat, stream_messages, stream_responses; what they share:
providers.stream_base). Their names are importable from here as before.

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
from providers.stream_base import PARTIAL, Malformed, StreamCut
from providers.stream_chat import ChatStream
from providers.stream_messages import MessageStream
from providers.stream_responses import ResponsesStream

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


def deadline_for(body: dict[str, Any], idle_s: float) -> float:
    """A streamed call's default total deadline: its idle timeout plus its token limit at the slowest
    rate (no limit: 32,768 tokens' worth)."""
    limit = next((body[k] for k in ("max_completion_tokens", "max_tokens", "max_output_tokens")
                  if isinstance(body.get(k), int)), 32_768)
    return idle_s + limit / DEADLINE_TOKENS_PER_S


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
