"""Anthropic Message Batches: `POST /v1/messages/batches` with `requests: [{custom_id, params}]`, poll
`processing_status` until `ended`, stream the `results_url` JSONL (results arrive in any order)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson

from core.types import Request
from providers.anthropic import DEFAULT_BASE, anthropic_headers, messages_body, parse_message
from providers.base import ProviderError
from providers.batch_base import BatchHTTP, BatchStatus, LineResult, register


@register
class AnthropicBatchAPI:
    kind = "anthropic"
    max_requests = 100_000
    max_bytes = 256_000_000
    supports_n = False

    def __init__(self, base_url: str | None, headers: dict[str, str] | None = None) -> None:
        self.http = BatchHTTP(base_url or DEFAULT_BASE)
        self.url = self.http.base_url + "/v1/messages/batches"
        self._extra = headers or {}

    def line(
        self, custom_id: str, req: Request, model_id: str, n: int, params: dict[str, Any], shape: Any = None
    ) -> bytes:
        if n != 1:
            raise ValueError("Message Batches take one sample per request")
        return orjson.dumps({"custom_id": custom_id, "params": messages_body(req, model_id, params, shape)})

    async def submit(self, lines: list[bytes], api_key: str | None, tag: str) -> str:
        data = b'{"requests":[' + b",".join(lines) + b"]}"
        b = await self.http.json("POST", self.url, anthropic_headers(api_key, self._extra), data=data)
        return str(b["id"])

    async def find(self, tag: str, api_key: str | None) -> str | None:
        """Message batches carry no metadata to recognise ours by: an unconfirmed create is resent."""
        return None

    async def status(self, batch_id: str, api_key: str | None) -> BatchStatus:
        b = await self.http.json("GET", f"{self.url}/{batch_id}", anthropic_headers(api_key, self._extra))
        c = b.get("request_counts") or {}
        failed = sum(c.get(k, 0) for k in ("errored", "canceled", "expired"))
        counts = {
            "total": failed + c.get("succeeded", 0) + c.get("processing", 0),
            "done": c.get("succeeded", 0),
        }
        counts["failed"] = failed
        state = b.get("processing_status", "?")
        return BatchStatus(state=state, ended=state == "ended", counts=counts, raw=b)

    async def results(
        self, st: BatchStatus, api_key: str | None, n_of: dict[str, int]
    ) -> AsyncIterator[LineResult]:
        # The key goes only to our own API host, whatever URL a response names.
        url = st.raw.get("results_url") or ""
        if not url.startswith(self.http.base_url + "/"):
            url = f"{self.url}/{st.raw['id']}/results"
        async for d in self.http.lines(url, anthropic_headers(api_key, self._extra)):
            cid = d.get("custom_id")
            if isinstance(cid, str):
                res = d.get("result")
                yield (cid, *_parse(res if isinstance(res, dict) else {}))

    async def close(self) -> None:
        await self.http.close()


def _parse(r: dict[str, Any]) -> tuple[Any, str | None]:
    kind = r.get("type")
    if kind == "succeeded":
        try:
            return parse_message(r.get("message")), None
        except ProviderError as e:
            return None, str(e)
    err = r.get("error") or {}
    if isinstance(err, dict) and isinstance(err.get("error"), dict):
        err = err["error"]
    msg = err.get("message", "") if isinstance(err, dict) else str(err)
    return None, f"{kind}: {str(msg)[:200]}".rstrip(": ")
