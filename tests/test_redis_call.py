"""#40 item 2: the shared budget's script call (runner.budgets.redis_call) on a real redis-server,
counted, not timed: one command and no task per call (redis-py wrapped each send in a task for its
timeout, ~35 us of the ~0.19 ms a call cost), and what redis-py's Script did, kept: the script loaded
again once Redis has lost it, a connection Redis dropped replaced at once, within the call."""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio as aioredis

from runner.budgets.redis_call import SHA, ScriptCall, connect, lane_id, pack
from tests.servers import RedisServer

_SENT = {"evalsha", "eval", "script", "script|load", "time", "ping", "hello", "client|setinfo", "select", "blpop"}


async def _counts(admin: aioredis.Redis) -> dict[str, int]:
    """Commands a client may send (not those the script runs), by name, and the connections Redis accepted."""
    stats = await admin.info("commandstats")
    out = {k: v["calls"] for k0, v in stats.items() if (k := k0.removeprefix("cmdstat_")) in _SENT}
    out["connections"] = (await admin.info("stats"))["total_connections_received"]
    return out


def _diff(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: v - a.get(k, 0) for k, v in b.items() if v != a.get(k, 0)}


async def test_a_script_call_is_one_command_and_starts_no_task(redis_server: RedisServer):
    admin = aioredis.Redis.from_url(redis_server.url)
    client = connect(redis_server.url)
    call = ScriptCall(client, lane_id("http://call.test/v1", "k"), "p")
    # a lease held and bound, a new slot for it each call (1 ms apart): what a leased ticket asks
    kw: dict[str, Any] = {"ttl_us": 5_000_000, "cap": 4, "want": 2, "bound": 1, "n_leased": 1, "T_us": 1000.0}
    loop = asyncio.get_running_loop()
    old = loop.get_task_factory()
    tasks = 0

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        nonlocal tasks
        tasks += 1
        return asyncio.Task(coro, loop=loop, **kwargs)

    try:
        await call(**kw)  # (a new Redis: the script is loaded, on a new connection)
        before = await _counts(admin)
        loop.set_task_factory(factory)
        try:
            replies = [await call(**kw) for _ in range(20)]
        finally:
            loop.set_task_factory(old)
        # one round trip each; TIME only the script's own (redis.lua reads it once), none of ours
        assert _diff(before, await _counts(admin)) == {"evalsha": 20, "time": 20}
        assert tasks == 0, tasks  # before: 20 (one per send)
        assert all(r.held == 1 and r.n == 1 and r.T == 0.001 and r.n_procs == 1 for r in replies)  # read right
        args = ["p-\u00e9", 5_000_000, 0.1, 1e-7, 12.5, "", b"1.7e+15", "1"]  # the bytes redis-py would send
        conn = client.connection_pool.make_connection()
        assert pack(call._head, call._n_head, args) == b"".join(conn.pack_command("EVALSHA", SHA, len(call.keys), *call.keys, *args))

        await admin.script_flush()  # Redis lost the script (as in a restart): loaded again, within the call
        before = await _counts(admin)
        r = await call(**kw)
        got = _diff(before, await _counts(admin))
        assert got.get("script|load", got.get("script")) == 1 and r.n == 1, got

        await admin.client_kill_filter(_type="normal", skipme=True)  # the call's connection dropped
        before = await _counts(admin)
        r = await call(**kw)
        got = _diff(before, await _counts(admin))
        assert got["connections"] == 1 and r.n == 1, got  # a new one at once: no error, no fallback
    finally:
        await client.aclose()
        await admin.aclose()
