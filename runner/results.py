"""results.jsonl: append-only, one orjson line per call, written as each call completes.

Each row is one `write(2)` on an O_APPEND descriptor: it reaches the kernel at once, so a killed
process loses nothing it had finished (no user-space buffer to lose), and costs a few microseconds.
A torn last line (power loss, disk full) is cut off on resume. Reading keeps, per identity
(model, item, sample, pass), the best row: the last success, else the last error.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from core.types import Row, row_identity

RESULTS = "results.jsonl"


class ResultsWriter:
    def __init__(self, path: Path) -> None:
        self.path = path
        repair_tail(path)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.rows = 0

    def write(self, row: Row) -> None:
        os.write(self._fd, orjson.dumps(row) + b"\n")
        self.rows += 1

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1


def repair_tail(path: Path) -> int:
    """Drop a torn last line (no trailing newline, or not JSON). Returns bytes removed."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with path.open("rb+") as f:
        f.seek(max(0, size - 1))
        if f.read(1) == b"\n":
            # Complete last line; still check it parses (a crash mid-write can leave garbage + \n).
            start = _last_line_start(f, size - 1)
            f.seek(start)
            try:
                orjson.loads(f.read(size - start))
                return 0
            except orjson.JSONDecodeError:
                f.truncate(start)
                return size - start
        start = _last_line_start(f, size)
        f.truncate(start)
        return size - start


def _last_line_start(f: Any, end: int) -> int:
    pos = end
    block = 65536
    while pos > 0:
        lo = max(0, pos - block)
        f.seek(lo)
        chunk = f.read(pos - lo)
        i = chunk.rfind(b"\n")
        if i >= 0:
            return lo + i + 1
        pos = lo
    return 0


def scan(path: Path) -> Iterator[tuple[int, Row]]:
    """(byte offset, row) for every complete, parseable line; a bad line is skipped, not fatal."""
    if not path.exists():
        return
    with path.open("rb") as f:
        off = 0
        for line in f:
            if line.endswith(b"\n"):
                try:
                    yield off, orjson.loads(line)
                except orjson.JSONDecodeError:
                    pass
            off += len(line)


def results_files(run_dir: Path) -> list[Path]:
    """results.jsonl and the `--join` workers' results.<host>-<pid>.jsonl: one run, read together."""
    return sorted(p for p in run_dir.glob("results*.jsonl") if p.is_file())


Loc = int | tuple[Path, int]
"""Where a row is: an offset in the file asked about, or (another file of the run, offset)."""


def index(path: Path) -> tuple[dict[str, Loc], dict[str, Loc]]:
    """Per identity, the location of its best row over every results file of the run directory:
    (done = successes, final = best of any kind). Rows of `path` itself are plain offsets."""
    done: dict[str, Loc] = {}
    final: dict[str, Loc] = {}
    for p in [path, *(q for q in results_files(path.parent) if q != path)]:
        own = p == path
        for off, r in scan(p):
            ident = row_identity(r["model"], r["item"], r["sample"], r["pass"])
            loc = off if own else (p, off)
            if r.get("error") is None:
                done[ident] = loc
                final[ident] = loc
            elif ident not in done:
                final[ident] = loc
    return done, final


def read_at(path: Path, offset: Loc) -> Row:
    if isinstance(offset, tuple):
        path, offset = offset
    with path.open("rb") as f:
        f.seek(offset)
        return orjson.loads(f.readline())


def final_rows(path: Path) -> Iterator[Row]:
    """The deduplicated rows of a run, sorted by (model, item, sample, pass): what the scoring stage
    reads. Sorted, so that scores (bootstrap resamples included) never depend on completion order."""
    _, final = index(path)
    order = sorted(final.items(), key=lambda kv: _sort_key(kv[0]))
    files: dict[Path, Any] = {}
    try:
        for _, loc in order:
            p, off = loc if isinstance(loc, tuple) else (path, loc)
            f = files.get(p) or files.setdefault(p, p.open("rb"))
            f.seek(off)
            yield orjson.loads(f.readline())
    finally:
        for f in files.values():
            f.close()


def _sort_key(identity: str) -> tuple[str, str, int, str]:
    model, item, sample, pass_ = identity.split("\x1f")
    return model, item, int(sample), pass_
