"""Content-addressed cache keys.

key = SHA-256 of canonical JSON (sorted keys) of: the provider-agnostic model id, the messages with
every image replaced by the SHA-256 of its bytes (path, bytes or base64 of one image give one key),
the decoding params, extra body params, the sample index and the pass. Endpoint, API key and
anything else about *where* the call goes are left out on purpose.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from core.types import Request, TextPart


def key_material(req: Request, model_id: str, params: dict[str, Any]) -> dict[str, Any]:
    msgs: list[Any] = []
    for m in req.messages:
        if m.tool_calls is not None or m.tool_call_id is not None:
            msgs.append({"role": m.role, "content": m.content, "tool_calls": m.tool_calls, "id": m.tool_call_id})
        elif isinstance(m.content, str):
            msgs.append({"role": m.role, "content": m.content})
        else:
            msgs.append(
                {
                    "role": m.role,
                    "content": [
                        {"type": "text", "text": p.text}
                        if isinstance(p, TextPart)
                        else {"type": "image", "sha256": p.sha256(), "detail": p.detail}
                        for p in m.content
                    ],
                }
            )
    d = req.decoding
    return {
        "model": model_id,
        "messages": msgs,
        "temperature": d.temperature,
        "max_tokens": d.max_tokens,
        "top_p": d.top_p,
        "seed": d.seed,
        "params": params,
        "pass": req.pass_,
        **({"tools": req.tools} if req.tools else {}),
    }


def cache_keys(req: Request, model_id: str, params: dict[str, Any], samples: range) -> list[str]:
    """One key per sample index; the shared material is built once."""
    base = key_material(req, model_id, params)
    out = []
    for s in samples:
        base["sample"] = s
        out.append(hashlib.sha256(orjson.dumps(base, option=orjson.OPT_SORT_KEYS)).hexdigest())
    return out


def cache_key(
    req: Request, model_id: str, params: dict[str, Any] | None = None, sample: int | None = None
) -> str:
    s = req.sample if sample is None else sample
    return cache_keys(req, model_id, params or {}, range(s, s + 1))[0]
