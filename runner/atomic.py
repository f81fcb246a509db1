"""Whole-file outputs (manifests, scores, scored rows, reports) written to a temp file and renamed, so
a kill or a full disk never leaves a partial file where an older complete one was.

    with atomic_open(path, "wb") as f: ...   # streamed writers (scored.jsonl, CSVs)
    write_atomic(path, data)                 # bytes or str
    write_json(path, obj)                    # indented, sorted keys (manifest.json, scores.json)
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "wb", **kw: Any) -> Iterator[IO[Any]]:
    """A file object whose content replaces `path` only when the block ends without an exception."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **kw) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(path: str | Path, data: bytes | str) -> None:
    if isinstance(data, str):
        data = data.encode()
    with atomic_open(path, "wb") as f:
        f.write(data)


def write_json(path: str | Path, data: Any) -> None:
    write_atomic(path, orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
