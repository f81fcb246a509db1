"""The mock OpenAI server's fault injection (tests.mock_openai): which fault an attempt gets, and the
answer each fault kind makes, as real providers and proxies have been seen to give them."""

from __future__ import annotations

import asyncio
import hashlib
import re
from typing import Any

import orjson
from aiohttp import web

MALFORMED = ("content_obj", "content_int", "usage_str", "message_str", "choices_int", "null_stop")
FAULTS = (
    "429",
    "500",
    "reset",
    "hang",
    "truncated",
    *MALFORMED,
    "garbage",
    "big",
    "bad_utf8",
    "echo_error",
    "echo_success",
    "echo_spellings",
    "echo_spellings_text",
    "error_200",
    "choices_flood",
    "content_filter",
    "policy_400",
    "404",
)
_MARK = re.compile(r"\[\[fault:([a-z0-9_]+)(\*(\d*))?\]\]")


def _unit(*parts: Any) -> float:
    h = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2**64


def malformed(kind: str, good: dict[str, Any]) -> dict[str, Any]:
    """A 200 body broken in one of the ways real servers break them."""
    b = orjson.loads(orjson.dumps(good))
    ch = b["choices"]
    if kind == "content_obj":
        ch[0]["message"]["content"] = {"text": "The answer is A."}
    elif kind == "content_int":
        ch[0]["message"]["content"] = 42
    elif kind == "usage_str":
        b["usage"] = {k: str(v) for k, v in b["usage"].items()}
    elif kind == "message_str":
        ch[0]["message"] = "The answer is A."
    elif kind == "choices_int":
        b["choices"] = [1, 2]
    elif kind == "null_stop":
        ch[0]["message"]["content"] = None
        ch[0]["finish_reason"] = "stop"
    return b


def _not_found(model: str) -> web.Response:
    """OpenAI's 404 for an id it does not have, or that this key may not use (its words as quoted in
    Shopify/roast#13 and continuedev/continue#10832)."""
    return web.json_response(
        {"error": {"message": f"The model `{model}` does not exist or you do not have access to it.",
                   "type": "invalid_request_error", "param": None, "code": "model_not_found"}},
        status=404)  # fmt: skip


def pick(srv: Any, model: str, prompt: str, seen: int) -> str | None:
    """The fault for this attempt: a `[[fault:KIND]]` marker in the prompt, else drawn from `faults`."""
    m = _MARK.search(prompt)
    if m is not None:
        kind, star, times = m.group(1), m.group(2), m.group(3)
        limit = 1 if not star else (int(times) if times else 1 << 30)
        return kind if seen <= limit else None
    if not srv.faults:
        return None
    u = _unit(srv.seed, model, prompt, seen)
    for kind, rate in srv.faults.items():
        if u < rate:
            return kind
        u -= rate
    return None

async def inject(
    srv: Any, kind: str, request: web.Request, model: str, prompt: str, key: str, good: dict[str, Any]
) -> web.StreamResponse:
    """The answer of fault `kind` to a request whose good answer is `good` (changed in place)."""
    if kind == "garbage":
        kind = MALFORMED[int(_unit("garbage", srv.seed, model, prompt) * len(MALFORMED))]
    if kind == "429":
        return web.json_response(
            {"error": {"message": "Rate limit reached", "type": "requests"}},
            status=429,
            headers={"Retry-After": f"{srv.retry_after:g}"},
        )
    if kind == "500":
        return web.json_response({"error": {"message": "internal error"}}, status=500)
    if kind == "404":
        return _not_found(model)
    if kind == "policy_400":  # Azure OpenAI's prompt filter: HTTP 400, code content_filter
        return web.json_response(
            {"error": {"message": "The response was filtered due to the prompt triggering Azure OpenAI's "
                       "content management policy.", "type": None, "param": "prompt", "code": "content_filter",
                       "status": 400}}, status=400)  # fmt: skip
    if kind == "content_filter":  # the completion filtered: no content, finish_reason content_filter
        for ch in good["choices"]:
            ch["message"]["content"], ch["finish_reason"] = None, "content_filter"
        return web.json_response(good)
    if kind == "echo_error":
        pad = "x" * 200
        return web.json_response(
            {"error": {"message": f"{pad} bad request from Authorization: Bearer {key}"}}, status=500
        )
    if kind == "hang":
        await asyncio.sleep(srv.timeout_hang_s)
        return web.json_response(good)
    if kind == "reset":  # headers and half the body, then the connection drops
        data = orjson.dumps(good)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.content_length = len(data)
        await resp.prepare(request)
        await resp.write(data[: len(data) // 2])
        assert request.transport is not None
        request.transport.abort()
        return resp
    if kind == "truncated":  # a complete HTTP answer whose JSON stops halfway
        data = orjson.dumps(good)
        return web.Response(body=data[: len(data) // 2], content_type="application/json")
    if kind in MALFORMED:
        if kind == "usage_str":  # odd but usable: the client keeps it
            with srv._lock:
                srv.answered[(model, prompt)] += 1
        return web.json_response(malformed(kind, good))
    if kind == "big":
        good["choices"][0]["message"]["content"] = "A" * (5 << 20) + "\nThe answer is A."
    elif kind == "bad_utf8":
        data = orjson.dumps(good).replace(b"Let me", b"Let \xff\xfe me", 1)
        return web.Response(body=data, content_type="application/json")
    elif kind == "echo_success":
        good["choices"][0]["message"]["content"] += f" (you sent Authorization: Bearer {key})"
    elif kind in ("echo_spellings", "error_200"):  # a 200 that is no completion: HTML, or an error JSON
        from tests.echoes import echo_all

        if kind == "error_200":
            return web.json_response({"error": {"message": "model overloaded, try later", "code": 503}})
        return web.Response(text=f"<html>proxy error for key\n{echo_all(key)}</html>", content_type="text/html")
    elif kind == "echo_spellings_text":
        from tests.echoes import echo_all

        good["choices"][0]["message"]["content"] += "\n" + echo_all(key)
    elif kind == "choices_flood":  # a broken server: 50,000 choices whatever `n` asked
        good["choices"] = [{**good["choices"][0], "index": i} for i in range(50_000)]
        u = good["usage"]
        u["total_tokens"] += u["completion_tokens"] * 49_999  # consistent usage, as a real server sends
        u["completion_tokens"] *= 50_000
    else:
        raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(FAULTS)}")
    return web.json_response(good)
