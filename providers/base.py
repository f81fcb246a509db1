"""What every provider shares: the call contract, the error classes the scheduler retries on, and the
OpenAI wire format of messages (used by the fast path, litellm and the batch files alike).

A provider knows HTTP (or its simulation), never benchmarks: it gets messages and decoding params and
returns texts and token usage.
"""

from __future__ import annotations

import json
import re
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

from core.secrets import REDACTED, header_secrets, scrub  # noqa: F401  (re-exported)
from core.types import Completion, Message, Request, TextPart


class ProviderError(Exception):
    """A failed call. `retryable` decides tenacity's retry; `rate_limited` also slows the lane down."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        rate_limited: bool = False,
        retry_after: float | None = None,
        quota: bool = False,
        refuses_model: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.quota = quota
        """The key has no credit left / billing / disabled: its lane stops, retrying cannot help."""
        self.refuses_model = refuses_model
        """The provider refuses this model whatever we send (no such model, no access to it; set it too
        on a 400 repeated after the request was adapted): runner.calls.gate stops the model, its other calls
        are not sent."""
        self.retryable = (retryable or rate_limited) and not quota
        self.rate_limited = rate_limited and not quota
        self.retry_after = retry_after
        self.limits: dict[str, float] | None = None
        """The answer's x-ratelimit-* headers (providers.http), for the lane to learn from."""
        self.body: str | None = None
        """A refused request's whole answer (400/422, a server's validation error), for
        providers.refusals to read what the model refuses: the message keeps only its start."""
        self.request: bytes | None = None
        """The refused request's body as sent (no secrets: keys go in headers), read against the answer."""

    @property
    def kind(self) -> str:
        if self.quota:
            return "quota"
        if self.refuses_model:
            return "model_refused"
        if self.rate_limited:
            return "rate_limit"
        return "transient" if self.retryable else "fatal"


def error_for_status(status: int, body: str, retry_after: float | None = None) -> ProviderError:
    err = _for_status(status, body, retry_after)
    if status in (400, 422) or (status >= 500 and _INVALID.search(body)):
        err.body = body
    return err


def _for_status(status: int, body: str, retry_after: float | None = None) -> ProviderError:
    """Map an answer to a retry class by its meaning first, then its status: quota/billing/disabled
    keys stop the lane (OpenAI sends insufficient_quota as a 429); overloaded (Anthropic 529) and
    429/408/409/5xx retry; 400/401/403/404/422 never do. 401/403 (for this model's key), a 404 and
    a `model_not_found` code refuse the model itself (`refuses_model`: runner.calls.gate stops it)."""
    snippet = " ".join(body.split())[:300]
    if _QUOTA.search(body):
        return ProviderError(f"HTTP {status} out of quota: {snippet}", status=status, quota=True)
    if status == 404 or (400 <= status < 500 and _NO_MODEL.search(body)):
        return ProviderError(f"HTTP {status}: {error_message(body)}", status=status, refuses_model=True)
    if status == 429:
        return ProviderError(
            f"HTTP 429 rate limited: {snippet}", status=status, rate_limited=True, retry_after=retry_after
        )
    if status >= 500 and _INVALID.search(body):  # llama-cpp-python: a pydantic error on OUR body as a 500
        return ProviderError(
            f"HTTP {status} invalid request (the server's validation): {snippet}", status=status
        )
    if status in (408, 409) or status >= 500 or "overloaded_error" in body:
        return ProviderError(
            f"HTTP {status}: {snippet}", status=status, retryable=True, retry_after=retry_after
        )
    if status in (401, 403):
        # The body may echo part of the key: never pass it on.
        return ProviderError(
            f"HTTP {status}: authentication/permission refused (check the key's env var)",
            status=status,
            refuses_model=True,
        )
    if "content_filter" in body or "content_policy" in body or "safety" in body.lower():
        return ProviderError(f"HTTP {status} content-policy refusal: {snippet}", status=status)
    return ProviderError(f"HTTP {status}: {snippet}", status=status)


_QUOTA = re.compile(
    r"insufficient_quota|billing_hard_limit|billing_not_active|credit balance is too low"
    r"|account_deactivated|api key (?:is |has been )?disabled|key_disabled|exceeded your current quota",
    re.IGNORECASE,
)
_NO_MODEL = re.compile(r'"(?:code|type|status)"\s*:\s*"(?:model_not_found|not_found_error|NOT_FOUND)"')
"""A model the provider does not have (or not for this key): OpenAI's 404 `code: model_not_found`
("The model `x` does not exist or you do not have access to it."), Anthropic's 404 `not_found_error`
(platform.claude.com/docs/en/api/errors), Google's `status: NOT_FOUND`; some gateways send it as a 400."""


def error_message(body: str) -> str:
    """The provider's own words from an error body (`{"error": {"message"}}` in OpenAI's, Anthropic's
    and Google's shapes, or a list of those), else the body itself, whitespace folded, cut at 300."""
    try:
        d = json.loads(body)
    except ValueError:
        d = None
    if isinstance(d, list) and d:
        d = d[0]
    err = d.get("error") if isinstance(d, dict) else None
    msg = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else None
    if not isinstance(msg, str) or not msg.strip():
        msg = body
    return " ".join(msg.split())[:300]


_INVALID = re.compile(r"\d+ validation errors?\b.{0,400}'loc': \('body',", re.DOTALL)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: str) -> float | None:
    """OpenAI's reset format (`6m0s`, `1s`, `20ms`, `1h2m3.5s`) or plain seconds, as seconds."""
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if not parts or "".join(a + u for a, u in parts) != value.replace(" ", ""):
        return None
    return sum(float(a) * _UNIT[u] for a, u in parts)


def retry_after_of(headers: Any, limits: dict[str, float] | None) -> float | None:
    """How long the server asked us to wait: Retry-After, else retry-after-ms, else the reset time
    of the x-ratelimit budget that ran out (or the soonest reset when none says 0)."""
    ra = parse_retry_after(headers.get("Retry-After"))
    if ra is not None:
        return ra
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    if not limits:
        return None
    resets = [
        (limits.get(f"remaining_{d}"), limits[f"reset_{d}"])
        for d in ("requests", "tokens")
        if f"reset_{d}" in limits
    ]
    empty = [r for rem, r in resets if rem == 0]
    return max(empty) if empty else min((r for _, r in resets), default=None)


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        import time

        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


class Provider(Protocol):
    supports_n: bool
    cacheable: bool

    async def complete(
        self,
        req: Request,
        model_id: str,
        n: int,
        sample: int,
        api_key: str | None,
        params: dict[str, Any],
        shape: Any = None,
    ) -> Completion: ...

    """`shape` (providers.shape.Shape): the model's request rules, resolved once per model."""

    async def close(self) -> None: ...


OPENAI_IMAGE_MB = (
    20  # per image (https://platform.openai.com/docs/guides/images-vision#image-input-requirements)
)
ANTHROPIC_IMAGE_MB = 5  # per image on the API (https://docs.anthropic.com/en/docs/build-with-claude/vision)


def checked_image(data_url: str, limit_mb: float, provider: str) -> str:
    """An image the provider refuses for its size is an error before anything is sent (and paid)."""
    size = (len(data_url) - data_url.find(",") - 1) * 3 // 4
    if size > limit_mb * 2**20:
        raise ValueError(
            f"an image of {size / 2**20:.1f} MB is over {provider}'s {limit_mb} MB per-image limit"
        )
    return data_url


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """OpenAI chat format; images become base64 data URLs (encoded once per file, cached)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.tool_calls is not None or m.tool_call_id is not None:
            out.append(tool_turn(m))
            continue
        if isinstance(m.content, str):
            out.append({"role": m.role, "content": m.content})
            continue
        parts: list[dict[str, Any]] = []
        for p in m.content:
            if isinstance(p, TextPart):
                parts.append({"type": "text", "text": p.text})
            else:
                url: dict[str, Any] = {"url": checked_image(p.data_url(), OPENAI_IMAGE_MB, "OpenAI")}
                if p.detail:
                    url["detail"] = p.detail
                parts.append({"type": "image_url", "image_url": url})
        out.append({"role": m.role, "content": parts})
    return out


def tool_turn(m: Message) -> dict[str, Any]:
    """An assistant turn that called tools, or a `tool` turn answering one (OpenAI wire format)."""
    d: dict[str, Any] = {"role": m.role, "content": m.content if isinstance(m.content, str) else ""}
    if m.tool_calls is not None:
        d["tool_calls"] = m.tool_calls
    if m.tool_call_id is not None:
        d["tool_call_id"] = m.tool_call_id
    return d


def wire_body(
    req: Request, model_id: str, n: int, params: dict[str, Any], shape: Any = None
) -> dict[str, Any]:
    d = req.decoding
    body: dict[str, Any] = {
        "model": model_id,
        "messages": wire_messages(req.messages),
        "temperature": d.temperature,
    }
    if d.temperature is None:
        del body["temperature"]
    if d.max_tokens is not None:
        body["max_tokens"] = d.max_tokens
    if d.top_p is not None:
        body["top_p"] = d.top_p
    if d.seed is not None:
        body["seed"] = d.seed
    if n > 1:
        body["n"] = n
    if req.tools:
        body["tools"] = req.tools
    if shape is not None:
        shape.chat(body, d.max_tokens)
    if params:
        apply_params(body, params)
    return body


def apply_params(body: dict[str, Any], params: dict[str, Any]) -> None:
    """A model's extra body fields; a None value removes the field (o-series models refuse
    `temperature`, for instance: config `omit = ["temperature"]`)."""
    for k, v in params.items():
        if v is None:
            body.pop(k, None)
        else:
            body[k] = v
