"""The long tail of providers (Anthropic, Gemini, Bedrock...) through litellm.

litellm is imported on first use only: its 3 s import and ~4 ms per call stay off the
OpenAI-compatible fast path. Its exceptions are mapped onto our retry classes by their meaning.
"""

from __future__ import annotations

import asyncio
from typing import Any

from core.types import Request
from providers.base import (
    Completion,
    ProviderError,
    apply_params,
    error_for_status,
    retry_after_of,
    scrub,
    wire_body,
)
from providers.http import parse_limits
from providers.parse import openai_chat


class LiteLLMProvider:
    cacheable = True

    def __init__(
        self, base_url: str | None = None, *, timeout_s: float = 600.0, supports_n: bool = False,
        prompt_caching: bool = True,
    ) -> None:
        self.base_url = base_url
        self.caches_prompts = prompt_caching
        """Gemini, DeepSeek... cache prompt prefixes by themselves: the runner's fan-out helps them."""
        self.timeout_s = timeout_s
        self.supports_n = supports_n
        self._litellm: Any = None

    def _lib(self) -> Any:
        if self._litellm is None:
            import os

            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm

            litellm.suppress_debug_info = True
            self._litellm = litellm
        return self._litellm

    async def close(self) -> None:
        return None

    async def complete(
        self,
        req: Request,
        model_id: str,
        n: int,
        sample: int,
        api_key: str | None,
        params: dict[str, Any],
        shape: Any = None,
    ) -> Completion:
        lib = self._lib()
        # The same OpenAI-style body as the fast path; litellm translates it per provider.
        kw = wire_body(req, model_id, n, {}, shape)
        extra = kw.pop("extra_body", None)  # litellm passes it through as the body's extension
        if extra:
            tc = extra.get("google", {}).get("thinking_config") if not model_id.startswith("openai/") else None
            if tc is not None:  # a Gemini budget in litellm's own form (-> thinkingConfig.thinkingBudget);
                # litellm would put `google` at the top of a native generateContent body, which Gemini refuses
                kw["thinking"] = {"type": "enabled", "budget_tokens": tc["thinking_budget"]}
            else:
                kw["extra_body"] = extra
        kw.update(timeout=self.timeout_s, num_retries=0)
        if api_key:
            kw["api_key"] = api_key
        if self.base_url:
            kw["api_base"] = self.base_url
        apply_params(kw, params)
        try:
            resp = await lib.acompletion(**kw)
        except Exception as e:  # noqa: BLE001 - mapped to our classes below
            raise _map_error(lib, e, api_key) from None
        return _completion(resp, n)


def _completion(resp: Any, n: int) -> Completion:
    """litellm's ModelResponse through the same checks as the fast path's JSON."""
    try:
        body = resp.model_dump() if hasattr(resp, "model_dump") else dict(resp)
    except Exception as e:  # noqa: BLE001 - whatever litellm hands back, it is malformed for us
        raise ProviderError(f"malformed litellm response: {type(e).__name__}", retryable=True) from None
    return openai_chat(body, n)


def _map_error(lib: Any, e: Exception, api_key: str | None) -> ProviderError:
    """An answer by its meaning, with the aiohttp providers' classifier (`error_for_status`: out of
    quota / billing / disabled key stops the lane even as a 429, overloaded retries, ...) and the
    wait the server asked for (Retry-After, retry-after-ms, x-ratelimit-reset-*); no answer at all
    (timeout, connection) retries."""
    ex = lib.exceptions
    status = getattr(e, "status_code", None)
    text = scrub(f"{type(e).__name__}: {e}", api_key)
    if isinstance(e, ex.Timeout | asyncio.TimeoutError | ex.APIConnectionError) or not isinstance(
        status, int
    ):
        return ProviderError(text[:300], retryable=True)
    body = getattr(e, "body", None)  # the provider's error object: its `code`/`type` name a quota
    if body:
        text += " " + scrub(str(body), api_key)
    headers = getattr(e, "litellm_response_headers", None) or getattr(
        getattr(e, "response", None), "headers", None
    )
    limits = parse_limits(headers) if headers else None
    err = error_for_status(status, text, retry_after_of(headers, limits) if headers else None)
    err.limits = limits
    return err
