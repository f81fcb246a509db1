"""One call of the shared budget's Lua script (redis.lua) and the server clock it brings back.

The script runs atomically on the server's clock (`TIME`), so slots are instants of that clock; this
module turns them into our monotonic clock from the round trips least delayed (an event loop busy
elsewhere makes a reply look late), slewing so slots granted before and after a new estimate do not
bunch; it jumps only into the interval a round trip proves (the server read its clock within it). A reply
slowed on its way (a busy loop) leaves the offset unsure by up to half its round trip: the slots it brings
would then be sent late, and the next call's, once the estimate is right, on time, a second's worth of
slots bunched into less than a second; so a `TIME` reading follows such a reply first (ERR_S).
Calls of one budget are serialised (`lock`): each says how many leases the process wants in absolute
terms, which only means something if no other call of it is in flight.

The call is on the hot path of every shared lane (#40: <= 0.1 ms of CPU per API call), so it skips
redis-py's command machinery (per-argument encoding, a task per send for its timeout, the observability
hooks): the command is packed here, its keys once, written on a pooled connection, and its reply read
with the connection's parser (hiredis when installed), within redis-py's own read timeout, retry and
reconnection (the connection's `Retry`), as a command through the client would be.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SLEW_S = 0.0005  # the clock offset estimate moves at most this much per round trip
FRESH_S = 0.3  # a key with no state (new, or Redis restarted) starts its slots this far ahead: slots
# granted before the restart (at most AHEAD_S + a round trip ahead) may still be due

ERR_S = 0.005  # slots are converted with an offset known to this (with LATE_S, within SAFETY's margin),
# the server's TIME read once more after a reply slower than usual that left it less sure
DRIFT = 1e-4  # two hosts' clocks drift apart by at most this (s/s): an offset grows unsure between calls

TIMEOUT_S = 1.5  # a script call takes well under a millisecond: no answer by then is an outage
RETRIES = 2  # ... retried this often on a fresh connection (a stale pooled one fails at once)

WAKE_S = 1.0  # a process sleeping on its wake list looks again at least this often (a push lost, or a
# waiter ahead of it gone): also within a third of its lease, so its heartbeat never lapses meanwhile

# How both scripts (redis.lua, redis_tpm's) wake a process sleeping on its wake list (`woken`): one
# item pushed, kept 5 s (a process that stopped listening leaves nothing behind); `once`: not if one is
# there already (a process woken by every call of the others, redis_tpm's, wakes once for them all).
WAKE_LUA = r"""
local function wake(k, once)
  if once and redis.call('LLEN', k) > 0 then return end
  redis.call('RPUSH', k, 1)
  redis.call('PEXPIRE', k, 5000)
end
"""

LUA = WAKE_LUA + (Path(__file__).parent / "redis.lua").read_text()
SHA = hashlib.sha1(LUA.encode()).hexdigest()


def _bulk(b: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(b), b)


def pack(head: bytes, n_head: int, args: list[Any]) -> bytes:
    """One RESP command: `head` (its first `n_head` items, packed) and `args` packed as redis-py's
    encoder would (bytes as they are, numbers by repr, str as UTF-8): the bytes it would send."""
    bs = [a if type(a) is bytes else str(a).encode() for a in args]
    return b"".join([b"*%d\r\n" % (n_head + len(bs)), head, *[b"$%d\r\n%s\r\n" % (len(b), b) for b in bs]])


_NAMED: dict[type, tuple[str, ...]] = {}


async def _get(pool: Any) -> Any:
    """A connected connection from the pool (redis-py < 5.3 wants a command name, later ones warn)."""
    named = _NAMED.get(type(pool))
    if named is None:
        p = inspect.signature(pool.get_connection).parameters.get("command_name")
        named = _NAMED[type(pool)] = ("EVALSHA",) if p is not None and p.default is inspect.Parameter.empty else ()
    return await pool.get_connection(*named)


@dataclass
class Reply:
    """What one script call gave: leases now held, slots (our clock) and the key's shared state."""

    held: int
    start: float  # the first slot granted (monotonic seconds)
    T: float  # seconds between request slots
    n: int  # slots granted: the leased tickets first, then new ones that got a lease
    paused_until: float  # the key's pause ends (monotonic seconds; 0: none)
    factor: float
    n_procs: int
    n_active: int  # processes with calls running or waiting: the fair share's divisor
    n_waiting: int  # other processes queued for a lease (under their share, calls waiting)
    others: int  # leases the other processes hold (a live heartbeat behind them): this one heartbeats
    # in its turn meanwhile, so a holder gone is never taken for a Redis that stood still (redis.py)
    rank: int  # its place (by name) in the key's heartbeat round-robin while leases are held: its turn (-1: none)
    n_turns: int  # ... among this many processes (those that call in turns, redis.lua)
    born: bytes  # when the key's state began: new after a restart, or a silence of a busy key
    outage_at: float  # when Redis last answered after an outage (server seconds): processes that met
    # it may pace locally until the first RECOVER_S boundary from then (redis_fallback)
    now_s: float  # the server's clock at the call (seconds)


class ScriptCall:
    """The script, its arguments in order, and the clock offset and round-trip time it measures."""

    def __init__(self, client: Any, ident: str, proc: str) -> None:
        self.keys = [f"evalsweep:{{{ident}}}:state", f"evalsweep:{{{ident}}}:procs", f"evalsweep:{{{ident}}}:held",
                     f"evalsweep:{{{ident}}}:active", f"evalsweep:{{{ident}}}:waiting", f"evalsweep:{{{ident}}}:wake:",
                     f"evalsweep:{{{ident}}}:turns"]
        self.wake_key = self.keys[5] + proc  # a lease came free for this process (redis.lua pushes to it)
        self.proc = proc
        head = (b"EVALSHA", SHA.encode(), b"%d" % len(self.keys), *(k.encode() for k in self.keys))
        self._head, self._n_head = b"".join(_bulk(x) for x in head), len(head)
        self.lock = asyncio.Lock()
        self.rtt = 0.001
        self.offset = 0.0  # server clock minus our monotonic clock, seconds
        self._best_rtt, self._best_at = float("inf"), 0.0
        self.calls = 0
        self.last = 0.0
        self.err = float("inf")  # how far the offset may be off (seconds): at most the width of a round trip
        self._client = client
        self._learnt = 0.0

    async def __call__(
        self,
        *,
        ttl_us: int,
        cap: int,
        want: int,
        bound: int,
        n_leased: int = 0,
        n_new: int = 0,
        T_us: float = 0.0,
        pause_us: int = 0,
        factor: str = "",
        born: bytes | None = None,
        recent_us: int = 0,
        charge: int = 0,
        demand: bool = True,
        waits: int = 0,
    ) -> Reply:
        """`recent_us`: a Redis up for less than this when it finds no state for the key marks an
        outage at its start (processes that met its restart may pace locally until they return);
        `charge`: requests this process sent locally in the last second, back from a fallback; `waits`:
        calls wait for a lease and this process is under its share: 1, it queues for the next free one if it
        wants more than it holds, and keeps its place while it says so (a heartbeat, want = held, does not
        send it to the back); 2, it queues whatever it asks (it gives leases back, its turn over)."""
        args = [self.proc, ttl_us, cap, want, bound, n_leased, n_new, T_us, pause_us, factor, int(FRESH_S * 1e6), int(TIMEOUT_S * 1e6), born or b"",
                recent_us, charge, "1" if demand else "0", str(waits)]
        data = pack(self._head, self._n_head, args)
        pool = self._client.connection_pool
        conn = await _get(pool)
        try:
            t0 = time.monotonic()
            res = await conn.retry.call_with_retry(lambda: _send(conn, data), lambda _e: conn.disconnect())
            t1 = time.monotonic()
        finally:
            await pool.release(conn)
        self.calls += 1
        self.last = t1
        rtt = t1 - t0
        self.rtt = 0.8 * self.rtt + 0.2 * rtt
        now_s = float(res[6]) / 1e6
        best = self._best_rtt
        self._learn(now_s, t0, t1)
        if self.err > ERR_S and (best == float("inf") or rtt > 2 * best):
            # A reply slower than usual (a busy loop) left the offset unsure: its slots, and the next
            # call's once the estimate is right, would bunch by the error (limit + 1 in a second). One
            # reading of the server's clock first; a loop slow for good (every reply alike) is not asked
            # more: each round trip added here makes the slots later when they are heard of.
            try:
                p0 = time.monotonic()
                sec, usec = await self._client.time()
                self._learn(sec + usec / 1e6, p0, time.monotonic())
            except Exception:  # noqa: BLE001 - the script's reply stands; the next call asks again
                pass
        return Reply(
            held=int(res[0]),
            start=float(res[1]) / 1e6 - self.offset,
            T=float(res[2]) / 1e6,
            n=int(res[7]),
            paused_until=now_s - self.offset + pause if (pause := float(res[3]) / 1e6) > 0 else 0.0,
            factor=float(res[4]),
            n_procs=int(res[5]),
            n_active=int(res[10]),
            n_waiting=int(res[11]),
            others=int(res[12]),
            rank=int(res[13]),
            n_turns=int(res[14]),
            born=res[8],
            outage_at=now_s - float(res[9]) / 1e6,
            now_s=now_s,
        )

    def _learn(self, now_s: float, t0: float, t1: float) -> None:
        """The offset from one reading of the server's clock (now_s), taken between t0 and t1."""
        rtt = t1 - t0
        est = now_s - (t0 + t1) / 2
        before = self.offset
        if self._best_rtt == float("inf"):
            self.offset, self.err = est, rtt / 2
        else:  # the server read its clock within this round trip: an estimate outside it is wrong (a
            # first call slowed by a busy loop), however slowly slewing would correct it
            self.err += (t1 - self._learnt) * DRIFT
            self.offset = min(max(self.offset, est - rtt / 2), est + rtt / 2)
        if rtt <= self._best_rtt * 1.5 or t1 - self._best_at > 5.0:
            self.offset += max(-SLEW_S, min(SLEW_S, est - self.offset))
            self._best_rtt, self._best_at = rtt, t1
        if self._learnt:  # (the offset now lies within this round trip's interval, as the true one does)
            self.err = min(self.err + abs(self.offset - before), rtt)
        self._learnt = t1


async def _send(conn: Any, data: bytes, lua: str = LUA) -> Any:
    """Write the packed script call and read its reply; the script (`lua`) loaded first if Redis lacks it (a
    restart). A write to a connected socket is buffered at once: a dead or frozen Redis shows in the
    read, which disconnects on any error or its timeout, as redis-py's own commands do."""
    from redis.exceptions import NoScriptError

    writer = getattr(conn, "_writer", None) if conn.is_connected else None
    if writer is not None:
        writer.write(data)  # (send_packed_command would wrap it in a task for its timeout: ~35 us)
    else:
        await conn.send_packed_command(data, check_health=False)  # (connects, as redis-py would)
    try:
        return await conn.read_response()
    except NoScriptError:
        await conn.send_packed_command(conn.pack_command("SCRIPT", "LOAD", lua), check_health=False)
        await conn.read_response()
        await conn.send_packed_command(data, check_health=False)
        return await conn.read_response()


def woken(client: Any, key: str, lease_ms: int) -> Any:
    """Sleep on this process's wake list `key` until a script pushes to it (BLPOP, no polling), at
    most WAKE_S or a third of its lease: an awaitable, run as a task where a local change must also wake."""
    return client.blpop([key], min(WAKE_S, lease_ms / 3000))


def lane_id(base_url: str | None, api_key: str | None) -> str:
    """The lane's name in Redis: one budget per key whatever the endpoint is called; never the key."""
    return hashlib.sha256(f"{base_url or ''}\x1f{api_key or ''}".encode()).hexdigest()[:32]


async def drop_connections(client: Any) -> None:
    """Close the pool's idle connections: after an outage they are dead, and the next command on one
    would fail ("Connection closed by server"), a second, spurious fallback."""
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        await pool.disconnect(inuse_connections=False)


def connect(url: str) -> Any:
    """The client every shared budget of a process uses: a connection error or timeout is retried on
    a new connection twice, then the lane falls back (a frozen Redis costs 3 x TIMEOUT_S, not a minute
    of redis-py's ten retries at the socket timeout each)."""
    import inspect

    import redis.asyncio as aioredis
    from redis.asyncio.connection import AbstractConnection
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialWithJitterBackoff

    return aioredis.Redis.from_url(
        url,
        socket_timeout=TIMEOUT_S,
        socket_connect_timeout=TIMEOUT_S,
        retry=Retry(ExponentialWithJitterBackoff(cap=0.2, base=0.01), RETRIES),
        # No handshake on connecting (HELLO 3, CLIENT SETINFO): a frozen Redis accepts the connection
        # (its backlog) but never answers, and the handshake's timeout, retried within each retry of
        # the command, made a fallback take 10.5 s instead of 4.5 (RESP2 reads the script's reply alike)
        protocol=2,
        **({"driver_info": None} if "driver_info" in inspect.signature(AbstractConnection.__init__).parameters
           else {"lib_name": None, "lib_version": None}),  # (redis-py 8 / 5 to 7)
    )
