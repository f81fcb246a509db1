"""The fast path: any OpenAI-compatible `/chat/completions` over one pooled aiohttp session.

No SDK, no per-call validation: orjson in, orjson out. Everything that goes wrong becomes a
`ProviderError` with the retry class the scheduler needs.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from core.types import Request
from core.urls import endpoint_url
from providers import http, patience
from providers.base import Completion, ProviderError, header_secrets, scrub, wire_body
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
    ) -> None:
        self.url = endpoint_url(base_url, "/chat/completions")
        self.responses_url = endpoint_url(base_url, "/responses")
        self.supports_n = supports_n
        self.timeout_s = timeout_s  # each call's deadline: providers.patience (a frozen process reads first)
        self._timeout = patience.session_timeout(timeout_s)
        self._max_connections = max_connections
        self._headers = {**_JSON, **(headers or {})}
        self._session: aiohttp.ClientSession | None = None
        self._auth: dict[str | None, dict[str, str]] = {}

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
        data = orjson.dumps(wire_body(req, model_id, n, params, shape))
        return await self.post(data, api_key, n)

    async def _responses(
        self, req: Request, model_id: str, api_key: str | None, params: dict[str, Any], shape: Any
    ) -> Completion:
        """A model served only on OpenAI's Responses API: one sample per call."""
        data = orjson.dumps(responses_body(req, model_id, params, shape))
        headers = self._headers_for(api_key)
        raw, limits = await patience.exchange(self._get_session(), self.responses_url, data, headers, self.timeout_s)
        comp = parse_responses(raw, headers)
        comp.limits = limits
        return comp

    async def post(self, data: bytes, api_key: str | None, n: int = 1) -> Completion:
        raw, limits = await patience.exchange(
            self._get_session(), self.url, data, self._headers_for(api_key), self.timeout_s
        )
        comp = parse_chat(raw, n, self._headers_for(api_key))
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
