"""A process with a call on the wire on a Redis-shared TPM key, its expected rest held in the key's account,
until it is SIGKILLed: nothing settled or given back, its heartbeat stops (tests/test_redis_tpm_hold.py).

python -m tests.redis_tpm_holder REDIS_URL KEY TPM TOKENS CHARGE LEASE_S  (prints "held PROC" once its call
is on the wire, PROC its name on the key)
"""

from __future__ import annotations

import asyncio
import sys

from runner.budgets.redis import RedisBudget, lane_id
from runner.budgets.redis_call import connect
from runner.config import Endpoint
from runner.lanes import Lane, LocalBudget


async def main(url: str, key: str, tpm: float, tokens: int, charge: int, lease_s: float) -> None:
    lane = Lane(Endpoint(name="e", kind="sim"), None, None, provider=None)
    b = lane.budget = RedisBudget(connect(url), lane_id("u", key), "holder", None, tpm, 16, lease_s,
                                  local_factory=LocalBudget)
    on = asyncio.Event()

    async def call() -> None:
        on.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(lane.call(call, tokens, None, charge))
    await on.wait()
    print("held", b.proc, flush=True)
    await task


if __name__ == "__main__":
    url, key, tpm, tokens, charge, lease_s = sys.argv[1:7]
    asyncio.run(main(url, key, float(tpm), int(tokens), int(charge), float(lease_s)))
