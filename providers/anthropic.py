"""Anthropic's native Messages API (`POST /v1/messages`) over aiohttp: live calls and the request body
that Message Batches reuse as each request's `params`.

Why native and not litellm: batch params must be the exact Messages body, and one converter for both
paths keeps a batch answer and its live fallback byte-for-byte the same request. A call whose
`max_tokens` Anthropic's SDK would refuse without streaming streams (providers.stream), with an idle
timeout instead of the total one.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import aiohttp
import orjson

from core.types import Message, Request, TextPart, text_of
from core.urls import endpoint_url
from providers import http, patience, stream
from providers.base import ANTHROPIC_IMAGE_MB, Completion, ProviderError, apply_params, checked_image
from providers.cache_marks import mark_messages, whole_resent
from providers.parse import THINKING_FIELD, anthropic_message

DEFAULT_BASE = "https://api.anthropic.com"
VERSION = "2023-06-01"
FALLBACK_MAX_TOKENS = 4096
"""For a model neither the config nor litellm's map knows: the smallest maximum output of any Claude model
(Claude 3), so no model refuses it. Set `max_output_tokens` for the model in the config to raise it."""
_CONFIGURED: dict[str, int] = {}


def configure_max_output(model_id: str, tokens: int) -> None:
    """The config's `max_output_tokens` for a model (runner.pool calls this while wiring models)."""
    _CONFIGURED[model_id] = tokens


def max_output_tokens(model_id: str) -> int:
    """Messages requires max_tokens. When a suite leaves it open the model's own maximum is sent (never a
    hidden cap that cuts a step-by-step answer before its final line): the config's, else litellm's
    bundled map (read as JSON, litellm is not imported), else FALLBACK_MAX_TOKENS."""
    if model_id in _CONFIGURED:
        return _CONFIGURED[model_id]
    from providers.pricing import map_entry

    entry = map_entry(model_id) or map_entry(f"anthropic/{model_id}")
    n = entry.get("max_output_tokens") or entry.get("max_tokens")
    if isinstance(n, int) and n > 0:
        return int(n)
    return documented_max_output(model_id) or FALLBACK_MAX_TOKENS


CLAUDE_MAX_OUTPUT: tuple[tuple[str, int], ...] = (
    ("claude-3-7-sonnet", 64000),
    ("claude-3-5-sonnet-20240620", 4096),  # 8,192 only with a beta header
    ("claude-3-5-sonnet", 8192),
    ("claude-3-5-haiku", 8192),
    ("claude-3-opus", 4096),
    ("claude-3-sonnet", 4096),
    ("claude-3-haiku", 4096),
    ("claude-opus-4-1", 32000),
    ("claude-opus-4-5", 64000),
    ("claude-opus-4", 32000),
    ("claude-sonnet-4-5", 64000),
    ("claude-sonnet-4", 64000),
    ("claude-haiku-4-5", 64000),
)
"""Max output per Claude family, from Anthropic's model tables ("Max output": docs.anthropic.com/en/docs/
about-claude/models/overview and .../model-deprecations for retired ones; 3.7 Sonnet without its 128k beta
header). litellm's current map has dropped the retired models, which VRB's paper ran; first prefix wins."""


def documented_max_output(model_id: str) -> int | None:
    bare = model_id.rsplit("/", 1)[-1].lower()
    return next((n for prefix, n in CLAUDE_MAX_OUTPUT if bare.startswith(prefix)), None)


def anthropic_headers(api_key: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    h = {"content-type": "application/json", "anthropic-version": VERSION, **(extra or {})}
    if api_key:
        h["x-api-key"] = api_key
    return h


def messages_body(
    req: Request, model_id: str, params: dict[str, Any], shape: Any = None, cache: bool = False
) -> dict[str, Any]:
    """Our messages in Anthropic's format: system prompt apart, images as base64 source blocks; with
    `cache`, prompt-cache breakpoints where the request is re-sent (providers.cache_marks; live calls
    only: a batch runs its requests at once, so a write there is seldom read)."""
    # An empty system message (JEEBench's, as its authors send it) is no system prompt: Anthropic refuses
    # empty text blocks ("text content blocks must be non-empty"), and an absent `system` means the same.
    system = [t for m in req.messages if m.role == "system" and (t := text_of(m.content))]
    msgs: list[dict[str, Any]] = []
    where: list[int | None] = []
    for m in req.messages:
        if m.role == "system":
            where.append(None)
            continue
        if m.role == "tool":  # results of one assistant turn's calls: one user turn of tool_result blocks
            if not (msgs and msgs[-1]["role"] == "user" and _results(msgs[-1])):
                msgs.append({"role": "user", "content": []})
            where.append(len(msgs) - 1)
            msgs[-1]["content"].append(tool_result(m))
            continue
        where.append(len(msgs))
        if m.tool_calls is not None:
            msgs.append({"role": m.role, "content": tool_use_turn(m)})
            continue
        if isinstance(m.content, str):
            msgs.append({"role": m.role, "content": m.content})
            continue
        blocks: list[dict[str, Any]] = []
        for p in m.content:
            if isinstance(p, TextPart):
                blocks.append({"type": "text", "text": p.text})
            else:
                head, _, data = checked_image(p.data_url(), ANTHROPIC_IMAGE_MB, "Anthropic").partition(",")
                media = head[5:].split(";")[0]
                blocks.append(
                    {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
                )
        msgs.append({"role": m.role, "content": blocks})
    d = req.decoding
    body: dict[str, Any] = {
        "model": model_id,
        "max_tokens": d.max_tokens or max_output_tokens(model_id),
        "messages": msgs,
        "temperature": d.temperature,
    }
    if d.temperature is None:
        del body["temperature"]
    if system:
        body["system"] = "\n\n".join(system)
    if req.tools:
        body["tools"] = anthropic_tools(req.tools)
    if d.top_p is not None:
        body["top_p"] = d.top_p
    if shape is not None:
        shape.messages(body, d.max_tokens)
    if params:
        apply_params(body, params)
    if cache and (req.prefix is not None or whole_resent(req)):
        mark_messages(body, req, where, whole_resent(req))
    return body


def anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI `tools` (the suites' one spelling) as Anthropic's: name, description and the JSON schema as
    `input_schema` (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use)."""
    out = []
    for t in tools:
        fn = t.get("function") or {}
        d = {"name": fn.get("name"), "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}}
        if fn.get("description"):
            d["description"] = fn["description"]
        out.append(d)
    return out


def tool_use_turn(m: Message) -> list[dict[str, Any]]:
    """An assistant turn that called tools (OpenAI's `tool_calls`, as the row keeps them) as Anthropic's
    content: its thinking blocks as they came (providers.parse.THINKING_FIELD), its text, then one `tool_use`
    block per call, `input` the arguments as an object. Arguments that are not a JSON object (a model's
    malformed call) go as `{"arguments": <the text>}`: Anthropic takes only an object, and the tool's error
    result answers that call all the same."""
    text = text_of(m.content)
    blocks: list[dict[str, Any]] = [b for c in m.tool_calls or [] for b in c.get(THINKING_FIELD) or []]
    blocks += [{"type": "text", "text": text}] if text else []
    for i, c in enumerate(m.tool_calls or []):
        fn = c.get("function") if isinstance(c.get("function"), dict) else {}
        raw = fn.get("arguments")
        try:
            args = raw if isinstance(raw, dict) else orjson.loads(raw or "{}")
        except (orjson.JSONDecodeError, TypeError):
            args = None
        if not isinstance(args, dict):
            args = {"arguments": raw}
        blocks.append({"type": "tool_use", "id": str(c.get("id") or f"call_{i}"), "name": str(fn.get("name")),
                       "input": args})
    return blocks


def tool_result(m: Message) -> dict[str, Any]:
    """A `role: tool` message as Anthropic's `tool_result` block, answering the `tool_use` of that id."""
    block = {"type": "tool_result", "tool_use_id": m.tool_call_id or "", "content": text_of(m.content)}
    return {**block, "is_error": True} if m.is_error else block


def _results(turn: dict[str, Any]) -> bool:
    c = turn.get("content")
    return isinstance(c, list) and bool(c) and all(b.get("type") == "tool_result" for b in c)


def parse_message(body: Any) -> Completion:
    """A Messages response (live, or a batch's `result.message`): text blocks joined, usage, stop reason."""
    return anthropic_message(body)


class AnthropicProvider:
    """Live calls; `n` is not supported by the API, so samples are separate calls."""

    cacheable = True
    reports_send = True  # http.SENT is called as each request leaves
    supports_n = False

    def __init__(
        self,
        base_url: str | None = None,
        *,
        timeout_s: float = 600.0,
        max_connections: int = 256,
        headers: dict[str, str] | None = None,
        stream_above_tokens: int | None = None,
        idle_timeout_s: float | None = None,
        prompt_caching: bool = True,
    ) -> None:
        self.base_url = (base_url or DEFAULT_BASE).rstrip("/")
        self.caches_prompts = prompt_caching
        """Breakpoints on re-sent prefixes (providers.cache_marks); the runner's fan-out waits for them."""
        self.stream_above = stream_above_tokens
        self.idle_s = idle_timeout_s or timeout_s
        self.deadline_s: float | None = None
        """A streamed call's total deadline (`stream_deadline_s`; None: from its token limit)."""
        self.timeout_s = timeout_s
        self.partials: Counter[str] = Counter()
        """Answers cut mid-stream, per model id (providers.stream)."""
        self.long: set[str] = set()
        """Models whose unstreamed call timed out: their calls stream (providers.stream.timed_out)."""
        self.url = endpoint_url(self.base_url, "/v1/messages")
        self._timeout = patience.session_timeout(timeout_s)  # each call's deadline: providers.patience
        self._max_connections = max_connections
        self._extra = headers or {}
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()

    async def complete(
        self,
        req: Request,
        model_id: str,
        n: int,
        sample: int,
        api_key: str | None,
        params: dict[str, Any],
        shape: Any = None,
    ) -> Completion:
        if self._session is None or self._session.closed:
            conn = aiohttp.TCPConnector(limit=self._max_connections, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=conn, timeout=self._timeout, request_class=http.SentRequest
            )
        body = messages_body(req, model_id, params, shape, self.caches_prompts)
        headers = anthropic_headers(api_key, self._extra)
        mt = body.get("max_tokens")
        if model_id in self.long or isinstance(mt, int) and stream.anthropic_streams(mt, model_id, self.stream_above):
            return await stream.call(
                self._session, self.url, {**body, "stream": True}, headers, stream.MessageStream(), self.idle_s,
                self.partials, lambda raw: _parsed(raw, None), self.deadline_s,
            )  # https://docs.anthropic.com/en/docs/build-with-claude/streaming
        try:  # a frozen process reads what arrived before its deadline fires (providers.patience)
            raw, limits = await patience.exchange(self._session, self.url, orjson.dumps(body), headers, self.timeout_s)
        except http.TimedOut:
            stream.timed_out(self.long, model_id, self.timeout_s, self.idle_s)
            raise
        return _parsed(raw, limits)


def _parsed(raw: bytes, limits: dict[str, float] | None) -> Completion:
    try:
        comp = parse_message(orjson.loads(raw))
    except orjson.JSONDecodeError:
        raise ProviderError(f"malformed response body ({len(raw)} bytes)", retryable=True) from None
    comp.limits = limits
    return comp
