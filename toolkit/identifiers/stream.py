"""Documents in batches, for analyses that must not hold a whole corpus as Python objects.

:class:`JsonlBatches` reads a JSON Lines corpus (the format of :func:`toolkit.corpus.read_jsonl`, native or with named
fields) line by line and yields lists of :class:`~toolkit.corpus.Document` bounded in count and characters; only one
batch is alive at a time. It applies the reader's rules to each line: a JSON object with no duplicate key, the native
fields only (or the named ones), spans validated by :func:`~toolkit.corpus.make_document`; blank lines are skipped, a
leading byte-order mark is dropped, lines end at ``\\n`` only. Errors are :class:`~toolkit.errors.CorpusError` naming
the file and line, never the text. What it cannot check line by line, a ``doc_id`` repeated across batches, the
consumer checks (:func:`toolkit.identifiers.engine.analyze_to_disk` does, before anything is written).

:func:`corpus_batches` cuts an in-memory corpus (any reader's output) into the same kind of batches.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from toolkit.corpus import CorpusError, Document, SkippedRecord, make_document

#: Default batch bounds: documents and characters of text per batch.
BATCH_DOCUMENTS = 20_000
BATCH_CHARS = 16_000_000
ROW = "@row"
_NATIVE = ("doc_id", "person_id", "text", "spans", "split", "labels")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError("duplicate key in a JSON object")
        out[key] = value
    return out


class JsonlBatches:
    """Iterate over a JSON Lines corpus in batches (a list of documents each).

    Parameters
    ----------
    path:
        The ``.jsonl`` file (UTF-8).
    batch_documents, batch_chars:
        A batch ends when it holds this many documents or this many characters of text (a longer document is a batch
        of its own).
    split:
        Keep only documents whose split is one of these names (``None``: all).
    text_field, person_field, id_field, split_field:
        As for :func:`toolkit.corpus.read_jsonl` (``"@row"`` for a person or id taken from the line).
    on_error:
        ``"strict"`` stops at the first bad line; ``"skip"`` leaves it out and lists it in :attr:`skipped`.

    Attributes
    ----------
    skipped:
        Lines left out under ``on_error="skip"`` (file, line, reason; no text).
    total_bytes, bytes_read:
        Size of the file and how much of it was read (for progress bars).
    n_documents:
        Documents yielded so far.
    """

    def __init__(self, path: str | os.PathLike, *, batch_documents: int = BATCH_DOCUMENTS,
                 batch_chars: int = BATCH_CHARS, split: str | Iterable[str] | None = None,
                 text_field: str = "text", person_field: str = "person_id", id_field: str | None = "doc_id",
                 split_field: str | None = "split", on_error: str = "strict"):
        self.path = Path(path)
        if not self.path.exists():
            raise CorpusError("file not found", self.path)
        if self.path.is_dir():
            raise CorpusError("expected a file, got a folder", self.path)
        if on_error not in ("strict", "skip"):
            raise CorpusError(f"on_error must be one of strict, skip (--on-error), got {on_error!r}", self.path)
        if batch_documents < 1 or batch_chars < 1:
            raise ValueError("batch_documents and batch_chars must be positive")
        for name, value in (("text_field", text_field), ("person_field", person_field), ("id_field", id_field),
                            ("split_field", split_field)):
            if value is not None and (not isinstance(value, str) or not value):
                raise CorpusError(f"{name} must be a non-empty field name, got {value!r}", self.path)
        if text_field in (None, ROW):
            raise CorpusError("text_field must name a field (every document needs a text)", self.path)
        self.batch_documents, self.batch_chars = batch_documents, batch_chars
        self.split = None if split is None else ({split} if isinstance(split, str) else set(split))
        self.fields = (text_field, person_field, None if id_field == ROW else id_field, split_field)
        self.native = (text_field, person_field, id_field, split_field) == ("text", "person_id", "doc_id", "split")
        self.lenient = on_error == "skip"
        self.skipped: list[SkippedRecord] = []
        self.total_bytes = self.path.stat().st_size
        self.bytes_read = 0
        self.n_documents = self.n_valid = 0
        self.splits_seen: set[str] = set()

    def __iter__(self) -> Iterator[list[Document]]:
        batch: list[Document] = []
        chars = 0
        self.bytes_read = self.n_documents = self.n_valid = 0
        with open(self.path, "rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                self.bytes_read += len(raw)
                doc = self._line(raw, lineno)
                if doc is None:
                    continue
                self.n_valid += 1
                if doc.split is not None:
                    self.splits_seen.add(doc.split)
                if self.split is not None and doc.split not in self.split:
                    continue
                if batch and (len(batch) >= self.batch_documents or chars + len(doc.text) > self.batch_chars):
                    yield batch
                    batch, chars = [], 0
                batch.append(doc)
                chars += len(doc.text)
                self.n_documents += 1
        if batch:
            yield batch
        if self.n_documents == 0:
            self._empty()

    def _empty(self) -> None:
        if self.split is not None and (self.n_valid or not self.skipped):
            raise CorpusError(f"no documents left after filtering (split={sorted(self.split)!r}); available splits: "
                              f"{sorted(self.splits_seen)}", self.path)
        if self.skipped:
            first = self.skipped[0]
            raise CorpusError(f"the corpus is empty: every record was skipped ({len(self.skipped)}; the first at line "
                              f"{first.line}: {first.reason})", self.path)
        raise CorpusError("the corpus is empty (no documents found)", self.path)

    def _line(self, raw: bytes, lineno: int) -> Document | None:
        try:
            return self._parse(raw, lineno)
        except CorpusError as exc:
            if not self.lenient:
                raise
            self.skipped.append(SkippedRecord(exc.path, exc.line, exc.record, exc.message))
            return None

    def _parse(self, raw: bytes, lineno: int) -> Document | None:
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorpusError(f"not valid utf-8: byte(s) {raw[e.start:e.end].hex(' ')} at byte {e.start + 1} of the "
                              f"line: {e.reason}; re-encode the file as UTF-8", self.path, line=lineno) from e
        if not line.strip(" \t\r"):
            return None
        try:
            obj = json.loads(line, object_pairs_hook=_no_duplicate_keys)
        except json.JSONDecodeError as e:
            raise CorpusError(f"invalid JSON: {e.msg} (column {e.colno})", self.path, line=lineno) from e
        except ValueError as e:
            raise CorpusError(str(e), self.path, line=lineno) from e
        except RecursionError as e:
            raise CorpusError("invalid JSON: nested too deeply", self.path, line=lineno) from e
        if not isinstance(obj, dict):
            raise CorpusError(f"expected a JSON object with fields {', '.join(_NATIVE)}; got a {type(obj).__name__}",
                              self.path, line=lineno)
        return self._document(obj, lineno)

    def _document(self, obj: dict[str, Any], lineno: int) -> Document:
        text_f, person_f, id_f, split_f = self.fields
        if self.native:
            unknown = [k for k in obj if k not in _NATIVE]
            missing = [k for k in ("doc_id", "person_id", "text") if k not in obj]
            problems = []
            if unknown:
                problems.append(f"{len(unknown)} unknown field(s); allowed fields: {', '.join(_NATIVE)} (to read a "
                                "foreign export, name its fields with --text-field, --person-field, --id-field)")
            if missing:
                problems.append(f"missing field(s) {', '.join(repr(k) for k in missing)}")
            if problems:
                raise CorpusError("; ".join(problems), self.path, line=lineno)
        else:
            named = [f for f in (id_f, person_f, text_f) if f is not None and f != ROW]
            missing = [f for f in named if f not in obj]
            if missing:
                raise CorpusError(f"missing field(s) {', '.join(map(repr, missing))} (the fields are named by "
                                  "--text-field, --person-field, --id-field)", self.path, line=lineno)
        doc_id = obj[id_f] if id_f is not None else f"{self.path.stem}-{lineno}"
        person = doc_id if person_f == ROW else obj[person_f]
        spans = obj.get("spans")
        if spans is not None and not isinstance(spans, list):
            raise CorpusError(f"field 'spans' must be a list of {{start, end, label}} objects, got "
                              f"{type(spans).__name__}", self.path, line=lineno)
        split = obj.get(split_f) if split_f is not None else None
        return make_document(doc_id, person, obj[text_f], spans, split, obj.get("labels"), path=self.path,
                             line=lineno)


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


__all__ = ["BATCH_CHARS", "BATCH_DOCUMENTS", "JsonlBatches", "corpus_batches", "iter_jsonl_batches"]
