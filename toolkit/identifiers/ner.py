"""NER at scale: texts cut into bounded pieces, each distinct piece run once (used by
:class:`~toolkit.identifiers.detectors.SpacyDetector`).

Clinical notes and e-mails repeat template text (section headers, boilerplate sentences, signatures). A document is cut
into **pieces** (:func:`pieces`): its lines, and with ``unit="sentence"`` the sentences of each line (a split after
``.``, ``!`` or ``?`` followed by a space and a capital, unless the word before is a title or an initial such as
``Dr.`` or ``J.``); a piece longer than ``max_chars`` is cut at its last space before the limit (or at the limit),
so that no single text handed to the model is unbounded (a 10 MB document is thousands of pieces, not one 10 MB
text). Each piece is **normalised** (:func:`normalise`: leading and trailing blanks dropped, inner runs of blanks
made one space); NER runs once per distinct normalised text (:class:`PieceCache`), and entity offsets are mapped back
to the document (:meth:`Piece.to_document`).

The cost is context: the model sees one piece at a time, so an entity cut by a piece boundary is cut too. spaCy's
small English pipeline looks a few tokens around each word, so sentence pieces lose little;
``benchmarks/identifiers.py`` measures precision and recall against document-level NER.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any


from toolkit.corpus import Document, Span
from toolkit.errors import ToolkitError
from toolkit.progress import progress_bar

UNITS = ("sentence", "line", "document")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]?[ \t]+(?=[A-Z0-9\"'(\[])")
_NO_SPLIT_BEFORE = re.compile(r"(?:\b(?:dr|mr|mrs|ms|st|jr|sr|prof|no|vs|mt|ft|approx|dept|e\.g|i\.e)|\b[A-Za-z])"
                              r"\.[\"')\]]?[ \t]+$", re.IGNORECASE)
_BLANKS = " \t\r\f\v\u00a0"
#: What the model reads around each piece: the newlines that stand around a line in the document.
WRAP = "\n"
_LINE = re.compile(r"[^\n]+")


@dataclass(frozen=True, slots=True)
class Piece:
    """``key == text[start:end]``, a piece of a document (what NER sees and the cache is keyed by)."""

    start: int
    end: int
    key: str

    def to_document(self, s: int, e: int) -> tuple[int, int]:
        """Document offsets of characters ``[s, e)`` of :attr:`key`."""
        return self.start + s, self.start + e


def normalise(raw: str) -> str:
    """Blanks at both ends dropped (inner blanks are kept: the model reads runs of spaces as tokens, and collapsing
    them moved precision on the sample notes by more than 0.005)."""
    return raw.strip(_BLANKS)


def _windows(text: str, start: int, end: int, max_chars: int) -> Iterator[tuple[int, int]]:
    while end - start > max_chars:
        cut = text.rfind(" ", start + 1, start + max_chars)
        cut = cut if cut > start else start + max_chars
        yield start, cut
        start = cut
    yield start, end


def _sentences(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    line = text[start:end]
    a = 0
    for m in _SENTENCE_END.finditer(line):
        if _NO_SPLIT_BEFORE.search(line, max(a, m.start() - 8), m.end()):
            continue
        yield start + a, start + m.end()
        a = m.end()
    yield start + a, end


def pieces(text: str, unit: str = "sentence", max_chars: int = 2000) -> list[Piece]:
    """The non-blank pieces of ``text`` (see the module docstring), in order, non-overlapping."""
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    spans: Iterator[tuple[int, int]]
    if unit == "document":
        spans = iter([(0, len(text))])
    else:
        spans = ((m.start(), m.end()) for m in _LINE.finditer(text))
        if unit == "sentence":
            spans = (s for a, b in spans for s in _sentences(text, a, b))
    out = []
    for a, b in spans:
        for s, e in _windows(text, a, b, max_chars):
            raw = text[s:e]
            key = raw if unit == "document" else normalise(raw)
            if key.strip():
                lead = 0 if unit == "document" else len(raw) - len(raw.lstrip(_BLANKS))
                out.append(Piece(s + lead, s + lead + len(key), key))
    return out


class PieceCache:
    """Entities of normalised pieces, ``key -> ((start, end, label), ...)`` in key offsets, at most ``size`` kept
    (the oldest entries go first)."""

    def __init__(self, size: int):
        self.size = max(int(size), 0)
        self.data: dict[str, tuple[tuple[int, int, str], ...]] = {}

    def get(self, key: str):
        return self.data.get(key)

    def update(self, fresh: dict[str, tuple[tuple[int, int, str], ...]]) -> None:
        if self.size == 0:
            return
        for key, ents in fresh.items():
            self.data[key] = ents
        for _ in range(len(self.data) - self.size):
            del self.data[next(iter(self.data))]


def processes(n_process: int, n_chars: int) -> int:
    """``n_process`` if positive; else (auto) one process for under :data:`MULTIPROCESS_CHARS` characters of new
    text (starting workers costs more than it saves), otherwise one per CPU available (at most 8)."""
    if n_process > 0:
        return n_process
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return 1 if n_chars < MULTIPROCESS_CHARS else max(1, min(cpus, 8))


#: Below this many characters of text to parse, ``n_process=0`` runs in one process.
MULTIPROCESS_CHARS = 400_000


def detect_entities(nlp, docs: Sequence[Document], labels: set[str], *, cache: PieceCache, unit: str = "sentence",
                    max_chars: int = 2000, batch_size: int = 64, n_process: int = 0,
                    progress: bool = True) -> tuple[list[list[Span]], dict[str, Any]]:
    """Entities (kept ``labels`` only) of every document, NER run once per distinct piece not in ``cache``
    (a cache with a ``prefetch(keys)`` method first loads the batch's pieces from its store on disk).

    Returns the spans per document (sorted, document offsets) and counts: pieces, distinct pieces, pieces run
    through the model, their characters, all characters, words (blank-separated). A failure inside spaCy is a
    :class:`~toolkit.errors.ToolkitError` naming the document and the characters of the piece, never the text.
    """
    cut = [pieces(d.text, unit, max_chars) for d in docs]
    prefetch = getattr(cache, "prefetch", None)  # a cache with a store on disk (toolkit.identifiers.ner_cache)
    if prefetch is not None:
        prefetch({pc.key for per_doc in cut for pc in per_doc})
    todo: dict[str, int] = {}
    for per_doc in cut:
        for pc in per_doc:
            if pc.key not in todo and cache.get(pc.key) is None:
                todo[pc.key] = len(todo)
    keys = list(todo)
    words = {k: k.count(" ") + 1 for k in keys}
    n_words = sum(pc.key.count(" ") + 1 for per_doc in cut for pc in per_doc)
    fresh: dict[str, tuple[tuple[int, int, str], ...]] = {}
    n_proc = processes(n_process, sum(map(len, keys)))
    with progress_bar(total=n_words, desc="spaCy NER", unit="word", unit_scale=True, enabled=progress) as bar:
        counts = _multiplicity(cut, todo)
        bar.update(n_words - sum(words[k] * n for k, n in counts.items()))  # pieces served from the cache
        try:
            wrap = "" if unit == "document" else WRAP
            wrapped = (wrap + k + wrap for k in keys)
            for key, parsed in zip(keys, nlp.pipe(wrapped, batch_size=batch_size, n_process=n_proc)):
                fresh[key] = _entities(parsed, labels, len(key), len(wrap))
                bar.update(words[key] * counts[key])
        except Exception as exc:  # noqa: BLE001 -- any failure inside the model, reported by document
            _raise_located(nlp, exc, keys[len(fresh):], docs, cut)
    out = []
    for d, per_doc in zip(docs, cut):
        spans = []
        for pc in per_doc:
            ents = fresh.get(pc.key)
            for s, e, label in (ents if ents is not None else cache.get(pc.key)):
                a, b = pc.to_document(s, e)
                spans.append(Span(a, b, label))
        out.append(spans)
    cache.update(fresh)
    n_pieces = sum(map(len, cut))
    stats = {"pieces": n_pieces, "distinct_pieces": len({pc.key for per in cut for pc in per}), "ner_pieces": len(keys),
             "ner_chars": sum(map(len, keys)), "chars": sum(len(d.text) for d in docs), "words": n_words,
             "n_process": n_proc}
    return out, stats


def _entities(parsed, labels: set[str], length: int, shift: int) -> tuple[tuple[int, int, str], ...]:
    """Kept entities in key offsets (the wrapping newlines removed, clipped to the key)."""
    out = []
    for e in parsed.ents:
        a, b = max(e.start_char - shift, 0), min(e.end_char - shift, length)
        if e.label_ in labels and b > a:
            out.append((a, b, e.label_))
    return tuple(out)


def _multiplicity(cut: list[list[Piece]], todo: dict[str, int]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for per_doc in cut:
        for pc in per_doc:
            if pc.key in todo:
                counts[pc.key] = counts.get(pc.key, 0) + 1
    return counts


def error_words(exc: BaseException) -> str:
    """An exception in words that hold no text of a record: its type and spaCy's error code (``ValueError [E088]``),
    never its message (spaCy's messages may quote the text)."""
    code = re.search(r"\[E\d+\]", str(exc))
    return f"{type(exc).__name__}{' ' + code.group() if code else ''}"


def _raise_located(nlp, exc: Exception, remaining: list[str], docs: Sequence[Document],
                   cut: list[list[Piece]]) -> None:
    """Find the piece spaCy fails on (running the rest one by one) and raise naming its document."""
    failing = None
    for key in remaining:
        try:
            nlp(key)
        except Exception:  # noqa: BLE001
            failing = key
            break
    what = error_words(exc)
    for d, per_doc in zip(docs, cut):
        for pc in per_doc:
            if pc.key == failing:
                raise ToolkitError(f"spaCy NER failed on document {d.doc_id!r}, characters {pc.start}-{pc.end}: "
                                   f"{what}") from None
    ids = ", ".join(repr(d.doc_id) for d in docs[:3]) + (" ..." if len(docs) > 3 else "")
    raise ToolkitError(f"spaCy NER failed on a batch of {len(docs)} documents ({ids}): {what}") from None


__all__ = ["MULTIPROCESS_CHARS", "Piece", "PieceCache", "UNITS", "detect_entities", "error_words", "normalise",
           "pieces", "processes"]
