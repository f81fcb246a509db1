"""results.jsonl: append-only, one orjson line per call, written as each call completes.

The rows finished in one turn of the event loop go out in one `write(2)` on an O_APPEND descriptor at
the end of that turn: they reach the kernel before the loop waits for anything, so a killed process
loses nothing it had finished, at one syscall per batch rather than per row.
A torn last line (power loss, disk full) is cut off on resume. Reading keeps, per identity
(model, item, sample, pass), the best row: the last success, else the last error.

A failed write (disk full, quota, I/O error) is a fault of ours, not of the call: the writer keeps the
unwritten bytes (never a torn line followed by more rows), tells `on_fault` once so the run stops
launching calls, holds the rows of calls still in flight in memory, and retries them at `flush`.
"""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from core.types import Row
from runner.config import ConfigError

RESULTS = "results.jsonl"


class ResultsWriter:
    """Appends rows to results.jsonl: the rows of one turn of the event loop go out in one `os.write`
    at its end (one syscall per batch instead of per row; a row waits microseconds, no longer than an
    answer waits for its turn to be processed). The first failed write keeps the rest in memory, in
    order, for `flush` to retry, and reports the fault once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        repair_tail(path)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.rows = 0
        self.fault: str | None = None
        """The first write error, phrased for the user (what, where, how much space)."""
        self.on_fault: Callable[[str], None] | None = None
        self._buf = bytearray()
        self._head = b""
        self._due = False
        self.keep: dict[str, bytes] = {}
        """Small files of the run directory (manifest, config) to put back if it is deleted mid-run."""
        self.gone = False

    @property
    def unsaved_rows(self) -> int:
        return self._buf.count(b"\n")

    def unsaved(self) -> list[Row]:
        """The rows still held in memory (a full disk): what a stop message must count exactly."""
        return [orjson.loads(line) for line in (self._head + bytes(self._buf)).splitlines() if line.strip()]

    def _wrote(self, n: int) -> None:
        """`n` bytes of the buffer reached the file. A short write leaves a line torn in the file: its
        written head is kept, so `unsaved` can still read that row whole."""
        if n < len(self._buf) or self._head:
            part = bytes(self._buf[:n])
            nl = part.rfind(b"\n")
            self._head = self._head + part if nl < 0 else part[nl + 1 :]
        del self._buf[:n]

    def write(self, row: Row) -> None:
        self._buf += orjson.dumps(row, option=orjson.OPT_APPEND_NEWLINE)
        self.rows += 1
        if self._due or self.fault is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: write now
            self._drain()
            return
        self._due = True
        loop.call_soon(self._drain)

    def _drain(self) -> None:
        self._due = False
        if self.fault is not None or not self._buf or self._fd < 0:
            return
        try:
            n = os.write(self._fd, self._buf)
        except OSError as e:
            self._failed(e)
            return
        self._wrote(n)
        if self._buf:  # a short write: the disk filled up mid-line
            self._failed(OSError(28, os.strerror(28)))
        elif os.fstat(self._fd).st_nlink == 0:  # ~0.3 us a batch: rows going to a deleted file
            self.gone = True
            self._fault(f"the run directory {self.path.parent} was deleted while the run wrote to it")

    def _failed(self, e: OSError) -> None:
        self._fault(write_error(self.path, e))

    def _fault(self, why: str) -> None:
        if self.fault is None:
            self.fault = why
            if self.on_fault is not None:
                self.on_fault(self.fault)

    def flush(self) -> int:
        """Write the held rows (retrying after a fault); returns how many are still unsaved."""
        if self._fd >= 0 and (self.gone or os.fstat(self._fd).st_nlink == 0):
            self.gone = True
            put_back(self)
        while self._buf and self._fd >= 0:
            try:
                n = os.write(self._fd, self._buf)
            except OSError:
                break
            if n == 0:
                break
            self._wrote(n)
        return self.unsaved_rows

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            try:
                os.fsync(self._fd)
            except OSError:
                pass
            os.close(self._fd)
            self._fd = -1


def put_back(w: ResultsWriter) -> None:
    """The run directory was deleted mid-run: make it again with the rows already written (still
    readable through the deleted file while it is open: Linux's /proc/self/fd), the kept manifest and
    config, so that nothing finished is lost, the manifest can say `aborted`, and the run resumes."""
    import logging

    log = logging.getLogger("evalsweep")
    old, out = w._fd, w.path.parent
    try:
        out.mkdir(parents=True, exist_ok=True)
        new = os.open(w.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as e:
        log.error("cannot make %s again (%s): the rows finished so far are lost", out, e.strerror)
        return
    saved = "its rows are lost (no /proc here to read the deleted file back)"
    try:
        with open(f"/proc/self/fd/{old}", "rb") as src, os.fdopen(os.dup(new), "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        saved = "the rows finished so far"
    except OSError:
        pass
    for name, data in w.keep.items():
        if not (out / name).exists():
            (out / name).write_bytes(data)
    os.close(old)
    w._fd, w.gone = new, False
    log.error("%s was deleted mid-run: made it again with %s, its manifest and config (delete it again "
              "if that was meant)", out, saved)


def disk_full(e: BaseException) -> bool:
    """No space (or quota, or file-size limit) left where we write."""
    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def write_error(path: Path, e: OSError) -> str:
    """`cannot write PATH: No space left on device (12 KiB free of 1.0 MiB on /mnt)`."""
    where = ""
    try:
        du = shutil.disk_usage(path.parent)
        where = f" ({_size(du.free)} free of {_size(du.total)})"
    except OSError:
        pass
    return f"cannot write {path}: {e.strerror or e}{where}"


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


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
    for _, off, row in _lines(path):
        yield off, row


def _lines(path: Path, strict: bool = False) -> Iterator[tuple[int, int, Any]]:
    """(line number, byte offset, decoded line) of every complete line. An undecodable complete line is
    skipped, or with `strict` (scoring: a row silently missing would change the scores) an error naming
    it; a last line without its newline (a write cut short) is never read."""
    if not path.exists():
        return
    with path.open("rb") as f:
        off = 0
        for lineno, line in enumerate(f, 1):
            if line.endswith(b"\n"):
                try:
                    yield lineno, off, orjson.loads(line)
                except orjson.JSONDecodeError as e:
                    if strict:
                        raise ConfigError(
                            f"{path}:{lineno}: unreadable line ({e}); every other row is intact. Remove that "
                            "line (resuming the run redoes its call), then rerun"
                        ) from None
            off += len(line)


def results_files(run_dir: Path) -> list[Path]:
    """results.jsonl and the `--join` workers' results.<host>-<pid>.jsonl: one run, read together."""
    return sorted(p for p in run_dir.glob("results*.jsonl") if p.is_file())


Loc = int | tuple[Path, int]
"""Where a row is: an offset in the file asked about, or (another file of the run, offset)."""

_ID_TYPES = {"model": str, "item": str, "sample": int, "pass": str}


def _identity_problem(r: Any) -> str | None:
    if not isinstance(r, dict):
        return f"a {type(r).__name__}, not an object"
    for k, t in _ID_TYPES.items():
        v = r.get(k)
        if v is None:
            return f"no {k!r}"
        if not isinstance(v, t) or isinstance(v, bool):
            return f"{k!r} is {type(v).__name__}, not {t.__name__}"
    return None


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """A run directory's manifest.json, checked: an object with a `spec` naming its suite."""
    path = run_dir / "manifest.json"
    if not path.is_file():
        raise ConfigError(f"{run_dir}: not a run directory (no manifest.json)")
    try:
        man = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e}); restore it or pick another --out") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    spec = man.get("spec") if isinstance(man, dict) else None
    if not isinstance(spec, dict) or not isinstance(spec.get("suite"), str):
        raise ConfigError(f"{path}: not a run manifest (no spec.suite); restore it or pick another --out")
    return man


def check_run_dir(run_dir: Path) -> None:
    """What `evalsweep score` needs before it reads anything: a manifest and a results file."""
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: not a run directory (no such directory)")
    read_manifest(run_dir)
    if not results_files(run_dir):
        raise ConfigError(f"{run_dir}: no {RESULTS} (the run never wrote a row); run it first")


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
        for lineno, off, r in _lines(p, strict=True):
            bad = _identity_problem(r)
            if bad:
                raise ConfigError(
                    f"{p}:{lineno}: not a results row ({bad}); fix or remove that line, then rerun"
                )
            ident, sample = [r["model"], r["item"], r["pass"]], r["sample"]
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
