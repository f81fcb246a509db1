"""One runner per run directory: an OS file lock (flock) on `<out>/.lock`.

The kernel drops the lock when the process dies, however it dies, so a SIGKILL never leaves a stale
lock behind; the file holds the owner's PID only to name it in the second launch's error.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from runner.config import ConfigError

LOCK = ".lock"


def lock_run_dir(out: Path) -> int:
    """Take the run directory's lock or fail at once (ConfigError: exit 2, nothing sent). Returns the
    descriptor to keep open for the run's lifetime (`unlock` closes it; so does the process's death)."""
    path = out / LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise ConfigError(f"{path}: cannot create the run directory's lock file: {e.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        finally:
            os.close(fd)
        raise ConfigError(
            f"{out} is in use by another evalsweep run (PID {pid}); wait for it to finish, stop it, "
            "or pick another --out"
        ) from None
    try:  # informational only: a full disk must not stop a resume from taking the lock
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass
    return fd


def unlock(fd: int) -> None:
    if fd >= 0:
        os.close(fd)  # closing the last descriptor releases the flock
