"""Token sequences aligned with the toolkit's words (methods.md §1), so that protection decided on words (methods.md §2)
reaches every sub-token, for any fast tokenizer (WordPiece, byte-level BPE, SentencePiece).

A token belongs to the word that contains its last character (byte-level BPE offsets include the leading space, so
the first character is not reliable); tokens outside every word (punctuation, spaces) belong to none (-1) and are
never targets. Documents longer than the model's window are cut into chunks, never inside a word.

A token may also *overlap* several words: a SentencePiece / Unigram vocabulary without whitespace pre-splitting has
pieces such as ``"n▁Sm"`` that span the end of one word and the start of the next. Besides the word of its last
character, every token therefore records the range of words its character span overlaps (``EncodedCorpus.overlap``:
first and last word row, -1 for none); protection is decided on that range (a token is protected when it overlaps
*any* protected word, :func:`toolkit.strategies.examples_from_encoding`), so no piece of a protected word escapes
because the piece ends in another word.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from toolkit.identifiers.words import WordTable, segment_corpus
from toolkit.progress import progress_bar


def special_template(tokenizer) -> tuple[list[int], list[int]]:
    """The special tokens the tokenizer adds before and after a single sequence (``[CLS] … [SEP]``, ``<s> … </s>``,
    nothing for GPT-2), found by encoding a probe text with and without special tokens."""
    probe = "a"
    plain = tokenizer(probe, add_special_tokens=False)["input_ids"]
    full = tokenizer(probe, add_special_tokens=True)["input_ids"]
    for i in range(len(full) - len(plain) + 1):
        if full[i:i + len(plain)] == plain:
            return full[:i], full[i + len(plain):]
    return [], []


@dataclass
class EncodedCorpus:
    """Chunks of token ids with, per token, the word-table row of its word (-1: special token or not in a word).

    Attributes
    ----------
    input_ids, word_row:
        One array per chunk, special tokens included.
    overlap:
        One ``(n_tokens, 2)`` array per chunk: the first and last word-table row the token's characters overlap
        (both -1 when it overlaps no word: special tokens, spaces, punctuation).
    chunk_doc:
        Document index of every chunk.
    words:
        The corpus' :class:`~toolkit.identifiers.words.WordTable` (rows are global word indices).
    """

    input_ids: list[np.ndarray]
    word_row: list[np.ndarray]
    chunk_doc: np.ndarray
    words: WordTable
    overlap: list[np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def n_tokens(self) -> int:
        return int(sum(len(x) for x in self.input_ids))


def _token_words(offsets: np.ndarray, w_start: np.ndarray, w_end: np.ndarray, row0: int) -> np.ndarray:
    """Word row of each token: the word holding its last character (-1: none)."""
    if len(offsets) == 0:
        return np.zeros(0, dtype=np.int64)
    last = offsets[:, 1] - 1
    idx = np.searchsorted(w_start, last, side="right") - 1
    ok = (idx >= 0) & (offsets[:, 1] > offsets[:, 0])
    ok[ok] &= last[ok] < w_end[idx[ok]]
    return np.where(ok, idx + row0, -1)


def token_overlaps(offsets: np.ndarray, w_start: np.ndarray, w_end: np.ndarray, row0: int) -> np.ndarray:
    """``(n_tokens, 2)``: first and last word row whose characters a token's span ``[s, e)`` overlaps (a word
    ``[ws, we)`` overlaps when ``ws < e`` and ``we > s``); ``-1, -1`` for a token overlapping none (or empty)."""
    if len(offsets) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    s, e = offsets[:, 0], offsets[:, 1]
    first = np.searchsorted(w_end, s, side="right")  # first word ending after s (words are sorted, disjoint)
    last = np.searchsorted(w_start, e, side="left") - 1  # last word starting before e
    ok = (e > s) & (first <= last)
    return np.where(ok[:, None], np.stack([first, last], axis=1) + row0, -1)


def _cuts(rows: np.ndarray, window: int) -> list[tuple[int, int]]:
    """Chunk boundaries of at most ``window`` tokens that never split a word (unless a word is longer than a window)."""
    out, start, n = [], 0, len(rows)
    while start < n:
        end = min(start + window, n)
        if end < n and rows[end] >= 0 and rows[end] == rows[end - 1]:
            back = end - 1
            while back > start and rows[back - 1] == rows[end]:
                back -= 1
            if back > start:
                end = back
        out.append((start, end))
        start = end
    return out or [(0, 0)]


def encode_corpus(texts: Sequence[str], tokenizer, *, max_length: int, words: WordTable | None = None,
                  progress: bool = True, batch_size: int = 256) -> EncodedCorpus:
    """Tokenise ``texts`` (batched, fast tokenizer) into chunks of at most ``max_length`` tokens with word alignment."""
    if not getattr(tokenizer, "is_fast", False):
        from toolkit.errors import ToolkitError

        raise ToolkitError("a fast tokenizer (with offset mapping) is required")
    words = words if words is not None else segment_corpus(texts, progress=False)
    prefix, suffix = special_template(tokenizer)
    window = max_length - len(prefix) - len(suffix)
    if window < 1:
        from toolkit.errors import ToolkitError

        raise ToolkitError(f"max_length {max_length} leaves no room next to {len(prefix) + len(suffix)} special tokens")
    pre, suf = np.asarray(prefix, dtype=np.int64), np.asarray(suffix, dtype=np.int64)
    pre_rows, suf_rows = np.full(len(prefix), -1), np.full(len(suffix), -1)
    pre_span, suf_span = np.full((len(prefix), 2), -1), np.full((len(suffix), 2), -1)
    input_ids, word_row, overlap, chunk_doc = [], [], [], []
    for b0 in progress_bar(range(0, len(texts), batch_size), desc="tokenising", unit="batch",
                           enabled=progress):
        enc = tokenizer(list(texts[b0:b0 + batch_size]), add_special_tokens=False, return_offsets_mapping=True)
        for j, (ids, offs) in enumerate(zip(enc["input_ids"], enc["offset_mapping"])):
            d = b0 + j
            lo, hi = words.doc_ptr[d], words.doc_ptr[d + 1]
            offs = np.asarray(offs, dtype=np.int64).reshape(-1, 2)
            rows = _token_words(offs, words.start[lo:hi], words.end[lo:hi], int(lo))
            spans = token_overlaps(offs, words.start[lo:hi], words.end[lo:hi], int(lo))
            ids = np.asarray(ids, dtype=np.int64)
            for s, e in _cuts(rows, window):
                input_ids.append(np.concatenate([pre, ids[s:e], suf]))
                word_row.append(np.concatenate([pre_rows, rows[s:e], suf_rows]))
                overlap.append(np.concatenate([pre_span, spans[s:e], suf_span]))
                chunk_doc.append(d)
    return EncodedCorpus(input_ids, word_row, np.asarray(chunk_doc, dtype=np.int64), words, overlap)
