"""The fast path: any OpenAI-compatible `/chat/completions` over one pooled aiohttp session.

No SDK, no per-call validation: orjson in, orjson out. Everything that goes wrong becomes a
`ProviderError` with the retry class the scheduler needs. A call whose maximum output is above the
endpoint's `stream_above_tokens` (default providers.stream.LONG_OUTPUT_TOKENS) streams, with an idle
timeout instead of the total one; all other calls take the non-streamed path.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import aiohttp
import orjson

from core.types import Request
from core.urls import endpoint_url
from providers import http, patience, stream
from providers.base import Completion, ProviderError, header_secrets, scrub, wire_body
from providers.cache_marks import prefix_key
from providers.parse import openai_chat
from providers.responses import parse_responses, responses_body

_JSON = {"Content-Type": "application/json"}


class OpenAIProvider:
    cacheable = True
    reports_send = True  # http.SENT is called as each request leaves (the lane's window counts from then)

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 600.0,
        max_connections: int = 256,
        headers: dict[str, str] | None = None,
        supports_n: bool = True,
        stream_above_tokens: int | None = None,
        idle_timeout_s: float | None = None,
        prompt_caching: bool = True,
        prompt_cache_key: bool = False,
    ) -> None:
        self.caches_prompts = prompt_caching
        """The server caches prompt prefixes by itself (OpenAI, DeepSeek, vLLM's prefix cache): the runner's
        fan-out sends a shared prefix's first call before the rest (runner.calls.fanout)."""
        self.cache_key = prompt_caching and prompt_cache_key
        """Send `prompt_cache_key` (OpenAI's own endpoints: requests with one key reach one cache)."""
        self.url = endpoint_url(base_url, "/chat/completions")
        self.responses_url = endpoint_url(base_url, "/responses")
        self.supports_n = supports_n
        self.timeout_s = timeout_s  # each call's deadline: providers.patience (a frozen process reads first)
        self._timeout = patience.session_timeout(timeout_s)
        self._max_connections = max_connections
        self._headers = {**_JSON, **(headers or {})}
        self._session: aiohttp.ClientSession | None = None
        self._auth: dict[str | None, dict[str, str]] = {}
        self.stream_above = stream.LONG_OUTPUT_TOKENS if stream_above_tokens is None else stream_above_tokens
        self.idle_s = idle_timeout_s or timeout_s
        self.deadline_s: float | None = None
        """A streamed call's total deadline (`stream_deadline_s`; None: from its token limit)."""
        self.timeout_s = timeout_s
        self.partials: Counter[str] = Counter()
        """Answers cut mid-stream, per model id (providers.stream)."""
        self.long: set[str] = set()
        """Models whose unstreamed call timed out: their calls stream (providers.stream.timed_out)."""
        self._model_max: dict[str, int | None] = {}

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            conn = aiohttp.TCPConnector(limit=self._max_connections, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=conn,
                timeout=self._timeout,
                json_serialize=lambda o: orjson.dumps(o).decode(),
                request_class=http.SentRequest,
            )
        return self._session

    def _headers_for(self, api_key: str | None) -> dict[str, str]:
        h = self._auth.get(api_key)
        if h is None:
            h = dict(self._headers)
            if api_key:
                h["Authorization"] = f"Bearer {api_key}"
            self._auth[api_key] = h
        return h

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
        if shape is not None and shape.api == "responses":
            return await self._responses(req, model_id, api_key, params, shape)
        body = wire_body(req, model_id, n, params, shape)
        if self.cache_key and req.prefix is not None:
            body["prompt_cache_key"] = prefix_key(req)
        limit = body.get("max_completion_tokens", body.get("max_tokens"))  # inlined _long: the hot path
        if (limit if type(limit) is int else self.model_max(model_id) or 0) > self.stream_above or model_id in self.long:
            return await self.streamed(body, api_key, n)
        try:
            return await self.post(orjson.dumps(body), api_key, n)
        except http.TimedOut:
            stream.timed_out(self.long, model_id, self.timeout_s, self.idle_s)
            raise

    def _long(self, model_id: str, limit: Any) -> bool:
        """Whether a call streams: its maximum output (else the model's) above `stream_above_tokens`,
        or a model whose unstreamed call timed out."""
        if not isinstance(limit, int):
            limit = self.model_max(model_id) or 0
        return limit > self.stream_above or model_id in self.long

    def model_max(self, model_id: str) -> int | None:
        """The output a call without a limit may reach: the model's maximum in litellm's map, if known."""
        if model_id not in self._model_max:
            from providers.pricing import map_entry

            top = map_entry(model_id).get("max_output_tokens")
            self._model_max[model_id] = top if isinstance(top, int) and not isinstance(top, bool) else None
        return self._model_max[model_id]

    async def streamed(self, body: dict[str, Any], api_key: str | None, n: int = 1) -> Completion:
        """One call as a stream, usage in its final chunk (https://platform.openai.com/docs/api-reference/
        chat/create#chat-create-stream_options)."""
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        return await stream.call(
            self._get_session(), self.url, body, self._headers_for(api_key), stream.ChatStream(n), self.idle_s,
            self.partials, lambda raw: parse_chat(raw, n), self.deadline_s,
        )

    async def _responses(
        self, req: Request, model_id: str, api_key: str | None, params: dict[str, Any], shape: Any
    ) -> Completion:
        """A model served only on OpenAI's Responses API: one sample per call."""
        body = responses_body(req, model_id, params, shape)
        if self.cache_key and req.prefix is not None:
            body["prompt_cache_key"] = prefix_key(req)
        headers = self._headers_for(api_key)
        if self._long(model_id, body.get("max_output_tokens")):
            return await stream.call(
                self._get_session(), self.responses_url, {**body, "stream": True}, headers,
                stream.ResponsesStream(), self.idle_s, self.partials, parse_responses, self.deadline_s,
            )
        try:
            raw, limits = await patience.exchange(
                self._get_session(), self.responses_url, orjson.dumps(body), headers, self.timeout_s
            )
        except http.TimedOut:
            stream.timed_out(self.long, model_id, self.timeout_s, self.idle_s)
            raise
        comp = parse_responses(raw, headers)
        comp.limits = limits
        return comp

    async def post(self, data: bytes, api_key: str | None, n: int = 1) -> Completion:
        headers = self._headers_for(api_key)
        raw, limits = await patience.exchange(self._get_session(), self.url, data, headers, self.timeout_s)
        comp = parse_chat(raw, n, headers)
        comp.limits = limits
        return comp


def parse_chat(raw: bytes, n: int = 1, headers: dict[str, str] | None = None) -> Completion:
    """Parse a chat.completions body: a well-typed completion, or a retryable error for truncated,
    undecodable or malformed bodies (providers.parse says what well-typed means). The snippet of a
    bad body is scrubbed of the request's secrets (`headers`) BEFORE it is cut: a key echoed escaped
    and then cut would no longer match any spelling of it."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        text = scrub(raw.decode("utf-8", "replace"), header_secrets(headers or {}))
        raise ProviderError(
            f"malformed response body ({len(raw)} bytes): {text[:120]!r}", retryable=True
        ) from None
    return openai_chat(body, n)
