"""Word segmentation and term normalisation (methods.md §1).

**Words** are maximal runs of letters and digits (Unicode categories L* and N*), with combining marks (M*) kept
attached, so ``"cafe\u0301"`` is one word and ``"O'Brien"`` is two (``O``, ``Brien``). Punctuation, whitespace and the
underscore are never part of a word. Terms are compared after Unicode NFKC and lower-casing **(methods.md §1 choice,
configurable ``lowercase``)**; character offsets always refer to the original text.

Corpora are segmented by RE2 inside Arrow kernels (:data:`RE2_WORD`, ``\\p{L}``/``\\p{N}``/``\\p{M}``), in
parallel threads, into flat numpy arrays so that every later step (term graph, protected positions) is vectorised.
:func:`word_pattern` is the same definition as a stdlib ``re`` pattern, for single texts and as a reference (a
property test checks that both agree); the two can only differ on characters assigned in a Unicode version newer
than Python's ``unicodedata``.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.progress import progress_bar


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


#: RE2 (Arrow) form of the word pattern: a letter or digit, then letters, digits and combining marks.
RE2_WORD = r"[\p{L}\p{N}][\p{L}\p{N}\p{M}]*"
#: Unicode noncharacters, reserved for internal use: used to delimit words inside the Arrow kernels.
_MARKERS = [chr(c) for c in range(0xFDD0, 0xFDF0)]


def _segment_chunk(chunk: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, pa.Array]:
    """Word (local doc index, start, end, surface) of a chunk of texts, all inside Arrow/numpy kernels.

    The texts are joined by ``"\\n"`` (never inside a word); RE2 wraps every word in a marker character
    (``replace_substring_regex``); splitting on the marker gives alternating gap / word pieces, so words are the odd
    pieces and their offsets the cumulative sum of the piece lengths. The marker is a Unicode noncharacter that does
    not occur in the chunk. A chunk holding all 32 noncharacters, or a lone surrogate (which Arrow cannot encode), is
    segmented with the stdlib ``re`` pattern instead (same definition).
    """
    joined = "\n".join(chunk)
    marker = next((m for m in _MARKERS if m not in joined), None)
    try:
        if marker is None:
            raise ValueError("every marker character occurs in the chunk")
        wrapped = pc.replace_substring_regex(pa.array([joined], type=pa.large_string()), pattern=RE2_WORD,
                                             replacement=f"{marker}\\0{marker}")
        pieces = pc.split_pattern(wrapped, pattern=marker).flatten()
        lengths = pc.utf8_length(pieces).to_numpy().astype(np.int64)
        surface = pieces[1::2]
    except (ValueError, UnicodeEncodeError):  # lone surrogates cannot be UTF-8 encoded for Arrow: stdlib route
        py_pieces = re.compile(f"({word_pattern().pattern})").split(joined)
        lengths = np.fromiter(map(len, py_pieces), dtype=np.int64, count=len(py_pieces))
        surface = pa.array(py_pieces[1::2], type=pa.large_string())
    w_end = np.cumsum(lengths)[1::2]
    w_start = w_end - lengths[1::2]
    doc_base = np.zeros(len(chunk), dtype=np.int64)
    np.cumsum([len(t) + 1 for t in chunk[:-1]], out=doc_base[1:])
    local_doc = np.searchsorted(doc_base, w_start, side="right") - 1
    return local_doc, w_start - doc_base[local_doc], w_end - doc_base[local_doc], surface


def segment_corpus(texts: Sequence[str], *, lowercase: bool = True, progress: bool = True,
                   chunk_size: int = 2000, n_threads: int | None = None) -> WordTable:
    """Segment every text into words and map them to normalised term ids.

    Chunks of documents are segmented by RE2 inside Arrow kernels (:func:`_segment_chunk`), which release the GIL,
    so ``n_threads`` chunks run in parallel (default: the number of CPUs, at most 4). Distinct surface forms are
    dictionary-encoded in Arrow and only they are NFKC-normalised and lower-cased in Python.
    ``benchmarks/identifiers.py`` compares the whole analysis with a Python dict-of-sets loop and networkx.
    """
    from concurrent.futures import ThreadPoolExecutor

    n_threads = n_threads or min(4, os.cpu_count() or 1)
    chunks = [texts[i:i + chunk_size] for i in range(0, len(texts), chunk_size)]
    results = []
    with ThreadPoolExecutor(max_workers=n_threads) as pool, \
            progress_bar(total=len(texts), desc="segmenting words", unit="doc", enabled=progress) as bar:
        for chunk, res in zip(chunks, pool.map(_segment_chunk, chunks)):
            results.append(res)
            bar.update(len(chunk))
    counts = np.zeros(len(texts), dtype=np.int64)
    docs, starts, ends = [], [], []
    for i, (local_doc, start, end, _) in enumerate(results):
        c0 = i * chunk_size
        docs.append(local_doc + c0)
        starts.append(start)
        ends.append(end)
        counts[c0:c0 + len(chunks[i])] = np.bincount(local_doc, minlength=len(chunks[i]))
    doc_ptr = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(counts, out=doc_ptr[1:])
    surface = pa.chunked_array([r[3] for r in results], type=pa.large_string()) if results else \
        pa.chunked_array([], type=pa.large_string())
    encoded = pc.dictionary_encode(surface).combine_chunks() if len(surface) else None
    if encoded is None:
        return WordTable(doc=np.zeros(0, np.int32), start=np.zeros(0, np.int64), end=np.zeros(0, np.int64),
                         term=np.zeros(0, np.int32), vocab=np.zeros(0, dtype=object), doc_ptr=doc_ptr)
    normalised = [normalize_term(u, lowercase) for u in encoded.dictionary.to_pylist()]
    term_codes, vocab = pd.factorize(pd.Series(normalised, dtype=object), sort=True)
    term = term_codes[encoded.indices.to_numpy()].astype(np.int32)
    return WordTable(doc=np.concatenate(docs).astype(np.int32), start=np.concatenate(starts),
                     end=np.concatenate(ends), term=term, vocab=np.asarray(vocab, dtype=object), doc_ptr=doc_ptr)
