"""Corpus model, readers and writer (SPEC.md §1).

>>> from toolkit.corpus import load_corpus          # doctest: +SKIP
>>> corpus = load_corpus("notes.jsonl")              # doctest: +SKIP
"""

from __future__ import annotations

from toolkit.errors import CorpusError, ToolkitError
from toolkit.corpus.model import Corpus, Document, Span, make_document
from toolkit.corpus.readers import (
    FORMATS,
    CorpusWarning,
    detect_format,
    load_corpus,
    read_csv,
    read_i2b2,
    read_jsonl,
    read_maildir,
    read_mbox,
    read_tab,
    read_txt_folder,
    write_jsonl,
)

__all__ = [
    "FORMATS",
    "Corpus",
    "CorpusError",
    "CorpusWarning",
    "Document",
    "Span",
    "ToolkitError",
    "detect_format",
    "load_corpus",
    "make_document",
    "read_csv",
    "read_i2b2",
    "read_jsonl",
    "read_maildir",
    "read_mbox",
    "read_tab",
    "read_txt_folder",
    "write_jsonl",
]
