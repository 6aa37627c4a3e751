"""Documents in batches, for analyses that must not hold a whole corpus as Python objects.

:class:`JsonlBatches` reads a JSON Lines corpus line by line, :class:`ParquetBatches` a Parquet table record batch by
record batch (pyarrow ``iter_batches``, the used columns only); both yield lists of
:class:`~toolkit.corpus.Document` bounded in count and characters, only one batch alive at a time. Records are parsed
in :mod:`toolkit.corpus` only — the same parser, field mapping and errors as :func:`toolkit.corpus.read_jsonl`
(:func:`~toolkit.corpus.formats.jsonl.jsonl_line_document`) and :func:`toolkit.corpus.read_parquet`
(:class:`~toolkit.corpus.formats.parquet.ParquetRows`); errors are :class:`~toolkit.errors.CorpusError` naming the
file and line or record, never the text. What cannot be checked record by record, a ``doc_id`` repeated across
batches, the consumer checks (:func:`toolkit.identifiers.engine.analyze_to_disk` does, before anything is written).

:func:`streamed` picks the batch reader of a format (``None``: read the corpus whole); :func:`corpus_batches` cuts
an in-memory corpus (any reader's output) into the same kind of batches.
"""

from __future__ import annotations

import copy
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from toolkit.corpus import CorpusError, Document, SkippedRecord
from toolkit.corpus.formats.common import ON_ERROR, existing, located
from toolkit.corpus.formats.jsonl import JsonlFields, jsonl_line_document
from toolkit.corpus.formats.parquet import ParquetRows

#: Default batch bounds: documents and characters of text per batch.
BATCH_DOCUMENTS = 20_000
BATCH_CHARS = 16_000_000


class DocumentBatches(ABC):
    """Batches of a corpus file read record by record; a subclass says how (:meth:`_records`).

    Parameters
    ----------
    path:
        The corpus file.
    batch_documents, batch_chars:
        A batch ends when it holds this many documents or this many characters of text (a longer document is a batch
        of its own).
    split:
        Keep only documents whose split is one of these names (``None``: all).
    on_error:
        ``"strict"`` stops at the first bad record; ``"skip"`` leaves it out and lists it in :attr:`skipped`.

    Attributes
    ----------
    skipped:
        Records left out under ``on_error="skip"`` (file, line or record, reason; no text).
    total_bytes, bytes_read:
        Size of the file and how much of it was read (for progress bars).
    n_documents:
        Documents yielded so far.
    record_number:
        The line (JSON Lines) or row (Parquet, 1-based) of the record read last.
    """

    def __init__(self, path: str | os.PathLike, *, batch_documents: int = BATCH_DOCUMENTS,
                 batch_chars: int = BATCH_CHARS, split: str | Iterable[str] | None = None, on_error: str = "strict"):
        self.path = existing(path)
        if self.path.is_dir():
            raise CorpusError("expected a file, got a folder", self.path)
        if on_error not in ON_ERROR:
            raise CorpusError(f"on_error must be one of {', '.join(ON_ERROR)} (--on-error), got {on_error!r}",
                              self.path)
        if batch_documents < 1 or batch_chars < 1:
            raise ValueError("batch_documents and batch_chars must be positive")
        self.batch_documents, self.batch_chars = batch_documents, batch_chars
        self.split = None if split is None else ({split} if isinstance(split, str) else set(split))
        self.lenient = on_error == "skip"
        self.skipped: list[SkippedRecord] = []
        self.total_bytes = self.path.stat().st_size
        self.bytes_read = 0
        self.n_documents = self.n_valid = 0
        self.record_number = 0
        self.splits_seen: set[str] = set()

    @abstractmethod
    def _records(self) -> Iterator[Callable[[], Document | None]]:
        """One function per record, returning its document (``None``: no record, e.g. a blank line) or raising a
        :class:`CorpusError`; :attr:`bytes_read` advanced as the file is read."""

    def documents(self) -> Iterator[Document]:
        """The documents one by one (split filter and ``on_error`` applied, no batches; an empty result is no error):
        :attr:`record_number` is the line or record of the one just yielded."""
        self.bytes_read = self.n_documents = self.n_valid = 0
        self.skipped = []
        for record in self._records():
            doc = self._attempt(record)
            if doc is None:
                continue
            self.n_valid += 1
            if doc.split is not None:
                self.splits_seen.add(doc.split)
            if self.split is not None and doc.split not in self.split:
                continue
            self.n_documents += 1
            yield doc

    def __iter__(self) -> Iterator[list[Document]]:
        batch: list[Document] = []
        chars = 0
        for doc in self.documents():
            if batch and (len(batch) >= self.batch_documents or chars + len(doc.text) > self.batch_chars):
                yield batch
                batch, chars = [], 0
            batch.append(doc)
            chars += len(doc.text)
        if batch:
            yield batch
        if self.n_documents == 0:
            self._empty()

    def _attempt(self, record: Callable[[], Document | None]) -> Document | None:
        try:
            return record()
        except CorpusError as exc:
            if not self.lenient:
                raise
            self.skipped.append(SkippedRecord(exc.path, exc.line, exc.record, exc.message))
            return None

    def _empty(self) -> None:
        if self.split is not None and (self.n_valid or not self.skipped):
            raise CorpusError(f"no documents left after filtering (split={sorted(self.split)!r}); available splits: "
                              f"{sorted(self.splits_seen)}", self.path)
        if self.skipped:
            first = self.skipped[0]
            raise CorpusError(f"the corpus is empty: every record was skipped ({len(self.skipped)}; the first at "
                              f"{located(None, first.line, first.record)}: {first.reason})", self.path)
        raise CorpusError("the corpus is empty (no documents found)", self.path)


class JsonlBatches(DocumentBatches):
    """A JSON Lines corpus (native, or with named fields: ``text_field``, ``person_field``, ``id_field``,
    ``split_field`` as for :func:`toolkit.corpus.read_jsonl`, ``"@row"`` for a person or id taken from the line) in
    batches, read line by line; other parameters: :class:`DocumentBatches`. :meth:`part` reads one byte range of
    the file (a partition of :func:`jsonl_ranges`)."""

    def __init__(self, path: str | os.PathLike, *, text_field: str = "text", person_field: str = "person_id",
                 id_field: str | None = "doc_id", split_field: str | None = "split", **options: Any):
        super().__init__(path, **options)
        self.fields = JsonlFields(text_field, person_field, id_field, split_field, self.path)
        self.range: tuple[int, int, int] | None = None

    def part(self, start: int, stop: int, first_line: int) -> JsonlBatches:
        """The same reader (fields, split, ``on_error``) over bytes ``[start, stop)`` of the file only, whose first
        line is line ``first_line`` of the file (errors name the file's own line numbers)."""
        other = copy.copy(self)
        other.range = (start, stop, first_line)
        other.skipped, other.splits_seen = [], set()
        other.total_bytes = stop - start
        return other

    def _records(self) -> Iterator[Callable[[], Document | None]]:
        start, stop, first = self.range if self.range is not None else (0, None, 1)
        with open(self.path, "rb") as fh:
            fh.seek(start)
            for lineno, raw in enumerate(fh, start=first):
                if stop is not None and self.bytes_read >= stop - start:
                    return
                self.bytes_read += len(raw)
                self.record_number = lineno
                yield lambda raw=raw, lineno=lineno: jsonl_line_document(raw, self.path, lineno, self.fields)


def jsonl_ranges(path: str | os.PathLike, part_bytes: int) -> list[tuple[int, int, int]]:
    """A JSON Lines file cut at line ends into consecutive byte ranges of about ``part_bytes`` (a range ends at the
    first line end from ``part_bytes`` on): ``(start, stop, first line number)`` each, for
    :meth:`JsonlBatches.part`. One pass over the file, counting line ends (no parsing)."""
    if part_bytes < 1:
        raise ValueError("part_bytes must be positive")
    out: list[tuple[int, int, int]] = []
    start, line, lines, pos = 0, 1, 0, 0  # the open range's first byte and line; its line ends so far; block offset
    with open(path, "rb") as fh:
        while block := fh.read(1 << 23):
            i = 0
            while (want := max(start + part_bytes - 1 - pos, i)) < len(block):
                j = block.find(b"\n", want)
                if j < 0:
                    break
                out.append((start, pos + j + 1, line))
                line += lines + block.count(b"\n", i, j + 1)
                start, lines, i = pos + j + 1, 0, j + 1
            lines += block.count(b"\n", i)
            pos += len(block)
    if pos > start:
        out.append((start, pos, line))
    return out


class ParquetBatches(DocumentBatches):
    """A Parquet table (columns named as for :func:`toolkit.corpus.read_parquet`) in batches, read one record batch
    of the used columns at a time; :attr:`bytes_read` is the file size times the share of rows read. Other
    parameters: :class:`DocumentBatches`."""

    def __init__(self, path: str | os.PathLike, *, text_field: str = "text", person_field: str = "person_id",
                 id_field: str | None = "doc_id", split_field: str | None = "split", **options: Any):
        super().__init__(path, **options)
        self.rows = ParquetRows(self.path, text_field=text_field, person_field=person_field, id_field=id_field,
                                split_field=split_field)

    def _records(self) -> Iterator[Callable[[], Document | None]]:
        for row, values in self.rows:
            self.record_number = row
            self.bytes_read = self.total_bytes * self.rows.rows_read // max(self.rows.num_rows, 1)
            yield lambda row=row, values=values: self.rows.document(row, values)


#: The formats read in batches, and their batch readers.
STREAMED: dict[str, type[DocumentBatches]] = {"jsonl": JsonlBatches, "parquet": ParquetBatches}


def streamed(path: str | os.PathLike, fmt: str, *, split: Iterable[str] | None = None, on_error: str = "strict",
             **options: Any) -> DocumentBatches | None:
    """The batch reader of the corpus ``path`` in format ``fmt`` (``options``: its field mapping), or ``None`` when
    that format is read whole (:func:`toolkit.corpus.load_corpus`)."""
    reader = STREAMED.get(fmt)
    return None if reader is None else reader(Path(path), split=split, on_error=on_error, **options)


def iter_jsonl_batches(path: str | os.PathLike, batch_size: int = BATCH_DOCUMENTS,
                       **options: Any) -> Iterator[list[Document]]:
    """Batches of at most ``batch_size`` documents of a JSON Lines corpus (options: see :class:`JsonlBatches`)."""
    return iter(JsonlBatches(path, batch_documents=batch_size, **options))


def corpus_batches(documents: Sequence[Document], *, batch_documents: int = BATCH_DOCUMENTS,
                   batch_chars: int = BATCH_CHARS) -> Iterator[list[Document]]:
    """An in-memory corpus as consecutive batches bounded like :class:`JsonlBatches`'s."""
    batch: list[Document] = []
    chars = 0
    for doc in documents:
        if batch and (len(batch) >= batch_documents or chars + len(doc.text) > batch_chars):
            yield batch
            batch, chars = [], 0
        batch.append(doc)
        chars += len(doc.text)
    if batch:
        yield batch


__all__ = ["BATCH_CHARS", "BATCH_DOCUMENTS", "STREAMED", "DocumentBatches", "JsonlBatches", "ParquetBatches",
           "corpus_batches", "iter_jsonl_batches", "jsonl_ranges", "streamed"]
