"""A process holding leases of a Redis-shared key on calls that never end, until it is SIGKILLed: nothing
released, its heartbeat stops (tests/test_redis_dead_holder.py, tests/test_redis_beats.py). N = 0: a process
alive on the key with no work (one call made, its lease given back), its heartbeat running.

python -m tests.redis_holder REDIS_URL KEY N CAP LEASE_S  (prints "held PROC" once its N calls hold their
leases, PROC its name on the key)
"""

from __future__ import annotations

import asyncio
import sys

from runner.budgets.redis import RedisBudget, lane_id
from runner.budgets.redis_call import connect
from runner.lanes import LocalBudget
from tests.helpers import slot


async def _hold(b: RedisBudget, held: list[int]) -> None:
    """One call, as a Lane makes it (lease, then slot), that stays on the wire."""
    await b.acquire()
    await slot(b)
    held.append(1)
    await asyncio.Event().wait()


async def main(url: str, key: str, n: int, cap: int, lease_s: float) -> None:
    b = RedisBudget(connect(url), lane_id("u", key), "holder", 600_000, None, cap, lease_s, local_factory=LocalBudget)
    held: list[int] = []
    if n == 0:  # on the key, its state seen, then idle
        await b.acquire()
        await slot(b)
        b.release()
    tasks = [asyncio.create_task(_hold(b, held)) for _ in range(n)]
    while len(held) < n:
        await asyncio.sleep(0.01)
    print("held", b.proc, flush=True)
    await asyncio.gather(*tasks, asyncio.Event().wait())


if __name__ == "__main__":
    url, key, n, cap, lease_s = sys.argv[1:6]
    asyncio.run(main(url, key, int(n), int(cap), float(lease_s)))
