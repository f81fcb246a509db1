"""OpenAI's Batch API: JSONL of requests → `/files` (purpose batch) → `/batches` (24h) → poll → output
and error files. Half the live price; no SDK, the same wire body as a live call: `/v1/chat/completions`
lines, or `/v1/responses` lines for a model served only on the Responses API (gpt-5-pro, o3-pro, the
codex models; https://platform.openai.com/docs/api-reference/batch/create). A batch holds one URL:
the batcher fills a file with one model's requests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson

from core.types import Request
from providers.base import ProviderError, wire_body
from providers.batch_base import BatchHTTP, BatchStatus, LineResult, register
from providers.parse import openai_chat
from providers.responses import responses_body, responses_completion

CHAT, RESPONSES = "/v1/chat/completions", "/v1/responses"

ENDED = {"completed", "expired", "cancelled", "failed"}


@register
class OpenAIBatchAPI:
    kind = "openai"
    max_requests = 50_000
    max_bytes = 200_000_000
    supports_n = True

    def __init__(self, base_url: str | None, headers: dict[str, str] | None = None) -> None:
        self.http = BatchHTTP(base_url or "")
        self._extra = headers or {}

    def _headers(self, api_key: str | None) -> dict[str, str]:
        h = dict(self._extra)
        if api_key:
            h["Authorization"] = f"Bearer {api_key}"
        return h

    def line(
        self, custom_id: str, req: Request, model_id: str, n: int, params: dict[str, Any], shape: Any = None
    ) -> bytes:
        if shape is not None and shape.api == "responses":
            if n != 1:
                raise ValueError("the Responses API takes one sample per request")
            url, body = RESPONSES, responses_body(req, model_id, params, shape)
        else:
            url, body = CHAT, wire_body(req, model_id, n, params, shape)
        return orjson.dumps({"custom_id": custom_id, "method": "POST", "url": url, "body": body}) + b"\n"

    async def submit(self, lines: list[bytes], api_key: str | None, tag: str) -> str:
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", b"".join(lines), filename=f"{tag}.jsonl", content_type="application/jsonl")
        h = self._headers(api_key)
        f = await self.http.json("POST", self.http.base_url + "/files", h, data=form)
        body = {
            "input_file_id": f["id"],
            "endpoint": orjson.loads(lines[0]).get("url", CHAT),  # every line of a file has one URL
            "completion_window": "24h",
            "metadata": {"evalsweep": tag},
        }
        b = await self.http.json("POST", self.http.base_url + "/batches", h, json=body)
        return str(b["id"])

    async def find(self, tag: str, api_key: str | None) -> str | None:
        """The batch we tagged `tag`, if a create went through but its id never reached the journal."""
        page = await self.http.json("GET", self.http.base_url + "/batches?limit=100", self._headers(api_key))
        for b in page.get("data") or []:
            if (b.get("metadata") or {}).get("evalsweep") == tag:
                return str(b["id"])
        return None

    async def status(self, batch_id: str, api_key: str | None) -> BatchStatus:
        b = await self.http.json("GET", f"{self.http.base_url}/batches/{batch_id}", self._headers(api_key))
        c = b.get("request_counts") or {}
        counts = {"total": c.get("total", 0), "done": c.get("completed", 0), "failed": c.get("failed", 0)}
        return BatchStatus(state=b.get("status", "?"), ended=b.get("status") in ENDED, counts=counts, raw=b)

    async def results(
        self, st: BatchStatus, api_key: str | None, n_of: dict[str, int]
    ) -> AsyncIterator[LineResult]:
        """Every line of the output file, then of the error file (expired, failed requests)."""
        h = self._headers(api_key)
        for fid in (st.raw.get("output_file_id"), st.raw.get("error_file_id")):
            if not fid:
                continue
            async for d in self.http.lines(f"{self.http.base_url}/files/{fid}/content", h):
                cid = d.get("custom_id")
                if not isinstance(cid, str):
                    continue
                yield (cid, *_parse(d, n_of.get(cid, 1)))

    async def close(self) -> None:
        await self.http.close()


def _parse(d: dict[str, Any], n: int) -> tuple[Any, str | None]:
    resp = d.get("response")
    resp = resp if isinstance(resp, dict) else {}
    body = resp.get("body")
    err = d.get("error")
    if err or resp.get("status_code") != 200:
        e = err or (body.get("error") if isinstance(body, dict) else None) or {}
        if not isinstance(e, dict):
            e = {"message": str(e)}
        code = e.get("code") or e.get("type") or f"HTTP {resp.get('status_code')}"
        return None, f"{code}: {str(e.get('message', ''))[:200]}"
    try:
        if isinstance(body, dict) and body.get("object") == "response":
            return responses_completion(body), None
        return openai_chat(body, n), None
    except ProviderError as e:
        return None, str(e)
