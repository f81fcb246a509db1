"""One HTTP POST with every failure mapped to our retry classes (shared by the aiohttp providers)."""

from __future__ import annotations

from typing import Any

import aiohttp

from providers.base import (
    ProviderError,
    error_for_status,
    header_secrets,
    parse_duration,
    retry_after_of,
    scrub,
)


def parse_limits(headers: Any) -> dict[str, float] | None:
    """The provider's x-ratelimit-* headers as numbers (reset-* in seconds); None when there are none."""
    out: dict[str, float] = {}
    for dim in ("requests", "tokens"):
        for what in ("limit", "remaining", "reset"):
            v = headers.get(f"x-ratelimit-{what}-{dim}")
            if v is None:
                continue
            x = parse_duration(v) if what == "reset" else _num(v)
            if x is not None:
                out[f"{what}_{dim}"] = x
    return out or None


def _num(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None


async def post(session: aiohttp.ClientSession, url: str, data: bytes, headers: dict[str, str]) -> bytes:
    """The body of a 200 answer; HTTP errors, timeouts and dropped connections as ProviderError."""
    return (await exchange(session, url, data, headers))[0]


async def exchange(
    session: aiohttp.ClientSession, url: str, data: bytes, headers: dict[str, str]
) -> tuple[bytes, dict[str, float] | None]:
    """`post`, plus the answer's x-ratelimit-* limits (errors carry them as `.limits`)."""
    try:
        async with session.post(url, data=data, headers=headers) as resp:
            raw = await resp.read()
            limits = parse_limits(resp.headers)
            if resp.status != 200:
                body = scrub(raw.decode("utf-8", "replace"), header_secrets(headers))
                err = error_for_status(resp.status, body, retry_after_of(resp.headers, limits))
                err.limits = limits
                raise err
            return raw, limits
    except ProviderError:
        raise
    except TimeoutError:
        raise ProviderError("request timed out", retryable=True) from None
    except (aiohttp.ClientError, ConnectionResetError) as e:
        raise ProviderError(f"connection error: {type(e).__name__}", retryable=True) from None
