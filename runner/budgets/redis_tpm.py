"""The key's TPM account across processes (#40), as `LocalBudget.take`/`reconcile` keep it in one process:
what a RedisBudget (runner.budgets.redis) does for the tokens of its calls, and what its script (redis_tpm.lua) keeps.

The account is a token bucket on the server's clock (`TPM_SHARE` of the key's TPM a second, a second of
it deep, full when new): a call waits, first come first served across every process on the key, until
the bucket holds its charge (what the key counts when it admits it: prompt + max_tokens), the rest it
is expected to use beyond it (reasoning) and the largest such rest of a call in flight in any process
(as `LocalBudget._owed`: the account is charged and settled as the key's bucket is, so only an answer the
key settled before our settlement reached Redis is held against, one at a time; the sum of every call's
rest kept the bucket a rest per call in flight fuller than need be, where credits overflowed it). Each
process says its own largest (`held`: absolute, kept as long as its heartbeat, redis.lua's, so a process
gone, SIGKILLed or not, or a Redis restart, leaks none). Its answer settles a call (`settle`): its real
usage replaces its charge and its hold is given back at once, so a call waiting in any process uses what
comes back (the credit wakes the process whose call heads the queue); an attempt that fails without a
429 settles at its charge (runner/lanes.py), its hold given back too. A call over a full bucket goes
when it is full, as locally.

The key charges a call when it is sent, the account when it admits it: a call admitted and then held back
(a lease it was let through for and did not get: seconds, bench shared_limits_tpm at 4 processes) met a
key whose bucket answers' debts had taken meanwhile, the account having counted its charge long before
(every refusal the trace of two runs on main showed: `python -m bench.shared_limits_tpm --diagnose 4`).
The script keeps what the key's bucket holds beyond the account's level (`unsent`: the charges of calls
admitted and not yet sent, in every process) and shrinks it by the refill the key's bucket could not hold
when full (the account's, charged, kept it), each call's part in proportion (`ep`, `lf`). A call sent is told
with the next script call (`sent`, within FLUSH_S: in order with the settlements) and charged what the key
lost of it, nothing if its bucket was never full meanwhile: a call that waited for its RPM slot is not
counted twice (it was, whole, before: tokens then bound early on a key whose calls queue for RPM slots,
`bench/shared_limits.py --tpm 600000 --tpm-rpm 420`: 2.27x calls/RPM at 2 processes). A call sent more than
STALE_S after its admission goes if the account's level holds it (`stale`: as the last reply of FRESH_S
showed, with no script call of its own); else what the key still holds of it is given back and it queues
again for its charge, at the head. (Counting unsent calls against the account's bucket, full that much sooner, held the key to what
the others said last, stale by an answer's latency: 1.27x its tokens / TPM at 4 processes, against 1.06x;
giving the first charge back whole put the account up to a call above the key: refusals of calls sent at
once.) A refusal for tokens defers token admission for every process (`defer`), not requests.

A process with room to spare takes its tokens in blocks (`_spend`): a script call made for a waiting call asks
too for a block of what the process's calls took over the last BLOCK_S, granted only while nobody waits and the
bucket stays at least half full after it (and only where it holds BLOCK_MIN calls: BLOCK_SHARE of the bucket at
most). It is charged and held as an admitted call is (its ep and lf; the largest hold a call spending it may have);
the next calls are charged from it with no script call each, as if admitted with it, and what is left goes back
after BLOCK_S, or when a reply shows calls queued, as a call dropped unsent. Its process's credits and the sends
of its calls are told with the next script call while it lives (nobody waits for them), and a debt it holds is
paid from it (as a call of it sent: the key took those tokens at the answer). A script call costs
~0.2 ms of CPU on a 2-core box (the socket send, the reply's parse): one per call or more was +0.3 ms a call, a
block per BLOCK_S or so brings it under 0.1 ms (`python bench/shared_limits.py --in-process`). A key whose TPM
binds admits call by call, first come first served, as before.

Waiting calls queue in Redis in arrival order (a sorted set, ordered by a counter the script keeps); a
process learns that its call heads the queue and the bucket can hold it from the script, which pushes to
its wake list (BLPOP, no polling), or from its own timer for the refill it was told. Every script call
says again which calls of its process wait (a restart's lost queue is rebuilt) and which left; a queue
entry or hold of a process whose heartbeat (redis.lua's) lapsed is dropped. While Redis is away the
process's calls take tokens from its fallback's local budget at 1/N of the key (redis_fallback).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.budgets.redis_call import WAKE_LUA, WAKE_S, _bulk, _get, _send, pack, woken
from runner.budgets.tokens import TPM_SHARE, WINDOW_S, hold, unhold

STALE_S = 0.25  # a call sent this long after its tokens were admitted is looked at again (`stale`): beyond the
# slots granted ahead (redis_slots.AHEAD_S), it waited for its slot or a lease
FRESH_S = 0.02  # ... and goes without a script call of its own if a reply this recent showed the bucket holding
# what the key lost of it (`stale`)
FLUSH_S = 0.05  # calls sent or dropped are told to Redis with the next script call, within this
BLOCK_S = 0.1  # a block of tokens (`_spend`) lives this long (< STALE_S: a call spent from it is fresh), the rest
# given back; it holds what the process's calls took over the last BLOCK_S ...
BLOCK_MIN = 4  # ... at least this many of the asking call's charge, ...
BLOCK_SHARE = 0.25  # ... at most this share of the key's bucket (the script grants it only while nobody waits
# and the bucket stays at least half full after it)

LUA = WAKE_LUA + (Path(__file__).parent / "redis_tpm.lua").read_text()  # the account's script


SHA = hashlib.sha1(LUA.encode()).hexdigest()


class Script:
    """The account's script, called as redis_call.ScriptCall calls the slot script (a packed EVALSHA on a
    pooled connection, its keys packed once, within the connection's retry): redis-py's command machinery
    (per-argument encoding, observability hooks, a task per send) cost ~100 us of CPU a call, and the
    account calls it about once per API call. `await script(keys=..., args=...)`, as a redis-py Script."""

    def __init__(self, client: Any, keys: list[str]) -> None:
        self.client, self.keys = client, keys
        head = (b"EVALSHA", SHA.encode(), b"%d" % len(keys), *(k.encode() for k in keys))
        self._head, self._n_head = b"".join(_bulk(x) for x in head), len(head)

    async def __call__(self, keys: list[str], args: list[Any]) -> Any:
        assert keys is self.keys or keys == self.keys  # (packed once)
        data = pack(self._head, self._n_head, args)
        pool = self.client.connection_pool
        conn = await _get(pool)
        try:
            return await conn.retry.call_with_retry(lambda: _send(conn, data, LUA), lambda _e: conn.disconnect())
        finally:
            await pool.release(conn)


@dataclass
class _Wait:
    """One call waiting for its tokens: its queue entry (process|n|charge|hold) and the future that lets
    it through (True: charged on Redis; False: the budget fell back, it takes them locally)."""

    member: str
    charge: int
    hold: int
    first: bool
    fut: asyncio.Future[bool]
    ep: bytes = b""  # (its admission's reply's ep and lf: what the key lost of it while unsent, `unsent` in LUA)
    lf: bytes = b""
    block: bool = False  # (charged from the process's block: `_spend`)


Unsent = tuple[int, int, int, float, bytes, bytes, bool]
"""A call charged on Redis, not yet sent: (charge, hold, tokens, when admitted, ep, lf, from a block)."""


@dataclass
class Reply:
    hint: float  # seconds until this process's call at the head of the queue fits (-1: none of ours heads it)
    level: float  # tokens in the bucket after this call
    held: float  # the largest rest a call in flight (in any process) holds beyond its charge
    admitted: list[str]
    depth: float  # the key's bucket as its answers showed it (0: unknown), halved by refusals for tokens


def _seen(t: asyncio.Task[Any]) -> None:
    if not t.cancelled():
        t.exception()


class Account:
    """One RedisBudget's side of the key's TPM account: its waiting calls, its holds, its settlements."""

    def __init__(self, b: Any) -> None:
        self.b = b
        pre = b.keys[0].removesuffix("state")
        self.keys = [pre + "tpm", pre + "tpmq", pre + "tpmheld", b.keys[1], pre + "tpmwake:"]
        self.wake_key = self.keys[4] + b.proc
        self._script = Script(b.client, self.keys)
        self._waiting: list[_Wait] = []  # in arrival order
        self._gone: list[str] = []  # entries to take out of the queue
        self._holds: dict[int, int] = {}  # its calls charged on Redis, not yet settled: {rest: calls}
        self._unsent: dict[Any, Unsent] = {}  # {task: its call}
        self._sends: list[Any] = []  # calls sent ('s') or dropped ('d') not yet told: kind, charge, ep, lf, delta then ...
        self._flush: asyncio.TimerHandle | None = None
        self._room = 0.0  # the account's level at the last reply, less the calls sent since ...
        self._top = 0.0  # ... and the largest hold in flight then, with theirs
        self._last_at = -1.0  # (monotonic) when the last reply came
        self._defer = 0.0  # a refusal for tokens: no token admitted for this long (s), not yet sent
        self.n_open = 0  # its calls charged on Redis, not yet settled
        self.n_local = 0  # ... charged by a fallback's local budget, not yet settled
        self._delta = 0  # settlements not yet sent: charges minus real usage
        self._seen = 0  # the largest remaining-tokens an answer showed (`learn_depth`) ...
        self._seen_new = 0  # ... not yet sent (0: none)
        self._shallow = 0  # refusals for tokens not yet sent (`shallow`)
        self._dirty = False
        self._n = 0
        self._news = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._blpop: asyncio.Task[Any] | None = None
        self.calls = 0
        self.last: Reply | None = None
        self.draining = False  # `open()`: the run is stopping; waiters leave uncharged (none is sent)
        self._block = 0  # a block's tokens left (`_spend`): charged on Redis, spent by the next calls
        self._block_h = 0  # ... the largest hold a call spending it may have (the script held room for it) ...
        self._block_ep, self._block_lf = b"", b""  # ... its admission's ep and lf
        self._block_end: asyncio.TimerHandle | None = None  # ... given back when this fires (BLOCK_S)
        self._asked = 0  # tokens this process's calls were charged since `_asked_at` (a block's size)
        self._asked_at = time.monotonic()
        self.blocks = 0  # blocks granted

    def rate(self) -> tuple[float, float]:
        """Tokens a second and the bucket's depth, at the lane's AIMD factor."""
        b = self.b
        per_s = (b.tpm or 0.0) * b.factor * TPM_SHARE / 60.0
        return per_s, per_s * WINDOW_S

    @property
    def held(self) -> int:
        """The largest rest one of this process's calls charged on Redis is expected to settle beyond its
        charge (what its script calls say: the account holds the largest over the processes, not the sum,
        as `LocalBudget._owed` says why)."""
        return max(max(self._holds, default=0), self._block_h if self._block_end is not None else 0)

    async def take(self, tokens: int, charge: int | None = None, first: bool = False) -> None:
        """Wait in the key's queue until its bucket holds this call's charge and the holds in flight,
        then charge it (`LocalBudget.take`'s contract: `tokens` expected, `charge` counted at admission)."""
        b = self.b
        c = tokens if charge is None else charge
        h = max(0, tokens - c)
        while not b.closed and not self.draining:
            local = b._local
            if local is not None:
                await local.take(tokens, charge, first)
                if local.draining and b._local is None:
                    continue  # Redis is back (the local budget let its waiters go): charged there
                self.n_local += 1
                return
            if not b.tpm or not tokens:
                return
            if self._spend(c, h, tokens):
                return
            self._n += 1
            fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            w = _Wait(f"{b.proc}|{self._n}|{c}|{h}", c, h, first, fut)
            self._waiting.append(w)
            self._kick()
            try:
                ok = await fut
                if ok:  # charged; the key charges it only when it is sent (`sent`)
                    self._unsent[asyncio.current_task()] = (c, h, tokens, time.monotonic(), w.ep, w.lf, w.block)
                if ok or self.draining:
                    return
            except BaseException:
                if w in self._waiting:
                    self._waiting.remove(w)
                    self._gone.append(w.member)
                    self._kick()
                elif fut.done() and not fut.cancelled() and fut.result():
                    self.settle(tokens, 0, charge)  # charged as we were cancelled: given back
                raise

    def open(self) -> None:
        """The run is stopping: every call waiting for tokens leaves uncharged (the lane sends none of
        them) and its queue entry goes."""
        self.draining = True
        for w in self._waiting:
            self._gone.append(w.member)
            if not w.fut.done():
                w.fut.set_result(False)
        self._waiting.clear()
        self._kick()

    def settle(self, est: int, actual: int, charge: int | None = None) -> None:
        """A call's answer: its real usage replaces its charge, its hold is given back, at once (a call
        waiting in any process may use it). Which account charged it is not known per call: calls
        admitted by a fallback settle first once Redis is back (they are older), those Redis charged
        first during a fallback; either way a credit is given only to the account that charged it,
        a debt always."""
        b = self.b
        c = est if charge is None else charge
        h = max(0, est - c)
        local = b._local
        if local is None and not b.tpm:  # (no TPM: nothing was charged)
            return
        if local is not None:
            if self.n_open:  # charged on Redis before the fallback: its debt is paid locally
                self.n_open -= 1
                unhold(self._holds, h)
                if actual > c:
                    local.reconcile(c, actual, c)
                return
            self.n_local = max(0, self.n_local - 1)
            local.reconcile(est, actual, charge)
            return
        if self.n_local and not self.n_open:  # charged by the fallback: a debt only
            self.n_local -= 1
            self._delta += min(0, c - actual)
        else:
            self.n_open = max(0, self.n_open - 1)
            top = self.held
            unhold(self._holds, h)
            if actual > c and self._block_end is not None and self._block >= actual - c:
                self._block -= actual - c  # a debt paid from the block: as a call of it sent (the key took it)
                self._tell(b"s", (actual - c, 0, 0, 0.0, self._block_ep, self._block_lf, True))
            else:
                self._delta += c - actual
            self._dirty = self._dirty or self.held != top  # (only its largest is sent)
        if self._delta >= 0 and self._block_end is not None and not self._waiting:
            self._later()  # nobody waits (a block is live): a credit can wait for the next script call
        elif self._delta or self._dirty:
            self._kick()

    def sent(self) -> None:
        """The current task's call goes now: the key charges it from now (told to Redis with the next script
        call: the account charges it what the key lost of it meanwhile)."""
        e = self._unsent.pop(asyncio.current_task(), None) if self._unsent else None
        if e is not None and self.b._local is None:
            if e[3] != math.inf and not e[6]:  # (one `stale` let go, or a block's, is out of it already)
                self._room -= e[0]
            self._tell(b"s", e)

    def dropped(self) -> bool:
        """The current task's attempt ended unsent (the run halted, the lane stopped): what the key still
        holds of its charge is given back, and its hold, as the key never counted it. False: it had none
        unsent."""
        e = self._unsent.pop(asyncio.current_task(), None) if self._unsent else None
        if e is None:
            return False
        if self.b._local is None:
            self.n_open = max(0, self.n_open - 1)
            unhold(self._holds, e[1])
            self._dirty = True
            self._tell(b"d", e)
            self._kick()
        return True

    def _tell(self, kind: bytes, e: Unsent) -> None:
        """A call sent or dropped, for the next script call (within FLUSH_S, or WAKE_S while calls of ours wait):
        until Redis hears of it the key is taken to hold its charge still (its bucket fuller, so more of it
        lost, charged at its telling: the safe side)."""
        self._sends += (kind, e[0], e[4], e[5], self._delta)  # (after the settlements made before it)
        self._later()

    def _later(self) -> None:
        """What changed goes with the next script call, within FLUSH_S of now or of the live block's end (while
        one is, nobody waits: the next call it cannot hold makes a script call, this with it)."""
        if self._flush is None and self._block_end is None:
            self._flush = asyncio.get_running_loop().call_later(FLUSH_S, self._flushed)

    def _flushed(self) -> None:
        """(While calls of ours wait, the script call that serves them next tells them: none of its own.)"""
        self._flush = None
        if (self._sends or self._delta or self._dirty) and not self._waiting:
            self._dirty = True
            self._kick()

    def stale(self) -> Any:
        """A wait for the current task's tokens again if they were admitted more than STALE_S ago and its call
        is about to go (its slot or lease came late) and the bucket may not hold it, else None. The key charges
        it only now: answers settled meanwhile (reasoning's debts, beyond what the account held) may have
        taken the tokens the account kept for it. It goes if the account's level (less the calls sent since)
        holds it, its hold and the holds in flight, as the last reply (FRESH_S) showed, with no script call
        of its own (told with the next one, `sent`, it is charged what the key lost of it: the refill its
        bucket, full, could not hold, not its whole charge again). Else what the key still holds of it is
        given back and it queues again for its charge, at the head: it goes if the bucket holds it, else when
        it does. (Counting what the key holds of this process's other unsent calls as room too made a late
        call go early: 4 refusals in 4 runs of the reasoning workload at 2 processes, against 0.)"""
        task = asyncio.current_task()
        e = self._unsent.get(task) if self._unsent else None
        now = time.monotonic()
        if e is None or now - e[3] < STALE_S or self.b._local is not None:
            return None
        c, h = e[0], e[1]
        if self._block >= c and h <= self._block_h and not self._waiting:  # a fresh charge from the block
            del self._unsent[task]
            self._tell(b"d", e)
            self._block -= c
            self._asked += c
            self._unsent[task] = (c, h, e[2], now, self._block_ep, self._block_lf, True)
            return None
        if self.last is not None and now - self._last_at <= FRESH_S and not (self._defer or self._shallow) \
                and self._room >= c + h + self._top:
            self._top = max(self._top, h)
            self._room -= c
            self._unsent[task] = (*e[:3], math.inf, *e[4:])  # (let go: `sent` tells it)
            return None
        del self._unsent[task]
        self.n_open = max(0, self.n_open - 1)
        unhold(self._holds, h)
        self._tell(b"d", e)
        return self.take(e[2], c, True)

    def _spend(self, c: int, h: int, tokens: int) -> bool:
        """Charge the current task's call from the process's block, if it holds it (no script call): as if Redis
        had admitted it at the block's admission (its ep and lf), its hold within the block's. Not while calls
        of ours wait (they came first)."""
        self._asked += c
        if self._block < c or h > self._block_h or self._waiting:
            return False
        self._block -= c
        if h:
            hold(self._holds, h)
        self.n_open += 1
        self._unsent[asyncio.current_task()] = (c, h, tokens, time.monotonic(), self._block_ep, self._block_lf, True)
        return True

    def _ask(self, c: int, h: int) -> tuple[int, int]:
        """The block to ask for with a script call made for the waiting call (`c`, `h`): what this process's
        calls were charged over the last BLOCK_S (at least BLOCK_MIN x c, at most BLOCK_SHARE of the bucket:
        none if that cannot hold BLOCK_MIN such calls, where a call's script call is a small part of the wait for its
        tokens), and its hold. A block still live cannot hold the call (it waits): what is left goes back with it."""
        self._end_block()
        now = time.monotonic()
        rate = self._asked / max(now - self._asked_at, FLUSH_S / 5)
        self._asked, self._asked_at = 0, now
        most = self.rate()[1] * BLOCK_SHARE
        if self.draining or most < BLOCK_MIN * c:
            return 0, 0
        return int(min(most, max(BLOCK_MIN * c, rate * BLOCK_S))), h

    def _end_block(self) -> None:
        """The block's time is up (or others queue): what is left of it is given back as a call dropped unsent,
        with the next script call (FLUSH_S), and its hold."""
        if self._block_end is not None:
            self._block_end.cancel()
            self._block_end = None
        if self._block and self.b._local is None:
            self._tell(b"d", (self._block, 0, 0, 0.0, self._block_ep, self._block_lf, True))
        self._block = 0
        if self._block_h:
            self._block_h = 0
            self._dirty = True  # (its hold: told with the block's rest)
        if self._sends or self._delta or self._dirty:
            self._later()

    def defer(self, seconds: float) -> None:
        """Refused for tokens until `seconds` from now: the key's account admits no token for anyone before
        then (`TokenAccount.defer`: requests that need none still go)."""
        self._defer = max(self._defer, seconds)
        self._dirty = True
        self._kick()

    @property
    def depth(self) -> float:
        """The key's bucket as the last reply said (0: unknown): a fallback keeps its share of it."""
        return self.last.depth if self.last is not None else 0.0

    def learn_depth(self, remaining: float) -> None:
        """An answer's remaining-tokens: the key's bucket held at least that (`LocalBudget.learn_depth`:
        a bucket of one second forgot the credit of every call charged more than it spent). Kept in
        Redis for the key: the first one any process sees credits the account, once, with what the
        deeper bucket held beyond the second counted. Sent with the next script call (only a new
        largest: one send or few a run)."""
        if remaining > self._seen:
            self._seen = self._seen_new = int(remaining)
            self._dirty = True
            self._kick()

    def shallow(self) -> None:
        """Refused for tokens: the key's bucket is believed half as deep from now on, for every process
        (`LocalBudget.shallow`), down to a second's tokens."""
        self._shallow += 1
        self._dirty = True
        self._kick()

    def fell_back(self) -> None:
        """Redis went away: the waiting calls take their tokens locally; their queue entries go with the
        next script call (Redis back, they would head the queue for nobody)."""
        for w in self._waiting:
            self._gone.append(w.member)
            if not w.fut.done():
                w.fut.set_result(False)
        self._waiting.clear()
        self._delta = 0  # (settlements made before it: lost with Redis, the conservative way for a credit)
        self._unsent.clear()  # (charged on Redis already: sent or not, nothing more to say of them)
        self._end_block()  # (its rest lost with Redis: the safe side)
        self._sends.clear()
        self._defer = 0.0

    def _kick(self) -> None:
        b = self.b
        self._news.set()
        if b.closed or b._local is not None:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._serve())

    async def _serve(self) -> None:
        """Send what changed, let the calls admitted through; while ours wait, sleep until the script wakes
        this process (BLPOP) or the refill it was told is done, or a local change (a settlement, a new
        call) needs sending."""
        b = self.b
        try:
            while b._local is None and not b.closed:
                self._waiting = [w for w in self._waiting if not w.fut.done()]
                if not (self._waiting or self._gone or self._delta or self._dirty):
                    return
                self._news.clear()
                r = await self._eval()
                if b._local is not None:
                    return
                if not self._waiting:
                    continue
                if self._news.is_set():
                    continue
                await self._sleep(min(WAKE_S, r.hint) if r.hint >= 0 else WAKE_S)
        except Exception as e:  # noqa: BLE001 - Redis gone: the fallback paces locally
            b._fall_back(e)

    async def _eval(self) -> Reply:
        per_s, depth = self.rate()
        block, block_h = self._ask(self._waiting[0].charge, max(w.hold for w in self._waiting)) \
            if self._waiting and self.b._local is None else (0, 0)
        waiting, gone = list(self._waiting), self._gone
        delta, held, seen, shallow, defer = self._delta, self.held, self._seen_new, self._shallow, self._defer
        sends = self._sends
        self._gone, self._delta, self._dirty, self._seen_new, self._shallow, self._defer = [], 0, False, 0, 0, 0.0
        self._sends = []
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        args: list[Any] = [self.b.proc, repr(per_s), repr(depth), held, delta, len(waiting),
                           repr(float(self.b.tpm or 0)), repr(float(seen)), shallow, repr(defer), len(sends) // 5,
                           block, block_h, *sends]
        for w in waiting:
            args += [w.member, "1" if w.first else "0"]
        try:
            res = await self._script(keys=self.keys, args=args + gone)
        except BaseException:
            self._gone = gone + self._gone
            self._delta += delta
            self._seen_new = max(self._seen_new, seen)
            self._shallow += shallow
            self._defer = max(self._defer, defer)
            self._sends = sends + self._sends
            self._dirty = True
            raise
        self.calls += 1
        hint = float(res[0])
        r = Reply(hint / 1e6, float(res[1]), float(res[2]), [m.decode() if isinstance(m, bytes) else m
                                                             for m in res[3]], float(res[4]))
        self.last = r
        self._room, self._top, self._last_at = r.level, r.held, time.monotonic()
        mine = {w.member: w for w in waiting}
        for m in r.admitted:
            w = mine.get(m)
            if w is not None and not w.fut.done():
                if w.hold:
                    hold(self._holds, w.hold)
                self.n_open += 1
                w.ep, w.lf = res[5], res[6]
                w.fut.set_result(True)
            else:  # (cancelled meanwhile: its charge back, its hold not counted from the next call on)
                self._delta += int(m.rsplit("|", 2)[1])
                self._dirty = True
        self._waiting = [w for w in self._waiting if not w.fut.done()]
        granted = int(res[7])
        if granted and not self.draining and not self.b.closed:
            self.blocks += 1
            self._block, self._block_h, self._block_ep, self._block_lf = granted, block_h, res[5], res[6]
            self._block_end = asyncio.get_running_loop().call_later(BLOCK_S, self._end_block)
            for w in self._waiting:  # (calls that came while the script ran, never queued: from the block, in order)
                if w.fut.done():
                    continue
                if self._block < w.charge or w.hold > self._block_h:
                    break
                self._block -= w.charge
                if w.hold:
                    hold(self._holds, w.hold)
                self.n_open += 1
                w.ep, w.lf, w.block = self._block_ep, self._block_lf, True
                w.fut.set_result(True)
            self._waiting = [w for w in self._waiting if not w.fut.done()]
        elif granted:  # (stopping meanwhile: back at once)
            self._tell(b"d", (granted, 0, 0, 0.0, res[5], res[6], True))
        elif int(res[8]) and self._block_end is not None:  # calls queue (ours or others'): ours back
            self._end_block()
        return r

    async def _sleep(self, seconds: float) -> None:
        """Until the script pushes to this process's wake list, a local change, or `seconds`."""
        b = self.b
        loop = asyncio.get_running_loop()
        if self._blpop is None or self._blpop.done():
            self._blpop = loop.create_task(woken(b.client, self.wake_key, b.lease_ms))
            self._blpop.add_done_callback(_seen)  # (one that fails once nobody waits for it: no noise)
        news = loop.create_task(self._news.wait())
        try:
            await asyncio.wait({self._blpop, news}, timeout=max(seconds, 0.0005),
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            news.cancel()
        if self._blpop.done():
            self._blpop.result()  # (a Redis error: the fallback)

    async def aclose(self) -> None:
        """Leave the queue and give back this process's holds (a settled account for the others)."""
        for t in (self._task, self._blpop):
            if t is not None and not t.done():
                t.cancel()
        gone = [w.member for w in self._waiting] + self._gone
        for w in self._waiting:
            if not w.fut.done():
                w.fut.cancel()
        self._waiting, self._gone = [], gone
        self._holds.clear()
        self._unsent.clear()
        self._end_block()
        if self.b._local is None and (gone or self.calls):
            try:
                await self._eval()
            except Exception:  # noqa: BLE001
                pass
