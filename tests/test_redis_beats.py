"""#40: while leases of a Redis-shared key are held, its live processes keep it from falling silent (redis.lua takes
a busy key silent for TIMEOUT_S for a Redis that stood still): in turns, a round-robin of SLOT_S slots by rank
(runner/budgets/redis.py), not each of them every BEAT_S (2 calls a second per process, however few API calls
there are). Real Redis, every process a real one (tests/redis_holder.py); counted in script calls and the key's
state, not timed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis
import redis.asyncio as aioredis

from runner.budgets.redis import RedisBudget, lane_id
from runner.budgets.redis_call import TIMEOUT_S, ScriptCall, connect
from runner.lanes import LocalBudget
from tests.helpers import slot
from tests.servers import RedisServer

ROOT = Path(__file__).resolve().parent.parent
CAP, LEASE_S, IDLE = 4, 6.0, 4  # two holders of 1 lease each, 4 processes idle on the key: N = 6
SECONDS = 4.0


def _proc(url: str, n: int) -> tuple[subprocess.Popen[str], str]:
    """A process on the key holding `n` leases (0: idle, its heartbeat running) and its name on the key."""
    p = subprocess.Popen([sys.executable, "-m", "tests.redis_holder", url, "beats", str(n), str(CAP), str(LEASE_S)],
                         cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    word, name = (p.stdout.readline().split() + ["", ""])[:2]
    assert word == "held", p.poll()
    return p, name


def _script_calls(admin: redis.Redis) -> int:
    return int(admin.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


def _guard(t0: float, what: object) -> None:
    assert time.monotonic() - t0 < 60, what  # (a guard against a hang, not a timed check)


def test_six_processes_keep_a_busy_key_alive_in_turns_and_a_freeze_is_still_met(redis_server: RedisServer):
    """Six processes alive on a key whose leases two of them hold. (1) Over SECONDS, their script calls number
    fewer than one per process per second (before: every process called every BEAT_S, 0.5 s: ~48). (2) A holder
    and the process next to it in the round-robin are SIGKILLed: the key keeps its state until the dead holder's
    lease expires (their turns are silent, the others' are not). (3) Redis frozen (SIGSTOP) 2 x TIMEOUT_S with a
    lease held: the first call after it finds a new state (the outage every process waits out), as before."""
    admin = redis.Redis.from_url(redis_server.url)
    keys = ScriptCall(None, lane_id("u", "beats"), "").keys
    procs: list[tuple[subprocess.Popen[str], str]] = []
    try:
        procs += [_proc(redis_server.url, 1) for _ in range(2)]
        procs += [_proc(redis_server.url, 0) for _ in range(IDLE)]
        t0 = time.monotonic()
        # settled: all six on the key, the idle ones' spare leases given back (their last call saw the holders')
        while admin.zcard(keys[1]) != 6 or admin.hlen(keys[2]) != 2:
            _guard(t0, (admin.zrange(keys[1], 0, -1), admin.hgetall(keys[2])))
            time.sleep(0.05)
        time.sleep(1.0)
        born = admin.hget(keys[0], "born")
        before = _script_calls(admin)
        time.sleep(SECONDS)
        calls = _script_calls(admin) - before
        assert calls < len(procs) * SECONDS, calls  # (the key's turns: ~SECONDS / SLOT_S; before: ~48)
        assert admin.hget(keys[0], "born") == born

        # (2) a holder and its neighbour in the round-robin (by name, redis.lua) killed: 2 turns silent in 6
        names = sorted(name for _, name in procs)
        holder = procs[0][1]
        i = names.index(holder)
        pair = {holder, next(n for n in (names[(i + 1) % 6], names[i - 1]) if n != procs[1][1])}
        for p, name in procs:
            if name in pair:
                p.send_signal(signal.SIGKILL)
                p.wait(10)
        while admin.hexists(keys[2], holder):  # its lease held until its heartbeat expires (LEASE_S)
            _guard(t0, admin.hgetall(keys[2]))
            assert admin.hget(keys[0], "born") == born  # never taken for a Redis that stood still
            time.sleep(0.05)
        assert admin.hget(keys[0], "born") == born and admin.hlen(keys[2]) == 1

        # (3) a freeze with the other holder's lease held: met as a new state
        assert redis_server.proc is not None
        os.kill(redis_server.proc.pid, signal.SIGSTOP)
        time.sleep(2 * TIMEOUT_S)
        os.kill(redis_server.proc.pid, signal.SIGCONT)
        while admin.hget(keys[0], "born") == born:
            _guard(t0, born)
            time.sleep(0.05)
        assert all(p.poll() is None for p, name in procs if name not in pair)  # (none of them failed)
    finally:
        if redis_server.proc is not None:
            os.kill(redis_server.proc.pid, signal.SIGCONT)
        for p, _ in procs:
            p.kill()
            p.wait(10)
        admin.close()


async def test_a_holder_is_not_left_to_its_turn_by_processes_that_have_not_seen_its_lease(
        redis_server: RedisServer):
    """Five processes on a key, idle since before a sixth took a lease on a call of 3 s (2 x TIMEOUT_S): they have
    not called since (their heartbeat: lease_s / 3, 10 s here), so they do not call in turns, and the holder is
    the only one the key hears from. It calls every BEAT_S, not in a turn of six (every 1.8 s: the key silent
    longer than TIMEOUT_S, taken for a Redis that stood still, a new state and an outage every process waits out)."""
    ident = lane_id("u", "unseen")
    budgets = [RedisBudget(connect(redis_server.url), ident, f"p{i}", 600_000, None, CAP, 30.0,
                           local_factory=LocalBudget) for i in range(6)]
    admin = aioredis.Redis.from_url(redis_server.url)
    try:
        for b in budgets:  # each on the key, its state seen; none holds a lease after
            await b.acquire()
            await slot(b)
            b.release()
        t0 = time.monotonic()
        while await admin.hlen(budgets[0].keys[2]):  # (their spare leases given back: KEEP_S)
            _guard(t0, await admin.hgetall(budgets[0].keys[2]))
            await asyncio.sleep(0.05)
        for b in budgets:  # a heartbeat each with no lease held on the key: none of them will call in turns
            async with b._call.lock:
                await b._eval(b._held)
        assert [(b._held, b._others) for b in budgets] == [(0, 0)] * 6
        born = await admin.hget(budgets[0].keys[0], "born")
        holder = budgets[0]
        await holder.acquire()
        try:
            await slot(holder)
            await asyncio.sleep(2 * TIMEOUT_S)  # its call on the wire
            ttls = [await admin.pttl(k) for k in holder.keys]  # (the round-robin's among them)
            assert -1 not in ttls and ttls[0] > 0, ttls  # each key there kept a day, not for ever
        finally:
            holder.release()
        await holder.acquire()  # (its next call: a script call that would find the key's silence)
        await slot(holder)
        holder.release()
        assert await admin.hget(holder.keys[0], "born") == born and holder._born == born
        assert [b.fallbacks for b in budgets] == [0] * 6
    finally:
        for b in budgets:
            await b.aclose()
            await b.client.aclose()
        await admin.aclose()
