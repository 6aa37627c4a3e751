"""Identifier analysis of a corpus: direct and indirect identifiers, protected positions, vocabularies (methods.md §2).

>>> from toolkit.corpus import load_corpus
>>> from toolkit.identifiers import IdentifierConfig, analyze
>>> result = analyze(load_corpus("data_samples/clinical/notes.jsonl").filter(split="train"),
...                  IdentifierConfig(detector="oracle", k=2, n=1))          # doctest: +SKIP
>>> result.terms.head()                                                      # doctest: +SKIP

Definitions (methods.md §2):

* a word is a **direct identifier** when it overlaps a detected PII span (any shared character: a word half inside a
  span is still PII) **(choice)**;
* a term (m-gram, m ≤ n) is an **indirect identifier** when fewer than ``k`` individuals use it;
* **protected positions** = direct positions ∪ positions of unigram indirect types ∪ positions covered by an
  occurrence of an indirect m-gram (m ≥ 2);
* ``I_direct`` = word types seen at a direct position, minus *generic* words whose share of occurrences outside PII
  spans exceeds ``generic_ratio``; ``I_indirect`` = unigram indirect types; ``I = I_direct ∪ I_indirect``.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.corpus import Corpus, Span
from toolkit.errors import ToolkitError
from toolkit.identifiers.categories import CATEGORIES, pii_category
from toolkit.identifiers.detectors import (DEFAULT_SPACY_LABELS, DEFAULT_SPACY_MODEL, Detector, check_spans,
                                           make_detector)
from toolkit.identifiers.graph import TermGraph
from toolkit.identifiers.storage import attach_documents, run_key, save_identifiers, text_sha256
from toolkit.identifiers.words import WordTable, segment_corpus

NO_CATEGORY = -1


@dataclass
class IdentifierConfig:
    """Parameters of the identifier analysis (methods.md §2). Validated on construction.

    Attributes
    ----------
    detector:
        ``"clinical"`` (default: the best measured recall and precision on clinical notes, docs/results.md,
        "Detection quality on clinical note formats"), ``"spacy"``, ``"patterns"``, ``"presidio"``, ``"oracle"``
        or a ``+`` combination (``"clinical+spacy+patterns"``).
    k:
        A term is an indirect identifier iff fewer than ``k`` individuals use it (k ≥ 2; k = 2: used by one).
    n:
        Largest m-gram size considered for indirect identifiers (n ≥ 1).
    lowercase:
        Compare terms after lower-casing (always after NFKC).
    generic_ratio:
        A word seen in PII spans is *generic* (not in ``I_direct``) when more than this share of its occurrences
        lies outside PII spans.
    spacy_model, spacy_labels, n_process, batch_size:
        spaCy detector settings (an installed package name or a pipeline path; nothing downloads; ``n_process=0``:
        worker processes chosen from the CPUs). ``n_process`` sets the pattern detector's worker processes too
        (:func:`~toolkit.identifiers.detectors.pattern_processes`); neither changes a span.
    cache_dir, ner_cache:
        The NER cache shared by all runs (:mod:`toolkit.identifiers.ner_cache`; spans, no text): its folder (None:
        ``$XDG_CACHE_HOME/lm-anonymity-toolkit/ner``, else ``~/.cache/...``) and whether to use it. Neither changes
        a result, so neither is part of the summary's config or ``run_key``.
    """

    detector: str = "clinical"
    k: int = 2
    n: int = 1
    lowercase: bool = True
    generic_ratio: float = 0.5
    spacy_model: str = DEFAULT_SPACY_MODEL
    spacy_labels: tuple[str, ...] = DEFAULT_SPACY_LABELS
    n_process: int = 0
    batch_size: int = 64
    cache_dir: str | None = None
    ner_cache: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 2:
            raise ToolkitError(f"k must be an integer >= 2 (k=2: terms used by a single individual), got {self.k!r}")
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise ToolkitError(f"n must be an integer >= 1 (largest m-gram size), got {self.n!r}")
        if not 0.0 <= float(self.generic_ratio) <= 1.0:
            raise ToolkitError(f"generic_ratio must lie in [0, 1], got {self.generic_ratio!r}")
        if isinstance(self.n_process, bool) or not isinstance(self.n_process, int) or self.n_process < 0:
            raise ToolkitError(f"n_process must be an integer >= 0 (0: from the CPUs), got {self.n_process!r}")
        if self.cache_dir is not None and not isinstance(self.cache_dir, (str, os.PathLike)):
            raise ToolkitError(f"cache_dir must be a folder path or null (the default cache), got {self.cache_dir!r}")
        if not isinstance(self.ner_cache, bool):
            raise ToolkitError(f"ner_cache must be true or false, got {self.ner_cache!r}")
        self.cache_dir = None if self.cache_dir is None else os.fspath(self.cache_dir)
        self.spacy_labels = tuple(self.spacy_labels)
        make_detector(self.detector)  # validates the spec without loading a model

    def make_detector(self) -> Detector:
        return make_detector(self.detector, spacy_model=self.spacy_model, spacy_labels=self.spacy_labels,
                             n_process=self.n_process, batch_size=self.batch_size, cache_dir=self.cache_dir,
                             ner_cache=self.ner_cache)


def mark_direct(words: WordTable, spans_per_doc: list[list[Span]]) -> tuple[np.ndarray, np.ndarray]:
    """Per word occurrence: does it overlap a PII span, and the span's category index (``NO_CATEGORY`` if not).

    Vectorised: spans and words are placed on one global axis (document index × stride + offset); for each word the
    last span starting before the word's end is found by binary search; spans of one document never overlap, so
    that span is the only candidate.
    """
    n = len(words)
    direct = np.zeros(n, dtype=bool)
    category = np.full(n, NO_CATEGORY, dtype=np.int8)
    flat = [(d, s.start, s.end, s.label) for d, spans in enumerate(spans_per_doc) for s in spans]
    if not flat or n == 0:
        return direct, category
    cat_index = {c: i for i, c in enumerate(CATEGORIES)}
    sd = np.fromiter((f[0] for f in flat), dtype=np.int64, count=len(flat))
    ss = np.fromiter((f[1] for f in flat), dtype=np.int64, count=len(flat))
    se = np.fromiter((f[2] for f in flat), dtype=np.int64, count=len(flat))
    sc = np.fromiter((cat_index[pii_category(f[3])] for f in flat), dtype=np.int8, count=len(flat))
    stride = np.int64(max(int(se.max()), int(words.end.max()) if n else 0) + 1)
    gs, ge = sd * stride + ss, sd * stride + se
    order = np.argsort(gs, kind="stable")
    gs, ge, sc = gs[order], ge[order], sc[order]
    ws = words.doc.astype(np.int64) * stride + words.start
    we = words.doc.astype(np.int64) * stride + words.end
    idx = np.searchsorted(gs, we, side="left") - 1
    valid = idx >= 0
    hit = np.zeros(n, dtype=bool)
    hit[valid] = ge[idx[valid]] > ws[valid]
    direct[hit] = True
    category[hit] = sc[idx[hit]]
    return direct, category


@dataclass
class IdentifierAnalysis:
    """Result of :func:`analyze`. Tables are pandas DataFrames; arrays are per word occurrence.

    Attributes
    ----------
    config:
        The :class:`IdentifierConfig` used.
    doc_ids, person_ids:
        Documents (corpus order) and individuals (order of first appearance).
    words:
        Word occurrences (:class:`WordTable`).
    direct, indirect, category:
        Per word occurrence: direct-identifier position, indirect-identifier position (unigram type or covered by an
        indirect m-gram), PII category index into :data:`CATEGORIES` (-1: none).
    spans:
        The detector's spans per document.
    graph:
        The :class:`TermGraph` (kept in memory for the k / n explorations; not saved).
    terms, individuals:
        The term and per-individual tables (see :meth:`save` for the columns).
    summary:
        Headline counts (JSON-serialisable), with ``run_key`` (:func:`toolkit.identifiers.storage.run_key`).
    text_sha256:
        SHA-256 of each document's text (corpus order): the identifiers hold for exactly these texts.
    """

    config: IdentifierConfig
    doc_ids: list[str]
    person_ids: list[str]
    person_of_doc: np.ndarray
    words: WordTable
    direct: np.ndarray
    indirect: np.ndarray
    category: np.ndarray
    spans: list[list[Span]]
    graph: TermGraph | None
    terms: pd.DataFrame
    individuals: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)
    text_sha256: list[str] = field(default_factory=list)

    # ---- vocabularies -------------------------------------------------------------------------------------------
    @property
    def I_direct(self) -> set[str]:  # noqa: N802 (the notation of docs/methods.md)
        """Direct-identifier vocabulary: word types seen in PII spans, generic words removed."""
        t = self.terms
        return set(t.loc[(t["n"] == 1) & t["direct"], "term"])

    @property
    def I_indirect(self) -> set[str]:  # noqa: N802
        """Indirect-identifier vocabulary: unigram types used by fewer than k individuals."""
        t = self.terms
        return set(t.loc[(t["n"] == 1) & t["indirect"], "term"])

    @property
    def vocabulary(self) -> set[str]:
        """``I = I_direct ∪ I_indirect`` — what the audit counts as a leak."""
        return self.I_direct | self.I_indirect

    @property
    def protected(self) -> np.ndarray:
        """Per word occurrence: a position training must never use as a target."""
        return self.direct | self.indirect

    def positions(self) -> pd.DataFrame:
        """Protected word occurrences: doc_id, start, end, term, direct, indirect, category (one row per word)."""
        sel = np.flatnonzero(self.protected)
        w = self.words
        cats = np.array(list(CATEGORIES) + [""], dtype=object)
        return attach_documents(pd.DataFrame({
            "doc_id": np.asarray(self.doc_ids, dtype=object)[w.doc[sel]],
            "start": w.start[sel], "end": w.end[sel],
            "term": w.vocab[w.term[sel]],
            "direct": self.direct[sel], "indirect": self.indirect[sel],
            "category": cats[self.category[sel]],
        }), dict(zip(self.doc_ids, self.text_sha256)))

    def span_table(self) -> pd.DataFrame:
        """The detector's PII spans: doc_id, start, end, label, category (the pseudonymisation baselines use them)."""
        rows = [(self.doc_ids[d], s.start, s.end, s.label, pii_category(s.label))
                for d, spans in enumerate(self.spans) for s in spans]
        table = pd.DataFrame(rows, columns=["doc_id", "start", "end", "label", "category"]).astype(
            {"doc_id": object, "start": "int64", "end": "int64", "label": object, "category": object})
        return attach_documents(table, dict(zip(self.doc_ids, self.text_sha256)))

    def protected_spans(self, doc_index: int, kind: str = "all") -> list[tuple[int, int]]:
        """Character spans of the protected words of one document (``kind``: all, direct or indirect)."""
        lo, hi = self.words.doc_ptr[doc_index], self.words.doc_ptr[doc_index + 1]
        mask = {"all": self.protected, "direct": self.direct, "indirect": self.indirect}[kind][lo:hi]
        return list(zip(self.words.start[lo:hi][mask].tolist(), self.words.end[lo:hi][mask].tolist()))

    # ---- explorations (paper 000 Fig. 8, 10) --------------------------------------------------------------------
    def indirect_counts(self, ks=(2, 3, 4, 5), ns=(1,)) -> pd.DataFrame:
        """Per individual, the number of distinct indirect terms for every (k, n): long format."""
        if self.graph is None:
            raise ToolkitError("this analysis was loaded from disk without its graph; re-run analyze()")
        rows = []
        for n in ns:
            for k in ks:
                counts = self.graph.indirect_per_individual(int(k), int(n))
                rows.append(pd.DataFrame({"person_id": self.person_ids, "k": int(k), "n": int(n),
                                          "n_indirect": counts}))
        return pd.concat(rows, ignore_index=True)

    # ---- persistence --------------------------------------------------------------------------------------------
    def documents(self) -> pd.DataFrame:
        """doc_id and ``text_sha256`` (SHA-256 of the text analysed) of every document: what the identifiers cover."""
        return pd.DataFrame({"doc_id": pd.Series(self.doc_ids, dtype=object),
                             "text_sha256": pd.Series(self.text_sha256, dtype=object)})

    def save(self, out_dir: str | Path) -> Path:
        """Write ``terms``, ``individuals``, ``positions``, ``spans``, ``documents`` (.parquet), ``summary.json`` and
        ``manifest.json`` as one set (:mod:`toolkit.identifiers.storage`: written beside the target and swapped in).

        ``terms``: term, n (gram size), n_individuals, n_occurrences, direct, indirect, n_direct_occurrences,
        category. ``individuals``: person_id, n_documents, n_words, n_distinct_words, n_direct, n_direct_occurrences,
        n_indirect, n_indirect_unigrams, n_indirect_occurrences, n_protected. ``positions``: see :meth:`positions`.
        ``documents``: see :meth:`documents`.
        """
        return save_identifiers({"terms": self.terms, "individuals": self.individuals, "positions": self.positions(),
                                 "spans": self.span_table(), "documents": self.documents()}, self.summary, out_dir)


def analyze(corpus: Corpus, config: IdentifierConfig | None = None, *, spans: list[list[Span]] | None = None,
            progress: bool = True, **overrides: Any) -> IdentifierAnalysis:
    """Detect direct identifiers, build the individuals × terms graph and derive indirect identifiers.

    Parameters
    ----------
    corpus:
        The documents to analyse (all their individuals form the graph's individual side).
    config:
        An :class:`IdentifierConfig`; keyword ``overrides`` (``k=3``, ``detector="oracle"`` ...) replace its fields.
    spans:
        Precomputed detector spans per document (skips detection; e.g. to compare k/n without re-running NER).
        Checked like a detector's output: :class:`~toolkit.corpus.Span` objects inside the text, non-overlapping
        (:func:`~toolkit.identifiers.detectors.check_spans`); anything else is a :class:`ToolkitError` naming the
        document.
    progress:
        Show ``tqdm`` progress bars.
    """
    cfg = config or IdentifierConfig()
    if overrides:
        cfg = IdentifierConfig(**{**asdict(cfg), **overrides})
    timings: dict[str, float] = {}
    docs = list(corpus)
    if not docs:
        raise ToolkitError("cannot analyse an empty corpus")

    t0 = time.perf_counter()
    if spans is None:
        detector = cfg.make_detector()
        try:
            spans = detector.detect(docs, progress=progress)
        finally:
            detector.close()  # the pattern detector's worker processes
        if not isinstance(cfg.detector, str):  # a user's Detector object: hold it to the same contract
            spans = check_spans(spans, docs, source=f"detector {detector!r}")
    else:
        spans = check_spans(spans, docs, source="spans=")
    timings["detect_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    words = segment_corpus([d.text for d in docs], lowercase=cfg.lowercase, progress=progress)
    timings["segment_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    person_codes, person_ids = pd.factorize(pd.Series([d.person_id for d in docs], dtype=object), sort=False)
    person_of_doc = person_codes.astype(np.int64)
    n_people = len(person_ids)
    direct, category = mark_direct(words, spans)
    graph = TermGraph(words, person_of_doc, n_people)
    indirect = graph.indirect_positions(cfg.k, cfg.n)
    terms = _term_table(words, graph, direct, category, cfg)
    individuals = _individual_table(words, graph, person_of_doc, list(person_ids), direct, indirect, cfg)
    timings["graph_s"] = time.perf_counter() - t0

    result = IdentifierAnalysis(config=cfg, doc_ids=[d.doc_id for d in docs], person_ids=list(person_ids),
                                person_of_doc=person_of_doc, words=words, direct=direct, indirect=indirect,
                                category=category, spans=spans, graph=graph, terms=terms, individuals=individuals,
                                text_sha256=[text_sha256(d.text) for d in docs])
    result.summary = _summary(result, timings)
    result.summary["run_key"] = run_key(result.summary["config"], result.documents())
    return result


def _term_table(words: WordTable, graph: TermGraph, direct: np.ndarray, category: np.ndarray,
                cfg: IdentifierConfig) -> pd.DataFrame:
    uni = graph.layer(1)
    n_direct_occ = np.bincount(words.term, weights=direct, minlength=uni.n_terms).astype(np.int64)
    outside_share = 1.0 - n_direct_occ / np.maximum(uni.n_occurrences, 1)
    in_direct_vocab = (n_direct_occ > 0) & (outside_share <= cfg.generic_ratio)
    # most frequent PII category of each word type among its direct occurrences (a tie: the first in CATEGORIES)
    cats = np.array(list(CATEGORIES), dtype=object)
    term_category = np.full(uni.n_terms, "", dtype=object)
    sel = direct & (category >= 0)
    if sel.any():
        width = len(CATEGORIES)
        keys, counts = np.unique(words.term[sel].astype(np.int64) * width + category[sel], return_counts=True)
        t, c = keys // width, keys % width
        order = np.lexsort((c, -counts, t))  # per term: highest count first, then the earliest category
        t, c = t[order], c[order]
        first = np.r_[True, t[1:] != t[:-1]]
        term_category[t[first]] = cats[c[first]]
    frames = [pd.DataFrame({
        "term": words.vocab, "n": 1, "n_individuals": uni.n_individuals, "n_occurrences": uni.n_occurrences,
        "direct": in_direct_vocab, "indirect": uni.n_individuals < cfg.k, "n_direct_occurrences": n_direct_occ,
        "category": term_category,
    })]
    for m in range(2, cfg.n + 1):
        lay = graph.layer(m)
        frames.append(pd.DataFrame({
            "term": lay.term_strings(words), "n": m, "n_individuals": lay.n_individuals,
            "n_occurrences": lay.n_occurrences, "direct": False, "indirect": lay.n_individuals < cfg.k,
            "n_direct_occurrences": 0, "category": "",
        }))
    out = pd.concat(frames, ignore_index=True)
    return out.astype({"term": "string", "n": "int16", "n_individuals": "int64", "n_occurrences": "int64",
                       "direct": "bool", "indirect": "bool", "n_direct_occurrences": "int64",
                       "category": "string"})


def _individual_table(words: WordTable, graph: TermGraph, person_of_doc: np.ndarray, person_ids: list[str],
                      direct: np.ndarray, indirect: np.ndarray, cfg: IdentifierConfig) -> pd.DataFrame:
    P = len(person_ids)
    pw = graph.person_of_word
    uni = graph.layer(1)

    def distinct_terms_per_person(mask: np.ndarray) -> np.ndarray:
        keys = pd.unique(words.term[mask].astype(np.int64) * P + pw[mask])
        return np.bincount(keys % P, minlength=P)

    return pd.DataFrame({
        "person_id": person_ids,
        "n_documents": np.bincount(person_of_doc, minlength=P),
        "n_words": np.bincount(pw, minlength=P),
        "n_distinct_words": np.bincount(uni.pair_person, minlength=P),
        "n_direct": distinct_terms_per_person(direct),
        "n_direct_occurrences": np.bincount(pw[direct], minlength=P),
        "n_indirect": graph.indirect_per_individual(cfg.k, cfg.n),
        "n_indirect_unigrams": graph.indirect_per_individual(cfg.k, 1),
        "n_indirect_occurrences": np.bincount(pw[indirect], minlength=P),
        "n_protected": np.bincount(pw[direct | indirect], minlength=P),
    })


def summary_config(cfg: IdentifierConfig) -> dict[str, Any]:
    """The config as the summary (and ``run_key``) records it."""
    out = {**asdict(cfg), "spacy_labels": list(cfg.spacy_labels)}
    for where in ("cache_dir", "ner_cache"):  # where spans are remembered, not what they are
        out.pop(where)
    return out


def _summary(r: IdentifierAnalysis, timings: dict[str, float]) -> dict[str, Any]:
    t = r.terms
    uni = t[t["n"] == 1]
    n_words = int(len(r.words))
    single = uni["n_individuals"] < r.config.k
    cats = np.array(list(CATEGORIES))
    direct_by_cat = pd.Series(cats[r.category[r.direct & (r.category >= 0)]]).value_counts()
    seen_in_spans = int((uni["n_direct_occurrences"] > 0).sum())
    return {
        "config": summary_config(r.config),
        "n_documents": len(r.doc_ids),
        "n_individuals": len(r.person_ids),
        "n_words": n_words,
        "n_distinct_words": int(len(uni)),
        "n_direct_positions": int(r.direct.sum()),
        "n_indirect_positions": int(r.indirect.sum()),
        "n_protected_positions": int(r.protected.sum()),
        "share_protected_positions": float(r.protected.sum() / max(n_words, 1)),
        "n_I_direct": int(uni["direct"].sum()),
        "n_generic_words_removed": seen_in_spans - int(uni["direct"].sum()),
        "n_I_indirect": int(uni["indirect"].sum()),
        "n_I": int((uni["direct"] | uni["indirect"]).sum()),
        "n_indirect_terms_by_n": {int(m): int(g["indirect"].sum()) for m, g in t.groupby("n")},
        "share_distinct_words_below_k": float(single.mean()) if len(uni) else 0.0,
        "share_occurrences_below_k": float(uni.loc[single, "n_occurrences"].sum() / max(n_words, 1)),
        "direct_positions_by_category": {str(k): int(v) for k, v in direct_by_cat.items()},
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
    }
