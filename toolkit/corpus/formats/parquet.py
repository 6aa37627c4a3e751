"""Apache Parquet tables, one document per row: the form a data lake holds notes in (read with pyarrow).

The columns are mapped as a CSV table's are (``--text-field``, ``--person-field``, ``--id-field``,
``--split-field``); a ``spans`` column (a list of ``{start, end, label}`` structs, or their JSON as a string) holds
gold spans and a ``labels`` column (a struct — a null field is an absent label —, a map or a JSON object as text)
the downstream labels, both optional. Only the used columns are read, one record batch at a time
(:class:`ParquetRows`), so the same code serves :func:`read_parquet` and the out-of-core identifier engine
(:class:`toolkit.identifiers.stream.ParquetBatches`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from toolkit.errors import CorpusError
from toolkit.corpus.model import Corpus, Document, make_document
from toolkit.corpus.formats.common import ROW, Builder, PathLike, cut, existing

__all__ = ["ParquetRows", "read_parquet"]

#: Rows per record batch read at a time.
BATCH_ROWS = 8192


def _arrow():
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pa, pq


class ParquetRows:
    """The rows of a Parquet corpus file, read in record batches of the used columns only (``iter_batches``).

    Iterating yields ``(row, values)`` with rows counted from 1 in file order and ``values`` the used cells by role
    (``text``, ``person_id``, ``doc_id``, ``split``, ``spans``, ``labels``); :meth:`document` turns them into a
    :class:`~toolkit.corpus.model.Document` or raises a :class:`CorpusError` naming the file and the record (its row
    number), never a cell. The column mapping is checked against the file's schema on construction: a missing
    column, or one of a type that cannot hold its role, is an error naming the column and the flag that names it.

    Attributes
    ----------
    num_rows, total_bytes, rows_read:
        Rows in the file, its size, and the rows read so far (for progress bars).
    """

    def __init__(self, path: PathLike, *, text_field: str = "text", person_field: str = "person_id",
                 id_field: str | None = "doc_id", split_field: str | None = "split",
                 spans_field: str | None = "spans", labels_field: str | None = "labels", batch_rows: int = BATCH_ROWS):
        pa, pq = _arrow()
        self.path = existing(path)
        if self.path.is_dir():
            raise CorpusError("expected a file, got a folder", self.path)
        try:
            self._file = pq.ParquetFile(self.path)
        except (pa.ArrowException, OSError) as e:
            raise CorpusError(f"not a readable Parquet file ({type(e).__name__}: {cut(e, 120)})", self.path) from e
        self.batch_rows = batch_rows
        self.num_rows = self._file.metadata.num_rows
        self.total_bytes = self.path.stat().st_size
        self.rows_read = 0
        self.columns = self._columns(self._file.schema_arrow, text_field=text_field, person_field=person_field,
                                     id_field=id_field, split_field=split_field, spans_field=spans_field,
                                     labels_field=labels_field)

    def _columns(self, schema, *, text_field, person_field, id_field, split_field, spans_field,
                 labels_field) -> dict[str, str | None]:
        pa, _ = _arrow()
        for name, value in (("text_field", text_field), ("person_field", person_field), ("id_field", id_field),
                            ("split_field", split_field)):
            if value is not None and (not isinstance(value, str) or not value):
                raise CorpusError(f"{name} must be a non-empty column name, got {value!r}", self.path)
        if text_field in (None, ROW) or person_field is None:
            raise CorpusError("text_field must name a column, and person_field a column or '@row' "
                              "(--person-field @row)", self.path)
        names = set(schema.names)
        if len(names) != len(schema.names):
            raise CorpusError("two columns of the table have the same name", self.path)
        defaults = {"doc_id": "doc_id", "split": "split", "spans": "spans", "labels": "labels"}
        optional = {"doc_id": None if id_field == ROW else id_field, "split": split_field, "spans": spans_field,
                    "labels": labels_field}
        required = [text_field, *([] if person_field == ROW else [person_field])]
        required += [name for role, name in optional.items() if name is not None and name != defaults[role]]
        missing = [name for name in required if name not in names]
        if missing:
            msg = (f"missing column(s) {', '.join(map(repr, missing))}; the table's columns: "
                   f"{cut(', '.join(schema.names), 200)}. Name the columns with --text-field, --person-field, "
                   "--id-field, --split-field")
            if person_field in missing:
                msg += "; a table with no person column: --person-field @row makes each row its own individual"
            raise CorpusError(msg, self.path)
        out: dict[str, str | None] = {"text": text_field, "person_id": None if person_field == ROW else person_field}
        for role, name in optional.items():
            out[role] = name if name is not None and name in names else None
        kinds = {"text": ("text", pa.types.is_string, pa.types.is_large_string),
                 "person_id": ("text or integers", pa.types.is_string, pa.types.is_large_string, pa.types.is_integer),
                 "doc_id": ("text or integers", pa.types.is_string, pa.types.is_large_string, pa.types.is_integer),
                 "split": ("text", pa.types.is_string, pa.types.is_large_string, pa.types.is_null),
                 "spans": ("a list of {start, end, label} structs or JSON text", pa.types.is_list,
                           pa.types.is_large_list, pa.types.is_string, pa.types.is_large_string, pa.types.is_null),
                 "labels": ("a struct, a map or JSON text", pa.types.is_struct, pa.types.is_map, pa.types.is_string,
                            pa.types.is_large_string, pa.types.is_null)}
        for role, name in out.items():
            if name is None:
                continue
            wanted, *checks = kinds[role]
            dtype = schema.field(name).type
            if not any(check(dtype) for check in checks):
                raise CorpusError(f"column {name!r} ({role}) holds {dtype}, not {wanted}", self.path)
        return out

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        pa, _ = _arrow()
        used = {role: name for role, name in self.columns.items() if name is not None}
        read = list(dict.fromkeys(used.values()))
        self.rows_read = 0
        batches = self._file.iter_batches(batch_size=self.batch_rows, columns=read)
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except (pa.ArrowException, OSError) as e:
                raise CorpusError(f"cannot read the Parquet file after row {self.rows_read} ({type(e).__name__}: "
                                  f"{cut(e, 120)})", self.path) from e
            columns = {role: batch.column(name).to_pylist() for role, name in used.items()}
            for i in range(batch.num_rows):
                self.rows_read += 1
                yield self.rows_read, {role: values[i] for role, values in columns.items()}

    def document(self, row: int, values: dict[str, Any]) -> Document:
        """The document of row ``row`` (counted from 1) with the cells ``values`` of :meth:`__iter__`."""
        record = str(row)

        def fail(msg: str) -> CorpusError:
            return CorpusError(msg, self.path, record=record)

        for role, what in (("text", "text"), ("person_id", "person"), ("doc_id", "document id")):
            if self.columns[role] is not None and values[role] is None:
                raise fail(f"null in column {self.columns[role]!r} (the {what}); every row needs one")
        doc_id = values["doc_id"] if self.columns["doc_id"] is not None else f"{self.path.stem}-{row}"
        person = values["person_id"] if self.columns["person_id"] is not None else doc_id
        spans = values.get("spans")
        if isinstance(spans, str):
            spans = _json_cell(spans, self.columns["spans"], list, fail) if spans.strip() else None
        labels = values.get("labels")
        if isinstance(labels, str):
            labels = _json_cell(labels, self.columns["labels"], dict, fail) if labels.strip() else None
        elif isinstance(labels, list):  # a map column: (key, value) pairs
            labels = dict(labels)
        elif isinstance(labels, dict):  # a struct column has every field in every row: a null one is an absent label
            labels = {k: v for k, v in labels.items() if v is not None}
        names = {role: col for role, col in self.columns.items() if isinstance(col, str)}
        return make_document(doc_id, person, values["text"], spans, values.get("split"), labels, path=self.path,
                             record=record, names=names)


def _json_cell(cell: str, column: str | None, kind: type, fail) -> Any:
    try:
        value = json.loads(cell)
    except json.JSONDecodeError as e:
        raise fail(f"column {column!r} is not valid JSON: {e.msg} (column {e.colno})") from e
    except (ValueError, RecursionError) as e:  # an over-long integer; nesting beyond the recursion limit
        raise fail(f"column {column!r} is not valid JSON: "
                   f"{'nested too deeply' if isinstance(e, RecursionError) else e}") from e
    if not isinstance(value, kind):
        raise fail(f"column {column!r} must hold a JSON {'list' if kind is list else 'object'}, got "
                   f"{type(value).__name__}")
    return value


def read_parquet(path: PathLike, *, text_field: str = "text", person_field: str = "person_id",
                 id_field: str | None = "doc_id", split_field: str | None = "split",
                 on_error: str = "strict") -> Corpus:
    """Read an Apache Parquet table, one document per row (rows counted from 1 in file order).

    Parameters
    ----------
    path : str or os.PathLike
        The ``.parquet`` file.
    text_field : str, default "text"
        The column holding the text (required, a string column; CLI ``--text-field``).
    person_field : str, default "person_id"
        The column naming the individual (required, string or integer; ``--person-field``). ``"@row"``: the table
        has no person column and each row is its own individual (``person_id = doc_id``); never assumed.
    id_field : str or None, default "doc_id"
        Optional (``--id-field``), string or integer. When the table has no such column, or with ``None``/``"@row"``,
        ``doc_id = "<file stem>-<row number>"``.
    split_field : str or None, default "split"
        Optional (``--split-field``); a null cell means no split.
    on_error : {"strict", "skip"}, default "strict"
        ``"skip"``: a bad row (a null text, person or id, invalid spans, a duplicate ``doc_id``) is left out and
        listed in ``Corpus.skipped`` (record and reason, no cell). A missing column still stops the read.

    Optional ``spans`` (list of ``{start, end, label}`` structs, or JSON text) and ``labels`` (struct, map, or JSON
    text) columns are used when present. As for CSV, naming an optional column other than its default that the table
    lacks is an error, so a typo is not silently ignored.

    Returns
    -------
    Corpus

    Raises
    ------
    CorpusError
        Naming the file (and the record, i.e. the row): not a Parquet file, missing columns (with the flags that name
        them), a column of the wrong type, a null text/person/id, invalid spans, an empty table, a duplicate
        ``doc_id`` (naming the row of the first).
    """
    p = existing(path)
    builder = Builder(p, on_error)
    rows = ParquetRows(p, text_field=text_field, person_field=person_field, id_field=id_field,
                       split_field=split_field)
    for row, values in rows:
        builder.attempt(lambda: builder.add(rows.document(row, values), record=str(row)))
    return builder.corpus(hint="the Parquet table has no rows")

