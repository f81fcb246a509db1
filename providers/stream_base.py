"""What every streamed format shares (providers.stream and its assemblers stream_chat, stream_messages,
stream_responses): an event is one JSON object, and an event goes wrong in one of two ways, Malformed
(skipped and counted, the stream read on) or a StreamCut (the stream ends there).
"""

from __future__ import annotations

from typing import Any

import orjson

from providers.base import ProviderError

PARTIAL = "partial"
"""The finish reason of a choice whose stream was cut before it finished."""


class Malformed(Exception):
    """An event that is not a JSON object: skipped (and counted), the stream read on."""


class StreamCut(ProviderError):
    """A stream that ended before its final event. `idle`: no byte for the idle timeout."""

    def __init__(self, why: str, *, idle: bool = False, event: str | None = None) -> None:
        super().__init__(why, retryable=True)
        self.idle = idle
        self.event = event
        """The provider's error type when an error event cut it (e.g. overloaded_error)."""


def event_json(data: bytes) -> dict[str, Any]:
    """An event's data as the JSON object every format sends; anything else is Malformed (skipped, the
    stream read on: not a cut)."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise Malformed(f"undecodable event ({len(data)} bytes): {data[:80]!r}") from None
    if not isinstance(obj, dict):
        raise Malformed(f"event is {type(obj).__name__}, not an object")
    return obj


def error_event(obj: dict[str, Any]) -> StreamCut:
    """An error event (`{"error": {"type" or "code", "message"}}`) as the cut it is, its type kept: a cut
    before any output is retried only when that type is a transient one (e.g. overloaded_error)."""
    err = obj.get("error")
    err = err if isinstance(err, dict) else {"message": str(err)}
    kind = err.get("type") or err.get("code")
    return StreamCut(f"error event mid-stream: {kind}: {str(err.get('message'))[:200]}", event=str(kind))

