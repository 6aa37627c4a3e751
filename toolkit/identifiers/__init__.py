"""Identifier analysis (SPEC.md §2): direct identifiers by detectors, indirect identifiers from the
individuals × terms graph (parameters ``k`` and ``n``), protected positions and the identifier vocabulary."""

from toolkit.identifiers.analysis import IdentifierAnalysis, IdentifierConfig, analyze, mark_direct
from toolkit.identifiers.categories import CATEGORIES, pii_category
from toolkit.identifiers.detectors import (CombinedDetector, Detector, OracleDetector, PatternDetector, SpacyDetector,
                                           make_detector, merge_spans)
from toolkit.identifiers.evaluation import detector_scores
from toolkit.identifiers.graph import TermGraph
from toolkit.identifiers.storage import check_coverage, load_identifiers
from toolkit.identifiers.words import WordTable, normalize_term, segment_corpus, word_pattern

__all__ = [
    "CATEGORIES", "CombinedDetector", "Detector", "IdentifierAnalysis", "IdentifierConfig", "OracleDetector",
    "PatternDetector", "SpacyDetector", "TermGraph", "WordTable", "analyze", "check_coverage", "detector_scores",
    "load_identifiers", "make_detector", "mark_direct", "merge_spans", "normalize_term", "pii_category",
    "segment_corpus", "word_pattern",
]
