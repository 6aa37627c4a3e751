"""Readers and a writer for corpus files (SPEC.md §1).

Every reader returns a :class:`~toolkit.corpus.model.Corpus` and reports any problem as a
:class:`~toolkit.errors.CorpusError` naming the file, the line or record, and what is wrong. Exceptions of
the parsing libraries (``json``, ``csv``, ``xml.etree``, ``email``, codecs) never escape bare: they are re-raised as
``CorpusError`` chained with ``from``.

Supported formats (:data:`FORMATS`):

========== ===================================================================================================
``jsonl``  the native format, one document per line (:func:`read_jsonl`, :func:`write_jsonl`)
``csv``    a CSV table with a header (:func:`read_csv`)
``i2b2``   i2b2 2006 / n2c2 2014 de-identification XML, a file or a folder (:func:`read_i2b2`)
``tab``    Text Anonymization Benchmark JSON (:func:`read_tab`)
``mbox``   a Unix mbox file (:func:`read_mbox`)
``maildir`` a Maildir folder with ``cur/`` and ``new/`` (:func:`read_maildir`)
``txt``    a folder of plain-text files, one document per file (:func:`read_txt_folder`)
========== ===================================================================================================

Text is kept exactly as stored: files are read as bytes and decoded without newline translation. The only
exceptions are documented where they happen: a leading UTF-8 byte-order mark is dropped (it is an encoding marker,
not text), XML parsers normalise line ends (see :func:`read_i2b2`), and e-mail headers are RFC 2047-decoded and
unfolded (see :func:`read_mbox`).
"""

from __future__ import annotations

import bisect
import codecs
import contextlib
import csv
import difflib
import email
import email.policy
import email.utils
import inspect
import io
import json
import mailbox
import os
import re
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator, Mapping
from email.headerregistry import HeaderRegistry, UnstructuredHeader
from email.message import EmailMessage
from pathlib import Path, PurePosixPath
from typing import Any, Union

from toolkit.io import atomic_path
from toolkit.errors import CorpusError
from toolkit.corpus.model import Corpus, Document, make_document

__all__ = [
    "FORMATS",
    "CorpusWarning",
    "detect_format",
    "load_corpus",
    "read_csv",
    "read_i2b2",
    "read_jsonl",
    "read_maildir",
    "read_mbox",
    "read_tab",
    "read_txt_folder",
    "write_jsonl",
]

PathLike = Union[str, "os.PathLike[str]"]
#: ``None`` (the reader's default), a keyword (reader specific), a regex with one group, or a callable.
PersonRule = Union[str, Callable[[str], Any], None]

FORMATS: tuple[str, ...] = ("jsonl", "csv", "i2b2", "tab", "mbox", "maildir", "txt")

_JSONL_FIELDS = ("doc_id", "person_id", "text", "spans", "split", "labels")
_JSONL_REQUIRED = ("doc_id", "person_id", "text")
_MAIL_HEADERS = ("From", "To", "Cc", "Bcc", "Subject", "Date")


class CorpusWarning(UserWarning):
    """A corpus was read, but something was resolved by a documented rule (e.g. overlapping gold mentions dropped)."""


# ----------------------------------------------------------------------------------------------------------------
# shared helpers
# ----------------------------------------------------------------------------------------------------------------


def _existing(path: PathLike) -> Path:
    """``path`` as a :class:`Path`; a missing path is a :class:`CorpusError` ("file not found")."""
    p = Path(path)
    if not p.exists():
        raise CorpusError("file not found", p)
    return p


def _read_bytes(path: Path) -> bytes:
    if path.is_dir():
        raise CorpusError("expected a file, got a folder", path)
    try:
        return path.read_bytes()
    except OSError as e:
        raise CorpusError(f"cannot read the file: {e.strerror or e}", path) from e


def _line_of(data: bytes, offset: int) -> int:
    """1-based line number of byte ``offset`` in ``data``."""
    return data.count(b"\n", 0, offset) + 1


def _decode(data: bytes, path: Path, encoding: str = "utf-8", *, hint: str = "") -> str:
    """Decode ``data`` strictly; an invalid byte is reported with its line and byte offset.

    A leading UTF-8 byte-order mark is dropped. No newline translation happens.
    """
    try:
        codec = codecs.lookup(encoding).name
    except LookupError as e:
        raise CorpusError(f"unknown text encoding {encoding!r}", path) from e
    try:
        text = data.decode(encoding)
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


def _located(path: Path | None, line: int | None = None, record: str | None = None) -> str:
    parts = [str(path)] if path is not None else []
    if line is not None:
        parts.append(f"line {line}")
    if record is not None:
        parts.append(f"record {record}")
    return ", ".join(parts)


class _Builder:
    """Collects documents, rejecting a duplicate ``doc_id`` with both locations, and builds the corpus."""

    def __init__(self, source: Path):
        self.source = source
        self.docs: list[Document] = []
        self._where: dict[str, str] = {}

    def add(self, doc: Document, *, file: Path | None = None, line: int | None = None,
            record: str | None = None) -> None:
        file = file if file is not None else self.source
        if doc.doc_id in self._where:
            raise CorpusError(f"duplicate doc_id {doc.doc_id!r} (first seen at {self._where[doc.doc_id]})",
                              file, line=line, record=record)
        self._where[doc.doc_id] = _located(file, line, record)
        self.docs.append(doc)

    def corpus(self, hint: str = "") -> Corpus:
        if not self.docs:
            raise CorpusError("the corpus is empty (no documents found)" + (f"; {hint}" if hint else ""),
                              self.source)
        return Corpus(self.docs, source=self.source)


class _PersonRule:
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
                raise CorpusError(f"person_rule {self._regex.pattern!r} does not match {key!r} (its first group "
                                  "must capture the person id)", file, record=record)
            return m.group(1)
        assert self._fn is not None
        try:
            return self._fn(key)
        except CorpusError:
            raise
        except Exception as e:  # a user callable: report where it failed
            raise CorpusError(f"person_rule raised {type(e).__name__} on {key!r}: {e}", file, record=record) from e


def _resolve_overlaps(cands: list[tuple[int, int, str, str]], *, strict: bool, path: Path,
                      record: str) -> tuple[list[tuple[int, int, str]], int]:
    """Drop overlapping spans deterministically: keep the longer span, then the earlier start.

    ``cands`` holds ``(start, end, label, name)`` where ``name`` identifies the mention in messages. Returns the kept
    ``(start, end, label)`` sorted by start and the number dropped. With ``strict=True`` the first overlap raises.
    """
    order = sorted(cands, key=lambda c: (-(c[1] - c[0]), c[0], c[1], c[2], c[3]))
    # kept spans sorted by start (non-overlapping, so sorted by end too): only the two neighbours can clash
    kept: list[tuple[int, int, str, str]] = []
    starts: list[int] = []
    dropped = 0
    for c in order:
        i = bisect.bisect_right(starts, c[0])
        clash = kept[i - 1] if i > 0 and kept[i - 1][1] > c[0] else \
            kept[i] if i < len(kept) and kept[i][0] < c[1] else None
        if clash is None:
            kept.insert(i, c)
            starts.insert(i, c[0])
            continue
        if strict:
            raise CorpusError(f"overlapping mentions {clash[3]} [{clash[0]}, {clash[1]}) {clash[2]} and {c[3]} "
                              f"[{c[0]}, {c[1]}) {c[2]}; pass strict=False to keep the longer one", path,
                              record=record)
        dropped += 1
    return sorted((s, e, label) for s, e, label, _ in kept), dropped


def _warn_dropped(path: Path, dropped: Mapping[str, int], what: str) -> None:
    if not dropped:
        return
    total = sum(dropped.values())
    shown = ", ".join(f"{doc}: {n}" for doc, n in list(dropped.items())[:10])
    more = f", ... ({len(dropped) - 10} more documents)" if len(dropped) > 10 else ""
    warnings.warn(f"{path}: dropped {total} overlapping {what}(s) in {len(dropped)} document(s), keeping the longer "
                  f"span (then the earlier start) [{shown}{more}]; pass strict=True to make this an error",
                  CorpusWarning, stacklevel=3)


def _json_object_no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r} in a JSON object")
        out[key] = value
    return out


# ----------------------------------------------------------------------------------------------------------------
# JSONL (native)
# ----------------------------------------------------------------------------------------------------------------


def read_jsonl(path: PathLike) -> Corpus:
    """Read the native JSON Lines format: one JSON object per line.

    Each object has exactly the fields ``doc_id``, ``person_id``, ``text`` (required), and optionally ``spans`` (a
    list of ``{"start", "end", "label"}`` with character offsets, ``end`` exclusive), ``split`` and ``labels`` (an
    object). Blank lines are skipped.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.jsonl`` file (UTF-8).

    Returns
    -------
    Corpus

    Raises
    ------
    CorpusError
        With the file and line: invalid JSON, a line that is not an object, a missing or unknown field (with a
        suggestion for typos such as ``personid``), a duplicate key, bad spans (outside the text, overlapping),
        non-UTF-8 bytes (with the byte offset), an empty corpus or a duplicate ``doc_id``.

    See Also
    --------
    write_jsonl : writes this format.
    """
    p = _existing(path)
    text = _decode(_read_bytes(p), p, hint="re-encode the file as UTF-8")
    builder = _Builder(p)
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip(" \t\r"):
            continue
        obj = _parse_json_line(line, p, lineno)
        builder.add(_jsonl_document(obj, p, lineno), line=lineno)
    return builder.corpus()


def _parse_json_line(line: str, path: Path, lineno: int) -> dict[str, Any]:
    try:
        obj = json.loads(line, object_pairs_hook=_json_object_no_duplicates)
    except json.JSONDecodeError as e:
        raise CorpusError(f"invalid JSON: {e.msg} (column {e.colno})", path, line=lineno) from e
    except ValueError as e:  # duplicate key, or an integer with more digits than Python converts
        raise CorpusError(str(e), path, line=lineno) from e
    except RecursionError as e:  # "[[[[..." nested deeper than the parser's recursion limit
        raise CorpusError("invalid JSON: nested too deeply", path, line=lineno) from e
    if not isinstance(obj, dict):
        raise CorpusError(f"expected a JSON object with fields {', '.join(_JSONL_FIELDS)}; got a "
                          f"{type(obj).__name__}", path, line=lineno)
    return obj


def _jsonl_document(obj: dict[str, Any], path: Path, lineno: int) -> Document:
    problems = []
    unknown = [k for k in obj if k not in _JSONL_FIELDS]
    if unknown:
        names = []
        for k in unknown:
            close = difflib.get_close_matches(k, _JSONL_FIELDS, n=1)
            names.append(f"{k!r} (did you mean {close[0]!r}?)" if close else repr(k))
        problems.append(f"unknown field(s) {', '.join(names)}; allowed fields: {', '.join(_JSONL_FIELDS)}")
    missing = [k for k in _JSONL_REQUIRED if k not in obj]
    if missing:
        problems.append(f"missing field(s) {', '.join(repr(k) for k in missing)}")
    if problems:
        raise CorpusError("; ".join(problems), path, line=lineno)
    spans = obj.get("spans")
    if spans is not None and not isinstance(spans, list):
        raise CorpusError(f"field 'spans' must be a list of {{start, end, label}} objects, got "
                          f"{type(spans).__name__}", path, line=lineno)
    return make_document(obj["doc_id"], obj["person_id"], obj["text"], spans, obj.get("split"), obj.get("labels"),
                         path=path, line=lineno)


def write_jsonl(corpus: Iterable[Document], path: PathLike) -> Path:
    """Write documents in the native JSON Lines format, atomically.

    One document per line, fields in the order ``doc_id, person_id, text, spans, split, labels`` (``split`` and
    ``labels`` omitted when ``None``/empty), UTF-8 without ASCII escaping, ``\\n`` line ends. The file is written to a
    temporary file in the same folder and moved into place (:func:`toolkit.io.atomic_path`), so a reader never sees a
    half written file and an existing file survives a failure. A new file is owner-only (0600); an existing file keeps
    its permissions.

    Parameters
    ----------
    corpus : Corpus or iterable of Document
        The documents (at least one).
    path : str or os.PathLike
        Destination; missing parent folders are created.

    Returns
    -------
    Path
        The written file.
    """
    p = Path(path)
    docs = list(corpus)
    if not docs:
        raise CorpusError("refusing to write an empty corpus (it could not be read back)", p)
    lines = [_dump_document(doc, p) for doc in docs]
    with atomic_path(p) as tmp:
        with open(tmp, "wb") as fh:
            fh.writelines(lines)
    return p


def _dump_document(doc: Document, path: Path) -> bytes:
    if not isinstance(doc, Document):
        raise CorpusError(f"expected a Document, got {type(doc).__name__}", path)
    try:
        return (json.dumps(doc.to_dict(), ensure_ascii=False) + "\n").encode("utf-8")
    except (TypeError, ValueError) as e:  # UnicodeEncodeError (lone surrogates) is a ValueError
        raise CorpusError(f"cannot write document as JSON: {e}", path, record=doc.doc_id) from e


# ----------------------------------------------------------------------------------------------------------------
# CSV
# ----------------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _csv_field_limit(limit: int = 2**31 - 1) -> Iterator[None]:
    """Allow long documents in one CSV field (the csv module's default limit is 128 KiB); restored afterwards."""
    old = csv.field_size_limit()
    csv.field_size_limit(max(old, limit))
    try:
        yield
    finally:
        csv.field_size_limit(old)


def _csv_records(reader: Any, path: Path) -> Iterator[tuple[list[str], int]]:
    """Yield ``(row, starting line)`` for each non-blank CSV record; ``csv.Error`` becomes :class:`CorpusError`."""
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise CorpusError(f"malformed CSV: {e}", path, line=reader.line_num) from e
        if row:
            yield row, start


def read_csv(path: PathLike, *, text_column: str = "text", doc_id_column: str | None = "doc_id",
             person_id_column: str = "person_id", split_column: str | None = "split",
             spans_column: str | None = "spans", label_columns: str | Iterable[str] = ()) -> Corpus:
    """Read a CSV table with a header row, one document per record.

    Quoted fields may hold newlines and commas (RFC 4180); the text is kept exactly, line ends included.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.csv`` file (UTF-8; a byte-order mark is allowed).
    text_column, person_id_column : str
        Required columns.
    doc_id_column : str or None, default "doc_id"
        Optional. When the file has no such column, ``doc_id = "<file stem>-<record number>"`` (records counted
        from 1, header excluded).
    split_column : str or None, default "split"
        Optional; an empty cell means no split.
    spans_column : str or None, default "spans"
        Optional; a JSON list of ``{"start", "end", "label"}`` (empty cell: no spans).
    label_columns : str or iterable of str
        Columns copied verbatim (as strings) into ``labels``; required when given.

    Optional columns are used when present; naming an optional column other than its default that the file lacks
    is an error (so a typo is not silently ignored). Pass ``None`` to ignore a column.

    Returns
    -------
    Corpus

    Raises
    ------
    CorpusError
        Naming the file and the record (``record N``, its starting ``line L``): missing columns (listing the
        columns the file has), a record with the wrong number of fields, malformed quoting, invalid spans JSON,
        invalid spans, non-UTF-8 bytes, an empty corpus, a duplicate ``doc_id``.
    """
    p = _existing(path)
    text = _decode(_read_bytes(p), p, hint="re-encode the file as UTF-8")
    labels = (label_columns,) if isinstance(label_columns, str) else tuple(label_columns)
    builder = _Builder(p)
    with _csv_field_limit():
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
        records = _csv_records(reader, p)
        first = next(records, None)
        if first is None:
            raise CorpusError("the corpus is empty (the CSV file has no header and no records)", p)
        header, header_line = first
        columns = _csv_columns(header, header_line, p, text_column=text_column, person_id_column=person_id_column,
                               doc_id_column=doc_id_column, split_column=split_column, spans_column=spans_column,
                               label_columns=labels)
        for number, (row, line) in enumerate(records, start=1):
            doc = _csv_document(row, header, columns, p, number, line)
            builder.add(doc, line=line, record=str(number))
    return builder.corpus(hint="the CSV file has a header but no records")


def _csv_columns(header: list[str], line: int, path: Path, *, text_column: str, person_id_column: str,
                 doc_id_column: str | None, split_column: str | None, spans_column: str | None,
                 label_columns: tuple[str, ...]) -> dict[str, Any]:
    """Map roles (text, person_id, ...) to column indices, checking that required columns exist."""
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise CorpusError(f"duplicate column name(s) in the header: {', '.join(map(repr, dupes))}", path, line=line)
    index = {name: i for i, name in enumerate(header)}
    defaults = {"doc_id": "doc_id", "split": "split", "spans": "spans"}
    optional = {"doc_id": doc_id_column, "split": split_column, "spans": spans_column}
    required = [text_column, person_id_column, *label_columns]
    required += [name for role, name in optional.items() if name is not None and name != defaults[role]]
    missing = [name for name in required if name not in index]
    if missing:
        raise CorpusError(f"missing column(s) {', '.join(map(repr, missing))}; the file has columns: "
                          f"{', '.join(map(repr, header))}", path, line=line)
    out: dict[str, Any] = {"text": index[text_column], "person_id": index[person_id_column],
                           "labels": {name: index[name] for name in label_columns}}
    for role, name in optional.items():
        out[role] = index.get(name) if name is not None else None
    return out


def _csv_document(row: list[str], header: list[str], columns: dict[str, Any], path: Path, number: int,
                  line: int) -> Document:
    def fail(msg: str) -> CorpusError:
        return CorpusError(msg, path, line=line, record=str(number))

    if len(row) != len(header):
        raise fail(f"the record has {len(row)} field(s) but the header has {len(header)}")
    doc_id = row[columns["doc_id"]] if columns["doc_id"] is not None else f"{path.stem}-{number}"
    split = row[columns["split"]] if columns["split"] is not None else None
    spans: Any = None
    if columns["spans"] is not None and row[columns["spans"]].strip():
        try:
            spans = json.loads(row[columns["spans"]])
        except json.JSONDecodeError as e:
            raise fail(f"column {header[columns['spans']]!r} is not valid JSON: {e.msg} (column {e.colno})") from e
        except (ValueError, RecursionError) as e:  # an over-long integer; nesting beyond the recursion limit
            raise fail(f"column {header[columns['spans']]!r} is not valid JSON: "
                       f"{'nested too deeply' if isinstance(e, RecursionError) else e}") from e
        if not isinstance(spans, list):
            raise fail(f"column {header[columns['spans']]!r} must hold a JSON list, got {type(spans).__name__}")
    labels = {name: row[i] for name, i in columns["labels"].items()}
    return make_document(doc_id, row[columns["person_id"]], row[columns["text"]], spans, split or None, labels,
                         path=path, line=line, record=str(number))


# ----------------------------------------------------------------------------------------------------------------
# i2b2 / n2c2 XML
# ----------------------------------------------------------------------------------------------------------------


def read_i2b2(path: PathLike, *, person_rule: PersonRule = None, split: str | None = None,
              strict: bool = False) -> Corpus:
    """Read i2b2 / n2c2 de-identification XML: one file, or a folder searched recursively for ``*.xml``.

    The style of each file is detected from its content:

    * **2006** (i2b2 de-identification challenge): ``<ROOT><RECORD ID="..."><TEXT> ... <PHI TYPE="PATIENT">...</PHI>
      ...</TEXT></RECORD></ROOT>``. Each ``RECORD`` is a document with ``doc_id`` = its ``ID``; the plain text is
      rebuilt from the text and tails around the inline ``PHI`` tags, and each ``PHI`` element becomes a gold span
      labelled with its ``TYPE``. Default person: the record ``ID``.
    * **2014** (n2c2 de-identification track): ``<deIdi2b2><TEXT><![CDATA[...]]></TEXT><TAGS><NAME id="P0"
      start="16" end="20" text="..." TYPE="PATIENT"/>...</TAGS></deIdi2b2>``. One document per file with ``doc_id``
      = the file stem; each tag is a span labelled with its ``TYPE`` (the element name when ``TYPE`` is absent).
      Default person: the part of the stem before the first ``-`` (n2c2 files are ``<patient>-<record>.xml``, so
      ``110-01.xml`` is about person ``110``).

    Parameters
    ----------
    path : str or os.PathLike
        An ``.xml`` file or a folder (files are read in sorted path order).
    person_rule : None, str or callable
        How to get ``person_id`` from the key (the record ``ID`` for 2006, the file stem for 2014): ``None`` for the
        defaults above, a regular expression whose first group is the person id (:func:`re.search`), or a callable
        ``key -> person_id``.
    split : str, optional
        A split name given to every document.
    strict : bool, default False
        Overlapping 2014 tags are resolved by keeping the longer span (then the earlier start) with a
        :class:`CorpusWarning` giving the counts; ``strict=True`` makes an overlap an error.

    Returns
    -------
    Corpus

    Notes
    -----
    **Line ends.** The XML parser normalises ``\\r\\n`` and lone ``\\r`` to ``\\n`` (XML 1.0 §2.11), inside CDATA too.
    The document text is the text *as the parser returns it*, and the 2014 offsets are interpreted on that text,
    which is how the n2c2 tools and offsets count. Every 2014 tag with a ``text`` attribute is checked against
    ``text[start:end]``, so an offset shift cannot go unnoticed. Because XML also normalises whitespace in attribute
    values (a newline in ``text="..."`` reads as a space), the comparison treats tab, ``\\r`` and ``\\n`` as a space.

    Raises
    ------
    CorpusError
        Naming the file and record or tag id: invalid XML (with the line), an unknown root element, a record
        without ``ID`` or ``TEXT``, an unexpected element inside 2006 ``TEXT``, a non-integer or out-of-range
        offset, a 2014 tag whose ``text`` differs from ``text[start:end]`` (both strings shown), a person rule
        that does not match, an empty corpus, a duplicate ``doc_id``.
    """
    p = _existing(path)
    files = _xml_files(p)
    rule_2006 = _PersonRule(person_rule, path=p, default=lambda key: key)
    rule_2014 = _PersonRule(person_rule, path=p, default=lambda stem: stem.split("-", 1)[0])
    builder = _Builder(p)
    dropped: dict[str, int] = {}
    for f in files:
        root = _parse_xml(f)
        if root.tag == "deIdi2b2" or (root.find("TEXT") is not None and root.find("TAGS") is not None):
            doc, n = _i2b2_2014_document(root, f, rule_2014, split, strict)
            builder.add(doc, file=f)
            if n:
                dropped[f.name] = n
        elif root.tag == "ROOT" or root.find("RECORD") is not None:
            for doc in _i2b2_2006_documents(root, f, rule_2006, split):
                builder.add(doc, file=f, record=doc.doc_id)
        else:
            raise CorpusError(f"not an i2b2 de-identification file: root element <{root.tag}>; expected <ROOT> with "
                              "<RECORD> elements (2006) or <deIdi2b2> with <TEXT> and <TAGS> (2014)", f)
    _warn_dropped(p, dropped, "tag")
    return builder.corpus()


def _xml_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    files = sorted(f for f in path.rglob("*.xml") if f.is_file())
    if not files:
        raise CorpusError("the corpus is empty: no .xml files in this folder", path)
    return files


def _parse_xml(path: Path) -> ET.Element:
    data = _read_bytes(path)
    try:
        return ET.fromstring(data)
    except ET.ParseError as e:
        line = e.position[0] if getattr(e, "position", None) else None
        raise CorpusError(f"invalid XML: {e}", path, line=line) from e


def _i2b2_2006_documents(root: ET.Element, path: Path, rule: _PersonRule, split: str | None) -> Iterator[Document]:
    records = root.findall("RECORD")
    if not records:
        raise CorpusError("no <RECORD> elements in the 2006-style file", path)
    for i, rec in enumerate(records, start=1):
        rid = rec.get("ID")
        if rid is None or not rid.strip():
            raise CorpusError("<RECORD> without an ID attribute", path, record=f"RECORD #{i}")
        text_el = rec.find("TEXT")
        if text_el is None:
            raise CorpusError("<RECORD> without a <TEXT> element", path, record=rid)
        text, spans = _inline_phi(text_el, path, rid)
        person = rule(rid, file=path, record=rid)
        yield make_document(rid, person, text, spans, split, path=path, record=rid)


def _inline_phi(text_el: ET.Element, path: Path, record: str) -> tuple[str, list[tuple[int, int, str]]]:
    """Plain text and spans from a 2006 ``TEXT`` element with inline ``PHI`` children."""
    parts = [text_el.text or ""]
    pos = len(parts[0])
    spans: list[tuple[int, int, str]] = []
    for child in text_el:
        if child.tag != "PHI":
            raise CorpusError(f"unexpected element <{child.tag}> inside <TEXT> (only <PHI> is expected)", path,
                              record=record)
        label = child.get("TYPE")
        if not label:
            raise CorpusError("<PHI> without a TYPE attribute", path, record=record)
        if len(child):
            raise CorpusError(f"nested element <{child[0].tag}> inside <PHI TYPE={label!r}>", path, record=record)
        content = child.text or ""
        if not content:
            raise CorpusError(f"empty <PHI TYPE={label!r}> element at character {pos}", path, record=record)
        spans.append((pos, pos + len(content), label))
        tail = child.tail or ""
        parts += [content, tail]
        pos += len(content) + len(tail)
    return "".join(parts), spans


def _same_surface(a: str, b: str) -> bool:
    table = str.maketrans("\t\r\n", "   ")
    return a.translate(table) == b.translate(table)


def _i2b2_2014_document(root: ET.Element, path: Path, rule: _PersonRule, split: str | None,
                        strict: bool) -> tuple[Document, int]:
    text_el = root.find("TEXT")
    if text_el is None:
        raise CorpusError("no <TEXT> element in the 2014-style file", path)
    text = text_el.text or ""
    tags_el = root.find("TAGS")
    cands = []
    for j, tag in enumerate(tags_el if tags_el is not None else [], start=1):
        cands.append(_i2b2_2014_span(tag, j, text, path))
    spans, dropped = _resolve_overlaps(cands, strict=strict, path=path, record=path.stem)
    person = rule(path.stem, file=path, record=path.stem)
    return make_document(path.stem, person, text, spans, split, path=path, record=path.stem), dropped


def _i2b2_2014_span(tag: ET.Element, j: int, text: str, path: Path) -> tuple[int, int, str, str]:
    tid = tag.get("id") or f"#{j}"
    record = f"tag {tid}"
    try:
        start, end = int(tag.get("start", "")), int(tag.get("end", ""))
    except ValueError as e:
        raise CorpusError(f"<{tag.tag}> needs integer start and end attributes, got start={tag.get('start')!r}, "
                          f"end={tag.get('end')!r}", path, record=record) from e
    label = tag.get("TYPE") or tag.tag
    if not 0 <= start < end <= len(text):
        raise CorpusError(f"<{tag.tag}> [{start}, {end}) {label} lies outside the text (length {len(text)}) or is "
                          "empty", path, record=record)
    surface = tag.get("text")
    if surface is not None and not _same_surface(text[start:end], surface):
        raise CorpusError(f"offset/text mismatch: text[{start}:{end}] is {text[start:end]!r} but the tag's text is "
                          f"{surface!r}", path, record=record)
    return start, end, label, tid


# ----------------------------------------------------------------------------------------------------------------
# TAB (Text Anonymization Benchmark) JSON
# ----------------------------------------------------------------------------------------------------------------


def read_tab(path: PathLike, *, annotator: str | None = None,
             identifier_types: str | Iterable[str] = ("DIRECT", "QUASI"), person_field: str | None = None,
             strict: bool = False) -> Corpus:
    """Read a Text Anonymization Benchmark file (TAB, Pilán et al. 2022): a JSON list of ECHR cases.

    Each object has ``doc_id``, ``text``, ``dataset_type`` (``train``/``dev``/``test``, becomes ``split``),
    ``task``, ``meta`` and ``annotations``: ``{annotator_id: {"entity_mentions": [...]}}`` where a mention has
    ``entity_type``, ``entity_mention_id``, ``start_offset``, ``end_offset`` (exclusive), ``span_text``,
    ``identifier_type`` (``DIRECT``, ``QUASI`` or ``NO_MASK``) and ``entity_id``.

    Each mention whose ``identifier_type`` is in ``identifier_types`` becomes a span labelled
    ``"{entity_type}/{identifier_type}"`` (e.g. ``PERSON/DIRECT``, ``DATETIME/QUASI``), so both the category and the
    masking decision are kept. ``labels`` holds ``annotator`` (the annotator used), ``task`` and ``meta`` when present.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.json`` file (e.g. ``echr_train.json``).
    annotator : str, optional
        Whose annotations to use. Default: per document, the first annotator id in sorted order (TAB training
        documents each have a single, document-specific annotator). When given, a document lacking it is an
        error naming the annotators it has. A document with an empty ``annotations`` object has no spans.
    identifier_types : str or iterable of str, default ("DIRECT", "QUASI")
        Which mentions become spans; ``NO_MASK`` mentions are skipped by default.
    person_field : str, optional
        Key in ``meta`` holding the person id (e.g. ``"applicant"``). Default: ``person_id = doc_id`` (one
        applicant per case).
    strict : bool, default False
        TAB has some nested mentions. By default overlapping kept mentions are resolved deterministically by
        keeping the longer span (then the earlier start), with one :class:`CorpusWarning` giving the number dropped
        per document; ``strict=True`` makes an overlap an error.

    Returns
    -------
    Corpus

    Raises
    ------
    CorpusError
        Naming the file and the document (``record #N (doc_id)``, and the mention id where relevant): invalid JSON
        (with the line), a top level that is not a list, missing fields, a missing annotator (listing those
        available), a missing ``person_field``, a mention whose ``span_text`` differs from
        ``text[start_offset:end_offset]``, non-UTF-8 bytes, an empty corpus, a duplicate ``doc_id``.
    """
    p = _existing(path)
    items = _load_json(p)
    if not isinstance(items, list):
        raise CorpusError(f"expected a JSON list of documents at the top level, got a {type(items).__name__}", p)
    wanted = {identifier_types} if isinstance(identifier_types, str) else set(identifier_types)
    builder = _Builder(p)
    dropped: dict[str, int] = {}
    for i, item in enumerate(items, start=1):
        doc, n = _tab_document(item, i, p, annotator=annotator, wanted=wanted, person_field=person_field,
                               strict=strict)
        builder.add(doc, record=f"#{i} ({doc.doc_id})")
        if n:
            dropped[doc.doc_id] = n
    _warn_dropped(p, dropped, "mention")
    return builder.corpus(hint="the JSON list is empty")


def _load_json(path: Path) -> Any:
    text = _decode(_read_bytes(path), path, hint="re-encode the file as UTF-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CorpusError(f"invalid JSON: {e.msg} (column {e.colno})", path, line=e.lineno) from e
    except (ValueError, RecursionError) as e:  # an over-long integer; nesting beyond the recursion limit
        raise CorpusError(f"invalid JSON: {'nested too deeply' if isinstance(e, RecursionError) else e}",
                          path) from e


def _tab_document(item: Any, i: int, path: Path, *, annotator: str | None, wanted: set[str],
                  person_field: str | None, strict: bool) -> tuple[Document, int]:
    record = f"#{i}"
    if not isinstance(item, dict):
        raise CorpusError(f"expected a JSON object, got a {type(item).__name__}", path, record=record)
    missing = [k for k in ("doc_id", "text", "annotations") if k not in item]
    if missing:
        raise CorpusError(f"missing field(s) {', '.join(map(repr, missing))}", path, record=record)
    doc_id, text = item["doc_id"], item["text"]
    record = f"#{i} ({doc_id})"
    if not isinstance(text, str):
        raise CorpusError(f"field 'text' must be a string, got {type(text).__name__}", path, record=record)
    meta = item.get("meta")
    person = _tab_person(doc_id, meta, person_field, path, record)
    ann_id, mentions = _tab_mentions(item["annotations"], annotator, path, record)
    cands = [_tab_span(m, k, text, path, record, wanted) for k, m in enumerate(mentions, start=1)]
    spans, dropped = _resolve_overlaps([c for c in cands if c is not None], strict=strict, path=path, record=record)
    labels: dict[str, Any] = {"annotator": ann_id}
    if item.get("task") is not None:
        labels["task"] = item["task"]
    if meta is not None:
        labels["meta"] = meta
    doc = make_document(doc_id, person, text, spans, item.get("dataset_type"), labels, path=path, record=record)
    return doc, dropped


def _tab_person(doc_id: Any, meta: Any, person_field: str | None, path: Path, record: str) -> Any:
    if person_field is None:
        return doc_id
    if not isinstance(meta, dict) or person_field not in meta:
        keys = sorted(meta) if isinstance(meta, dict) else []
        raise CorpusError(f"person_field {person_field!r} not found in 'meta' (meta keys: {keys})", path,
                          record=record)
    return meta[person_field]


def _tab_mentions(annotations: Any, annotator: str | None, path: Path, record: str) -> tuple[str | None, list[Any]]:
    if not isinstance(annotations, dict):
        raise CorpusError(f"field 'annotations' must be an object keyed by annotator, got "
                          f"{type(annotations).__name__}", path, record=record)
    available = sorted(annotations)
    if annotator is None:
        if not available:
            return None, []
        annotator = available[0]
    elif annotator not in annotations:
        raise CorpusError(f"annotator {annotator!r} not found; this document has annotators: {available}", path,
                          record=record)
    block = annotations[annotator]
    mentions = block.get("entity_mentions") if isinstance(block, dict) else None
    if not isinstance(mentions, list):
        raise CorpusError(f"annotations[{annotator!r}] must be an object with an 'entity_mentions' list", path,
                          record=record)
    return annotator, mentions


def _tab_span(m: Any, k: int, text: str, path: Path, record: str,
              wanted: set[str]) -> tuple[int, int, str, str] | None:
    """``(start, end, label, mention id)`` of a mention, or ``None`` when its identifier type is not wanted.

    Offsets and ``span_text`` are checked only for wanted mentions (those that become spans).
    """
    if not isinstance(m, dict):
        raise CorpusError(f"entity mention #{k} must be an object, got {type(m).__name__}", path, record=record)
    mid = str(m.get("entity_mention_id", f"#{k}"))
    where = f"{record}, mention {mid}"
    missing = [f for f in ("entity_type", "identifier_type", "start_offset", "end_offset") if f not in m]
    if missing:
        raise CorpusError(f"missing field(s) {', '.join(map(repr, missing))}", path, record=where)
    start, end, etype, itype = m["start_offset"], m["end_offset"], m["entity_type"], m["identifier_type"]
    if not isinstance(itype, str) or not isinstance(etype, str):
        raise CorpusError(f"entity_type and identifier_type must be strings, got entity_type={etype!r:.40}, "
                          f"identifier_type={itype!r:.40}", path, record=where)
    if itype not in wanted:
        return None
    if isinstance(start, bool) or isinstance(end, bool) or not isinstance(start, int) or not isinstance(end, int):
        raise CorpusError(f"offsets must be integers, got start_offset={start!r}, end_offset={end!r}", path,
                          record=where)
    if not 0 <= start < end <= len(text):
        raise CorpusError(f"[{start}, {end}) lies outside the text (length {len(text)}) or is empty", path,
                          record=where)
    surface = m.get("span_text")
    if surface is not None and text[start:end] != surface:
        raise CorpusError(f"offset/text mismatch: text[{start}:{end}] is {text[start:end]!r} but span_text is "
                          f"{surface!r}", path, record=where)
    return start, end, f"{etype}/{itype}", mid


# ----------------------------------------------------------------------------------------------------------------
# e-mail: mbox and Maildir
# ----------------------------------------------------------------------------------------------------------------

# Every header is read as unstructured text: RFC 2047-decoded and unfolded, but otherwise verbatim (the default
# policy would re-render addresses and dates, e.g. "3 Jan" -> "03 Jan").
_MAIL_POLICY = email.policy.default.clone(
    header_factory=HeaderRegistry(default_class=UnstructuredHeader, use_default_map=False))


def _parse_message(fh: Any) -> EmailMessage:
    return email.message_from_binary_file(fh, policy=_MAIL_POLICY)  # type: ignore[return-value]


def read_mbox(path: PathLike, *, person: str = "sender", owner: str | None = None,
              charset_errors: str = "strict") -> Corpus:
    """Read a Unix mbox file, one document per message.

    Each message becomes a document whose text is the ``From``, ``To``, ``Cc``, ``Bcc``, ``Subject`` and ``Date``
    headers present, as ``"Name: value"`` lines in that order (header values RFC 2047-decoded and unfolded, otherwise
    verbatim), a blank line, then the plain-text body: the body part chosen by
    :meth:`email.message.EmailMessage.get_body` preferring ``text/plain`` (attachments are not bodies). A message
    without a ``text/plain`` body keeps only the headers, and a :class:`CorpusWarning` counts such messages.

    The body is decoded with the charset the part declares; an undeclared charset is read as UTF-8 (a superset of
    the RFC default US-ASCII). Bytes invalid in that charset are an error naming the message and the charset,
    unless ``charset_errors`` says otherwise (e.g. ``"replace"``).

    Parameters
    ----------
    path : str or os.PathLike
        The mbox file.
    person : {"sender", "owner"}, default "sender"
        ``"sender"``: ``person_id`` is the lower-cased address in ``From`` (:func:`email.utils.parseaddr`).
        ``"owner"``: every message belongs to the mailbox owner, ``owner`` or else the file stem.
    owner : str, optional
        The owner's id for ``person="owner"``.
    charset_errors : str, default "strict"
        The ``errors`` argument of :meth:`bytes.decode` for bodies.

    Returns
    -------
    Corpus
        ``doc_id`` is the ``Message-ID`` without ``<>``, or ``"<file name>#<n>"`` (n counted from 1) when absent.

    Raises
    ------
    CorpusError
        Naming the file and ``message N``: an unparsable message, an undecodable body or unknown charset, a
        message without a ``From`` address under ``person="sender"``, no messages, a duplicate ``Message-ID``.
    """
    p = _existing(path)
    if p.is_dir():
        raise CorpusError("expected an mbox file, got a folder (use read_maildir for a Maildir)", p)
    _check_person_mode(person, p)
    try:
        box = mailbox.mbox(p, factory=_parse_message, create=False)
    except (OSError, mailbox.Error) as e:
        raise CorpusError(f"cannot open the mbox file: {e}", p) from e
    with contextlib.closing(box):
        return _read_mailbox(box, p, person=person, owner=owner if owner is not None else p.stem,
                             charset_errors=charset_errors,
                             empty_hint="an mbox file starts each message with a 'From ' line")


def read_maildir(path: PathLike, *, person: str = "sender", owner: str | None = None,
                 charset_errors: str = "strict") -> Corpus:
    """Read a Maildir folder (with ``cur/`` and ``new/`` subfolders), one document per message.

    Messages are read in sorted key order (Maildir keys start with the delivery time). Documents are built as in
    :func:`read_mbox`; with ``person="owner"`` the default owner is the folder name, and the fallback ``doc_id`` is
    ``"<folder name>#<n>"``.

    Parameters
    ----------
    path : str or os.PathLike
        The Maildir folder.
    person : {"sender", "owner"}, default "sender"
    owner : str, optional
    charset_errors : str, default "strict"
        See :func:`read_mbox`.

    Returns
    -------
    Corpus
    """
    p = _existing(path)
    missing = [sub for sub in ("cur", "new") if not (p / sub).is_dir()]
    if missing:
        raise CorpusError(f"not a Maildir: missing subfolder(s) {', '.join(missing)} (a Maildir has cur/, new/ and "
                          "tmp/)", p)
    _check_person_mode(person, p)
    try:
        box = mailbox.Maildir(p, factory=_parse_message, create=False)
    except (OSError, mailbox.Error) as e:
        raise CorpusError(f"cannot open the Maildir: {e}", p) from e
    with contextlib.closing(box):
        return _read_mailbox(box, p, person=person, owner=owner if owner is not None else p.name,
                             charset_errors=charset_errors, empty_hint="no messages in cur/ or new/")


def _check_person_mode(person: str, path: Path) -> None:
    if person not in ("sender", "owner"):
        raise CorpusError(f"person must be 'sender' or 'owner', got {person!r}", path)


def _read_mailbox(box: mailbox.Mailbox, path: Path, *, person: str, owner: str, charset_errors: str,
                  empty_hint: str) -> Corpus:
    try:
        keys = sorted(box.keys()) if isinstance(box, mailbox.Maildir) else list(box.keys())
    except (OSError, mailbox.Error) as e:
        raise CorpusError(f"cannot list the messages: {e}", path) from e
    builder = _Builder(path)
    no_plain = 0
    for n, key in enumerate(keys, start=1):
        record = f"message {n}"
        try:
            msg = box[key]
            doc, has_plain = _message_document(msg, path, n, person=person, owner=owner,
                                               charset_errors=charset_errors)
        except CorpusError:
            raise
        except Exception as e:  # the email package raises many types on malformed input
            raise CorpusError(f"cannot parse the message: {type(e).__name__}: {e}", path, record=record) from e
        no_plain += not has_plain
        builder.add(doc, record=f"{record} (Message-ID {doc.doc_id})")
    if no_plain:
        warnings.warn(f"{path}: {no_plain} message(s) have no text/plain body; their text holds the headers only",
                      CorpusWarning, stacklevel=3)
    return builder.corpus(hint=empty_hint)


def _message_document(msg: EmailMessage, path: Path, n: int, *, person: str, owner: str,
                      charset_errors: str) -> tuple[Document, bool]:
    record = f"message {n}"
    mid = str(msg.get("Message-ID", "") or "").strip().strip("<>").strip()
    doc_id = mid or f"{path.name}#{n}"
    lines = [f"{name}: {value}" for name in _MAIL_HEADERS
             for value in _header_values(msg, name, path, record, charset_errors)]
    body = _plain_body(msg, path, record, charset_errors)
    text = "\n".join(lines) + "\n\n" + (body or "")
    if person == "sender":
        address = email.utils.parseaddr(str(msg.get("From", "") or ""))[1].strip().lower()
        if not address:
            raise CorpusError("the message has no From address (use person='owner' to group by mailbox)", path,
                              record=record)
        person_id = address
    else:
        person_id = owner
    return make_document(doc_id, person_id, text, path=path, record=record), body is not None


def _header_values(msg: EmailMessage, name: str, path: Path, record: str, errors: str) -> list[str]:
    """Decoded values of header ``name``; raw non-UTF-8 bytes in a header are an error unless ``errors`` allows.

    The email package silently turns undecodable raw (non RFC 2047) header bytes into U+FFFD; this is caught here
    so that no text is lost without notice.
    """
    values = [str(v) for v in msg.get_all(name) or []]
    raws = [raw for key, raw in msg.raw_items() if key.lower() == name.lower()]
    for value, raw in zip(values, raws):
        if "\ufffd" in value and errors == "strict" and isinstance(raw, str):
            try:
                raw.encode("utf-8", "surrogateescape").decode("utf-8")
            except UnicodeDecodeError as e:
                raise CorpusError(f"header {name} holds raw bytes that are not UTF-8 ({e.reason}); pass "
                                  "charset_errors='replace' to substitute U+FFFD", path, record=record) from e
    return values


def _plain_body(msg: EmailMessage, path: Path, record: str, errors: str) -> str | None:
    """The decoded ``text/plain`` body, or ``None`` when the message has none."""
    part = msg.get_body(preferencelist=("plain",))
    if part is None:
        return None
    payload = part.get_payload(decode=True)
    if payload is None:
        return ""
    if isinstance(payload, str):  # defensive: some malformed parts yield str
        return payload
    charset = part.get_content_charset() or "utf-8"
    try:
        return payload.decode(charset, errors=errors)
    except LookupError as e:
        raise CorpusError(f"unknown charset {charset!r} (or unknown charset_errors={errors!r})", path,
                          record=record) from e
    except UnicodeDecodeError as e:
        raise CorpusError(f"the body is not valid {charset}: byte(s) {payload[e.start:e.end].hex(' ')} at body "
                          f"byte offset {e.start}; pass charset_errors='replace' to substitute U+FFFD", path,
                          record=record) from e


# ----------------------------------------------------------------------------------------------------------------
# folders of plain-text files
# ----------------------------------------------------------------------------------------------------------------


def read_txt_folder(path: PathLike, *, person_rule: PersonRule = "stem", pattern: str = "**/*.txt",
                    encoding: str = "utf-8", split: str | None = None) -> Corpus:
    """Read a folder of plain-text files, one document per file.

    ``doc_id`` is the path relative to the folder, POSIX style, without its suffix (``alice/note1``). Files are read
    in sorted order and their text kept exactly (no newline translation; a leading UTF-8 byte-order mark dropped).
    A single file may be given instead of a folder (its ``doc_id`` is then its stem).

    Parameters
    ----------
    path : str or os.PathLike
        The folder.
    person_rule : str or callable, default "stem"
        ``"stem"``: the file stem; ``"parent"``: the name of the file's parent folder (the root folder's name for
        files directly in it); any other string: a regular expression applied with :func:`re.search` to the
        relative path (``"alice/note1.txt"``) whose first group is the person id; a callable receiving that
        relative path and returning the person id.
    pattern : str, default "**/*.txt"
        Glob pattern relative to the folder.
    encoding : str, default "utf-8"
        Text encoding of the files.
    split : str, optional
        A split name given to every document.

    Returns
    -------
    Corpus

    Raises
    ------
    CorpusError
        Naming the file: bytes invalid in ``encoding`` (with line and byte offset), a file name that is not UTF-8,
        a regex that does not match (or has no group), no matching files, a duplicate ``doc_id`` (``a.txt`` and
        ``a.TXT``).
    """
    p = _existing(path)
    root, files = (p.parent, [p]) if p.is_file() else (p, sorted(f for f in p.glob(pattern) if f.is_file()))
    rule = _PersonRule(person_rule, path=p, default=lambda rel: PurePosixPath(rel).stem, keywords={
        "stem": lambda rel: PurePosixPath(rel).stem,
        "parent": lambda rel: PurePosixPath(rel).parent.name or root.name,
    })
    builder = _Builder(p)
    hint = f"pass encoding= if the files are not {encoding}"
    for f in files:
        rel = f.relative_to(root).as_posix()
        try:
            rel.encode("utf-8")
        except UnicodeEncodeError as e:  # os.fsdecode keeps undecodable name bytes as lone surrogates
            raise CorpusError("the file name is not valid UTF-8; rename the file (doc_id and person_id are taken "
                              "from it)", f) from e
        text = _decode(_read_bytes(f), f, encoding, hint=hint)
        person = rule(rel, file=f)
        doc_id = str(PurePosixPath(rel).with_suffix(""))
        builder.add(make_document(doc_id, person, text, split=split, path=f), file=f)
    return builder.corpus(hint=f"no files match {pattern!r}")


# ----------------------------------------------------------------------------------------------------------------
# dispatch
# ----------------------------------------------------------------------------------------------------------------

_READERS: dict[str, Callable[..., Corpus]] = {
    "jsonl": read_jsonl,
    "csv": read_csv,
    "i2b2": read_i2b2,
    "tab": read_tab,
    "mbox": read_mbox,
    "maildir": read_maildir,
    "txt": read_txt_folder,
}

_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".xml": "i2b2", ".json": "tab",
             ".mbox": "mbox", ".txt": "txt"}


def detect_format(path: PathLike) -> str:
    """Guess the format of ``path`` (one of :data:`FORMATS`).

    Files by suffix: ``.jsonl``/``.ndjson`` → jsonl, ``.csv`` → csv, ``.xml`` → i2b2, ``.json`` → tab,
    ``.mbox`` → mbox (also a suffix-less file starting with ``"From "``), ``.txt`` → txt. Folders: with ``cur/``
    and ``new/`` → maildir; else containing ``.xml`` files → i2b2; else containing ``.txt`` files → txt.

    Raises
    ------
    CorpusError
        A missing path ("file not found") or an undetectable one (listing the formats).
    """
    p = _existing(path)
    known = f"pass format= one of {', '.join(FORMATS)}"
    if p.is_dir():
        if (p / "cur").is_dir() and (p / "new").is_dir():
            return "maildir"
        if any(f.is_file() for f in p.rglob("*.xml")):
            return "i2b2"
        if any(f.is_file() for f in p.rglob("*.txt")):
            return "txt"
        raise CorpusError("cannot detect the format of this folder: no cur/ and new/ subfolders (maildir), no .xml "
                          f"files (i2b2) and no .txt files (txt); {known}", p)
    suffix = p.suffix.lower()
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    if not suffix:
        with contextlib.suppress(OSError), open(p, "rb") as fh:
            if fh.read(5) == b"From ":
                return "mbox"
    raise CorpusError(f"cannot detect the format from the suffix {suffix or '(none)'!r} (known suffixes: "
                      f"{', '.join(sorted(_SUFFIXES))}); {known}", p)


def load_corpus(path: PathLike, format: str = "auto", **options: Any) -> Corpus:
    """Read a corpus in any supported format.

    Parameters
    ----------
    path : str or os.PathLike
        File or folder.
    format : str, default "auto"
        One of :data:`FORMATS` (``"jsonl"``, ``"csv"``, ``"i2b2"``, ``"tab"``, ``"mbox"``, ``"maildir"``,
        ``"txt"``) or ``"auto"`` to detect it with :func:`detect_format`.
    **options
        Keyword options of the reader (e.g. ``text_column=`` for csv, ``annotator=`` for tab).

    Returns
    -------
    Corpus

    Raises
    ------
    CorpusError
        A missing path ("file not found"), an unknown or undetectable format (listing the formats), an option the
        reader does not take (listing those it takes), or any error of the reader.

    Examples
    --------
    >>> corpus = load_corpus("notes.jsonl")                          # doctest: +SKIP
    >>> corpus = load_corpus("cases.json", annotator="annotator2")   # doctest: +SKIP
    """
    p = _existing(path)
    fmt = detect_format(p) if format == "auto" else format
    if fmt not in _READERS:
        raise CorpusError(f"unknown format {format!r}; known formats: {', '.join(FORMATS)} (or 'auto')", p)
    reader = _READERS[fmt]
    params = inspect.signature(reader).parameters
    accepted = [name for name, prm in params.items() if prm.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise CorpusError(f"the {fmt} reader takes no option(s) {', '.join(unknown)}; its options are: "
                          f"{', '.join(accepted) or '(none)'}", p)
    return reader(p, **options)
