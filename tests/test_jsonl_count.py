"""The jsonl suite's `count` (calls per model) reads no file the pre-flight check already read whole (#47):
the check's pass keeps the version's count of non-blank lines; a file changed since is read again. The
reads are counted with Python's audit events ("open" of the data file), not timed."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from suites.base import RunSpec
from suites.jsonl import SUITE
from tests.helpers import write_dataset

_WATCHED: list[tuple[str, list[int]]] = []
"""(path, [opens seen]) while `_opens` runs: an audit hook cannot be removed, so it reads this."""


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _WATCHED and args and isinstance(args[0], str | bytes | os.PathLike):
        path, seen = _WATCHED[-1]
        if os.fsdecode(args[0]) == path:
            seen[0] += 1


sys.addaudithook(_hook)


def _opens(path: Path, f: Callable[[], object]) -> tuple[object, int]:
    """(f's result, how many times it opened `path`)."""
    seen = [0]
    _WATCHED.append((str(path), seen))
    try:
        return f(), seen[0]
    finally:
        _WATCHED.pop()


def _with_blank_lines(path: Path, n: int) -> Path:
    """`n` items with blank (and whitespace-only) lines between them and after the last."""
    lines = write_dataset(path, n).read_bytes().splitlines(keepends=True)
    path.write_bytes(b"\n".join(lines) + b"  \n\n")
    return path


def test_count_after_the_check_reads_nothing(tmp_path: Path):
    data = _with_blank_lines(tmp_path / "d.jsonl", 5)
    spec = RunSpec(suite=f"jsonl:{data}")
    _, opened = _opens(data, lambda: SUITE.check(spec))  # type: ignore[misc]
    assert opened >= 1
    assert _opens(data, lambda: SUITE.count(spec)) == (5, 0)  # type: ignore[misc]
    limited = RunSpec(suite=f"jsonl:{data}", limit=3, samples=2)
    assert _opens(data, lambda: SUITE.count(limited)) == (6, 0)  # type: ignore[misc]
    assert _opens(data, lambda: SUITE.count(RunSpec(suite=f"jsonl:{data}", limit=9))) == (5, 0)  # type: ignore[misc]


def test_count_without_a_check_reads_once_and_counts_non_blank_lines(tmp_path: Path):
    data = _with_blank_lines(tmp_path / "d.jsonl", 4)
    spec = RunSpec(suite=f"jsonl:{data}")
    assert _opens(data, lambda: SUITE.count(spec)) == (4, 1)  # type: ignore[misc]
    assert _opens(data, lambda: SUITE.count(spec)) == (4, 0)  # type: ignore[misc]


def test_a_file_changed_between_runs_is_read_again(tmp_path: Path):
    data = write_dataset(tmp_path / "d.jsonl", 3)
    spec = RunSpec(suite=f"jsonl:{data}")
    SUITE.check(spec)  # type: ignore[misc]
    assert _opens(data, lambda: SUITE.count(spec)) == (3, 0)  # type: ignore[misc]
    st = os.stat(data)
    with data.open("ab") as f:
        f.write(b"\n" + orjson.dumps({"id": "q3", "prompt": "p", "answer": "x"}) + b"\n")
    os.utime(data, ns=(st.st_atime_ns, st.st_mtime_ns))  # the same mtime: the size (and ctime) still tell
    assert _opens(data, lambda: SUITE.count(spec)) == (4, 1)  # type: ignore[misc]
    new = tmp_path / "new.jsonl"  # the same size and mtime, put in its place (another inode)
    new.write_bytes(data.read_bytes().replace(b'"q3"', b'"q9"').replace(b"\n\n", b"\n "))
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(new, data)
    assert _opens(data, lambda: SUITE.count(spec)) == (4, 1)  # type: ignore[misc]
    SUITE.check(spec)  # type: ignore[misc]
    assert _opens(data, lambda: SUITE.count(spec)) == (4, 0)  # type: ignore[misc]
