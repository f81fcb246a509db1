"""One HTTP POST with every failure mapped to our retry classes (shared by the aiohttp providers)."""

from __future__ import annotations

import aiohttp

from providers.base import ProviderError, error_for_status, header_secrets, parse_retry_after, scrub


async def post(session: aiohttp.ClientSession, url: str, data: bytes, headers: dict[str, str]) -> bytes:
    """The body of a 200 answer; HTTP errors, timeouts and dropped connections as ProviderError."""
    try:
        async with session.post(url, data=data, headers=headers) as resp:
            raw = await resp.read()
            if resp.status != 200:
                ra = parse_retry_after(resp.headers.get("Retry-After"))
                body = scrub(raw.decode("utf-8", "replace"), header_secrets(headers))
                raise error_for_status(resp.status, body, ra)
            return raw
    except ProviderError:
        raise
    except TimeoutError:
        raise ProviderError("request timed out", retryable=True) from None
    except (aiohttp.ClientError, ConnectionResetError) as e:
        raise ProviderError(f"connection error: {type(e).__name__}", retryable=True) from None
