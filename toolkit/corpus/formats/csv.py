"""CSV tables with a header row, one document per record."""

from __future__ import annotations

import contextlib
import csv
import difflib
import io
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from toolkit.errors import CorpusError
from toolkit.corpus.model import Corpus, Document, make_document
from toolkit.corpus.formats.common import ROW, Builder, PathLike, decode, existing, read_bytes, undecodable

__all__ = ["read_csv"]

#: A header cell shown as a "did you mean" suggestion must look like a column name: a short token without spaces,
#: '@' or digits first. The header row of a file without one is a record, and its cells are never printed whole.
_NAME_LIKE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,39}")


@contextlib.contextmanager
def _csv_field_limit(limit: int = 2**31 - 1) -> Iterator[None]:
    """Allow long documents in one CSV field (the csv module's default limit is 128 KiB); restored afterwards."""
    old = csv.field_size_limit()
    csv.field_size_limit(max(old, limit))
    try:
        yield
    finally:
        csv.field_size_limit(old)


def _csv_records(reader: Any) -> Iterator[tuple[list[str] | csv.Error, int]]:
    """Yield ``(row, line)`` for each non-blank CSV record: its starting line, or for a ``csv.Error`` yielded in
    place of the row, the line where parsing failed (the csv module resumes at the next line, so a lenient read
    goes on)."""
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            yield e, reader.line_num
            continue
        if row:
            yield row, start


def _malformed(error: csv.Error, path: Path, line: int, record: str | None = None) -> CorpusError:
    out = CorpusError(f"malformed CSV: {error}", path, line=line, record=record)
    out.__cause__ = error
    return out


def read_csv(path: PathLike, *, text_field: str = "text", person_field: str = "person_id",
             id_field: str | None = "doc_id", split_field: str | None = "split", spans_field: str | None = "spans",
             label_fields: str | Iterable[str] = (), on_error: str = "strict") -> Corpus:
    """Read a CSV table with a header row, one document per record.

    Quoted fields may hold newlines and commas (RFC 4180); the text is kept exactly, line ends included.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.csv`` file (UTF-8; a byte-order mark is allowed).
    text_field : str, default "text"
        The column holding the text (required; CLI ``--text-field``).
    person_field : str, default "person_id"
        The column holding the individual (required; ``--person-field``). ``"@row"``: the file has no person
        column and each record is its own individual (``person_id = doc_id``); this is never assumed.
    id_field : str or None, default "doc_id"
        Optional (``--id-field``). When the file has no such column, or with ``None``/``"@row"``,
        ``doc_id = "<file stem>-<record number>"`` (records counted from 1, header excluded).
    split_field : str or None, default "split"
        Optional (``--split-field``); an empty cell means no split.
    spans_field : str or None, default "spans"
        Optional; a JSON list of ``{"start", "end", "label"}`` (empty cell: no spans).
    label_fields : str or iterable of str
        Columns copied verbatim (as strings) into ``labels``; required when given.
    on_error : {"strict", "skip"}, default "strict"
        ``"skip"``: a bad record (wrong number of fields, malformed quoting, invalid spans, invalid UTF-8, a
        duplicate ``doc_id``) is left out and listed in ``Corpus.skipped`` (record, line and reason, no text). A
        header without the named columns still stops the read.

    Optional columns are used when present; naming an optional column other than its default that the file lacks
    is an error (so a typo is not silently ignored). Pass ``None`` to ignore a column.

    Returns
    -------
    Corpus

    Raises
    ------
    CorpusError
        Naming the file and the record (``record N``, its starting ``line L``): missing columns (with a suggestion
        for a near miss such as ``Text``; the header's cells are not listed, since in a file without a header they
        are a record), a record with the wrong number of fields, malformed quoting, invalid spans JSON, invalid
        spans, non-UTF-8 bytes, an empty corpus, a duplicate ``doc_id`` (naming the record of the first).
    """
    p = existing(path)
    builder = Builder(p, on_error)
    text = decode(read_bytes(p), p, hint="re-encode the file as UTF-8", lenient=builder.lenient)
    labels = (label_fields,) if isinstance(label_fields, str) else tuple(label_fields)
    with _csv_field_limit():
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
        records = _csv_records(reader)
        first = next(records, None)
        if first is None:
            raise CorpusError("the corpus is empty (the CSV file has no header and no records)", p)
        header, header_line = first
        if isinstance(header, csv.Error):
            raise _malformed(header, p, header_line)
        columns = _csv_columns(header, header_line, p, text_field=text_field, person_field=person_field,
                               id_field=id_field, split_field=split_field, spans_field=spans_field,
                               label_fields=labels)

        def one(row: list[str] | csv.Error, number: int, line: int) -> None:
            if isinstance(row, csv.Error):
                raise _malformed(row, p, line, str(number))
            doc = _csv_document(row, header, columns, p, number, line, builder.lenient)
            builder.add(doc, line=line, record=str(number))

        for number, (row, line) in enumerate(records, start=1):
            builder.attempt(lambda: one(row, number, line))
    return builder.corpus(hint="the CSV file has a header but no records")


def _csv_columns(header: list[str], line: int, path: Path, *, text_field: str, person_field: str,
                 id_field: str | None, split_field: str | None, spans_field: str | None,
                 label_fields: tuple[str, ...]) -> dict[str, Any]:
    """Map roles (text, person_id, ...) to column indices, checking that required columns exist.

    No message prints a header cell whole: a file without a header row has a record there.
    """
    seen: dict[str, int] = {}
    for i, name in enumerate(header, start=1):
        if name in seen:
            raise CorpusError(f"columns {seen[name]} and {i} of the header have the same name", path, line=line)
        seen[name] = i
    if text_field in (None, ROW) or person_field is None:
        raise CorpusError("text_field must name a column, and person_field a column or '@row' (--person-field @row)",
                          path, line=line)
    index = {name: i for i, name in enumerate(header)}
    defaults = {"doc_id": "doc_id", "split": "split", "spans": "spans"}
    optional = {"doc_id": None if id_field == ROW else id_field, "split": split_field, "spans": spans_field}
    required = [text_field, *([] if person_field == ROW else [person_field]), *label_fields]
    required += [name for role, name in optional.items() if name is not None and name != defaults[role]]
    missing = [name for name in required if name not in index]
    if missing:
        raise CorpusError(_missing_columns_message(missing, header, person_field), path, line=line)
    out: dict[str, Any] = {"text": index[text_field], "person_id": None if person_field == ROW else index[person_field],
                           "labels": {name: index[name] for name in label_fields}}
    for role, name in optional.items():
        out[role] = index.get(name) if name is not None else None
    return out


def _missing_columns_message(missing: list[str], header: list[str], person_field: str) -> str:
    names = [h for h in header if _NAME_LIKE.fullmatch(h)]
    lowered = {h.lower(): h for h in names}
    parts = []
    for name in missing:
        close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.8)
        parts.append(f"{name!r} (did you mean {lowered[close[0]]!r}?)" if close else repr(name))
    msg = (f"missing column(s) {', '.join(parts)} in the header row ({len(header)} column(s)); its cells are not "
           "shown, since in a file without a header row they are a record. Name the columns with --text-field, "
           "--person-field, --id-field, --split-field, or add a header row")
    if person_field in missing:
        msg += "; a table with no person column: --person-field @row makes each record its own individual"
    return msg


def _csv_document(row: list[str], header: list[str], columns: dict[str, Any], path: Path, number: int,
                  line: int, lenient: bool) -> Document:
    def fail(msg: str) -> CorpusError:
        return CorpusError(msg, path, line=line, record=str(number))

    if len(row) != len(header):
        raise fail(f"the record has {len(row)} field(s) but the header has {len(header)}")
    if lenient:
        for cell in row:
            bad = undecodable(cell)
            if bad is not None:
                raise fail(bad)
    doc_id = row[columns["doc_id"]] if columns["doc_id"] is not None else f"{path.stem}-{number}"
    person = row[columns["person_id"]] if columns["person_id"] is not None else doc_id
    split = row[columns["split"]] if columns["split"] is not None else None
    spans: Any = None
    if columns["spans"] is not None and row[columns["spans"]].strip():
        name = header[columns["spans"]]
        try:
            spans = json.loads(row[columns["spans"]])
        except json.JSONDecodeError as e:
            raise fail(f"column {name!r} is not valid JSON: {e.msg} (column {e.colno})") from e
        except (ValueError, RecursionError) as e:  # an over-long integer; nesting beyond the recursion limit
            raise fail(f"column {name!r} is not valid JSON: "
                       f"{'nested too deeply' if isinstance(e, RecursionError) else e}") from e
        if not isinstance(spans, list):
            raise fail(f"column {name!r} must hold a JSON list, got {type(spans).__name__}")
    labels = {name: row[i] for name, i in columns["labels"].items()}
    names = {role: header[columns[role]] for role in ("doc_id", "person_id", "text", "split")
             if columns[role] is not None}
    return make_document(doc_id, person, row[columns["text"]], spans, split or None, labels,
                         path=path, line=line, record=str(number), names=names)
