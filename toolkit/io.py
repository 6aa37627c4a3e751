"""Crash-safe, owner-only file writing: every file the toolkit writes appears whole or not at all.

Writers put the content in a temporary file in the destination folder, flush and fsync it, then ``os.replace`` it
onto the final name (atomic on POSIX) and fsync the folder, so an interrupted run never leaves a truncated JSON or
Parquet file: a reader sees the old content or the new one (``tests/test_reliability.py`` kills writers with
SIGKILL to check this). A kill can leave a ``.NAME.*.tmp`` file beside the target (owner-only), never a partial
target.

The data are about people, so what the toolkit creates is private to the user who runs it: new files are 0600
(``mkstemp``), new folders 0700 (:func:`make_private_dir`; existing folders keep their permissions). Files that
libraries write themselves (the Hugging Face Trainer's ``trainer/checkpoint-*``, tokenizers, Opacus states) follow
the process umask, so every entry point that writes runs under :func:`private_umask` (umask 077): the command line
(``toolkit.cli.common.run_command``), :func:`toolkit.pipelines.lm_experiment.run_experiment` and the e-mail
pipeline's functions (``toolkit.pipelines.email_extraction``). ``toolkit.training.train`` / ``build_base`` called
directly from a notebook do not set it themselves: wrap such a call in ``with private_umask():``.
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
def private_umask() -> Iterator[None]:
    """Run the block under umask 077: whatever is created inside it, by the toolkit or by a library, is owner-only.

    The umask is per process (not per thread); the previous one is restored on exit, also on an exception. Nested
    blocks are harmless.
    """
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


def make_private_dir(path: str | Path) -> Path:
    """Create folder ``path`` and its missing parents owner-only (0700); folders that exist are left as they are.

    (``Path.mkdir(mode=..., parents=True)`` applies ``mode`` to the last folder only, and through the umask.)
    """
    from toolkit.errors import ToolkitError

    p = Path(path)
    missing = []
    q = p
    while not q.is_dir():
        if (q.exists() or q.is_symlink()) and not q.is_dir():  # is_dir again: another process may just have made it
            raise ToolkitError(f"{q}: exists and is not a folder")
        missing.append(q)
        if q.parent == q:
            break
        q = q.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:  # created meanwhile by another process: leave its permissions alone
            continue
        os.chmod(d, 0o700)  # exactly 0700 whatever the umask
    return p


def restrict_tree(path: str | Path) -> Path:
    """Make a folder written by a library (e.g. ``save_pretrained``) owner-only: folders 0700, files 0600."""
    root = Path(path)
    os.chmod(root, 0o700)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o700)
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o600)
    return root


def fsync_dir(path: str | Path) -> None:
    """fsync a folder so that a rename inside it survives a power loss (best effort: not every OS allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it is fsynced and renamed onto ``path``.

    The temporary file is created owner-only (0600, ``mkstemp``); when ``path`` already exists its permissions are
    kept. Missing folders are created 0700 (:func:`make_private_dir`). On an exception the temporary file is
    removed and ``path`` is untouched.
    """
    dest = Path(path)
    make_private_dir(dest.parent)
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
        fsync_dir(dest.parent)
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
