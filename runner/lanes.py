"""A lane = one (endpoint, API key): its RPM/TPM pacing, concurrency cap, 429 back-off and retries.

Pacing is smooth: providers enforce per-minute limits over short windows (60,000 RPM may mean 1,000
per second), so a lane never admits more than a second's share of its limit in any second. aiolimiter's
leaky bucket gives that when its burst capacity is small: in any window of T seconds it admits at most
`capacity + rate*T`, so we set rate = limit/s - capacity. On repeated 429s the lane halves its rate
and later recovers it step by step (AIMD), honouring Retry-After for the whole lane.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiolimiter import AsyncLimiter
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from providers.base import ProviderError, scrub
from runner.config import Endpoint

T = TypeVar("T")

SAFETY = 0.975  # pace below a limit: timer and network jitter must not tip us over it


def smooth_limiter(per_minute: float) -> AsyncLimiter:
    """A leaky bucket that admits at most per_minute/60 in any one-second window.

    With capacity 1 admissions are spaced 1/rate apart, so a 1 s window holds at most `rate` of them:
    pace at 97.5%, leaving ~25 ms a second for jitter. Above ~75/s a late timer wake-up would lose
    its slot for good, so allow a burst of c = 2% of a second's share and pace at rate = 99% - c: any
    window still holds <= c + rate.
    """
    limit = per_minute / 60.0
    c = max(1, round(0.02 * limit))
    if c == 1:
        return AsyncLimiter(1, 1.0 / (limit * SAFETY))
    return AsyncLimiter(c, c / (0.99 * limit - c))


class Lane:
    def __init__(self, endpoint: Endpoint, key_env: str | None, api_key: str | None, provider: Any) -> None:
        self.endpoint = endpoint
        self.name = f"{endpoint.name}/{key_env}" if key_env else endpoint.name
        self.api_key = api_key
        self.provider = provider
        self.max_concurrency = endpoint.max_concurrency
        self.sem = asyncio.Semaphore(endpoint.max_concurrency)
        self.in_flight = 0
        self.factor = 1.0
        self.paused_until = 0.0
        self._last_cut = 0.0
        self._episode = 0.0
        self._last_429 = 0.0
        self._last_raise = 0.0
        self.token_debt = 0.0
        self.rate_limited = 0
        self.retries = 0
        self._build_limiters()
        self._retry_kw = dict(
            stop=stop_after_attempt(endpoint.max_attempts),
            retry=retry_if_exception(lambda e: isinstance(e, ProviderError) and e.retryable),
            reraise=True,
        )
        # Full jitter: many lanes retrying at once do not stampede the provider together.
        self._backoff = wait_random_exponential(multiplier=endpoint.retry_initial_s, max=endpoint.retry_max_s)

    def _build_limiters(self) -> None:
        e = self.endpoint
        self.rpm = smooth_limiter(e.rpm * self.factor) if e.rpm else None
        if e.tpm:
            per_s = e.tpm * self.factor / 60.0 * SAFETY
            cap = max(1.0, per_s * 0.1)
            self.tpm_cap = cap
            self.tpm = (
                AsyncLimiter(cap, cap / max(per_s - cap, 1e-9)) if per_s > cap else AsyncLimiter(cap, 60.0)
            )
        else:
            self.tpm = None

    @property
    def load(self) -> float:
        """How busy the lane is, for picking among a model's lanes (paused lanes last)."""
        busy = self.in_flight / self.max_concurrency
        return busy + (10.0 if self.paused_until > time.monotonic() else 0.0) + (1.0 - self.factor)

    async def _admit(self, est_tokens: int) -> None:
        wait = self.paused_until - time.monotonic()
        while wait > 0:  # Retry-After applies to the whole lane
            await asyncio.sleep(wait)
            wait = self.paused_until - time.monotonic()
        if self.rpm is not None:
            await self.rpm.acquire()
        if self.tpm is not None:
            # Pay the estimate plus what earlier calls under-estimated (or minus what they over-
            # estimated), in bucket-sized steps: a call bigger than a second's share just waits longer.
            need = est_tokens + self.token_debt
            self.token_debt = min(need, 0.0)
            while need > 0:
                take = min(need, self.tpm_cap)
                await self.tpm.acquire(take)
                need -= take

    def _on_rate_limited(self, retry_after: float | None) -> None:
        now = time.monotonic()
        self.rate_limited += 1
        if now - self._last_429 > 5.0:
            self._episode = now  # a new run of 429s
        self._last_429 = now
        if retry_after:
            self.paused_until = max(self.paused_until, now + retry_after)
        # One burst of 429s (a server hiccup, jitter at the window edge) is answered by the pause
        # alone; 429s that persist past a second mean the limit is really lower: halve the rate,
        # at most once a second, for as long as they continue.
        if now - self._episode >= 1.0 and now - self._last_cut > 1.0 and self.factor > 0.05:
            self.factor = max(0.05, self.factor * 0.5)
            self._last_cut = now
            self._build_limiters()

    def _on_success(self) -> None:
        if self.factor < 1.0:
            now = time.monotonic()
            if now - self._last_429 > 5.0 and now - self._last_raise > 1.0:  # additive recovery
                self.factor = min(1.0, self.factor + 0.1)
                self._last_raise = now
                self._build_limiters()

    def _wait(self, state: RetryCallState) -> float:
        backoff = self._backoff(state)
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, ProviderError) and exc.retry_after is not None:
            return max(backoff, exc.retry_after)
        return backoff

    async def _attempt(self, fn: Callable[[], Awaitable[T]], est_tokens: int) -> tuple[T, float]:
        async with self.sem:
            await self._admit(est_tokens)
            self.in_flight += 1
            t0 = time.perf_counter()
            try:
                result = await fn()
            except ProviderError as e:
                if e.rate_limited:
                    self._on_rate_limited(e.retry_after)
                raise
            finally:
                self.in_flight -= 1
        self._on_success()
        return result, time.perf_counter() - t0

    async def call(self, fn: Callable[[], Awaitable[T]], est_tokens: int) -> tuple[T, int, float]:
        """Run `fn` under the lane's limits with retries; returns (result, attempts, latency_s).

        The first attempt runs bare (most calls succeed; tenacity's per-attempt bookkeeping costs
        ~80 us); after a retryable failure tenacity drives backoff and the remaining attempts. A final
        ProviderError carries `.attempts` so the error row can say how hard we tried."""
        try:
            result, latency = await self._attempt(fn, est_tokens)
            return result, 1, latency
        except ProviderError as e:
            e.attempts = 1  # type: ignore[attr-defined]
            if not e.retryable or self.endpoint.max_attempts <= 1:
                raise
            first: ProviderError | None = e
        attempts = 1
        try:
            async for attempt in AsyncRetrying(wait=self._wait, **self._retry_kw):
                with attempt:
                    if first is not None:  # replay attempt 1's failure: tenacity's count and wait start there
                        err, first = first, None
                        raise err
                    attempts += 1
                    self.retries += 1
                    result, latency = await self._attempt(fn, est_tokens)
        except ProviderError as e:
            e.attempts = attempts  # type: ignore[attr-defined]
            raise
        return result, attempts, latency

    def scrub(self, message: str) -> str:
        """Never let a key into a row, a log line or an error message, whatever a server echoes."""
        return scrub(message, self.api_key)

    def reconcile(self, est_tokens: int, actual_tokens: int | None) -> None:
        """Correct the TPM account once the real usage is known (debt or credit for the next call)."""
        if self.tpm is not None and actual_tokens is not None:
            self.token_debt += actual_tokens - est_tokens
