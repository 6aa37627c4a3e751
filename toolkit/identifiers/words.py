"""Word segmentation and term normalisation (SPEC.md §1).

**Words** are maximal runs of letters and digits (Unicode categories L* and N*), with combining marks (M*) kept
attached, so ``"cafe\u0301"`` is one word and ``"O'Brien"`` is two (``O``, ``Brien``). Punctuation, whitespace and the
underscore are never part of a word. Terms are compared after Unicode NFKC and lower-casing **(SPEC §1 choice,
configurable ``lowercase``)**; character offsets always refer to the original text.

The segmenter is a single compiled stdlib ``re`` pattern (measured about 2x faster than the ``regex`` module's
``\\p{L}`` classes on this machine), applied to a whole corpus into flat numpy arrays so that every later step
(term graph, protected positions) is vectorised.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from tqdm.auto import tqdm


@functools.cache
def word_pattern() -> re.Pattern[str]:
    """The compiled word pattern: alphanumeric runs with attached combining marks."""
    ranges: list[list[int]] = []
    for o in range(sys.maxunicode + 1):
        if unicodedata.category(chr(o)).startswith("M"):
            if ranges and ranges[-1][1] == o - 1:
                ranges[-1][1] = o
            else:
                ranges.append([o, o])
    marks = "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)
    return re.compile(rf"[^\W_]+(?:[{marks}]+[^\W_]*)*")


def normalize_term(term: str, lowercase: bool = True) -> str:
    """NFKC-normalise (and lower-case) one term."""
    term = unicodedata.normalize("NFKC", term)
    return term.lower() if lowercase else term


def iter_words(text: str) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the words of one text."""
    return [m.span() for m in word_pattern().finditer(text)]


@dataclass
class WordTable:
    """All word occurrences of a corpus as flat arrays (one row per word occurrence, in document order).

    Attributes
    ----------
    doc:
        Document index (position in the corpus) of each word, int32.
    start, end:
        Character offsets in that document's text, int64.
    term:
        Index into ``vocab`` of the normalised word, int32.
    vocab:
        Normalised word types; ``vocab[term[i]]`` is word ``i``.
    doc_ptr:
        Words of document ``d`` are rows ``doc_ptr[d]:doc_ptr[d + 1]`` (CSR-style), int64, length n_docs + 1.
    """

    doc: np.ndarray
    start: np.ndarray
    end: np.ndarray
    term: np.ndarray
    vocab: np.ndarray
    doc_ptr: np.ndarray

    def __len__(self) -> int:
        return len(self.term)

    @property
    def n_docs(self) -> int:
        return len(self.doc_ptr) - 1


@functools.cache
def _split_pattern() -> re.Pattern[str]:
    return re.compile(f"({word_pattern().pattern})")


def segment_corpus(texts: Sequence[str], *, lowercase: bool = True, progress: bool = True,
                   chunk_size: int = 2000) -> WordTable:
    """Segment every text into words and map them to normalised term ids.

    Texts are processed in chunks joined by ``"\n"`` (never part of a word, so no word spans two documents). One
    ``re.split`` with a capturing group returns the alternating non-word / word pieces in C; word offsets are the
    cumulative sum of the piece lengths. This avoids one Python match object per word (measured 2x faster than a
    ``finditer`` loop). Raw words are factorised first (pandas hash table) and only distinct surface forms are
    normalised, so NFKC + lower-casing is paid once per distinct form, not once per occurrence.
    """
    splitter = _split_pattern()
    starts, ends, docs, surface = [], [], [], []
    counts = np.zeros(len(texts), dtype=np.int64)
    bar = tqdm(total=len(texts), desc="segmenting words", unit="doc", disable=not progress, mininterval=1.0)
    for c0 in range(0, len(texts), chunk_size):
        chunk = texts[c0:c0 + chunk_size]
        pieces = splitter.split("\n".join(chunk))
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        w_end = np.cumsum(lengths)[1::2]
        w_start = w_end - lengths[1::2]
        doc_base = np.zeros(len(chunk), dtype=np.int64)
        np.cumsum([len(t) + 1 for t in chunk[:-1]], out=doc_base[1:])
        local_doc = np.searchsorted(doc_base, w_start, side="right") - 1
        starts.append(w_start - doc_base[local_doc])
        ends.append(w_end - doc_base[local_doc])
        docs.append(local_doc + c0)
        counts[c0:c0 + len(chunk)] = np.bincount(local_doc, minlength=len(chunk))
        surface.extend(pieces[1::2])
        bar.update(len(chunk))
    bar.close()
    doc_ptr = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(counts, out=doc_ptr[1:])
    codes, uniques = pd.factorize(pd.Series(surface, dtype=object), sort=False)
    normalised = [normalize_term(u, lowercase) for u in uniques]
    term_codes, vocab = pd.factorize(pd.Series(normalised, dtype=object), sort=True)
    term = term_codes[codes].astype(np.int32) if len(codes) else np.zeros(0, dtype=np.int32)

    def cat(parts: list[np.ndarray], dtype) -> np.ndarray:
        return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)

    return WordTable(doc=cat(docs, np.int32), start=cat(starts, np.int64), end=cat(ends, np.int64), term=term,
                     vocab=np.asarray(vocab, dtype=object), doc_ptr=doc_ptr)
