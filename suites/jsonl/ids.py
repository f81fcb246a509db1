"""The ids a jsonl file's first pass reads, checked for duplicates once per version of the file and held
compactly (64-bit hashes): `load` (suites.jsonl) runs once per model's stream, the live ETA's plan and
the pre-flight check, and a set of every id string on each pass grew a run's memory by ~128 bytes a call."""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import orjson


def _first_line(path: Path, key: str, before: int | None = None) -> int:
    """The first line of `path` (before line `before`) whose id is `key`, else 0: a duplicate's error,
    and the check of a 64-bit hash that `_Ids` found twice (two ids colliding: not a duplicate)."""
    with path.open("rb") as f:
        for lineno, line in enumerate(f, 1):
            if before is not None and lineno >= before:
                break
            try:
                d = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(d, dict) and str(d.get("id")) == key:
                return lineno
    return 0


_UNIQUE: set[tuple[int, ...]] = set()
"""Versions of jsonl files (`_version`) read whole and found free of duplicate ids in this process."""

_VALID: set[tuple[tuple[int, ...], bool]] = set()
"""(version, allow_missing_gold) of jsonl files read whole and found valid in this process: later passes
over the same version (each model's requests, the scorer's golds) parse its lines without checking them."""

_ITEMS: dict[tuple[int, ...], int] = {}
"""Non-blank lines of jsonl file versions read whole in this process (by `load` or `count`): the suite's
`count` (calls per model) then costs a `stat`, not another read of the file."""


def _version(f: BinaryIO | Path) -> tuple[int, ...]:
    """An open file's (or a path's) identity and version: device, inode, size, modification and change
    times (ns)."""
    st = os.stat(f) if isinstance(f, Path) else os.fstat(f.fileno())
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class _Ids:
    """The ids a file's first pass has read, as their 64-bit hashes in an open-addressing table (~12-24
    bytes an id; a set of the id strings took ~106), so checking a file of millions of items costs tens
    of MB, not hundreds. Two ids may share a hash (~n^2/2^65): `add` then says "maybe seen", for the
    caller to check exactly (`_first_line`)."""

    __slots__ = ("_hash", "_table", "n")

    def __init__(self, hash_: Callable[[str], int] = hash) -> None:
        self._hash = hash_
        self._table = array("q", [0]) * 1024  # 0: an empty slot (no hash is stored as 0)
        self.n = 0

    def add(self, key: str) -> bool:
        """True if `key`'s hash is new (then kept), False if it was added before: maybe the same id."""
        h = self._hash(key) or 1
        t = self._table
        mask = len(t) - 1
        i = h & mask
        while v := t[i]:
            if v == h:
                return False
            i = (i + 1) & mask
        t[i] = h
        self.n += 1
        if 3 * self.n > 2 * len(t):  # at most two thirds full: probes stay short
            self._grow()
        return True

    def _grow(self) -> None:
        old = self._table
        t = array("q", [0]) * (2 * len(old))  # (made in place: no bytes copy beside it)
        mask = len(t) - 1
        for h in old:
            if h:
                i = h & mask
                while t[i]:
                    i = (i + 1) & mask
                t[i] = h
        self._table = t
