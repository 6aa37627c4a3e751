"""Manual name review (methods.md §7.4, paper 003 §4.3): the append-only review file.

**Review file** (JSON Lines, one decision per line, UTF-8)::

    {"format_version": 1, "token": "okafor", "decision": "name", "reviewer": "alice",
     "timestamp": "2025-01-31T10:02:03.123456+00:00", "context": "seen by nurse <mask>.", "score": 0.41,
     "session": "9f2c0a41d3e7"}

* ``decision``: ``name`` | ``not_name`` | ``unsure`` | ``undo`` (``undo`` withdraws the latest still-standing decision
  on ``token``: the one before it, if any, stands again);
* ``context``: one sentence that produced the candidate, with ``<mask>`` where the token was predicted (the name itself
  is only in ``token``); ``score``: the candidate's name-likeness score when decided; ``session``: a random id per
  review session (a browser tab, a notebook run).

**Durability.** A decision is acknowledged (:meth:`ReviewStore.append` returns) only once its whole line is on disk:
``write`` of the line + ``fsync``, under an exclusive ``flock`` of the file (POSIX). When the write or the ``fsync``
fails (disk full, quota, I/O error) the file is truncated back to its length before the append and
:class:`ReviewWriteError` is raised: nothing was recorded, the caller (the review session) keeps its previous state
and the reviewer can decide again. So a crash, a killed kernel or a closed tab loses nothing that was acknowledged,
and the next review session replays the file and resumes.

**Torn tails.** A crash (or a failure whose truncation failed too) can leave a last line without its newline; it was
never acknowledged. Readers skip an unfinished last line with a :class:`ReviewFileWarning`; **every** append first
looks at the end of the file and cuts such a line (counted in :attr:`ReviewStore.n_torn_cut`, with a warning) before
writing, so one failed write never glues itself to the next decision. A last line that is a complete record and
lacks only its newline is kept (readers count it) and gets its newline. A damaged line anywhere else, or a line of
a **newer** ``format_version`` than this toolkit writes, is a :class:`~toolkit.errors.ToolkitError` naming the file
and line (never silently skipped).

One file holds one review (one reviewer, possibly over several review sessions); reviews are compared and merged by
:mod:`toolkit.review.compare`, and :class:`~toolkit.review.session.ReviewSession` is the review state over a file.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.io import make_private_dir

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; one writer per file is then the caller's business
    fcntl = None

FORMAT_VERSION = 1
DECISIONS = ("name", "not_name", "unsure")
UNDO = "undo"
REQUIRED_FIELDS = ("format_version", "token", "decision", "reviewer", "timestamp")
RECORD_FIELDS = ("format_version", "token", "decision", "reviewer", "timestamp", "context", "score", "session")

#: Bytes read at a time when looking for the start of the file's last line.
_TAIL_BLOCK = 1 << 16


class ReviewWriteError(ToolkitError, OSError):
    """A decision could not be written durably (disk full, I/O error); nothing was recorded. ``errno`` is the
    operating system's."""


class ReviewFileWarning(UserWarning):
    """A review file was read, but an unfinished last line (a write cut by a crash) was skipped."""


def _fail(path: Path, line: int, msg: str) -> ToolkitError:
    return ToolkitError(f"{path}, line {line}: {msg}")


def _check_record(rec: Any, path: Path, line: int) -> dict:
    if not isinstance(rec, dict):
        raise _fail(path, line, f"expected a JSON object, got {type(rec).__name__}")
    version = rec.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise _fail(path, line, f"missing or non-integer 'format_version' ({version!r}); not a review file?")
    if version > FORMAT_VERSION:
        raise _fail(path, line, f"review file format version {version} is newer than this toolkit's "
                                f"({FORMAT_VERSION}); upgrade the toolkit to read it (nothing was changed)")
    if version < 1:
        raise _fail(path, line, f"invalid format_version {version}")
    missing = [f for f in REQUIRED_FIELDS if f not in rec]
    if missing:
        raise _fail(path, line, f"missing field(s) {missing}")
    if not isinstance(rec["token"], str) or not rec["token"]:
        raise _fail(path, line, f"'token' must be a non-empty string, got a {type(rec['token']).__name__}")
    if rec["decision"] not in DECISIONS + (UNDO,):
        raise _fail(path, line, f"unknown decision (a {type(rec['decision']).__name__} of {len(str(rec['decision']))} "
                                f"characters); expected one of {DECISIONS + (UNDO,)}")
    return rec


def _parse(data: bytes, path: Path) -> tuple[list[dict], int | None]:
    """Records of a review file's bytes, and the number of an unfinished last line (``None``: none)."""
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    out = []
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _fail(path, i, f"not a JSON record ({exc}); the file is damaged — fix or remove this line") from None
        out.append(_check_record(rec, path, i))
    if tail.strip():
        try:
            rec = json.loads(tail.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return out, len(lines) + 1
        out.append(_check_record(rec, path, len(lines) + 1))
    return out, None


def read_review(path: str | Path) -> list[dict]:
    """All records of a review file, in order (a missing file is an empty review). See the module docstring."""
    p = Path(path)
    if not p.exists():
        return []
    out, torn = _parse(p.read_bytes(), p)
    if torn is not None:
        warnings.warn(f"{p}, line {torn}: unfinished last line (a write interrupted by a crash) skipped; it was "
                      f"never acknowledged", ReviewFileWarning, stacklevel=2)
    return out


class ReviewStore:
    """Append-only access to one review file (durable and crash-safe, see the module docstring).

    ``n_torn_cut``: unfinished last lines this store cut before an append (each reported by a
    :class:`ReviewFileWarning`).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.n_torn_cut = 0
        self._checked = False

    def records(self) -> list[dict]:
        return read_review(self.path)

    def _prepare(self) -> None:
        """Before the first append: create the file (0600) and its folder, or refuse a damaged file or one of a newer
        format (its unfinished last line, if any, is cut by :meth:`append`)."""
        if self._checked:
            return
        make_private_dir(self.path.parent)
        if not self.path.exists():
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                os.close(fd)
            except FileExistsError:  # created meanwhile by another session: an empty or valid file, checked below
                pass
            else:
                dfd = os.open(self.path.parent, os.O_RDONLY)
                try:
                    os.fsync(dfd)  # the new directory entry survives a crash too
                finally:
                    os.close(dfd)
        _parse(self.path.read_bytes(), self.path)
        self._checked = True

    def _last_line(self, fd: int, end: int) -> tuple[int, bytes]:
        """Offset and bytes of the file's last line (the bytes after its last newline; ``end`` = file length)."""
        pos, tail = end, b""
        while pos > 0:
            step = min(_TAIL_BLOCK, pos)
            pos -= step
            os.lseek(fd, pos, os.SEEK_SET)
            block = os.read(fd, step)
            nl = block.rfind(b"\n")
            if nl >= 0:
                return pos + nl + 1, block[nl + 1:] + tail
            tail = block + tail
        return 0, tail

    def _settle_tail(self, fd: int) -> tuple[int, bytes]:
        """Where the next line goes and what must precede it: cut an unfinished last line (counted, warned), or
        complete a last record that only lost its newline. Returns ``(length to restore on failure, prefix)``."""
        end = os.lseek(fd, 0, os.SEEK_END)
        if end == 0:
            return 0, b""
        os.lseek(fd, end - 1, os.SEEK_SET)
        if os.read(fd, 1) == b"\n":
            return end, b""
        start, tail = self._last_line(fd, end)
        try:
            rec = json.loads(tail.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            rec = None
        line = _count_newlines(fd, start) + 1
        if rec is not None:  # a complete record that only lost its newline: keep it, as readers do
            _check_record(rec, self.path, line)
            return end, b"\n"
        os.ftruncate(fd, start)
        os.fsync(fd)
        self.n_torn_cut += 1
        warnings.warn(f"{self.path}, line {line}: unfinished last line ({end - start} bytes, a write that never "
                      f"completed) cut before appending; it was never acknowledged", ReviewFileWarning, stacklevel=3)
        return start, b""

    def append(self, record: dict) -> dict:
        """Validate ``record`` and append it as one line; returns only once the line is written and fsynced.

        Raises :class:`ReviewWriteError` (nothing recorded, the file as before) when the line cannot be written.
        """
        rec = {"format_version": FORMAT_VERSION, **record}
        _check_record(rec, self.path, 0)
        line = (json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8")
        self._prepare()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)  # one append at a time: no tail is cut while another is written
                except OSError:  # a file system without locks (some network mounts): one writer, as on Windows
                    pass
            base = None
            try:
                base, prefix = self._settle_tail(fd)
                _write_all(fd, prefix + line)
                os.fsync(fd)
            except OSError as exc:
                restored = base is None or _truncate(fd, base)
                msg = (f"{self.path}: the decision was not saved ({exc.strerror or exc}); "
                       + ("the file is as it was before" if restored else "a partial line may remain, the next append "
                          "cuts it") + ", nothing was recorded")
                raise ReviewWriteError(*((exc.errno,) if exc.errno else ()), msg) from exc
        finally:
            os.close(fd)  # releases the lock
        return rec


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written (a write may write fewer bytes than asked)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(0, "the write made no progress")
        view = view[n:]


def _truncate(fd: int, length: int) -> bool:
    """Cut the file back to ``length`` and fsync; ``False`` when that fails too."""
    try:
        os.ftruncate(fd, length)
        os.fsync(fd)
    except OSError:
        return False
    return True


def _count_newlines(fd: int, end: int) -> int:
    """Newlines in the file's first ``end`` bytes (the line number of a warning)."""
    os.lseek(fd, 0, os.SEEK_SET)
    n, left = 0, end
    while left > 0:
        block = os.read(fd, min(_TAIL_BLOCK, left))
        if not block:
            break
        n += block.count(b"\n")
        left -= len(block)
    return n


def replay(records: Iterable[dict]) -> tuple[dict[str, dict], list[dict]]:
    """Current decision per token and the standing decisions in order, after applying every ``undo``."""
    stacks: dict[str, list[dict]] = {}
    standing: list[dict] = []
    for rec in records:
        tok = rec["token"]
        if rec["decision"] == UNDO:
            stack = stacks.get(tok)
            if stack:
                gone = stack.pop()
                for j in range(len(standing) - 1, -1, -1):
                    if standing[j] is gone:
                        del standing[j]
                        break
        else:
            stacks.setdefault(tok, []).append(rec)
            standing.append(rec)
    return {t: s[-1] for t, s in stacks.items() if s}, standing


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def load_decisions(path: str | Path, *, reviewer: str | None = None) -> pd.DataFrame:
    """Current decisions of a review file (after undos): token, decision, reviewer, timestamp, context, score."""
    recs = read_review(path)
    if reviewer is not None:
        recs = [r for r in recs if r["reviewer"] == reviewer]
    current, _ = replay(recs)
    cols = ["token", "decision", "reviewer", "timestamp", "context", "score"]
    return pd.DataFrame([{c: r.get(c) for c in cols} for r in current.values()], columns=cols)


def read_script(path: str | Path) -> pd.DataFrame:
    """A scripted review: CSV with ``token,decision`` columns, or a review file (its current decisions)."""
    p = Path(path)
    if not p.is_file():
        raise ToolkitError(f"{p}: scripted review not found")
    if p.suffix.lower() == ".jsonl":
        return load_decisions(p)
    try:
        frame = pd.read_csv(p, dtype=str, keep_default_na=False, encoding="utf-8")
    except (UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise ToolkitError(f"{p}: cannot read the scripted review ({exc})") from None
    if not {"token", "decision"} <= set(frame.columns):
        raise ToolkitError(f"{p}: a scripted review needs 'token' and 'decision' columns, got {list(frame.columns)}")
    return frame


__all__ = ["DECISIONS", "FORMAT_VERSION", "RECORD_FIELDS", "UNDO", "ReviewFileWarning", "ReviewStore", "ReviewWriteError",
           "load_decisions", "now_iso", "read_review", "read_script", "replay"]
