"""Identifier analysis (methods.md §2): direct identifiers by detectors, indirect identifiers from the
individuals × terms graph (parameters ``k`` and ``n``), protected positions and the identifier vocabulary.

``analyze`` holds everything in memory (the reference; small corpora, notebooks); ``analyze_to_disk`` streams
documents in batches and builds the graph out of core in DuckDB (``python -m toolkit identifiers``), writing the same
identifier set; ``analyze_on_cluster`` runs its detection pass on a Dask cluster (``--scheduler``)."""

from toolkit.identifiers.analysis import IdentifierAnalysis, IdentifierConfig, analyze, mark_direct
from toolkit.identifiers.categories import CATEGORIES, pii_category
from toolkit.identifiers.detectors import (CombinedDetector, Detector, OracleDetector, PatternDetector, SpacyDetector,
                                           make_detector, merge_spans)
from toolkit.identifiers.distributed import analyze_on_cluster
from toolkit.identifiers.engine import analyze_to_disk
from toolkit.identifiers.evaluation import detector_scores
from toolkit.identifiers.graph import TermGraph
from toolkit.identifiers.storage import check_coverage, load_identifiers
from toolkit.identifiers.stream import JsonlBatches, corpus_batches, iter_jsonl_batches
from toolkit.identifiers.words import WordTable, normalize_term, segment_corpus, word_pattern

__all__ = [
    "CATEGORIES", "CombinedDetector", "Detector", "IdentifierAnalysis", "IdentifierConfig", "JsonlBatches",
    "OracleDetector", "PatternDetector", "SpacyDetector", "TermGraph", "WordTable", "analyze", "analyze_on_cluster",
    "analyze_to_disk", "check_coverage", "corpus_batches", "detector_scores", "iter_jsonl_batches", "load_identifiers",
    "make_detector", "mark_direct", "merge_spans", "normalize_term", "pii_category", "segment_corpus", "word_pattern",
]
