"""Helpers shared by the corpus readers: path checks, strict decoding, the document builder, person rules.

Every reader reports a problem as a :class:`~toolkit.errors.CorpusError` naming the file, the line or record, and
what is wrong; the helpers here build those messages in one way for all formats.
"""

from __future__ import annotations

import bisect
import codecs
import os
import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar, Union

from toolkit.errors import CorpusError
from toolkit.corpus.model import Corpus, Document, SkippedRecord

PathLike = Union[str, "os.PathLike[str]"]
#: ``None`` (the reader's default), a keyword (reader specific), a regex with one group, or a callable.
PersonRule = Union[str, Callable[[str], Any], None]
#: ``"@row"`` as a field name: no such field; each record is its own value (a generated doc_id, its own individual).
ROW = "@row"
T = TypeVar("T")


class CorpusWarning(UserWarning):
    """A corpus was read, but something was resolved by a documented rule (e.g. overlapping gold mentions dropped)."""


def existing(path: PathLike) -> Path:
    """``path`` as a :class:`Path`; a missing path is a :class:`CorpusError` ("file not found")."""
    p = Path(path)
    if not p.exists():
        raise CorpusError("file not found", p)
    return p


def read_bytes(path: Path) -> bytes:
    if path.is_dir():
        raise CorpusError("expected a file, got a folder", path)
    try:
        return path.read_bytes()
    except OSError as e:
        raise CorpusError(f"cannot read the file: {e.strerror or e}", path) from e


def _line_of(data: bytes, offset: int) -> int:
    """1-based line number of byte ``offset`` in ``data``."""
    return data.count(b"\n", 0, offset) + 1


def decode(data: bytes, path: Path, encoding: str = "utf-8", *, hint: str = "", lenient: bool = False) -> str:
    """Decode ``data`` strictly; an invalid byte is reported with its line and byte offset.

    A leading UTF-8 byte-order mark is dropped. No newline translation happens. With ``lenient=True`` (a reader's
    ``on_error="skip"``) an invalid byte is kept as U+DC80 + byte instead (``errors="surrogateescape"``), so that the
    reader can skip only the records that hold one (see :func:`undecodable`).
    """
    try:
        codec = codecs.lookup(encoding).name
    except LookupError as e:
        raise CorpusError(f"unknown text encoding {encoding!r}", path) from e
    try:
        text = data.decode(encoding, errors="surrogateescape" if lenient else "strict")
    except UnicodeDecodeError as e:
        ascii_lines = not codec.startswith(("utf-16", "utf-32"))
        line = _line_of(data, e.start) if ascii_lines else None
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1)
        bad = data[e.start:e.end].hex(" ")
        where = f"byte offset {e.start}" + (f" (byte {column + 1} of the line)" if ascii_lines else "")
        msg = f"not valid {encoding}: byte(s) {bad} at {where}: {e.reason}"
        raise CorpusError(msg + (f"; {hint}" if hint else ""), path, line=line) from e
    if text.startswith("\ufeff") and codec in ("utf-8", "utf-8-sig"):
        text = text[1:]
    return text


def located(path: Path | str | None, line: int | None = None, record: str | None = None) -> str:
    parts = [str(path)] if path is not None else []
    if line is not None:
        parts.append(f"line {line}")
    if record is not None:
        parts.append(f"record {record}")
    return ", ".join(parts)


def short(value: Any, width: int = 60) -> str:
    """``repr(value)`` cut to ``width`` characters: keys and ids named in a message come from the file, and a
    hostile or broken file can make one megabytes long."""
    if isinstance(value, str) and len(value) > width:
        return repr(value[:width]) + "…"
    text = repr(value)
    return text if len(text) <= width + 2 else text[:width] + "…"


def cut(label: Any, width: int = 60) -> str:
    """``str(label)`` cut to ``width`` characters, for a record label built from an id found in the file."""
    text = str(label)
    return text if len(text) <= width else text[:width] + "…"


def names(values: Any, limit: int = 10) -> str:
    """At most ``limit`` names (each cut by :func:`short`) as a list for a message, with the number left out."""
    values = list(values)
    shown = ", ".join(short(v) for v in values[:limit])
    return f"[{shown}{f', ... ({len(values) - limit} more)' if len(values) > limit else ''}]"


#: Values of every reader's ``on_error`` option.
ON_ERROR = ("strict", "skip")

#: What a lenient decode (``errors="surrogateescape"``) leaves for each byte it cannot read: U+DC80..U+DCFF.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def undecodable(text: str, encoding: str = "utf-8") -> str | None:
    """Why ``text`` (a record of a leniently decoded file) cannot be used, or ``None`` when every byte was read.

    A byte :func:`decode` could not read under ``lenient=True`` is kept as U+DC80 + byte; this names the first one
    (its value and character position, never the text around it).
    """
    m = _ESCAPED_BYTE.search(text)
    if m is None:
        return None
    return f"not valid {encoding}: byte {ord(m.group()) - 0xDC00:02x} at character {m.start()} of the record"


class Builder:
    """Collects documents, rejects a duplicate ``doc_id`` (naming both locations, not the id), builds the corpus.

    With ``on_error="skip"`` a :class:`CorpusError` raised inside :meth:`attempt` is recorded as a
    :class:`~toolkit.corpus.model.SkippedRecord` (location and reason, no text) instead of stopping the read; the
    corpus carries the list (``Corpus.skipped``) and one :class:`CorpusWarning` gives the count.
    """

    def __init__(self, source: Path, on_error: str = "strict"):
        if on_error not in ON_ERROR:
            raise CorpusError(f"on_error must be one of {', '.join(ON_ERROR)} (--on-error), got {on_error!r}", source)
        self.source = source
        self.lenient = on_error == "skip"
        self.docs: list[Document] = []
        self.skipped: list[SkippedRecord] = []
        self._where: dict[str, tuple[Path, int | None, str | None]] = {}

    def attempt(self, fn: Callable[[], T]) -> T | None:
        """``fn()``; under ``on_error="skip"`` a :class:`CorpusError` it raises is recorded and ``None`` returned."""
        try:
            return fn()
        except CorpusError as e:
            if not self.lenient:
                raise
            self.skip(e)
            return None

    def skip(self, error: CorpusError) -> None:
        """Record ``error`` as a skipped record (its location and message; messages never hold record text)."""
        self.skipped.append(SkippedRecord(error.path if error.path is not None else str(self.source), error.line,
                                          error.record, error.message))

    def add(self, doc: Document, *, file: Path | None = None, line: int | None = None,
            record: str | None = None) -> None:
        file = file if file is not None else self.source
        if doc.doc_id in self._where:
            first_file, first_line, first_record = self._where[doc.doc_id]
            where = located(None if first_file == file else first_file, first_line, first_record) or str(first_file)
            raise CorpusError(f"duplicate doc_id (first seen at {where})", file, line=line, record=record)
        self._where[doc.doc_id] = (file, line, record)
        self.docs.append(doc)

    def corpus(self, hint: str = "") -> Corpus:
        if self.skipped:
            warnings.warn(f"{self.source}: skipped {len(self.skipped)} bad record(s) or span(s) (on_error='skip'); "
                          "their locations and reasons are in Corpus.skipped", CorpusWarning, stacklevel=3)
        if not self.docs:
            if self.skipped:
                first = self.skipped[0]
                raise CorpusError(f"the corpus is empty: every record was skipped ({len(self.skipped)}; the first at "
                                  f"{located(first.file, first.line, first.record)}: {first.reason})", self.source)
            raise CorpusError("the corpus is empty (no documents found)" + (f"; {hint}" if hint else ""),
                              self.source)
        return Corpus(self.docs, source=self.source, skipped=self.skipped)


class PersonResolver:
    """Turns a ``person_rule`` option into a function ``key -> person_id``.

    ``rule`` is ``None`` (use ``default``), a keyword from ``keywords``, a regular expression whose first group is
    the person id (applied with :func:`re.search` to the key), or a callable ``key -> person_id``.
    """

    def __init__(self, rule: PersonRule, *, path: Path, default: Callable[[str], str],
                 keywords: Mapping[str, Callable[[str], str]] | None = None):
        self.rule = rule
        self.path = path
        self._regex: re.Pattern[str] | None = None
        keywords = dict(keywords or {})
        if rule is None:
            self._fn: Callable[[str], Any] | None = default
        elif isinstance(rule, str) and rule in keywords:
            self._fn = keywords[rule]
        elif isinstance(rule, str):
            self._fn = None
            try:
                self._regex = re.compile(rule)
            except re.error as e:
                raise CorpusError(f"person_rule {rule!r} is neither one of {sorted(keywords)} nor a valid "
                                  f"regular expression: {e}", path) from e
            if self._regex.groups < 1:
                raise CorpusError(f"person_rule regex {rule!r} has no capturing group; its first group must "
                                  "hold the person id, e.g. r'^(\\d+)-'", path)
        elif callable(rule):
            self._fn = rule
        else:
            raise CorpusError(f"person_rule must be None, a keyword {sorted(keywords)}, a regex string or a "
                              f"callable; got {type(rule).__name__}", path)

    def __call__(self, key: str, *, file: Path, record: str | None = None) -> Any:
        if self._regex is not None:
            m = self._regex.search(key)
            if m is None or m.group(1) is None:
                raise CorpusError(f"person_rule {self._regex.pattern!r} does not match {short(key)} (its first group "
                                  "must capture the person id)", file, record=record)
            return m.group(1)
        assert self._fn is not None
        try:
            return self._fn(key)
        except CorpusError:
            raise
        except Exception as e:  # a user callable: report where it failed
            raise CorpusError(f"person_rule raised {type(e).__name__} on {short(key)}", file, record=record) from e


def resolve_overlaps(cands: list[tuple[int, int, str, str]], *, strict: bool, path: Path,
                      record: str) -> tuple[list[tuple[int, int, str]], int]:
    """Drop overlapping spans deterministically: keep the longer span, then the earlier start.

    ``cands`` holds ``(start, end, label, name)`` where ``name`` identifies the mention in messages. Returns the kept
    ``(start, end, label)`` sorted by start and the number dropped. With ``strict=True`` the first overlap raises.
    """
    order = sorted(cands, key=lambda c: (-(c[1] - c[0]), c[0], c[1], c[2], c[3]))
    kept = _DisjointSpans()
    dropped = 0
    for c in order:
        clash = kept.clash(c[0], c[1])
        if clash is None:
            kept.insert(c)
            continue
        if strict:
            raise CorpusError(f"overlapping mentions {clash[3]} [{clash[0]}, {clash[1]}) {clash[2]} and {c[3]} "
                              f"[{c[0]}, {c[1]}) {c[2]}; pass strict=False to keep the longer one", path,
                              record=record)
        dropped += 1
    return [(s, e, label) for s, e, label, _ in kept], dropped


class _DisjointSpans:
    """Non-overlapping spans sorted by start (so by end too): only a new span's two neighbours can overlap it.

    Held in blocks of at most ``2 * BLOCK`` spans (with their starts, for bisection), each block found by bisection
    on the blocks' first starts, so an insert moves at most a block, not the whole list: a flat sorted list made
    200,000 tags of one long document cost O(n²) memory moves (11 s).
    """

    BLOCK = 256

    def __init__(self) -> None:
        self.blocks: list[list[tuple[int, int, str, str]]] = []
        self.starts: list[list[int]] = []
        self.firsts: list[int] = []

    def __iter__(self) -> Iterator[tuple[int, int, str, str]]:
        return (span for block in self.blocks for span in block)

    def clash(self, start: int, end: int) -> tuple[int, int, str, str] | None:
        if not self.blocks:
            return None
        b = max(bisect.bisect_right(self.firsts, start) - 1, 0)
        block = self.blocks[b]
        i = bisect.bisect_right(self.starts[b], start)
        if i > 0 and block[i - 1][1] > start:
            return block[i - 1]
        after = block[i] if i < len(block) else self.blocks[b + 1][0] if b + 1 < len(self.blocks) else None
        return after if after is not None and after[0] < end else None

    def insert(self, span: tuple[int, int, str, str]) -> None:
        if not self.blocks:
            self.blocks, self.starts, self.firsts = [[span]], [[span[0]]], [span[0]]
            return
        b = max(bisect.bisect_right(self.firsts, span[0]) - 1, 0)
        block, starts = self.blocks[b], self.starts[b]
        i = bisect.bisect_right(starts, span[0])
        block.insert(i, span)
        starts.insert(i, span[0])
        self.firsts[b] = starts[0]
        if len(block) > 2 * self.BLOCK:
            half = self.BLOCK
            self.blocks[b:b + 1] = [block[:half], block[half:]]
            self.starts[b:b + 1] = [starts[:half], starts[half:]]
            self.firsts[b:b + 1] = [starts[0], starts[half]]


def warn_dropped(path: Path, dropped: Mapping[str, int], what: str) -> None:
    if not dropped:
        return
    total = sum(dropped.values())
    shown = ", ".join(f"{doc}: {n}" for doc, n in list(dropped.items())[:10])
    more = f", ... ({len(dropped) - 10} more documents)" if len(dropped) > 10 else ""
    warnings.warn(f"{path}: dropped {total} overlapping {what}(s) in {len(dropped)} document(s), keeping the longer "
                  f"span (then the earlier start) [{shown}{more}]; pass strict=True to make this an error",
                  CorpusWarning, stacklevel=3)


def mismatch_hint(text: str, surface: str, start: int, window: int = 10_000) -> str:
    """Where ``surface`` does occur near ``start`` in ``text``, as a shift (``"; it occurs at offset 120 (shift +3)"``).

    For an offset/text mismatch of a gold span: the message must not print either string (they are personal data),
    but a constant shift is the usual cause (another line-end convention, a byte-order mark) and the nearest
    occurrence within ``window`` characters shows it. Two substring searches, so a long document or a long span
    costs time linear in the window, whatever the number of mismatches.
    """
    if not surface:
        return ""
    before = text.rfind(surface, max(0, start - window), start + len(surface) - 1)
    after = text.find(surface, start + 1, start + window + len(surface))
    found = [pos for pos in (before, after) if pos != -1]
    if not found:
        return f"; the annotated text does not occur within {window:,} characters of it"
    best = min(found, key=lambda pos: (abs(pos - start), pos))
    return f"; it occurs at offset {best} (shift {best - start:+d})"
