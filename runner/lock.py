"""One runner per run directory: an OS file lock (flock) on `<out>/.lock`.

The kernel drops the lock when the process dies, however it dies, so a SIGKILL never leaves a stale
lock behind. A plain run holds it exclusively and writes its PID into the file, to be named in a
second launch's error; `--join` workers (runner.budgets.leases: many processes splitting one run on purpose)
share it, so they exclude a plain run on the same directory and it excludes them.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from runner.config import ConfigError

LOCK = ".lock"


def lock_run_dir(out: Path, shared: bool = False) -> int:
    """Take the run directory's lock or fail at once (ConfigError: exit 2, nothing sent). Returns the
    descriptor to keep open for the run's lifetime (`unlock` closes it; so does the process's death)."""
    path = out / LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise ConfigError(f"{path}: cannot create the run directory's lock file: {e.strerror}") from None
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = _holder(os.pread(fd, 32, 0).decode(errors="replace").strip())
        finally:
            os.close(fd)
        raise ConfigError(
            f"{out} is in use by another evalsweep run ({holder}); wait for it to finish, stop it, "
            "or pick another --out"
        ) from None
    if not shared:
        try:  # informational only: a full disk must not stop a resume from taking the lock
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass
    return fd


def _holder(pid: str) -> str:
    """`PID 123` for a live exclusive holder; otherwise the holders are --join workers."""
    if pid.isdigit():
        try:
            os.kill(int(pid), 0)
            return f"PID {pid}"
        except ProcessLookupError:
            pass
        except PermissionError:
            return f"PID {pid}"
    return "--join workers"


def unlock(fd: int) -> None:
    if fd >= 0:
        os.close(fd)  # closing the last descriptor releases the flock
