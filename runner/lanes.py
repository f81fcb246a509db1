"""A lane = one (endpoint, API key): RPM/TPM pacing, a concurrency cap, 429 handling and retries.

Pacing is GCRA on absolute slots: admission k of a lane gets the slot `t0 + k/rate` (the "theoretical
arrival time" advances by 1/rate per admission, never from the moment a late timer woke us), so timer
lateness does not accumulate. A lane that fell behind (a slow callback, a GC pause) catches up on the
slots it missed, up to `BURST_S` of them, spending the burst the provider's one-second window allows
instead of throwing it away; a sliding log of the last second's admissions guarantees that no
one-second window ever holds more than a second's share of the limit (providers enforce per-minute
limits over short windows: 60,000 RPM may mean 1,000 per second). A fresh lane starts on its first
slot, not with a burst: a burst of new connections arrives at the server spread out, and the
window's first requests must not be the late ones.

Rate-limit answers: each 429 makes *that* request wait its Retry-After (or `retry-after-ms`, or the
`x-ratelimit-reset-*` of the exhausted budget); the lane is paused as a whole only when the provider
says the key's budget is empty (`x-ratelimit-remaining-*: 0`). A lane whose recent attempts are mostly
refused slows down multiplicatively (at most once a second; below `FLOOR` only while most attempts are
refused) and recovers additively while quiet (AIMD), so a storm of random 429s costs at most ~2x,
never a stop per 429.
Limits the provider reports (`x-ratelimit-limit-*`) are adopted when the config has none or a higher
one. A quota/billing/disabled-key error stops the lane for good: the pool moves its calls elsewhere.

The seam: all pacing *state* of a lane lives in a budget object, so another process-wide or
cross-process store (Redis, runner issue 12) can replace `LocalBudget` by implementing:

    reserve(tokens) -> float     claim the next RPM slot (and `tokens` of TPM); seconds to wait for it
    confirm() -> float           at the slot: 0 = admitted (recorded), else seconds to wait and re-confirm
    reconcile(est, actual)       correct the TPM account once the real usage is known
    pause(seconds)               nobody on this key is admitted before now + seconds (key exhausted)
    set_limits(rpm, tpm)         the effective per-minute limits (config or provider), None = unlimited
    factor / set_factor(f)       the AIMD multiplier applied to both limits (and to concurrency if none)
    await acquire() / release()  a concurrency lease (cap: max_concurrency, 1 while probing limits)

LocalBudget also hears `late_by(seconds)`, how late a timer fired (its window guard widens by it for ~1 s).

The policy (when to slow, recover, stop, adopt limits) stays in `Lane` and only talks to the seam.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from providers.base import ProviderError, scrub
from providers.http import SENT
from runner.config import Endpoint

T = TypeVar("T")
log = logging.getLogger("evalsweep")

BURST_S = 0.05  # a lane catches up this much lateness at once; more would arrive as a bunch the server
# timestamps spread out (under load), and the window's next requests would meet them
WINDOW_S = 1.0  # no sliding window of this length holds more than rate * WINDOW_S admissions
MARGIN_S = 0.005  # ... measured at the server, after its jitter: keep the window this much wider
SLACK_S = 0.003  # slots are spaced for a window this much wider still: a send's lateness (timer, loop)
# then rarely makes the guard bind, so it does not carry into the next second (the guard's own wait
# would be late too, and lateness accumulating is what absolute slots are for)
MARGIN_MAX = 0.05  # widened while our timers run late or 429s still come (a loaded machine jitters)
LATE_HOLD_S = 1.2  # a stall widens the window guard this long (its delayed sends meet the next second)
FLOOR = 0.5  # a minority of 429s never slows a lane below half its limit (they may be a random storm)
MIN_FACTOR = 0.05  # ... a majority of 429s may (the real limit is far below the configured one)
PROBE_KINDS = ("openai", "anthropic")  # answers carry x-ratelimit-* headers worth waiting one call for


class LocalBudget:
    """One lane's pacing state in this process: GCRA slots, a 1 s window log, a concurrency lease."""

    def __init__(
        self, rpm: float | None, tpm: float | None, max_concurrency: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_concurrency = max_concurrency
        self.clock = clock
        self.factor = 1.0
        self.paused_until = 0.0
        self._tat = 0.0  # next free request slot (monotonic seconds)
        self._tok_tat = 0.0  # next free token slot
        self._log: deque[list[Any]] = deque()  # [stamp, state] per admission of the last window
        self._last: list[Any] | None = None  # the entry of the latest admission (for `on_sent`)
        self.margin = MARGIN_S
        self.late = 0.0  # worst timer lateness (loop stall) of the last LATE_HOLD_S
        self._late_t = 0.0
        self._used = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.probing = False
        self.set_limits(rpm, tpm)

    def set_limits(self, rpm: float | None, tpm: float | None) -> None:
        self.rpm, self.tpm = rpm, tpm
        self._rescale()

    def set_factor(self, f: float) -> None:
        self.factor = f
        self._rescale()

    def _rescale(self) -> None:
        f = self.factor
        self._T = 60.0 / (self.rpm * f) if self.rpm else 0.0  # seconds per request
        self._Tt = 60.0 / (self.tpm * f) if self.tpm else 0.0  # seconds per token
        self._per_window = max(1, math.floor(self.rpm * f / 60.0 * WINDOW_S + 1e-9)) if self.rpm else 0
        cap = self.max_concurrency if self.rpm or self.tpm else max(1, math.ceil(self.max_concurrency * f))
        self._cap = 1 if self.probing else cap
        self._wake()

    def reserve(self, tokens: int) -> float:
        now = self.clock()
        if not self._tat:
            self._tat = self._tok_tat = now  # start on the first slot, without a burst
        slot = max(now - BURST_S, self.paused_until)
        if self._T:
            slot = max(slot, self._tat)
            self._tat = slot + self._T * (1.0 + self.margin + SLACK_S)
        if self._Tt:
            slot = max(slot, self._tok_tat)
            self._tok_tat = slot + tokens * self._Tt
        return slot - now

    def confirm(self) -> float:
        now = self.clock()
        if now < self.paused_until:
            return self.paused_until - now
        if self._per_window:
            log_ = self._log
            span = WINDOW_S + min(MARGIN_MAX, self.margin + self.late)
            for _ in range(2):
                while log_ and log_[0][1] == _SENT and log_[0][0] + span <= now:
                    log_.popleft()[1] = _GONE
                if len(log_) < self._per_window:
                    break
                wait = log_[-self._per_window][0] + span - now
                if wait > 0:
                    return wait
                # Out of order: a request stamped when it left (after later admissions) sits before
                # older stamps; order the log and look again (an unsent one still counts: see on_sent).
                self._log = log_ = deque(sorted(log_, key=_stamp))
            else:  # full of requests admitted a window ago and still not sent: look again soon
                return 0.01
            self._last = entry = [now, _SENT]
            log_.append(entry)
        return 0.0

    def on_sent(self) -> Callable[..., None] | None:
        """The request just admitted will report when its bytes leave: returns the callback for
        that. Until then it counts in every window (its send can only be later), after it from its
        send: the window covers what the provider can see, however long the loop took between
        admission and the write (a stall, a new connection's handshake). Call it with `final=True`
        once the attempt is over: a request that never reported counts from then. None without a
        window."""
        entry, self._last = self._last, None
        if entry is None:
            return None
        entry[1] = _PENDING

        def sent(final: bool = False) -> None:
            if final and entry[1] != _PENDING:
                return
            now = self.clock()
            if entry[1] == _GONE:  # a big body's last chunk, its first one a window ago
                self._log.append(entry)
            entry[0], entry[1] = max(entry[0], now), _SENT

        return sent

    def late_by(self, seconds: float) -> None:
        """A timer fired this late: the loop stalled, so requests admitted just before the stall
        reached the server up to that much after their log stamp (only for providers that do not
        report their sends). Only windows holding them are at risk, i.e. the next ~second: the
        guard widens by the worst stall of the last `LATE_HOLD_S` (not longer: every widened second
        costs `margin` of the limit)."""
        now = self.clock()
        if seconds >= self.late or now - self._late_t > LATE_HOLD_S:
            self.late, self._late_t = seconds, now

    def reconcile(self, est: int, actual: int) -> None:
        if self._Tt:
            self._tok_tat += (actual - est) * self._Tt

    def pause(self, seconds: float) -> None:
        self.paused_until = max(self.paused_until, self.clock() + seconds)

    async def acquire(self) -> None:
        while self._used >= self._cap:
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            except BaseException:
                if fut.done() and not fut.cancelled():
                    self._wake()  # pass on a wake-up we will not use
                raise
        self._used += 1

    def release(self) -> None:
        self._used -= 1
        self._wake()

    def _wake(self) -> None:
        free = self._cap - self._used
        while free > 0 and self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                free -= 1

    def set_probing(self, on: bool) -> None:
        if self.probing and not on and len(self._log) == 1:
            # The probe (a lane's first call, alone) also opened the connection: all we know of its
            # arrival is that it came before its answer, so the window counts it from now.
            self._log[0][0] = self.clock()
        self.probing = on
        self._rescale()


_SENT, _PENDING, _GONE = 0, 1, 2  # a window log entry's state: counts from its stamp / counts / expired


def _stamp(entry: list[Any]) -> float:
    return entry[0]


class Lane:
    def __init__(self, endpoint: Endpoint, key_env: str | None, api_key: str | None, provider: Any) -> None:
        self.endpoint = endpoint
        self.name = f"{endpoint.name}/{key_env}" if key_env else endpoint.name
        self.api_key = api_key
        self.provider = provider
        self._reports_send = bool(getattr(provider, "reports_send", False))  # calls providers.http.SENT
        self.max_concurrency = endpoint.max_concurrency
        self.budget = LocalBudget(endpoint.rpm, endpoint.tpm, endpoint.max_concurrency)
        self.source = {"rpm": "config" if endpoint.rpm else None, "tpm": "config" if endpoint.tpm else None}
        self.reported: dict[str, float] = {}
        self._seen_limits: tuple[float | None, float | None] = (None, None)
        if endpoint.kind in PROBE_KINDS and not (endpoint.rpm and endpoint.tpm):
            self.budget.set_probing(True)  # the first answer tells us the key's limits (or that none come)
        self.stopped: str | None = None
        self.in_flight = 0
        self.queued = 0
        self.admitted = 0
        self._looked = self._started = (time.monotonic(), 0)
        self.rate_limited = 0
        self.retries = 0
        self._bucket = (0.0, 0, 0)  # (start, attempts, 429s) of the current one-second bucket
        self._widened = -math.inf  # when a 429 last widened the budget's window margin
        self._retry_kw = dict(
            stop=stop_after_attempt(endpoint.max_attempts),
            retry=retry_if_exception(lambda e: isinstance(e, ProviderError) and e.retryable),
            reraise=True,
        )
        # Full jitter: many lanes retrying at once do not stampede the provider together.
        self._backoff = wait_random_exponential(multiplier=endpoint.retry_initial_s, max=endpoint.retry_max_s)

    # --- what the pool and the live view read ------------------------------------------------------

    @property
    def tpm(self) -> float | None:
        return self.budget.tpm

    @property
    def rpm(self) -> float | None:
        return self.budget.rpm

    @property
    def factor(self) -> float:
        return self.budget.factor

    @property
    def load(self) -> float:
        """How busy the lane is, for picking among a model's lanes (paused and slowed lanes last)."""
        if self.stopped:
            return math.inf
        b = self.budget
        busy = (self.in_flight + self.queued) / self.max_concurrency
        return busy + (10.0 if b.paused_until > time.monotonic() else 0.0) + (1.0 - b.factor)

    def describe(self, whole_run: bool = False) -> dict[str, Any]:
        """Limit, its source and use (requests a minute, and that / rpm) since the last look (live
        view) or over the whole run (manifest.json)."""
        b = self.budget
        now = time.monotonic()
        t0, n0 = self._started if whole_run else self._looked
        per_min = (self.admitted - n0) / max(now - t0, 1e-9) * 60.0 if self.admitted else 0.0
        if not whole_run and now - t0 >= 5.0:
            self._looked = (now, self.admitted)
        return {
            "lane": self.name,
            "rpm": b.rpm,
            "rpm_source": self.source["rpm"],
            "tpm": b.tpm,
            "tpm_source": self.source["tpm"],
            "factor": round(b.factor, 3),
            "rpm_used": round(per_min, 1),
            "use": round(per_min / b.rpm, 3) if b.rpm else None,
            "admitted": self.admitted,
            "rate_limited": self.rate_limited,
            "retries": self.retries,
            "stopped": self.stopped,
        }

    # --- one attempt -----------------------------------------------------------------------------

    async def _admit(self, est_tokens: int) -> Callable[..., None] | None:
        """Wait for the lane's next slot; returns the callback that stamps the send, if any."""
        b = self.budget
        local = isinstance(b, LocalBudget)
        wait = b.reserve(est_tokens)
        while True:
            if wait > 0:
                due = time.monotonic() + wait
                await asyncio.sleep(wait)
                if local and not self._reports_send:
                    b.late_by(time.monotonic() - due)
            wait = b.confirm()
            if wait <= 0:
                return b.on_sent() if local and self._reports_send else None

    async def _attempt(self, fn: Callable[[], Awaitable[T]], est_tokens: int) -> tuple[T, float]:
        b = self.budget
        self.queued += 1
        try:
            await b.acquire()
        finally:
            self.queued -= 1
        try:
            sent = await self._admit(est_tokens)
            mark = SENT.set(sent) if sent is not None else None
            try:
                if self.stopped:  # out of quota while this call waited: the pool sends it elsewhere
                    raise ProviderError(self.stopped, quota=True)
                self.in_flight += 1
                self.admitted += 1
                t0 = time.perf_counter()
                try:
                    result = await fn()
                except ProviderError as e:
                    self._on_error(e)
                    raise
                finally:
                    self.in_flight -= 1
            finally:
                if mark is not None:
                    SENT.reset(mark)
                    sent(final=True)  # type: ignore[misc]  # never reported: it counts from now
        finally:
            b.release()
        self._on_answer(getattr(result, "limits", None), False)
        return result, time.perf_counter() - t0

    def _on_error(self, e: ProviderError) -> None:
        if e.quota:
            self.stop(str(e))
            return
        if e.status is not None:  # the server answered: limits known (or known to be absent)
            self._on_answer(e.limits, e.rate_limited)

    def stop(self, reason: str) -> None:
        if not self.stopped:
            self.stopped = f"out of quota on {self.name}: {self.scrub(reason)[:200]}"
            log.warning("lane %s stopped: %s", self.name, self.stopped)

    def _on_answer(self, limits: dict[str, float] | None, limited: bool) -> None:
        b = self.budget
        if b.probing:
            b.set_probing(False)
        if limits:
            self._learn(limits)
        now = time.monotonic()
        if limited:
            self.rate_limited += 1
            if b.rpm and now - self._widened >= WINDOW_S:
                # Paced at the limit and still refused: arrivals jitter more than we allowed. Once a
                # window: one stall at the server refuses the whole bunch it delayed, one episode.
                b.margin = min(MARGIN_MAX, b.margin + 0.004)
                self._widened = now
        # AIMD over one-second buckets: when most of a second's attempts were 429s the limit is far
        # below our rate: halve it; when 20-50% were, slow by 3/4 but not below FLOOR; recover by 0.1
        # after each quiet second. A storm of random 429s (~30%, unrelated to our rate) thus costs at
        # most 1/FLOOR; each refused request also waits what it was told.
        start, tries, n429 = self._bucket
        tries, n429 = tries + 1, n429 + limited
        if now - start < 1.0:
            self._bucket = (start, tries, n429)
            return
        self._bucket = (now, 0, 0)
        if n429 >= 3 and n429 >= 0.5 * tries:  # most refused: we send well above the real limit
            b.set_factor(max(MIN_FACTOR, b.factor * 0.5))
        elif n429 >= 3 and n429 >= 0.2 * tries:
            if b.factor > FLOOR:
                b.set_factor(max(FLOOR, b.factor * 0.75))
        elif n429 == 0:
            if b.factor < 1.0:
                b.set_factor(min(1.0, b.factor + 0.1))
            b.margin = max(MARGIN_S, b.margin - 0.0005)

    def _learn(self, lim: dict[str, float]) -> None:
        """Adopt the key's limits the provider reports; pause when it says the budget is empty."""
        rpm, tpm = lim.get("limit_requests"), lim.get("limit_tokens")
        if (rpm, tpm) != self._seen_limits:
            self._seen_limits = (rpm, tpm)
            self.reported = {k: v for k, v in (("rpm", rpm), ("tpm", tpm)) if v}
            b, ep = self.budget, self.endpoint
            new = {"rpm": b.rpm, "tpm": b.tpm}
            for dim, rep, conf in (("rpm", rpm, ep.rpm), ("tpm", tpm, ep.tpm)):
                if not rep:
                    continue
                if conf and conf > rep:
                    log.warning(
                        "lane %s: configured %s %g is above the %g the provider reports; pacing at %g",
                        self.name, dim, conf, rep, rep,
                    )
                if not conf or conf > rep:
                    new[dim], self.source[dim] = rep, "provider"
            if (new["rpm"], new["tpm"]) != (b.rpm, b.tpm):
                b.set_limits(new["rpm"], new["tpm"])
        for dim in ("requests", "tokens"):
            reset = lim.get(f"reset_{dim}")
            if lim.get(f"remaining_{dim}") == 0 and reset:
                per = 60.0 / rpm if dim == "requests" and rpm else 1.0
                self.budget.pause(min(reset, per))

    # --- retries ---------------------------------------------------------------------------------

    def _wait(self, state: RetryCallState) -> float:
        """The wait the server asked for (Retry-After and kin), plus up to 10% jitter so the requests
        it refused together do not return together; exponential backoff only when it said nothing."""
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, ProviderError) and exc.retry_after is not None:
            return exc.retry_after * (1.0 + 0.1 * random.random())
        return self._backoff(state)

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
        if actual_tokens is not None:
            self.budget.reconcile(est_tokens, actual_tokens)
