"""A sweep's paced lanes put on Redis budgets (`[shared] redis_url`) for the run, and taken off after."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from runner.budgets.redis import RedisBudget, lane_id
from runner.budgets.redis_call import connect
from runner.config import redact_url

log = logging.getLogger("evalsweep")


async def _reach(client: Any, redis_url: str, wait_s: float) -> None:
    """Ping Redis, retrying once a second for up to `wait_s` (said once): a process started during a
    Redis blip waits for it instead of dying; one that never reaches it is refused (ConfigError: exit 2)."""
    from runner.config import ConfigError

    deadline = time.monotonic() + wait_s
    said = False
    while True:
        try:
            await client.ping()
            if said:
                log.warning("[shared] redis_url %s: reached; starting", redact_url(redis_url))
            return
        except Exception as e:  # noqa: BLE001
            if time.monotonic() >= deadline:
                raise ConfigError(
                    f"[shared] redis_url {redact_url(redis_url)}: cannot reach Redis ({e})"
                    + (f" after waiting {wait_s:.0f}s ([shared] redis_wait_s)" if wait_s else "")
                    + "; start it, fix the URL, or remove redis_url (and EVALSWEEP_REDIS_URL) to pace "
                    "this process alone"
                ) from None
            if not said:
                said = True
                log.warning(
                    "[shared] redis_url %s: cannot reach Redis (%s); waiting up to %.0fs for it "
                    "([shared] redis_wait_s), nothing is sent meanwhile", redact_url(redis_url), e, wait_s,
                )
            await asyncio.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


async def attach(
    models: dict[str, Any], redis_url: str, lease_s: float, wait_s: float = 0.0
) -> list[RedisBudget]:
    """Give every paced lane of a sweep a RedisBudget; refuse to start if Redis cannot be reached
    within `wait_s`."""
    from runner.lanes import LocalBudget

    client = connect(redis_url)
    try:
        await _reach(client, redis_url, wait_s)
    except BaseException:
        await client.aclose()
        raise
    budgets: list[RedisBudget] = []
    seen: set[int] = set()
    for m in models.values():
        for lane in m.lanes:
            ep = lane.endpoint
            if id(lane) in seen or ep.kind in ("sim", "replay"):
                continue
            seen.add(id(lane))
            old = lane.budget
            b = RedisBudget(
                client,
                lane_id(ep.base_url or ep.kind, lane.api_key),
                lane.name,
                old.rpm,
                old.tpm,
                ep.max_concurrency,
                lease_s,
                probing=old.probing,
                local_factory=lambda r, t, c: LocalBudget(r, t, c),
            )
            lane.budget = b
            budgets.append(b)
    if not budgets:
        await client.aclose()
    return budgets


async def detach(budgets: list[RedisBudget]) -> None:
    for b in budgets:
        await b.aclose()
        if b.admitted:
            log.info(
                "lane %s: shared budget: %d calls admitted with %d Redis round trips (%d late slots redone)%s",
                b.name, b.admitted, b.calls, b.late, "; fell back to local pacing" if b._local else "",
            )
    if budgets:
        try:
            await budgets[0].client.aclose()
        except Exception:  # noqa: BLE001
            pass
