"""Naming identifiers without writing them: a keyed digest of a normalised term, with one secret key per run.

Reports and summaries that must point at a reproduced identifier (regurgitation examples, leaked types, reviewed
tokens) show :func:`hash_term` of it instead of the word itself: the first 12 hex digits (48 bits) of
HMAC-SHA-256 (RFC 2104) of the UTF-8 term under the run's key. An unkeyed digest (the SHA-256 of the word, which
this toolkit used before) is a pseudonym anyone can reverse by hashing a list of candidate words — every word of a
corpus, a name list; with the key, only someone who holds it can test a guess.

The key is 32 random bytes kept in the run directory (``RUN_DIR/.hash_key``, 64 hex digits, mode 0600), created on
first use by :func:`run_key` and read afterwards, so every file of one run names a word alike (the report built from
the run and its ``regurgitation.json``); it is never written into a report or a JSON file. Two runs have different
keys, so their tokens cannot be compared. Deleting the key (``python -m toolkit purge``) makes the tokens left in a
kept report unlinkable to any name, also for the holder of the data.

Code that writes a run's files without the run directory in hand (the regurgitation step inside
:func:`toolkit.pipelines.lm_experiment.run_experiment`) finds the key with :func:`active_key`, set for the duration of
a ``with keyed_hashing(RUN_DIR):`` block.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.io import fsync_dir, make_private_dir

KEY_FILE = ".hash_key"
KEY_BYTES = 32
#: How the report and the JSON files describe the scheme (the key itself is never written anywhere else).
SCHEME = "keyed hash (HMAC-SHA-256, first 12 hex digits)"

_ACTIVE: ContextVar[bytes | None] = ContextVar("toolkit_hash_key", default=None)


def hash_term(term: str, key: bytes) -> str:
    """First 12 hex digits (48 bits) of HMAC-SHA-256(``key``, ``term`` as UTF-8); callers pass the normalised
    term and the run's key (:func:`run_key`)."""
    if not isinstance(key, (bytes, bytearray)) or len(key) < 16:
        raise ToolkitError("hash_term needs the run's key (toolkit.audit.hashing.run_key(RUN_DIR)), 16 bytes or more")
    return hmac.new(bytes(key), term.encode("utf-8"), hashlib.sha256).hexdigest()[:12]


def _read_key(path: Path) -> bytes:
    try:
        text = path.read_text(encoding="ascii").strip()
        key = bytes.fromhex(text)
    except (UnicodeDecodeError, ValueError):
        raise ToolkitError(f"{path}: not a hash key (expected {2 * KEY_BYTES} hex digits)") from None
    if len(key) != KEY_BYTES:
        raise ToolkitError(f"{path}: not a hash key (expected {2 * KEY_BYTES} hex digits, got {len(text)})")
    return key


def run_key(run_dir: str | Path) -> bytes:
    """The key of the run in ``run_dir``: ``run_dir/.hash_key``, created once (32 random bytes, 0600) and reused.

    Creation is atomic and race-free: the key is written to a private temporary file and hard-linked onto the
    final name, which fails when another process created it first; that process's key is then read and used.
    """
    d = make_private_dir(run_dir)
    path = d / KEY_FILE
    if path.is_file():
        return _read_key(path)
    fd, tmp = tempfile.mkstemp(prefix=f"{KEY_FILE}.", suffix=".tmp", dir=d)  # 0600 whatever the umask
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secrets.token_hex(KEY_BYTES) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        else:
            fsync_dir(d)
    finally:
        os.unlink(tmp)
    return _read_key(path)


@contextmanager
def keyed_hashing(run_dir: str | Path) -> Iterator[bytes]:
    """Make ``run_dir``'s key the :func:`active_key` inside the block (yields it)."""
    key = run_key(run_dir)
    token = _ACTIVE.set(key)
    try:
        yield key
    finally:
        _ACTIVE.reset(token)


def active_key() -> bytes | None:
    """The key of the innermost :func:`keyed_hashing` block, or None outside one."""
    return _ACTIVE.get()


__all__ = ["KEY_FILE", "SCHEME", "active_key", "hash_term", "keyed_hashing", "run_key"]
