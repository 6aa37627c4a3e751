"""Crash-safe file writing: every file the toolkit writes appears whole or not at all.

Writers put the content in a temporary file in the destination folder, flush and fsync it, then ``os.replace`` it
onto the final name (atomic on POSIX), so an interrupted run never leaves a truncated JSON or Parquet file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is fsynced and renamed onto ``path``.

    The temporary file is created owner-only (0600, ``mkstemp``); when ``path`` already exists its permissions are
    kept. On an exception the temporary file is removed and ``path`` is untouched.
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        if dest.exists():
            os.chmod(tmp_path, dest.stat().st_mode & 0o777)
        os.replace(tmp_path, dest)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def atomic_write(path: str | Path, write: Callable[[IO[str]], Any], *, encoding: str = "utf-8") -> Path:
    """Write text through ``write(fh)`` atomically."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding=encoding, newline="\n") as fh:
            write(fh)
    return Path(path)


def atomic_write_text(text: str, path: str | Path) -> Path:
    return atomic_write(path, lambda fh: fh.write(text))


def atomic_write_json(obj: Any, path: str | Path) -> Path:
    return atomic_write(path, lambda fh: (json.dump(obj, fh, indent=2, ensure_ascii=False, sort_keys=False),
                                          fh.write("\n")))


def atomic_write_parquet(frame, path: str | Path) -> Path:
    """Write a pandas DataFrame to Parquet atomically (pyarrow engine, no index)."""
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False, engine="pyarrow")
    return Path(path)
