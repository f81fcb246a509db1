"""In-flight claims on cache keys, so processes sharing one cache directory never pay twice for a key.

Two people starting the same sweep on one machine is the ordinary case: both miss the cache for the
same keys and, without this, both pay for every call. A process claims a key just before it sends the
call (`claim`); another process that misses the same key finds the claim and waits for the answer
to appear in the cache instead of sending its own. A claim ends when its answer is committed to the
cache, or at once when the call ended without one (an error row: the waiter then sends itself). The
claimant's death frees its claims: a claim whose process is gone (same host) or older than `stale_s`
(another host on a shared directory) is taken over.

One small SQLite table beside diskcache's (`claims.db`, WAL, no fsync: a claim is only a courtesy, the
cache stays the record), one transaction per call.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from pathlib import Path

_SCHEMA = "CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, host TEXT, pid INTEGER, t REAL)"
_PROCS = "CREATE TABLE IF NOT EXISTS procs (host TEXT, pid INTEGER, seen REAL, PRIMARY KEY (host, pid))"
LOOK_S = 1.0
"""How often a process looks for others on its cache directory. Alone, it claims nothing (a claim
costs a transaction per call); a newcomer waits until every process it finds has looked since it
arrived, and a process that finds a newcomer claims what it has in flight, so no key slips between."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Claims:
    def __init__(self, directory: Path, stale_s: float = 1800.0) -> None:
        self.con = sqlite3.connect(directory / "claims.db", isolation_level=None, timeout=10)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute("PRAGMA synchronous=OFF")
        self.con.execute(_SCHEMA)
        self.con.execute(_PROCS)
        self.host, self.pid = socket.gethostname(), os.getpid()
        self._look_t = time.time()
        self.con.execute("INSERT OR REPLACE INTO procs VALUES (?, ?, ?)", (self.host, self.pid, self._look_t))
        self.arrived = time.time()
        """Taken once our row is committed: a look that began at or after it has seen us."""
        self.stale_s = stale_s
        self.waited = 0
        """Keys this process waited for instead of paying for them."""

    def claim(self, keys: list[str]) -> list[str]:
        """Claim `keys`; returns those another live process holds (the caller waits for their answers)."""
        now = time.time()
        con = self.con
        con.execute("BEGIN IMMEDIATE")
        try:
            con.executemany("INSERT OR IGNORE INTO claims VALUES (?, ?, ?, ?)",
                            [(k, self.host, self.pid, now) for k in keys])
            held = con.execute(
                f"SELECT key, host, pid, t FROM claims WHERE key IN ({','.join('?' * len(keys))})", keys
            ).fetchall()
            theirs = []
            for k, host, pid, t in held:
                if host == self.host and pid == self.pid:
                    continue
                if (host == self.host and not _alive(pid)) or now - t > self.stale_s:
                    con.execute("UPDATE claims SET host = ?, pid = ?, t = ? WHERE key = ?", (self.host, self.pid, now, k))
                else:
                    theirs.append(k)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        return theirs

    def looked(self) -> None:
        """Say this process has looked (after claiming what a newcomer must not call twice). The stamp is
        when the last `others` began, not now: a newcomer that registered between that read and this
        stamp was not seen, and must not take the stamp for a look made since it arrived."""
        self.con.execute("UPDATE procs SET seen = ? WHERE host = ? AND pid = ?", (self._look_t, self.host, self.pid))

    def others(self) -> list[float]:
        """The other live processes on this directory: when each last looked. Begins a look (`looked`)."""
        now = self._look_t = time.time()
        con = self.con
        out = []
        for host, pid, seen in con.execute("SELECT host, pid, seen FROM procs").fetchall():
            if host == self.host and pid == self.pid:
                continue
            if (host == self.host and not _alive(pid)) or now - seen > self.stale_s:
                con.execute("DELETE FROM procs WHERE host = ? AND pid = ?", (host, pid))
            else:
                out.append(seen)
        return out

    def release(self, keys: list[str]) -> None:
        if keys:
            self.con.execute(
                f"DELETE FROM claims WHERE host = ? AND pid = ? AND key IN ({','.join('?' * len(keys))})",
                [self.host, self.pid, *keys],
            )

    def close(self) -> None:
        try:
            self.con.execute("DELETE FROM claims WHERE host = ? AND pid = ?", (self.host, self.pid))
            self.con.execute("DELETE FROM procs WHERE host = ? AND pid = ?", (self.host, self.pid))
            self.con.close()
        except sqlite3.Error:
            pass
