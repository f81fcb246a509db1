"""#40: a lane with `hedge_after` (opt-in: off by default) paced by no tokens re-sends a call at its drain (runner.budgets.hedge), on hand-made calls: once no
call waits and a lease is free, a call that has run HEDGE_X x its kind's median goes again and the first answer of
the two is the call's, the other cancelled; never while a call waits for a lease, on a lane paced by tokens, or for
a kind of too few answers; a copy's error leaves the call's own answer standing."""

from __future__ import annotations

import asyncio
from typing import Any

from core.types import Request, user
from providers.base import ProviderError
from runner.budgets.hedge import COPY_FITS, HEDGE_MIN
from runner.calls.spend import _HELD, Ceiling, Spend, copy_fits
from runner.config import Endpoint
from runner.lanes import Lane

MEDIAN = 0.01  # the kind's median: a call is due for a copy after 0.03 s


def _lane(**kw: Any) -> Lane:
    return Lane(Endpoint(name="e", kind="sim", **{"hedge_after": 3.0, **kw}), None, None, provider=None)


def _work(answers: int = 20) -> tuple[str, Any, bool]:
    return ("kind", lambda: (MEDIAN, answers, ("answer", 1)), False)


class _Thinker:
    """A call whose first send thinks until cancelled (or `end` is set); its later sends answer at once."""

    def __init__(self, copy_fails: bool = False, converts: bool = False) -> None:
        self.sends, self.cancelled, self.copy_fails, self.converts = 0, 0, copy_fails, converts
        self.end = asyncio.Event()

    async def __call__(self) -> str:
        self.sends += 1
        if self.sends > 1:
            if self.copy_fails:
                raise RuntimeError("the copy failed")
            return "copy"
        try:
            await self.end.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            if self.converts:  # (a client reporting its cancelled request as an error of its own)
                raise ProviderError("connection closed", retryable=True) from None
            raise
        return "own"


async def _bound(lane: Lane, fn: Any) -> asyncio.Future[Any]:
    """`fn` sent on a lane of 2 leases that one call waited for (a lane bound by concurrency), then drained."""
    held = asyncio.Event()
    first = asyncio.ensure_future(lane.call(fn, 0, _work()))
    other = asyncio.ensure_future(lane.call(held.wait, 0, _work()))
    waited = asyncio.ensure_future(lane.call(lambda: asyncio.sleep(0), 0, _work()))
    await asyncio.sleep(0.01)
    assert lane.budget.idle() == 0  # (`waited` waits for a lease)
    held.set()
    await other, await waited
    return first


async def test_a_long_call_at_the_drain_is_answered_by_its_copy_and_is_cancelled() -> None:
    lane, fn = _lane(max_concurrency=2), _Thinker()
    got, attempts, _ = await asyncio.wait_for(await _bound(lane, fn), 30)
    assert (got, attempts, fn.sends, fn.cancelled, lane.hedges.sent) == ("copy", 1, 2, 1, 1)
    assert lane.in_flight == 0 and lane.budget.idle() == 2 and not lane.hedges.flights  # both leases back


async def test_the_copys_answer_stands_when_the_cancelled_call_reports_an_error() -> None:
    lane, fn = _lane(max_concurrency=2), _Thinker(converts=True)
    call = await _bound(lane, fn)
    got, attempts, _ = await asyncio.wait_for(call, 30)
    assert (got, attempts, fn.sends, fn.cancelled, lane.hedges.sent) == ("copy", 1, 2, 1, 1)
    assert call.cancelling() == 0  # type: ignore[attr-defined]  # (the copy's cancel taken back)


async def test_off_by_default_no_copy_and_no_hedge_state() -> None:
    lane, fn = _lane(max_concurrency=2, hedge_after=None), _Thinker()
    assert lane.hedges is None
    call = await _bound(lane, fn)
    await asyncio.sleep(0.3)  # 10x past its due at the drain of a lane bound by concurrency
    assert (fn.sends, fn.cancelled) == (1, 0)
    fn.end.set()
    assert (await call)[0] == "own"


async def test_no_copy_on_a_lane_no_call_waited_on() -> None:
    lane, fn = _lane(max_concurrency=4), _Thinker()
    call = asyncio.ensure_future(lane.call(fn, 0, _work()))
    await asyncio.sleep(0.3)  # 10x past its due: leases free all along, but never short of them
    assert (fn.sends, lane.hedges.sent) == (1, 0)
    fn.end.set()
    assert (await call)[0] == "own"


async def test_no_copy_while_a_call_waits_for_a_lease() -> None:
    lane, fn = _lane(max_concurrency=1), _Thinker()
    first = asyncio.ensure_future(lane.call(fn, 0, _work()))
    second = asyncio.ensure_future(lane.call(lambda: asyncio.sleep(0, "second"), 0, _work()))
    await asyncio.sleep(0.3)  # 10x past the first call's due: the second waits for its lease all along
    assert (fn.sends, lane.hedges.sent, lane.budget.idle()) == (1, 0, 0)
    fn.end.set()
    assert (await first)[0] == "own" and (await second)[0] == "second"


async def test_no_copy_on_a_lane_paced_by_tokens_or_for_a_kind_of_few_answers() -> None:
    for lane, work in ((_lane(max_concurrency=4, tpm=1_000_000), _work()),
                       (_lane(max_concurrency=4), _work(HEDGE_MIN - 1))):
        fn = _Thinker()
        call = asyncio.ensure_future(lane.call(fn, 0, work))
        lane.budget._seq += 1  # (as if a call had waited for a lease)
        await asyncio.sleep(0.3)
        assert (fn.sends, lane.hedges.sent) == (1, 0)
        fn.end.set()
        assert (await call)[0] == "own"


async def test_a_copys_error_leaves_the_calls_own_answer() -> None:
    lane, fn = _lane(max_concurrency=2), _Thinker(copy_fails=True)
    call = await _bound(lane, fn)
    while fn.sends < 2:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    fn.end.set()
    got, attempts, _ = await asyncio.wait_for(call, 30)
    assert (got, attempts, fn.cancelled, lane.hedges.sent) == ("own", 1, 0, 1)
    assert lane.in_flight == 0 and lane.budget.idle() == 2


async def _under(ceiling: float, lane: Lane, fn: Any) -> tuple[Any, list[float], Ceiling]:
    """`_bound`'s call run as runner.calls.spend.Spend.paid runs it: its worst case (1.0) reserved under `ceiling`."""
    c = Ceiling(ceiling, "--max-cost", held=1.0, in_flight=1)
    hold = [1.0, 0.0]

    async def go() -> Any:
        _HELD.set((Spend((c,), 0.0, 0.0, 1), hold))
        COPY_FITS.set(copy_fits)
        return await asyncio.wait_for(await _bound(lane, fn), 30)

    task = asyncio.ensure_future(go())
    while fn.sends < 1 or not lane.hedges.flights and not task.done():
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # 10x past its due, at the drain
    fn.end.set()
    return await task, hold, c


async def test_under_a_ceiling_a_copy_goes_only_when_its_worst_case_fits_and_holds_it() -> None:
    (got, _, _), hold, c = await _under(1.5, _lane(max_concurrency=2), fn := _Thinker())
    assert (got, fn.sends, hold, c.held) == ("own", 1, [1.0, 0.0], 1.0)  # no room for a second worst case
    (got, _, _), hold, c = await _under(2.0, lane := _lane(max_concurrency=2), fn := _Thinker())
    assert (got, fn.sends, lane.hedges.sent, hold, c.held) == ("copy", 2, 1, [1.0, 1.0], 2.0)  # held till it settles


async def test_a_call_under_a_ceiling_lends_the_hedge_its_ceilings_check() -> None:
    """Spend.paid, the path every call under a ceiling takes, is what sets the hook the hedge asks (the hedge cannot
    import runner.calls): without it a copy would go unreserved past --max-cost."""
    seen: list[Any] = []

    async def call() -> list[Any]:
        seen.append(COPY_FITS.get())
        return []

    req = Request(suite="s", item="i", messages=[user("2+2?")], decoding={"max_tokens": 16})
    await Spend((Ceiling(10.0, "--max-cost"),), 0.0, 0.0, 1).paid(req, [0], {0: "k"}, call)
    assert seen == [copy_fits] and COPY_FITS.get() is None  # set while the call runs, gone after
