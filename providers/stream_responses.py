"""OpenAI Responses streamed: the final Response comes whole in `response.completed` /
`response.incomplete`; the deltas before it only count output (a cut answer's size), and an `error` or
`response.failed` event is the cut it is.
"""

from __future__ import annotations

from typing import Any

from core.types import Completion
from providers.parse import checked
from providers.responses import responses_completion
from providers.stream_base import PARTIAL, error_event, event_json


class ResponsesStream:
    """Responses API events (https://platform.openai.com/docs/api-reference/responses-streaming) → the
    final Response object, which `response.completed` / `response.incomplete` carry whole."""

    def __init__(self) -> None:
        self.response: Any = None
        self.done = False
        self.chars = 0

    def feed(self, event: str, data: bytes) -> None:
        obj = event_json(data)
        kind = obj.get("type", event)
        if kind in ("response.output_text.delta", "response.reasoning_summary_text.delta") and isinstance(
            obj.get("delta"), str
        ):
            self.chars += len(obj["delta"])
        elif kind in ("response.completed", "response.incomplete"):
            self.response, self.done = obj.get("response"), True
        elif kind == "error":
            raise error_event({"error": {"type": obj.get("code"), "message": obj.get("message")}})
        elif kind == "response.failed":
            failed = obj.get("response") if isinstance(obj.get("response"), dict) else {}
            raise error_event({"error": failed.get("error") or {"message": "response.failed"}})

    @property
    def complete(self) -> bool:
        return self.done

    @property
    def answered(self) -> bool:
        return self.chars > 0

    def completion(self, cut: bool = False) -> Completion:
        return checked([None], [PARTIAL], None, None) if cut else responses_completion(self.response)

