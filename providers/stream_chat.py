"""OpenAI chat completions streamed: chat.completion.chunk events assembled into the chat.completion the
unstreamed call returns (texts and tool calls per choice, finish reasons, the last usage), so
providers.parse reads both paths alike.
"""

from __future__ import annotations

from typing import Any

import orjson

from core.types import Completion
from providers.parse import openai_chat
from providers.stream_base import PARTIAL, StreamCut, error_event, event_json

_REASONING_DELTAS = ("reasoning_content", "reasoning")
"""Chat deltas of visible reasoning (DeepSeek and vLLM `reasoning_content`, OpenRouter `reasoning`)."""


class ChatStream:
    """chat.completion.chunk events → the chat.completion body of the same call."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.parts: dict[int, list[str]] = {}
        self.calls: dict[int, dict[int, dict[str, Any]]] = {}
        """Per choice, its tool calls by their `index`, assembled from fragments (`tool_call`)."""
        self.reasons: dict[int, str] = {}
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None
        self.done = False
        self.chars = 0
        """Characters of output received, visible reasoning included (a cut answer's size, for the log)."""

    def feed(self, event: str, data: bytes) -> None:
        if data == b"[DONE]":
            self.done = True
            return
        obj = event_json(data)
        if "error" in obj:
            raise error_event(obj)
        self.model = obj.get("model") or self.model
        for i, ch in enumerate(obj.get("choices") or []):
            if not isinstance(ch, dict):
                raise StreamCut(f"choices[{i}] is {type(ch).__name__}, not an object")
            idx = ch.get("index", 0)
            idx = idx if isinstance(idx, int) and not isinstance(idx, bool) else 0
            delta = ch.get("delta")
            text = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(text, str):
                self.parts.setdefault(idx, []).append(text)
                self.chars += len(text)
            for field in _REASONING_DELTAS if isinstance(delta, dict) else ():
                if isinstance(delta.get(field), str):  # generated (and billed) output, not the answer
                    self.chars += len(delta[field])
            frags = delta.get("tool_calls") if isinstance(delta, dict) else None
            for frag in frags if isinstance(frags, list) else ():
                if isinstance(frag, dict):
                    self.chars += self.tool_call(self.calls.setdefault(idx, {}), frag)
            if ch.get("finish_reason") is not None:
                self.reasons[idx] = ch["finish_reason"]
        if isinstance(obj.get("usage"), dict):
            self.usage = obj["usage"]  # the last one counts (vLLM's continuous usage stats send several)

    @staticmethod
    def tool_call(calls: dict[int, dict[str, Any]], frag: dict[str, Any]) -> int:
        """One `delta.tool_calls[]` fragment into its call (https://platform.openai.com/docs/guides/
        function-calling#streaming: the first carries index, id, type and the name, the next ones pieces of
        `arguments`); returns the characters it added. Lenient where servers differ: no `index` (one call
        per fragment, a new id a new call), a name or id repeated in every fragment (kept once: Fireworks,
        DeepSeek and Qwen repeat the id, MiniMax on NVIDIA NIM the name), arguments
        sent whole as an object (Ollama's, vLLM's object form: kept as it came). Any other field of the call
        is kept as it came (Gemini's `extra_content` thought signature, which must go back with the call)."""
        k = frag.get("index")
        if not isinstance(k, int) or isinstance(k, bool):
            last = max(calls, default=-1)
            new = last < 0 or (frag.get("id") and calls[last].get("id") not in (None, frag.get("id")))
            k = last + 1 if new else last
        call = calls.setdefault(k, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        if isinstance(frag.get("id"), str) and frag["id"] and not call["id"]:
            call["id"] = frag["id"]
        if isinstance(frag.get("type"), str):
            call["type"] = frag["type"]
        call.update({key: v for key, v in frag.items()
                     if key not in ("index", "id", "type", "function") and v is not None})
        fn, got = frag.get("function"), 0
        if isinstance(fn, dict):
            name, args = fn.get("name"), fn.get("arguments")
            if isinstance(name, str) and name != call["function"]["name"]:
                call["function"]["name"] += name
                got += len(name)
            if isinstance(args, str) and isinstance(call["function"]["arguments"], str):
                call["function"]["arguments"] += args
                got += len(args)
            elif isinstance(args, dict):
                call["function"]["arguments"] = args
                got += len(orjson.dumps(args))
        return got

    @property
    def complete(self) -> bool:
        """[DONE], or every choice finished (a server that omits [DONE] ends with the connection)."""
        return self.done or (bool(self.reasons) and len(self.reasons) >= min(self.n, len(self.parts) or 1))

    @property
    def answered(self) -> bool:
        return self.chars > 0 or bool(self.reasons)

    def body(self, cut: bool = False) -> dict[str, Any]:
        """The chat.completion the non-streamed call returns; `cut`: every unfinished choice of the n asked
        is PARTIAL (none is left unseen: the runner would take that for a server ignoring `n`)."""
        choices = []
        seen = set(self.parts) | set(self.calls) | set(self.reasons)
        for i in sorted(seen | (set(range(self.n)) if cut else set())):
            reason = self.reasons.get(i, PARTIAL if cut else None)
            text = "".join(self.parts[i]) if i in self.parts and reason != PARTIAL else None
            msg: dict[str, Any] = {"role": "assistant", "content": text}
            if self.calls.get(i) and reason != PARTIAL:  # a call cut mid-arguments is never run
                msg["tool_calls"] = [self.calls[i][k] for k in sorted(self.calls[i])]
            choices.append({"index": i, "message": msg, "finish_reason": reason})
        body: dict[str, Any] = {"object": "chat.completion", "model": self.model, "choices": choices}
        if self.usage is not None:
            body["usage"] = self.usage
        return body

    def completion(self, cut: bool = False) -> Completion:
        return openai_chat(self.body(cut), self.n)

