"""One HTTP POST with every failure mapped to our retry classes (shared by the aiohttp providers)."""

from __future__ import annotations

import errno
import socket
import ssl
import time
from collections.abc import Callable
from contextvars import ContextVar
from datetime import datetime
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

SENT: ContextVar[Callable[[], None] | None] = ContextVar("evalsweep_sent", default=None)
"""Set by a paced caller around one call: called as the request's body goes out on the socket, so
a rate window counts the request from when the provider can first see it, not from its admission."""


class SentRequest(aiohttp.ClientRequest):
    """aiohttp's request (the session's `request_class`), calling `SENT` as its body starts out on
    the socket: immediately before the write, in the same step of the loop. A subclass, not a
    `TraceConfig`: a trace costs every request ~15 us of CPU (a Trace object and a coroutine per
    event), this one frame and a context-variable read."""

    async def write_bytes(self, *args: Any, **kwargs: Any) -> None:
        mark = SENT.get()
        if mark is not None:
            mark()
        await super().write_bytes(*args, **kwargs)


_LIMIT_NAMES = frozenset(
    name
    for dim in ("requests", "tokens")
    for what in ("limit", "remaining", "reset")
    for name in (f"x-ratelimit-{what}-{dim}", f"anthropic-ratelimit-{dim}-{what}")
)
_PARSED: dict[tuple[bool, str], float | None] = {}
"""Header values already read (`6m0s`, `499`...): they repeat from answer to answer, and reading one
costs ~3-5 us (a failed float, then a regex), for ~6 headers an answer."""


def parse_limits(headers: Any) -> dict[str, float] | None:
    """The key's limits the provider reports, as numbers (reset-* in seconds from now); None when it
    reports none. OpenAI (and gateways copying it): x-ratelimit-{limit,remaining,reset}-{requests,
    tokens}, resets like `6m0s`; Anthropic: anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset},
    resets as RFC 3339 times. One pass over the answer's handful of headers, not a case-insensitive
    look-up of each of the twelve names (~4 us an answer that has none)."""
    seen: dict[str, str] = {}
    for name, v in headers.items():
        name = name.lower()
        if name in _LIMIT_NAMES and name not in seen:  # (the first of a repeated one, as `get` reads)
            seen[name] = v
    if not seen:
        return None
    out: dict[str, float] = {}
    for dim in ("requests", "tokens"):
        for what in ("limit", "remaining", "reset"):
            v = seen.get(f"x-ratelimit-{what}-{dim}")
            if v is None and (v := seen.get(f"anthropic-ratelimit-{dim}-{what}")) is not None and what == "reset":
                x = _until(v)
            elif v is None:
                continue
            else:
                x = _read(what == "reset", v)
            if x is not None:
                out[f"{what}_{dim}"] = x
    return out or None


def _read(duration: bool, v: str) -> float | None:
    """A limit header's number (a reset's seconds), remembered (`_PARSED`)."""
    k = (duration, v)
    if k not in _PARSED:
        if len(_PARSED) >= 4096:
            _PARSED.clear()
        _PARSED[k] = parse_duration(v) if duration else _num(v)
    return _PARSED[k]


def _until(stamp: str) -> float | None:
    try:
        return max(0.0, datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - time.time())
    except ValueError:
        return None


def _num(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None


class TimedOut(ProviderError):
    """An unstreamed call without an answer within its total timeout (the provider may still bill it)."""


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
                err = refusal(resp, raw, headers, limits)
                err.request = data
                raise err
            return raw, limits
    except ProviderError:
        raise
    except TimeoutError:
        raise TimedOut(f"request timed out: {host_port(url)}", retryable=True) from None
    except (aiohttp.ClientError, ConnectionResetError) as e:
        raise ProviderError(
            f"connection error: {host_port(url)}: {connection_cause(e)}", retryable=True
        ) from None


def refusal(
    resp: aiohttp.ClientResponse, raw: bytes, headers: dict[str, str], limits: dict[str, float] | None
) -> ProviderError:
    """The error of a non-200 answer (its body scrubbed of the request's secrets), carrying its limits."""
    body = scrub(raw.decode("utf-8", "replace"), header_secrets(headers))
    err = error_for_status(resp.status, body, retry_after_of(resp.headers, limits))
    err.limits = limits
    return err


def host_port(url: str) -> str:
    """`host:port` of a URL (the port its scheme implies when none is written)."""
    from yarl import URL

    u = URL(url)
    return f"{u.host}:{u.port}"


_ERRNO = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset",
    errno.ETIMEDOUT: "connect timed out",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
}


def connection_cause(e: BaseException) -> str:
    """Why a connection failed, in words a person acts on: `connection refused`, `DNS lookup failed`,
    `TLS: certificate verify failed`, `server disconnected`..."""
    if isinstance(e, aiohttp.ClientConnectorDNSError) or isinstance(
        getattr(e, "os_error", None), socket.gaierror
    ):
        return "DNS lookup failed (no such host?)"
    if isinstance(e, aiohttp.ClientConnectorCertificateError):
        return f"TLS: certificate verify failed ({getattr(e.certificate_error, 'verify_message', '') or e})"
    if isinstance(e, aiohttp.ClientSSLError | ssl.SSLError):
        return f"TLS: {getattr(e, 'os_error', None) or e}"
    if isinstance(e, aiohttp.ServerDisconnectedError):
        return "server disconnected without answering"
    if isinstance(e, ConnectionResetError):
        return "connection reset"
    os_err = getattr(e, "os_error", None) if isinstance(e, aiohttp.ClientConnectorError) else e
    if isinstance(os_err, OSError) and os_err.errno in _ERRNO:
        return _ERRNO[os_err.errno]
    if isinstance(os_err, OSError) and os_err.strerror:
        return os_err.strerror.lower()
    return type(e).__name__
