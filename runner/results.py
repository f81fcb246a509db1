"""results.jsonl: append-only, one orjson line per call, written as each call completes.

Each row is one `write(2)` on an O_APPEND descriptor: it reaches the kernel at once, so a killed
process loses nothing it had finished (no user-space buffer to lose), and costs a few microseconds.
A torn last line (power loss, disk full) is cut off on resume. Reading keeps, per identity
(model, item, sample, pass), the best row: the last success, else the last error.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from core.types import Row, row_identity
from runner.config import ConfigError

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
    reads. Sorted, so that scores (bootstrap resamples included) never depend on completion order.
    Streams: the identities are held as small integer columns (see `final_offsets`), rows read back
    one at a time from every results file of the run."""
    paths, which, offsets = final_offsets(path)
    files: dict[int, Any] = {}
    try:
        for k, off in zip(which.tolist(), offsets.tolist(), strict=True):
            f = files.get(k) or files.setdefault(k, paths[k].open("rb"))
            f.seek(off)
            yield orjson.loads(f.readline())
    finally:
        for f in files.values():
            f.close()


def final_offsets(path: Path) -> tuple[list[Path], np.ndarray, np.ndarray]:
    """(files, file index, byte offset) of each identity's best row over every results file of the run
    (the last success, else the last error, reading `path` first as `index` does), in (model, item,
    sample, pass) order. Per row it keeps seven integers, per distinct model/item/pass one string: about
    60 MB for a million rows, where a dict of identity strings and a sort of their tuples took ~500 MB."""
    paths = [path, *(q for q in results_files(path.parent) if q != path)]
    codes: dict[str, dict[str, int]] = {"model": {}, "item": {}, "pass": {}}
    cols = {k: array("q") for k in ("model", "item", "sample", "pass", "ok", "file", "offset")}
    for k_file, p in enumerate(paths):
        for off, r in scan(p):
            try:
                ident = [r["model"], r["item"], r["pass"]]
                sample = int(r["sample"])
            except (KeyError, TypeError, ValueError):
                ident, sample = [], 0
            if len(ident) < 3 or not all(isinstance(v, str) for v in ident):
                raise ConfigError(
                    f"{p}: the row at byte {off} is not a results row (model, item, sample, pass)"
                )
            for k, v in zip(("model", "item", "pass"), ident, strict=True):
                c = codes[k]
                cols[k].append(c.setdefault(v, len(c)))
            cols["sample"].append(sample)
            cols["ok"].append(r.get("error") is None)
            cols["file"].append(k_file)
            cols["offset"].append(off)
    n = len(cols["offset"])
    if not n:
        return paths, np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    arr = {k: np.frombuffer(v, dtype=np.int64) for k, v in cols.items()}
    ranks = {}
    for k in ("model", "item", "pass"):  # code -> rank of its string in sorted order
        names = list(codes[k])
        order = sorted(range(len(names)), key=names.__getitem__)
        rank = np.empty(len(names), dtype=np.int64)
        rank[order] = np.arange(len(names))
        ranks[k] = rank[arr[k]]
    codes.clear()
    seq = np.arange(n)
    # last key sorts first: within an identity, errors before successes, each in file order
    idx = np.lexsort((seq, arr["ok"], ranks["pass"], arr["sample"], ranks["item"], ranks["model"]))
    ident = np.stack([ranks["model"][idx], ranks["item"][idx], arr["sample"][idx], ranks["pass"][idx]])
    last = np.ones(n, dtype=bool)  # the last row of each identity: its best
    last[:-1] = (ident[:, 1:] != ident[:, :-1]).any(axis=0)
    best = idx[last]
    return paths, arr["file"][best], arr["offset"][best]
