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
        self.host, self.pid = socket.gethostname(), os.getpid()
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

    def release(self, keys: list[str]) -> None:
        if keys:
            self.con.execute(
                f"DELETE FROM claims WHERE host = ? AND pid = ? AND key IN ({','.join('?' * len(keys))})",
                [self.host, self.pid, *keys],
            )

    def close(self) -> None:
        try:
            self.con.execute("DELETE FROM claims WHERE host = ? AND pid = ?", (self.host, self.pid))
            self.con.close()
        except sqlite3.Error:
            pass
