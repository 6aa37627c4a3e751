"""The blind baseline: a model-free classifier that tells members from non-members by their text alone (Das, Zhang,
Tramèr, "Blind Baselines Beat Membership Inference Attacks for Foundation Models", arXiv 2406.16201, 2024; Duan et
al., "Do Membership Inference Attacks Work on Large Language Models?", COLM 2024).

Where the two groups differ as texts — other years, other templates, other lengths — every membership attack can
separate them without the model having memorised anything. This attack measures that difference and nothing else:

.. math:: \\phi(x) = [\\,h(x);\\ \\log(1 + |x|_{\\mathrm{chars}});\\ \\log(1 + |x|_{\\mathrm{words}});\\
          n_{\\mathrm{years}}(x);\\ \\overline{y}(x);\\ \\max y(x)\\,]

with :math:`h` the hashed counts of word 1- and 2-grams (2^16 features, l2-normalised; scikit-learn's
``HashingVectorizer``), the lengths, and the four-digit years 1900–2099 the text names (their number, mean and
largest, centred at 2000 and scaled by 1/50; 0 without one). The score is the log-odds of a logistic regression
(scikit-learn, L2, C = 1) **cross-fitted over individuals**: the individuals are split into K folds
(``StratifiedGroupKFold``, K = min(5, the individuals of the smaller group), seeded), and each document is scored by
the classifier fitted on the other folds — no individual is scored by a classifier that saw its label. Higher =
more likely a member. Fewer than 2 individuals in either group: not scored (nan).

It reads no model (``model_free``): it is not evidence of leakage but a check of the split, as the reference model's
own attacks are (methods.md §11). Where its AUC is significantly above 0.5 the verdict says the groups differ as
texts, and the attacks that this difference could explain do not decide on their own. It runs with and without a
reference model. Limits: a linear model on hashed n-grams finds differences of vocabulary, length and dates; a
difference of style or topic it cannot express stays undetected (the check can say "differ", never "the same").
Cross-fitted scores are slightly pessimistic under the null (a fold's training labels lean against its own), so the
check is one-sided: it never claims a separation that the fitting produced.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

#: hashed n-gram features, word n-gram range, folds, and the classifier's regularisation
N_FEATURES = 2 ** 16
NGRAMS = (1, 2)
FOLDS = 5
C = 1.0
_YEAR = re.compile(r"(?<!\d)(19\d\d|20\d\d)(?!\d)")


def text_features(texts: Sequence[str]):
    """:math:`\\phi(x)` of every text (module docstring), a sparse matrix."""
    from scipy.sparse import csr_matrix, hstack
    from sklearn.feature_extraction.text import HashingVectorizer

    grams = HashingVectorizer(n_features=N_FEATURES, ngram_range=NGRAMS, alternate_sign=False,
                              norm="l2").transform(list(texts))
    rows = []
    for t in texts:
        years = np.array([int(y) for y in _YEAR.findall(t)], dtype=float)
        rows.append([np.log1p(len(t)), np.log1p(len(t.split())), float(years.size),
                     (years.mean() - 2000) / 50 if years.size else 0.0,
                     (years.max() - 2000) / 50 if years.size else 0.0])
    return hstack([grams, csr_matrix(np.asarray(rows, dtype=float))]).tocsr()


def folds_over_individuals(member: Sequence[bool], groups: Sequence, *, seed: int = 0,
                           folds: int = FOLDS) -> list[tuple[np.ndarray, np.ndarray]]:
    """The cross-fitting's ``(train, test)`` index pairs: K = min(``folds``, the individuals of the smaller group)
    folds of whole individuals (scikit-learn's ``StratifiedGroupKFold``, shuffled with ``seed``); [] below K = 2."""
    from sklearn.model_selection import StratifiedGroupKFold

    y = np.asarray(member, dtype=bool)
    g = np.asarray([str(x) for x in groups], dtype=object)
    if g.size != y.size:
        raise ValueError(f"{y.size} labels for {g.size} individuals")
    k = min(folds, len(set(g[y])), len(set(g[~y])))
    if k < 2:
        return []
    split = StratifiedGroupKFold(n_splits=k, shuffle=True, random_state=seed)
    return list(split.split(np.zeros((y.size, 1)), y, g))


def blind_score(texts: Sequence[str], member: Sequence[bool], groups: Sequence, *, seed: int = 0,
                folds: int = FOLDS) -> np.ndarray:
    """Cross-fitted log-odds of membership of every document from its text alone (module docstring)."""
    from sklearn.linear_model import LogisticRegression

    y = np.asarray(member, dtype=bool)
    if len(texts) != y.size:
        raise ValueError(f"{len(texts)} texts for {y.size} labels")
    out = np.full(y.size, np.nan)
    splits = folds_over_individuals(y, groups, seed=seed, folds=folds)
    if not splits:
        return out
    from threadpoolctl import threadpool_limits

    x = text_features(texts)
    # on one BLAS thread: the same scores, to the bit, whatever the process' thread count (a step's files are the
    # same whether it ran alone on every core or beside others; tests/test_parallel_steps.py)
    with threadpool_limits(limits=1):
        for train, test in splits:
            if y[train].all() or not y[train].any():
                continue
            clf = LogisticRegression(C=C, max_iter=2000).fit(x[train], y[train])
            out[test] = clf.decision_function(x[test])
    return out


__all__ = ["blind_score", "folds_over_individuals", "text_features"]
