"""Where a request's re-sent prefix ends, for providers that cache prompt prefixes.

Anthropic caches only what a `cache_control` breakpoint marks (at most 4 per request), bills a write at
1.25x and a read at 0.1x the input price, caches nothing shorter than its minimum (1,024 tokens; 2,048
on Haiku), and keeps an entry 5 minutes from its last use
(https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching). So a breakpoint goes where a
suite says its shared prefix ends (`Request.prefix`) and on the whole prompt when it will be sent again
(several samples without `n`, or `Request.resent`): never elsewhere, as a write nobody reads costs 25%
more than no caching. Marks change no text the model sees: a string content and the one text block
carrying the mark are the same input. OpenAI caches prefixes by itself and routes by
`prompt_cache_key`, which `prefix_key` gives (stable per shared prefix).
"""

from __future__ import annotations

import hashlib
from typing import Any

from core.types import ImagePart, Request, TextPart

EPHEMERAL = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4
IMAGE_TOKENS = 1600
"""An image's tokens at most (Anthropic scales images over ~1.15 megapixels, ~1,600 tokens): the
prefix estimate errs long, so a prefix is never taken for too short to cache."""


def min_cacheable(model_id: str) -> int:
    """The fewest prompt tokens a provider caches (Anthropic: 2,048 on Haiku; 1,024 elsewhere and on
    OpenAI, Gemini and DeepSeek's automatic caches)."""
    return 2048 if "haiku" in model_id.lower() else 1024


def whole_resent(req: Request) -> bool:
    """The whole prompt will be sent again: several samples as separate calls, or a later pass."""
    return req.resent or req.decoding.n > 1


def tokens_to(req: Request, end: tuple[int, int] | None = None) -> int:
    """Estimated prompt tokens up to and including `end` (message, part); None: the whole prompt
    (~4 characters a token, IMAGE_TOKENS an image)."""
    last = len(req.messages) - 1 if end is None else end[0]
    chars = images = 0
    for i, m in enumerate(req.messages[: last + 1]):
        if isinstance(m.content, str):
            chars += len(m.content)
            continue
        parts = m.content if end is None or i < last else m.content[: end[1] + 1]
        for p in parts:
            if isinstance(p, TextPart):
                chars += len(p.text)
            else:
                images += 1
    return chars // 4 + IMAGE_TOKENS * images


def prefix_key(req: Request) -> str | None:
    """A stable key of the shared prefix's content (images by their bytes' SHA-256): equal for every
    request that starts with it. None when the request declares no prefix."""
    if req.prefix is None:
        return None
    mi, pi = req.prefix
    h = hashlib.sha256()
    for i, m in enumerate(req.messages[: mi + 1]):
        h.update(m.role.encode() + b"\x1e")
        if isinstance(m.content, str):
            h.update(m.content.encode() + b"\x1f")
            continue
        for p in m.content if i < mi else m.content[: pi + 1]:
            h.update(p.sha256().encode() if isinstance(p, ImagePart) else p.text.encode())
            h.update(b"\x1f")
    return h.hexdigest()[:32]


def mark_messages(
    body: dict[str, Any], req: Request, where: list[int | None], whole: bool
) -> None:
    """Put Anthropic breakpoints into a Messages `body` built from `req`: at `req.prefix` and, when
    `whole`, on the last block. `where[i]` is the index in body["messages"] of req.messages[i] (None
    for a system message, sent in body["system"])."""
    spots: list[tuple[int, int]] = []
    if req.prefix is not None:
        spots.append(req.prefix)
    if whole and req.messages:
        last = req.messages[-1]
        spots.append((len(req.messages) - 1, 0 if isinstance(last.content, str) else len(last.content) - 1))
    done: set[tuple[int, int]] = set()
    room = MAX_BREAKPOINTS - _already(body)
    for mi, pi in spots:
        if (mi, pi) in done or room <= 0 or not 0 <= mi < len(where):
            continue
        done.add((mi, pi))
        at = where[mi]
        if at is None:
            if _mark_system(body):
                room -= 1
            continue
        content = body["messages"][at]["content"]
        if isinstance(content, str):
            body["messages"][at]["content"] = [{"type": "text", "text": content, "cache_control": EPHEMERAL}]
        elif 0 <= pi < len(content):
            content[pi]["cache_control"] = EPHEMERAL
        else:
            continue
        room -= 1


def _mark_system(body: dict[str, Any]) -> bool:
    system = body.get("system")
    if isinstance(system, str) and system:
        body["system"] = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
        return True
    return False


def _already(body: dict[str, Any]) -> int:
    """Breakpoints a body carries already (a model's `params` may set a system prompt with its own)."""
    system = body.get("system")
    return sum(1 for b in system if isinstance(b, dict) and "cache_control" in b) if isinstance(system, list) else 0
