"""A resume's finished rows, compact: identity -> location of its best row over every results file of a
run directory, held as 64-bit identity hashes (sorted numpy arrays) beside packed locations, a hash hit
confirmed by reading the identity back from its results file (exact under collisions). Split from
runner/results.py (which writes and streams the rows); `index` is the one read of a resume.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from core.types import Row, row_identity
from runner.config import ConfigError
from runner.results import Loc, _identity_problem, _lines, results_files

_pread = os.pread

HASH_BITS = 64
"""Width of the identity hashes a `RowIndex` keeps (a test narrows it so that identities collide)."""
_FILE_SHIFT = 44
"""A packed location: the file's number above this bit, the byte offset (< 16 TiB) below."""
_OFFSET = (1 << _FILE_SHIFT) - 1


def _ident_hash(ident: str) -> int:
    h = hash(ident)
    return h if HASH_BITS >= 64 else h & ((1 << HASH_BITS) - 1)


class _Files:
    """The results files an index names, each opened once for reading (a look-up per planned call: no
    open each time) when the index is made, so that a run directory deleted mid-run (see `put_back`)
    still reads; shared by `index`'s done and final. `pread`, so that the resume's thread and the event
    loop may both read."""

    __slots__ = ("fds", "paths")

    def __init__(self, paths: list[Path], eager: bool = True) -> None:
        self.paths = paths
        self.fds: dict[int, int] = {}
        for k in range(len(paths) if eager else 0):
            try:
                self.fd(k)
            except OSError:
                pass  # (opened when first read, or the read says why)

    def fd(self, k: int) -> int:
        fd = self.fds.get(k)
        if fd is None:
            fd = self.fds[k] = os.open(self.paths[k], os.O_RDONLY)
        return fd

    def close(self) -> None:
        fds, self.fds = self.fds, {}
        for fd in fds.values():
            try:
                os.close(fd)
            except (OSError, TypeError):  # (TypeError: at interpreter exit, `os` may be gone)
                pass

    def __del__(self) -> None:
        self.close()


class RowIndex:
    """Identity -> location of one row per identity (a read-only mapping), held as the identities' 64-bit
    hashes, sorted, beside packed locations and a (model, pass) code: 18-20 bytes a row, where a dict of
    identity strings took ~146 (a resumed 45-model x 200k-row night: ~170 MB, not 1.3 GB). Two identities
    may share a hash: a hash names a row only once the identity read back from its results file matches
    (one `pread` of a line a look-up, the files' own bytes: nothing else to keep in step)."""

    __slots__ = ("_codes", "_files", "_groups", "_keys", "_kv", "_locs", "_lv", "walked")

    def __init__(self, files: _Files | None = None, keys: np.ndarray | None = None,
                 locs: np.ndarray | None = None, codes: np.ndarray | None = None,
                 groups: list[tuple[str, str]] | None = None) -> None:
        self._files = files or _Files([])
        self._groups = groups or []
        self.walked: dict[str, bytes] = {}
        """Per model, the resume's one walk of its plan (runner.resume.load): bit k (`walked_bit`) set when
        request k of the suite's build has every sample here. The scheduler's skip reads it instead of
        confirming each finished row a second time (a `pread` and a parse a row); emptied by `update`."""
        self._set(np.empty(0, np.int64) if keys is None else keys, np.empty(0, np.int64) if locs is None else locs,
                  np.empty(0, np.uint32) if codes is None else codes)

    def _set(self, keys: np.ndarray, locs: np.ndarray, codes: np.ndarray) -> None:
        self._keys, self._locs, self._codes = keys, locs, codes
        self._kv, self._lv = memoryview(keys).cast("B").cast("q"), memoryview(locs).cast("B").cast("q")
        """(memoryviews: `bisect` and indexing on them give plain ints, ~10x faster than numpy scalars)"""

    @property
    def paths(self) -> list[Path]:
        return self._files.paths

    def __len__(self) -> int:
        return len(self._keys)

    def __getitem__(self, ident: str) -> Loc:
        loc = self.get(ident)
        if loc is None:
            raise KeyError(ident)
        return loc

    def __contains__(self, ident: object) -> bool:
        return isinstance(ident, str) and self._find(ident) >= 0

    def get(self, ident: str, default: Loc | None = None) -> Loc | None:
        i = self._find(ident)
        return default if i < 0 else self._loc(self._lv[i])

    def row(self, ident: str) -> Row | None:
        """`ident`'s row, read back."""
        i = self._find(ident)
        if i < 0:
            return None
        packed = self._lv[i]
        return _row_at(self._fd(packed >> _FILE_SHIFT), packed & _OFFSET)

    def found(self, ident: str) -> Row | None:
        """`ident`'s row, read whole once and its identity checked on the row itself: for a caller that
        needs the row anyway (a resumed answer's follow-ups), no head read to confirm it first."""
        keys, lv = self._kv, self._lv
        h = hash(ident) if HASH_BITS >= 64 else _ident_hash(ident)
        i, n = bisect_left(keys, h), len(keys)
        while i < n and keys[i] == h:
            packed = lv[i]
            r = _row_at(self._fd(packed >> _FILE_SHIFT), packed & _OFFSET)
            if row_identity(r["model"], r["item"], r["sample"], r["pass"]) == ident:
                return r
            i += 1
        return None

    def __iter__(self) -> Iterator[str]:
        """Every identity, read back from its row: a whole read of the rows (tests, rare uses)."""
        for packed in self._lv:
            yield self._identity_at(packed)

    def keys(self) -> Iterator[str]:
        return iter(self)

    def items(self) -> Iterator[tuple[str, Loc]]:
        for packed in self._lv:
            yield self._identity_at(packed), self._loc(packed)

    def by_pass(self) -> dict[str, dict[str, int]]:
        """model -> pass -> identities held, from the codes (no row read)."""
        out: dict[str, dict[str, int]] = {}
        for code, n in enumerate(np.bincount(self._codes, minlength=len(self._groups)).tolist()):
            if n:
                model, pass_ = self._groups[code]
                out.setdefault(model, {})[pass_] = n
        return out

    def _find(self, ident: str) -> int:
        """The position of `ident`'s entry, else -1: the hash's first entry whose row says `ident`.
        (The hot path, a call per planned call on resume: `_identity_at` inlined; a row in the runner's
        own order is confirmed by comparing bytes, ~0.6 us less than parsing its head.)"""
        keys, lv, fds = self._kv, self._lv, self._files.fds
        h = hash(ident) if HASH_BITS >= 64 else _ident_hash(ident)
        i = bisect_left(keys, h)
        n = len(keys)
        want: tuple[bytes, bytes] | None = None
        while i < n and keys[i] == h:
            packed = lv[i]
            fd = fds.get(packed >> _FILE_SHIFT)
            if fd is None:
                fd = self._fd(packed >> _FILE_SHIFT)
            head = _pread(fd, _HEAD, packed & _OFFSET)
            if want is None:
                want = _expected_head(ident)
            if want is not None and _head_is(head, want):
                return i
            got = _head_identity(head)
            if got is None:
                got = self._identity_at(packed)
            if got == ident:
                return i
            i += 1
        return -1

    def _loc(self, packed: int) -> Loc:
        k, off = packed >> _FILE_SHIFT, packed & _OFFSET
        return off if k == 0 else (self.paths[k], off)

    def _identity_at(self, packed: int) -> str:
        fd, off = self._fd(packed >> _FILE_SHIFT), packed & _OFFSET
        ident = _head_identity(_pread(fd, _HEAD, off))
        if ident is None:
            r = _row_at(fd, off)
            ident = row_identity(r["model"], r["item"], r["sample"], r["pass"])
        return ident

    def _fd(self, k: int) -> int:
        return self._files.fd(k)

    def update(self, other: RowIndex) -> None:
        """As dict.update: `other`'s locations win, an identity only here stays. (A --join worker's
        re-read after a takeover: `other` reads the same files, grown, so it holds every identity here;
        an entry whose row `other` holds too is known without a read, the others are read back.)"""
        if not len(self):
            self._take(other)
            return
        where = {p: k for k, p in enumerate(other.paths)}
        paths = list(other.paths)
        move = np.array([where.get(p, -1) for p in self.paths], dtype=np.int64)
        for k in np.flatnonzero(move < 0).tolist():  # a file `other` did not read
            move[k] = len(paths)
            paths.append(self.paths[k])
        mask = (1 << _FILE_SHIFT) - 1
        locs = (move[self._locs >> _FILE_SHIFT] << _FILE_SHIFT) | (self._locs & mask)
        pos = np.searchsorted(other._keys, self._keys)
        hit = pos < len(other)
        hit[hit] = other._keys[pos[hit]] == self._keys[hit]
        same = hit.copy()
        same[hit] = other._locs[pos[hit]] == locs[hit]  # the very row `other` names: the same identity
        keep = ~hit
        for i in np.flatnonzero(hit & ~same).tolist():
            keep[i] = self._identity_at(self._lv[i]) not in other
        self.walked = {}  # (the rows held change: the walk no longer says)
        groups = list(other._groups)
        code_of = {g: c for c, g in enumerate(groups)}
        recode = np.array([code_of.setdefault(g, len(code_of)) for g in self._groups] or [0], dtype=np.int64)
        groups = list(code_of)
        keys = np.concatenate([other._keys, self._keys[keep]])
        order = np.argsort(keys, kind="stable")
        codes = np.concatenate([other._codes.astype(np.int64), recode[self._codes[keep]]])[order]
        self._files = other._files if len(paths) == len(other.paths) else _Files(paths)
        self._groups = groups
        self._set(keys[order], np.concatenate([other._locs, locs[keep]])[order], _narrow(codes, len(groups)))

    def _take(self, other: RowIndex) -> None:
        self.walked = {}
        self._files, self._groups = other._files, list(other._groups)
        self._set(other._keys, other._locs, other._codes)


def walked_bits(flags: bytearray) -> bytes:
    """A byte a request (1: all its samples finished) packed to a bit a request, for `RowIndex.walked`."""
    return np.packbits(np.frombuffer(flags, np.uint8)).tobytes()


def walked_bit(bits: bytes, k: int) -> bool | None:
    """Request k's bit in a `RowIndex.walked` entry; None past its end (the walk did not see it)."""
    byte = k >> 3
    return None if byte >= len(bits) else bool(bits[byte] >> (7 - (k & 7)) & 1)


class Final:
    """`index`'s best row of every identity: its finished rows (a `RowIndex`) and, apart, the identities
    whose rows are all errors (their last), as compact."""

    __slots__ = ("done", "failed")

    def __init__(self, done: RowIndex, failed: RowIndex) -> None:
        self.done, self.failed = done, failed

    def __len__(self) -> int:
        return len(self.done) + len(self.failed)

    def __contains__(self, ident: object) -> bool:
        return ident in self.done or ident in self.failed

    def get(self, ident: str, default: Loc | None = None) -> Loc | None:
        loc = self.done.get(ident)
        return loc if loc is not None else self.failed.get(ident, default)

    def __iter__(self) -> Iterator[str]:
        yield from self.done
        yield from self.failed

    def items(self) -> Iterator[tuple[str, Loc]]:
        yield from self.done.items()
        yield from self.failed.items()


def by_pass(done: Any) -> dict[str, dict[str, int]]:
    """model -> pass -> identities in `done` (a RowIndex, or any mapping of identities)."""
    if isinstance(done, RowIndex):
        return done.by_pass()
    out: dict[str, dict[str, int]] = {}
    for ident in list(done):
        model, _, rest = ident.partition("\x1f")
        d = out.setdefault(model, {})
        p = rest.rsplit("\x1f", 1)[-1]
        d[p] = d.get(p, 0) + 1
    return out


_HEAD = 512
"""Bytes read first to confirm a hash hit: the runner's rows name model, suite, item, sample, pass first."""


def _head_identity(head: bytes) -> str | None:
    """The identity of the row whose line starts `head`, read from the head alone: cut before the first
    `,"` after `"pass":`, closed with `}`. A bare `,"` is never inside a string and the cut object parses
    only if cut at its top level, so what parses holds the row's own fields (a line of one object without
    repeated keys, as orjson writes); None when the head does not say (the caller reads the whole line,
    a cost that grows with the answer's length: a hit per planned call, on resume)."""
    at = head.find(b'"pass":')
    cut = head.find(b',"', at + 7) if at >= 0 else -1
    if cut < 0 or head.find(b"\n", 0, cut) >= 0:  # (a line has no raw newline: past it, another row)
        return None
    try:
        r = orjson.loads(head[:cut] + b"}")
    except orjson.JSONDecodeError:
        return None
    if type(r) is not dict:
        return None
    m, item, s, p = r.get("model"), r.get("item"), r.get("sample"), r.get("pass")
    if type(m) is str and type(item) is str and type(s) is int and type(p) is str:  # (what index checked)
        return row_identity(m, item, s, p)
    return None


def _expected_head(ident: str) -> tuple[bytes, bytes] | None:
    """The bytes a row of `ident` starts with as the runner writes it (runner.rows: model, suite, item,
    sample, pass first): what precedes the suite's string and what follows it. None when a field holds
    a quote or a backslash (its bytes could read as other fields, or as an escape) or the separator:
    the caller parses. (A control character needs no check: a row never holds one raw, no match.)"""
    if '"' in ident or "\\" in ident:
        return None
    parts = ident.encode().split(b"\x1f")
    if len(parts) != 4 or not parts[2].isdigit():
        return None
    m, item, s, p = parts
    return b'{"model":"%s","suite":"' % m, b'","item":"%s","sample":%s,"pass":"%s"' % (item, s, p)


def _head_is(head: bytes, want: tuple[bytes, bytes]) -> bool:
    """Does `head` start a row of the identity `want` was made of (`_expected_head`)? True only when it
    does: the model's string is the first value, the suite's ends at its first quote (no backslash
    before it: no escape), then item, sample and pass, the pass's string closed by its own quote; equal
    bytes of a JSON string are the equal string (a line holds one object without repeated keys, as
    `_head_identity` says). False says nothing (another order, an escaped suite or field, a cut head,
    another identity): the caller parses the head."""
    pre, post = want
    if not head.startswith(pre):
        return False
    a = len(pre)
    end = head.find(b'"', a)
    return end >= 0 and head.find(b"\\", a, end) < 0 and head.startswith(post, end)


def _row_at(fd: int, off: int) -> Any:
    """The row whose line starts at byte `off` of an open file."""
    size = 4096
    while True:
        buf = _pread(fd, size, off)
        end = buf.find(b"\n")
        if end >= 0 or len(buf) < size:
            return orjson.loads(buf if end < 0 else buf[:end])
        size *= 4


def _narrow(codes: np.ndarray, groups: int) -> np.ndarray:
    return codes.astype(np.uint16 if groups <= 1 << 16 else np.uint32)


_SLICE = 65536
"""Rows sharing a hash that `index` reads back at a time."""

_SUCCESS, _CUT, _ERROR = 2, 1, 0
"""A row's kind in `index`: a success, a stream cut mid-answer (counted as done), another error."""


def index(path: Path, partial: set[str] | None = None,
          each: Callable[[Row], None] | None = None) -> tuple[RowIndex, Final]:
    """Per identity, the location of its best row over every results file of the run directory:
    (done = successes, final = best of any kind). Rows of `path` itself are plain offsets.
    With `partial`, a stream cut mid-answer (`finish_reason` "partial": billed, no answer) counts as
    done too, its identity added to `partial`, so a resume does not pay for it again (#39).
    `each`: called with every row as it is read (the dry run's totals per model: one read, not two).

    Per identity, in the order read: done is its last success, else its first cut stream; final is the
    same, else its last error. The rows are read once into columns of hashes, packed locations and
    kinds (18 bytes a row), sorted by hash; rows sharing a hash are told apart by reading their
    identities back (retries, and the rare collision).

    A row without a well-typed identity is bad input, named by file and line (ConfigError: exit 2)."""
    paths = [path, *(q for q in results_files(path.parent) if q != path)]
    if len(paths) >= 1 << (63 - _FILE_SHIFT):
        raise ConfigError(f"{path.parent}: {len(paths):,} results files; at most {(1 << (63 - _FILE_SHIFT)) - 1:,}")
    hashes, locs, kinds = array("q"), array("q"), array("H")  # kinds: (model, pass) code << 2 | kind
    code_of: dict[tuple[str, str], int] = {}
    cut: set[str] = set()
    for k, p in enumerate(paths):
        base = k << _FILE_SHIFT
        for lineno, off, r in _lines(p):
            bad = _identity_problem(r)
            if bad:
                raise ConfigError(
                    f"{p}:{lineno}: not a results row ({bad}); fix or remove that line, then rerun"
                )
            if each is not None:
                each(r)
            ident = row_identity(r["model"], r["item"], r["sample"], r["pass"])
            if r.get("error") is None:
                kind = _SUCCESS
            elif partial is not None and r.get("finish_reason") == "partial":  # providers.stream.PARTIAL
                kind = _CUT
                cut.add(ident)
            else:
                kind = _ERROR
            g = (r["model"], r["pass"])
            code = code_of.get(g)
            if code is None:
                code = code_of[g] = len(code_of)
                if code == 1 << 14 and kinds.typecode == "H":  # (two bytes a row until then)
                    kinds = array("I", kinds)
            hashes.append(_ident_hash(ident))
            locs.append(base | off)
            kinds.append(code << 2 | kind)
    groups = list(code_of)
    done, failed = _best(paths, hashes, locs, kinds, groups)
    if partial is not None:
        for ident in cut | partial:  # cut and never answered since (a success wins)
            row = done.row(ident)
            if row is not None and row.get("error") is None:
                partial.discard(ident)
            elif ident in cut:
                partial.add(ident)
    return done, Final(done, failed)


def _best(paths: list[Path], hashes: array, locs: array, kinds: array,
          groups: list[tuple[str, str]]) -> tuple[RowIndex, RowIndex]:
    """(done, failed) of `index` from its columns, emptied as it goes: this sort is a resume's peak
    (~33 bytes a row for a moment, the columns included; 18 once built)."""
    n = len(hashes)
    h = np.frombuffer(hashes, dtype=np.int64)
    order = np.argsort(h)  # (not stable, no buffer: rows sharing a hash are put in the order read below)
    if n < 1 << 31:
        order = order.astype(np.int32)
    h.sort()  # (in place: the same as h[order], without a copy)
    kind = np.frombuffer(kinds, dtype=np.uint16 if kinds.typecode == "H" else np.uint32)[order]
    del kinds[:]
    first = np.ones(n, dtype=bool)
    first[1:] = h[1:] != h[:-1]
    alone = first.copy()
    alone[:-1] &= first[1:]
    win_done = alone & ((kind & 3) != _ERROR)
    win_failed = alone & ((kind & 3) == _ERROR)
    shared = np.flatnonzero(~alone)  # rows sharing a hash: retries, and the rare collision
    del alone
    files = _Files(paths)
    probe = RowIndex(files)
    a = 0
    while a < len(shared):  # (in slices of whole groups: no list of every retried row at once)
        b = min(a + _SLICE, len(shared))
        while b < len(shared) and not first[shared[b]]:
            b += 1
        rows = shared[a:b].tolist()
        at = order[rows].tolist()
        starts = first[rows].tolist()
        i = 0
        while i < len(rows):
            j = i + 1
            while j < len(rows) and not starts[j]:
                j += 1
            by: dict[str, list[int]] = {}  # identity read back -> its rows, in the order read
            for q in sorted(range(i, j), key=at.__getitem__):
                by.setdefault(probe._identity_at(locs[at[q]]), []).append(rows[q])
            for mine in by.values():
                ks = [int(kind[r]) & 3 for r in mine]
                if _SUCCESS in ks:
                    win_done[mine[len(ks) - 1 - ks[::-1].index(_SUCCESS)]] = True
                elif _CUT in ks:
                    win_done[mine[ks.index(_CUT)]] = True
                else:
                    win_failed[mine[-1]] = True
            i = j
        a = b
    del first
    codes = _narrow(kind[win_done] >> 2, len(groups))
    del kind
    keys = [h[win_done], h[win_failed]]
    del h
    del hashes[:]
    at_done, at_failed = order[win_done], order[win_failed]
    del order, win_done, win_failed
    lv = np.frombuffer(locs, dtype=np.int64)
    done_locs, failed_locs = lv[at_done], lv[at_failed]
    del lv, at_done, at_failed
    del locs[:]
    done = RowIndex(files, keys[0], done_locs, codes, groups)
    failed = RowIndex(files, keys[1], failed_locs, np.zeros(len(keys[1]), np.uint16), groups)
    return done, failed
