"""A lane = one (endpoint, API key): RPM/TPM pacing, a concurrency cap, 429 handling and retries.

Pacing (GCRA on absolute slots, a sliding window of sends) lives in `runner.budgets.local`.

Rate-limit answers: each 429 makes *that* request wait its Retry-After (or `retry-after-ms`, or the
`x-ratelimit-reset-*` of the exhausted budget); the lane is paused as a whole only when a 429 says
the key's requests are spent (`x-ratelimit-remaining-requests: 0`, for as long as it said) or most of
a second's attempts are refused with a Retry-After (the shortest one told), or a 429 tells one to
wait far longer than the key's pace explains (KEYWIDE_S and KEYWIDE_SLOTS request intervals). A 429
for tokens (`remaining-tokens: 0`) defers the lane's token slots by the key's reset and refunds the
refused charge (and halves the depth of the key's token bucket the account believes: answers' remaining-tokens
show it, `runner.budgets.local`); it neither pauses requests nor cuts the rate. Headers on answers are stale (stamped at
admission, a latency ago) and pause nothing; TPM is charged by what the model's answers really used
(`runner.calls.estimates`) and reconciled with each answer's usage. A shared budget (Redis) makes every
process on the key wait the same pause. A lane whose recent attempts are mostly refused slows down multiplicatively (at most once a second; below `FLOOR` only while most attempts are
refused) and recovers additively while quiet (AIMD): a storm of random 429s costs ~2x, never a stop.
Limits the provider reports (`x-ratelimit-limit-*`) are adopted when the config has none or a higher
one. A quota/billing/disabled-key error stops the lane for good: the pool moves its calls elsewhere.

The seam: all pacing *state* of a lane lives in a budget object (`runner.budgets`: its docstring
lists what a budget implements), so a cross-process store (Redis) can replace `LocalBudget`. A budget
queues calls for tokens (`take`: credits move the queue up, debts back; a shared one across processes).

The policy (when to slow, recover, stop, adopt limits) stays in `Lane` and only talks to the seam.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
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
from runner.budgets.hedge import Hedges
from runner.budgets.local import MARGIN_MAX, MARGIN_S, WINDOW_S, LocalBudget
from runner.budgets.rank import Work
from runner.calls.halt import HALTED, ON_WIRE, Halted, Sleeps
from runner.config import Endpoint

T = TypeVar("T")

WIRE: ContextVar[Any] = ContextVar("evalsweep_wire", default=None)
"""What a call is, set by the scheduler ((id(run), model, pass, samples)): kept with its send time in
`Lane.wire` for the live ETA (runner.eta.Live), which reads it from its thread."""

log = logging.getLogger("evalsweep")

FLOOR = 0.5  # a minority of 429s never slows a lane below half its limit (they may be a random storm)
MIN_FACTOR = 0.05  # ... a majority of 429s may (the real limit is far below the configured one)
MAX_PAUSE_S = 300.0  # a key-wide pause the provider asks for, believed up to this long
KEYWIDE_S, KEYWIDE_SLOTS = 1.0, 10  # a 429 told to wait this long and this many request intervals
# at the key's limit (a request-rate refusal says "the next slot") refuses the key as a whole
PROBE_KINDS = ("openai", "anthropic")  # answers carry x-ratelimit-* headers worth waiting one call for
DOWN_AFTER = 3
"""Attempts in a row without any answer after which the live view calls a lane `down`."""
PROBE_MAX_S = 1.0
"""A probe (the one call a lane without limits sends first) unanswered by then no longer holds the
lane to one call: a slow reasoning model (seconds of a sweep's start on one slot) or a hung server
teaches nothing by being waited for."""
NOT_NEAR = (False, False)
STATE_RANK = {"down": 0, "stopped": 1, "retrying": 2, "slowed": 3, "ok": 4, "": 5}
"""The worst lane state of a model is its state (lower: worse)."""


def _tokens_spent(lim: dict[str, float]) -> bool:
    return lim.get("remaining_tokens") == 0 and lim.get("remaining_requests") != 0


def _for_tokens(e: ProviderError) -> bool:
    """A 429 for tokens (not requests): its retry goes first once the reset has passed."""
    return e.rate_limited and bool(e.limits) and _tokens_spent(e.limits)  # type: ignore[arg-type]


def worst_state(states: list[str]) -> str:
    return min(states, key=lambda s: STATE_RANK.get(s, 0), default="")


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
        self.halted = False
        """Stopping (Ctrl-C...): calls not yet sent end here (`Halted`); those sent finish."""
        self._sleeps = Sleeps()
        self.conn_failures = 0
        """Consecutive attempts that got no answer at all (refused, DNS, TLS, timeout): `down` at DOWN_AFTER."""
        self.last_error: str | None = None
        self.retrying = 0
        """Calls of this lane waiting between attempts."""
        self.in_flight = 0
        self.wire: dict[int, tuple[float, Any]] = {}
        """Calls on the wire: (when sent, its WIRE tag); copied (atomic) by the live ETA's thread, no lock."""
        self.queued = 0
        self.admitted = 0
        self.hedges = Hedges(self._idle, self._copy, endpoint.hedge_after) if endpoint.hedge_after else None
        """Long calls sent again at the lane's drain (runner.budgets.hedge), opt-in (`hedge_after`): None, no work."""
        self._looked = self._started = (time.monotonic(), 0)
        self.rate_limited = 0
        self.retries = 0
        self._bucket = (0.0, 0, 0, math.inf)  # (start, attempts, 429s, least told wait) of this second
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
    def state(self) -> str:
        """What the live view shows: `stopped` (out of quota), `down` (no answer for DOWN_AFTER attempts
        in a row), `retrying`, `slowed` (AIMD below its limit) or `ok`."""
        if self.stopped:
            return "stopped"
        if self.conn_failures >= DOWN_AFTER:
            return "down"
        if self.retrying:
            return "retrying"
        return "slowed" if self.budget.factor < 1 else "ok"

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
            "state": self.state,
            "error": self.last_error if self.conn_failures else None,
        }

    def halt(self) -> None:
        """No call of this lane is sent from now on: those waiting for a pacing slot, a retry or a
        concurrency lease wake and end as `Halted`; those already sent finish."""
        self.halted = True
        self._sleeps.wake_all()
        self.budget.open()  # (a shared budget's lease waiters follow as the calls in flight end)

    async def _sleep(self, seconds: float) -> None:
        await self._sleeps.sleep(seconds)

    # --- one attempt -----------------------------------------------------------------------------

    async def _admit(
        self, est_tokens: int, first: bool = False, charge: int | None = None, follow: bool = False
    ) -> tuple[Callable[..., None] | None, tuple[bool, bool]]:
        """Wait for the lane's next slot (the request's, then its tokens'); returns the callback that
        stamps the send, if any, and whether the lane was using its (request, token) rate then.
        `follow`: a follow-up, ahead of the first calls waiting for tokens (as for a lease)."""
        b = self.budget
        local = isinstance(b, LocalBudget)
        if est_tokens and not local:  # a shared budget's tokens first (its queue is the key's), then a slot
            await b.take(est_tokens, charge, first)
            est_tokens = 0
            if self.halted:
                raise Halted(HALTED)
        wait = b.reserve(0)
        own = getattr(b, "near", NOT_NEAR)
        while True:
            grant = None if local or wait <= 0 else b.granted()  # a shared budget's slot not granted yet:
            if grant is not None:  # woken by its grant, not by polling confirm()
                await grant
                if self.halted:
                    raise Halted(HALTED)
            elif wait > 0:
                due = time.monotonic() + wait
                await self._sleep(wait)
                if self.halted:
                    raise Halted(HALTED)
                if local and not self._reports_send:
                    b.late_by(time.monotonic() - due)
            if est_tokens and local:  # in the order calls came (follow-ups first), as the account allows
                await b.take(est_tokens, charge, first, follow)
                own, est_tokens = (own[0], b.near[1]), 0
                if self.halted:
                    raise Halted(HALTED)
            if not local and (stale := b.stale()) is not None:  # its tokens admitted long before this
                await stale  # send (it waited for its slot or a lease), the key's bucket not holding them: again
                if self.halted:
                    raise Halted(HALTED)
            wait = b.confirm()
            if wait <= 0:
                return (b.on_sent() if self._reports_send else None), own  # (a shared one's: while local)

    async def _attempt(
        self, fn: Callable[[], Awaitable[T]], est_tokens: int, work: Work | None, first: bool = False,
        charge: int | None = None,
    ) -> tuple[T, float]:
        b = self.budget
        self.queued += 1
        try:
            # (a model's gate probe, ON_WIRE set, is not held back by the lane's own probe: `acquire`)
            await (b.acquire(work, ON_WIRE.get() is not None) if isinstance(b, LocalBudget) else b.acquire())
        finally:
            self.queued -= 1
        try:
            if self.halted:
                raise Halted(HALTED)
            sent, own = await self._admit(est_tokens, first, charge, bool(work and any(work[2:])))
            mark = SENT.set(sent) if sent is not None else None
            try:
                if self.stopped:  # out of quota while this call waited: the pool sends it elsewhere
                    raise ProviderError(self.stopped, quota=True)
                if self.halted:  # the run is stopping: what is not on the wire stays unsent
                    raise Halted(HALTED)
                self.in_flight += 1
                self.admitted += 1
                me = self.admitted
                self.wire[me] = (time.monotonic(), WIRE.get())
                if b.probing:
                    asyncio.get_running_loop().call_later(PROBE_MAX_S, self._end_probe)
                if (wired := ON_WIRE.get()) is not None:
                    wired()
                t0 = time.perf_counter()
                try:
                    result = await (fn() if self.hedges is None or work is None or self.tpm is not None
                                    or not isinstance(b, LocalBudget) else self.hedges.run(fn, work[1]))
                except ProviderError as e:
                    e.latency_s = time.perf_counter() - t0  # type: ignore[attr-defined]  # its row's latency
                    if e.rate_limited and est_tokens:
                        self.reconcile(est_tokens, 0, charge)  # refused: the key charged it nothing
                    elif est_tokens:  # no answer will settle it: its charge stays, its hold is given back
                        self.reconcile(est_tokens, est_tokens if charge is None else charge, charge)
                    self._on_error(e, own)
                    raise
                finally:
                    self.in_flight -= 1
                    del self.wire[me]
            finally:
                if mark is not None:
                    SENT.reset(mark)
                    sent(final=True)  # type: ignore[misc]  # never reported: it counts from now
        finally:
            b.release()
            if self.hedges is not None:
                self.hedges.poke()
        self._on_answer(getattr(result, "limits", None), False, own=own)
        return result, time.perf_counter() - t0

    def _idle(self) -> int:
        b = self.budget
        return b.idle() if isinstance(b, LocalBudget) and b.tpm is None and not self.halted else 0

    async def _copy(self, fn: Callable[[], Awaitable[T]]) -> T:
        """A call sent again (runner.budgets.hedge), under a lease of its own: never itself re-sent."""
        return (await self._attempt(fn, 0, None))[0]

    def _on_error(self, e: ProviderError, own: tuple[bool, bool] = NOT_NEAR) -> None:
        if e.quota:
            self.stop(str(e))
            return
        if e.status is not None:  # the server answered: limits known (or known to be absent)
            self._on_answer(e.limits, e.rate_limited, e.retry_after, own)
        else:  # a timeout or a dropped connection: no limits will come from this probe
            self._end_probe()
            if e.retryable:  # no answer at all (not a breaker or quota stop of ours)
                self.conn_failures += 1
                self.last_error = self.scrub(str(e))[:200]

    def _end_probe(self) -> None:
        if self.budget.probing:
            self.budget.set_probing(False)

    def stop(self, reason: str) -> None:
        if not self.stopped:
            self.stopped = f"out of quota on {self.name}: {self.scrub(reason)[:200]}"
            log.warning("lane %s stopped: %s", self.name, self.stopped)

    def _on_answer(
        self, limits: dict[str, float] | None, limited: bool, told: float | None = None,
        own: tuple[bool, bool] = NOT_NEAR,
    ) -> None:
        """`own`: whether the lane itself was using its (request, token) rate when this attempt was
        admitted (its budget's account then), against which the headers' remaining-* are read."""
        b = self.budget
        self.conn_failures = 0
        if b.probing:
            b.set_probing(False)
        if limits:
            self._learn(limits, (told or 0.0) if limited else None, own)
            if hasattr(b, "learn_depth"):  # how deep the key's token bucket is (budgets.local, .redis_tpm)
                if not limited and limits.get("remaining_tokens"):
                    b.learn_depth(limits["remaining_tokens"])
                elif limited and _tokens_spent(limits):
                    b.shallow()
            if limited and _tokens_spent(limits):
                # Refused for tokens: our charges ran ahead of the key's bucket. The key's tokens come
                # back after its reset: the lane's token slots wait that long, requests are not paused
                # and the rate is not cut (the next answers' usage corrects the estimates).
                self._defer_tokens(limits.get("reset_tokens") or told or 1.0)
                self.rate_limited += 1
                return
        now = time.monotonic()
        if limited:
            self.rate_limited += 1
            if told is not None and b.rpm and told >= max(KEYWIDE_S, KEYWIDE_SLOTS * 60.0 / b.rpm):
                b.pause(min(told, MAX_PAUSE_S))  # at once, for every process on a shared key (not
                # after a second of refusals in each: 25 refused calls for 1 across 3 processes)
            if b.rpm and now - self._widened >= WINDOW_S:
                # Paced at the limit and still refused: arrivals jitter more than we allowed. Once a
                # window: one stall at the server refuses the whole bunch it delayed, one episode.
                b.margin = min(MARGIN_MAX, b.margin + 0.004)
                self._widened = now
        # AIMD over one-second buckets: when most of a second's attempts were 429s the limit is far
        # below our rate: halve it; when 20-50% were, slow by 3/4 but not below FLOOR; recover by 0.1
        # after each quiet second. A storm of random 429s (~30%, unrelated to our rate) thus costs at
        # most 1/FLOOR; each refused request also waits what it was told.
        start, tries, n429, least = self._bucket
        tries, n429 = tries + 1, n429 + limited
        if limited and told is not None:
            least = min(least, told)
        if now - start < 1.0:
            self._bucket = (start, tries, n429, least)
            return
        self._bucket = (now, 0, 0, math.inf)
        if n429 >= 3 and n429 >= 0.5 * tries:  # most refused: we send well above the real limit
            b.set_factor(max(MIN_FACTOR, b.factor * 0.5))
            if least < math.inf:  # ... and told to wait: the key is refused as a whole, for everyone
                b.pause(min(least, MAX_PAUSE_S))
        elif n429 >= 3 and n429 >= 0.2 * tries:
            if b.factor > FLOOR:
                b.set_factor(max(FLOOR, b.factor * 0.75))
        elif n429 == 0:
            if b.factor < 1.0:
                b.set_factor(min(1.0, b.factor + 0.1))
            b.margin = max(MARGIN_S, b.margin - 0.0005)

    def _learn(
        self, lim: dict[str, float], refused_for: float | None = None, own: tuple[bool, bool] = NOT_NEAR
    ) -> None:
        """Adopt the key's limits the provider reports; wait when it says a budget is empty.

        A 429 with no requests left (`refused_for`: its Retry-After, 0 if none) refuses the key as a
        whole for the reset (at most 60/rpm): every process on a shared budget waits it. An answer's
        remaining-* were stamped when it was admitted, a latency ago: compared with the lane's own
        account then (`own`), a budget the lane was itself using at its rate was empty by its own
        pacing, which already spaces what follows (pausing on such echoes stopped busy lanes for
        nothing); an empty budget the lane was not using up (another client on the key) frees its next
        request after 60/rpm, its tokens after the reset (at most a second)."""
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
        reset = lim.get("reset_requests")
        if lim.get("remaining_requests") == 0 and reset and (refused_for is not None or not own[0]):
            told = max(refused_for or 0.0, min(reset, 60.0 / rpm if rpm else 1.0))
            self.budget.pause(min(told, MAX_PAUSE_S))
        reset = lim.get("reset_tokens")
        if lim.get("remaining_tokens") == 0 and reset and refused_for is None and not own[1]:
            self._defer_tokens(min(reset, 1.0))  # (a 429 for tokens: `_on_answer` defers by its reset)

    def _defer_tokens(self, seconds: float) -> None:
        """Token admission waits, requests do not (a shared budget's for every process on the key: its
        account admits no token meanwhile; pausing the key as a whole stopped calls that need no tokens)."""
        self.budget.defer_tokens(min(seconds, MAX_PAUSE_S))

    # --- retries ---------------------------------------------------------------------------------

    def _wait(self, state: RetryCallState) -> float:
        """The wait the server asked for (Retry-After and kin), plus up to 10% jitter so the requests
        it refused together do not return together; exponential backoff only when it said nothing."""
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, ProviderError) and exc.retry_after is not None:
            return exc.retry_after * (1.0 + 0.1 * random.random())
        return self._backoff(state)

    async def call(
        self, fn: Callable[[], Awaitable[T]], est_tokens: int, work: Work | None = None, charge: int | None = None
    ) -> tuple[T, int, float]:
        """Run `fn` under the lane's limits with retries; returns (result, attempts, latency_s).
        `work` (its kind and expected duration) orders the calls waiting for a lease: longest first.
        `est_tokens`: what the call is expected to use; `charge`: what the key counts at admission.

        The first attempt runs bare (most calls succeed; tenacity's per-attempt bookkeeping costs
        ~80 us); after a retryable failure tenacity drives backoff and the remaining attempts. A final
        ProviderError carries `.attempts` so the error row can say how hard we tried."""
        try:
            result, latency = await self._attempt(fn, est_tokens, work, charge=charge)
            return result, 1, latency
        except ProviderError as e:
            e.attempts = 1  # type: ignore[attr-defined]
            if not e.retryable or self.endpoint.max_attempts <= 1:
                raise
            first: ProviderError | None = e
            front = _for_tokens(e)
        attempts = 1
        self.retrying += 1
        try:
            async for attempt in AsyncRetrying(wait=self._wait, sleep=self._sleep, **self._retry_kw):
                with attempt:
                    if first is not None:  # replay attempt 1's failure: tenacity's count and wait start there
                        err, first = first, None
                        raise err
                    attempts += 1
                    self.retries += 1
                    try:
                        result, latency = await self._attempt(fn, est_tokens, work, front, charge)
                    except ProviderError as e:
                        front = _for_tokens(e)
                        raise
        except ProviderError as e:
            e.attempts = attempts  # type: ignore[attr-defined]
            raise
        finally:
            self.retrying -= 1
        return result, attempts, latency

    def scrub(self, message: str) -> str:
        """Never let a key into a row, a log line or an error message, whatever a server echoes."""
        return scrub(message, self.api_key)

    def reconcile(self, est_tokens: int, actual_tokens: int | None, charge: int | None = None) -> None:
        """Correct the TPM account once the real usage is known: a debt delays the calls waiting for
        token slots, a credit wakes them to go sooner."""
        b = self.budget
        if actual_tokens is not None:
            b.reconcile(est_tokens, actual_tokens, charge)
