"""OpenAI's Responses API (`POST /v1/responses`), for models served only there (litellm's map lists no
`/v1/chat/completions` among their `supported_endpoints`: the gpt-5 codex models, o3-pro, gpt-5-pro).

The same messages as the chat path, in the Responses input format; one sample per call (no `n`); the
answer is the text of its `output_text` parts; usage as `input_tokens`/`output_tokens` with their
details (cached input, reasoning). A response cut by its limit is `status: "incomplete"` with
`incomplete_details.reason = "max_output_tokens"`: the finish reason "length" of the chat path.
Function tools (https://platform.openai.com/docs/guides/function-calling?api-mode=responses) go flat
(`{"type": "function", "name", "description", "parameters"}`); a `function_call` output item is read as
the chat path's `tool_calls` entry, and a turn that called tools goes back as `function_call` items and
each result as a `function_call_output`, by `call_id` only: with `store: false` an item sent back with
its `id` is refused ("Items are not persisted when `store` is set to false",
https://github.com/continuedev/continue/issues/9101). Reasoning items are not sent back.
"""

from __future__ import annotations

from typing import Any

import orjson

from core.types import Completion, Request, TextPart
from providers.base import apply_params, header_secrets, scrub
from providers.parse import checked, malformed, output_billed


def responses_body(req: Request, model_id: str, params: dict[str, Any], shape: Any) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for m in req.messages:
        if m.role == "tool" or m.tool_calls:
            items += _tool_items(m)
            continue
        role = "developer" if m.role == "system" else m.role
        kind = "output_text" if m.role == "assistant" else "input_text"
        if isinstance(m.content, str):
            items.append({"role": role, "content": [{"type": kind, "text": m.content}]})
            continue
        parts: list[dict[str, Any]] = []
        for p in m.content:
            if isinstance(p, TextPart):
                parts.append({"type": kind, "text": p.text})
            else:
                parts.append({"type": "input_image", "image_url": p.data_url(), "detail": p.detail or "auto"})
        items.append({"role": role, "content": parts})
    d = req.decoding
    body: dict[str, Any] = {"model": model_id, "input": items, "temperature": d.temperature, "store": False}
    if req.tools:
        body["tools"] = [{"type": "function", **t["function"]} for t in req.tools if t.get("type") == "function"]
    if d.temperature is None:
        del body["temperature"]
    if d.top_p is not None:
        body["top_p"] = d.top_p
    for f in shape.drop:
        body.pop(f, None)
    n = shape.limit(d.max_tokens)
    if n is not None:
        body["max_output_tokens"] = n
    body.update(shape.fields)
    if params:
        apply_params(body, params)
    return body


def _tool_items(m: Any) -> list[dict[str, Any]]:
    """A chat turn of tool calls, or a tool's result, as Responses input items."""
    if m.role == "tool":
        out = m.content if isinstance(m.content, str) else orjson.dumps(m.content).decode()
        return [{"type": "function_call_output", "call_id": m.tool_call_id, "output": out}]
    items: list[dict[str, Any]] = []
    if isinstance(m.content, str) and m.content:
        items.append({"role": "assistant", "content": [{"type": "output_text", "text": m.content}]})
    for c in m.tool_calls or []:
        fn = c.get("function") or {}
        args = fn.get("arguments")
        items.append({"type": "function_call", "call_id": c.get("id"), "name": fn.get("name"),
                      "arguments": args if isinstance(args, str) else orjson.dumps(args).decode()})
    return items


def parse_responses(raw: bytes, headers: dict[str, str] | None = None) -> Completion:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:  # scrubbed before it is cut (providers.openai.parse_chat says why)
        text = scrub(raw.decode("utf-8", "replace"), header_secrets(headers or {}))
        raise malformed(f"response body ({len(raw)} bytes) is not JSON: {text[:120]!r}") from None
    return responses_completion(body)


def responses_completion(body: Any) -> Completion:
    """A decoded Responses object: a well-typed completion, or a retryable error."""
    if not isinstance(body, dict) or not isinstance(body.get("output"), list):
        raise malformed(f"Responses body without an output list: {str(body)[:120]}")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for i, item in enumerate(body["output"]):
        if not isinstance(item, dict):
            raise malformed(f"output[{i}] is {type(item).__name__}, not an object")
        if item.get("type") == "function_call":
            calls.append({"id": item.get("call_id"), "type": "function",
                          "function": {"name": item.get("name"), "arguments": item.get("arguments")}})
            continue
        if item.get("type") != "message":
            continue  # reasoning summaries
        content = item.get("content")
        if not isinstance(content, list):
            raise malformed(f"output[{i}].content is {type(content).__name__}, not a list")
        for part in content:
            if isinstance(part, dict) and part.get("type") == "output_text":
                t = part.get("text")
                if not isinstance(t, str):
                    raise malformed(f"output[{i}] text is {type(t).__name__}")
                texts.append(t)
            elif isinstance(part, dict) and part.get("type") == "refusal":
                return checked([None], ["refusal"], *_usage(body))
    status = body.get("status")
    details = body.get("incomplete_details") if isinstance(body.get("incomplete_details"), dict) else {}
    reason = {"completed": "stop"}.get(status) or (
        "length"
        if details.get("reason") == "max_output_tokens"
        else "content_filter"
        if details.get("reason") == "content_filter"
        else status
    )
    text = "".join(texts) if texts else None
    if text is None and reason == "stop" and not calls:
        raise malformed("a completed response with no output text")
    ins, outs, _, details = _usage(body)
    done = checked([text], [reason if isinstance(reason, str) else None], ins, outs, None, details, [bool(calls)])
    if calls:
        done.tool_calls = [calls]
    return done


def _usage(body: dict[str, Any]) -> tuple[Any, Any, None, tuple[Any, Any, Any, Any]]:
    """input/output tokens and their details (https://platform.openai.com/docs/api-reference/responses/object)."""
    u = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    cached = (
        (u.get("input_tokens_details") or {}).get("cached_tokens")
        if isinstance(u.get("input_tokens_details"), dict)
        else None
    )
    reasoning = (
        u["output_tokens_details"].get("reasoning_tokens")
        if isinstance(u.get("output_tokens_details"), dict)
        else None
    )
    outs = output_billed(body.get("model"), u.get("input_tokens"), u.get("output_tokens"), reasoning,
                         u.get("total_tokens"))
    return u.get("input_tokens"), outs, None, (cached, None, reasoning, None)
