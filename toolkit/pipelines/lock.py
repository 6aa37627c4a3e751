"""One writer per run directory: ``RUN_DIR/.lock`` holds the pid and host of the process running it.

Two ``run``s on one directory would overwrite each other's steps (one with ``k = 2``, the other with ``k = 3``).
:func:`run_lock` takes the lock with an exclusive create (``O_CREAT | O_EXCL``, atomic on a local file system); a lock
left by a process that no longer exists on this host (killed, crashed) is taken over; a live holder makes the second
run stop with a clear error naming the pid. The lock is removed when the run ends, whatever the outcome.
"""

from __future__ import annotations

import json
import os
import socket
from contextlib import contextmanager
from pathlib import Path

from toolkit.errors import ToolkitError

LOCK_NAME = ".lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def lock_holder(run_dir: str | Path) -> dict | None:
    """The lock's ``{"pid", "host"}``, or None when the directory is not locked (or the lock is unreadable)."""
    try:
        return json.loads((Path(run_dir) / LOCK_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


@contextmanager
def run_lock(run_dir: str | Path):
    """Hold ``RUN_DIR/.lock`` for the duration of the block (see the module docstring)."""
    path = Path(run_dir) / LOCK_NAME
    me = {"pid": os.getpid(), "host": socket.gethostname()}
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            holder = lock_holder(run_dir)
            stale = (holder is not None and holder.get("host") == me["host"]
                     and not _alive(int(holder.get("pid", -1))))
            if holder is None or stale:  # a crashed run's lock (or a torn one): take it over
                path.unlink(missing_ok=True)
                continue
            raise ToolkitError(f"{run_dir}: another run is using this directory (pid {holder.get('pid')} on "
                               f"{holder.get('host')}); wait for it to finish or choose another --out") from None
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(me, fh)
        break
    try:
        yield
    finally:
        if lock_holder(run_dir) == me:
            path.unlink(missing_ok=True)


__all__ = ["LOCK_NAME", "lock_holder", "run_lock"]
