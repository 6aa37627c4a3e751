"""Detector quality against gold spans, at the word level (the unit the identifier analysis protects).

For every word occurrence, ``gold`` = it overlaps a gold span, ``pred`` = it overlaps a detected span.
Precision = |pred ∩ gold| / |pred|, recall = |pred ∩ gold| / |gold| (scikit-learn's
``precision_recall_fscore_support`` on the binary word labels). Recall is also given per gold category: the share of
gold words of that category that the detector marks as PII under any label.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.metrics import precision_recall_fscore_support

from toolkit.corpus import Span
from toolkit.identifiers.analysis import mark_direct
from toolkit.identifiers.categories import CATEGORIES
from toolkit.identifiers.words import WordTable


def detector_scores(words: WordTable, predicted: list[list[Span]], gold: list[list[Span]]) -> pd.DataFrame:
    """One row ``all`` plus one row per gold category: precision (``all`` only), recall, f1, support (gold words)."""
    pred, _ = mark_direct(words, predicted)
    true, true_cat = mark_direct(words, gold)
    p, r, f, _ = precision_recall_fscore_support(true, pred, average="binary", zero_division=0)
    rows = [{"category": "all", "precision": p, "recall": r, "f1": f, "support": int(true.sum()),
             "n_predicted": int(pred.sum())}]
    for i, cat in enumerate(CATEGORIES):
        sel = true_cat == i
        if sel.any():
            rows.append({"category": cat, "precision": np.nan, "recall": float(pred[sel].mean()), "f1": np.nan,
                         "support": int(sel.sum()), "n_predicted": int(pred[sel].sum())})
    return pd.DataFrame(rows)
