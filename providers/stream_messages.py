"""Anthropic Messages streamed: message_start, content blocks and message_delta events assembled into the
Message the unstreamed call returns (a tool_use block's input_json_delta pieces decoded into its input),
so providers.parse reads both paths alike.
"""

from __future__ import annotations

from typing import Any

import orjson

from core.types import Completion
from providers.parse import anthropic_message
from providers.stream_base import PARTIAL, StreamCut, error_event, event_json


class MessageStream:
    """Messages stream events (https://docs.anthropic.com/en/docs/build-with-claude/streaming) → the
    Message of the same call: content blocks by index, stop_reason and usage from message_delta."""

    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.done = False
        self.chars = 0

    def feed(self, event: str, data: bytes) -> None:
        obj = event_json(data)
        kind = obj.get("type", event)
        if kind == "error":
            raise error_event(obj)
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

