"""#40: a call admitted for its tokens and sent long after (it waited for its RPM slot or a lease) through the
key's shared TPM account (runner/budgets/redis_tpm.py), a real Redis (the fixture starts one): the key charges
it when it goes, so the account charges it again only what the key's bucket lost of it meanwhile (the refill
it could not hold when full), not its whole charge a second time. Counted in the account's state, not timed."""

from __future__ import annotations

import asyncio
import time

from tests.helpers import close_lanes, redis_tpm_lane
from tests.servers import RedisServer

GUARD_S = 30.0  # a hang guard only
TPM = 600  # ~10 tokens a second: the bucket, seen 600 deep, refills ~5 tokens in the call's wait


async def test_a_call_late_for_its_slot_on_a_bucket_not_full_is_not_charged_twice(redis_server: RedisServer):
    """The key's bucket, 600 deep, holds ~300 after a call of 300 (used all of it). A's call of 200 is admitted
    (~100 left) and waits 0.5 s for its slot (the key's requests paused): the key, which charges it only when
    it goes, held ~300 + 5 < 600 meanwhile, so it lost nothing of it. It goes at the pause's end and the account
    keeps ~100 + its refill (before, its re-take charged it 200 again: it waited ~10 s for the bucket to hold
    200 and left it empty)."""
    a = redis_tpm_lane(redis_server.url, "late", "a", TPM)
    acc = a.budget._tpm
    sent: list[float] = []

    async def noop() -> None:
        sent.append(time.monotonic())

    await asyncio.wait_for(a.call(noop, 0), GUARD_S)  # (on the key: a new key's leases come after its grace)
    a._on_answer({"limit_tokens": TPM, "remaining_tokens": 600}, False)  # the key's bucket: 600 deep
    await asyncio.wait_for(a.call(noop, 300), GUARD_S)
    a.reconcile(300, 300)
    state = acc.keys[0]
    t0 = time.monotonic()
    while float(await a.budget.client.hget(state, "depth") or 0) != 600 and time.monotonic() - t0 < GUARD_S:
        await asyncio.sleep(0.01)
    a.budget.pause(0.5)
    await asyncio.wait_for(a.call(noop, 200), GUARD_S)
    while (getattr(acc, "_sends", None) or acc._task is not None and not acc._task.done()) \
            and time.monotonic() - t0 < GUARD_S:
        await asyncio.sleep(0.01)  # (its send told to Redis)
    level = float(await a.budget.client.hget(state, "level"))
    assert 60 <= level <= 140, level  # ~600 - 300 - 200 (+ refill, ~10 a second): charged once
    await close_lanes(a)
