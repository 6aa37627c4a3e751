"""Corpus model, readers and writer (methods.md §1).

``model`` holds :class:`Document` and :class:`Corpus`; ``formats/`` one reader module per file format (JSONL, CSV,
Parquet, i2b2/n2c2 XML, TAB JSON, mbox/Maildir, the Enron layout, folders of text files) over shared helpers in
``formats/common``; ``load`` detects the format and dispatches (:func:`load_corpus`); ``reading`` declares the
reading options every command takes (:class:`CorpusReading`: format, field mapping, person rule, annotator, errors).

>>> from toolkit.corpus import load_corpus          # doctest: +SKIP
>>> corpus = load_corpus("notes.jsonl")              # doctest: +SKIP
"""

from __future__ import annotations

from toolkit.errors import CorpusError, ToolkitError
from toolkit.corpus.model import Corpus, Document, SkippedRecord, Span, make_document
from toolkit.corpus.formats import (
    CorpusWarning,
    read_csv,
    read_enron,
    read_i2b2,
    read_jsonl,
    read_maildir,
    read_mbox,
    read_parquet,
    read_tab,
    read_txt_folder,
    write_jsonl,
)
from toolkit.corpus.load import FORMATS, detect_format, load_corpus
from toolkit.corpus.reading import CorpusReading

__all__ = [
    "FORMATS",
    "Corpus",
    "CorpusError",
    "CorpusReading",
    "CorpusWarning",
    "Document",
    "SkippedRecord",
    "Span",
    "ToolkitError",
    "detect_format",
    "load_corpus",
    "make_document",
    "read_csv",
    "read_enron",
    "read_i2b2",
    "read_jsonl",
    "read_maildir",
    "read_mbox",
    "read_parquet",
    "read_tab",
    "read_txt_folder",
    "write_jsonl",
]
