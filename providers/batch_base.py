"""What the two batch APIs share: a status in one vocabulary, HTTP with our error classes, and a JSONL
stream reader that holds one line at a time (result files reach hundreds of MB)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from providers.base import (
    Completion,
    ProviderError,
    error_for_status,
    header_secrets,
    parse_retry_after,
    scrub,
)

BATCH_APIS: dict[str, Callable[..., Any]] = {}
"""Endpoint kind → its batch API class, `cls(base_url, headers)`. Each API module registers itself when
imported (`@register`); import `providers.batches` to have them all."""

LineResult = tuple[str, Completion | None, str | None]
"""(custom_id, the answer or None, why it failed or None) for one request of a batch."""


@dataclass
class BatchStatus:
    state: str
    """The provider's own word (in_progress, finalizing, completed, expired, ended...)."""
    ended: bool
    """No further change: results (possibly partial) can be fetched."""
    counts: dict[str, int] = field(default_factory=dict)
    """Normalised: total, done (succeeded), failed (errored, expired, cancelled)."""
    raw: dict[str, Any] = field(default_factory=dict)


def register(cls: Any) -> Any:
    """Class decorator: the batch API for endpoints of kind `cls.kind`."""
    BATCH_APIS[cls.kind] = cls
    return cls


def batch_api(ep: Any) -> Any:
    """The batch API of an endpoint (a runner.config.Endpoint of a kind in BATCH_APIS)."""
    return BATCH_APIS[ep.kind](ep.base_url, ep.headers)


class BatchHTTP:
    """One aiohttp session per batch endpoint. Timeouts suit uploads/downloads of large files."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=600)
            self._session = aiohttp.ClientSession(timeout=timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()

    async def json(self, method: str, url: str, headers: dict[str, str], **kw: Any) -> Any:
        try:
            async with self.session().request(method, url, headers=headers, **kw) as resp:
                raw = await resp.read()
                if resp.status >= 300:
                    ra = parse_retry_after(resp.headers.get("retry-after"))
                    body = scrub(raw.decode("utf-8", "replace"), header_secrets(headers))
                    raise error_for_status(resp.status, body, ra)
        except ProviderError:
            raise
        except TimeoutError:
            raise ProviderError(f"{method} {url}: timed out", retryable=True) from None
        except (aiohttp.ClientError, ConnectionResetError) as e:
            raise ProviderError(
                f"{method} {url}: connection error {type(e).__name__}", retryable=True
            ) from None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ProviderError(
                f"{method} {url}: malformed JSON ({len(raw)} bytes)", retryable=True
            ) from None

    async def lines(self, url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
        """Parsed JSONL lines (objects) of a download, streamed; a garbled line is skipped (its request then
        counts as missing and falls back to a live call)."""
        try:
            async with self.session().get(url, headers=headers) as resp:
                if resp.status >= 300:
                    raw = await resp.read()
                    body = scrub(raw.decode("utf-8", "replace"), header_secrets(headers))
                    raise error_for_status(resp.status, body)
                buf = b""
                async for chunk in resp.content.iter_chunked(1 << 20):
                    buf += chunk
                    *done, buf = buf.split(b"\n")
                    for line in done:
                        if (d := _loads(line)) is not None:
                            yield d
                if (d := _loads(buf)) is not None:
                    yield d
        except ProviderError:
            raise
        except (TimeoutError, aiohttp.ClientError, ConnectionResetError) as e:
            raise ProviderError(f"GET {url}: {type(e).__name__}", retryable=True) from None


def _loads(line: bytes) -> Any:
    if not line.strip():
        return None
    try:
        d = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return d if isinstance(d, dict) else None
