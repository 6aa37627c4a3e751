"""Memorisation score of identifier types: how much more likely the audited model finds an identifier in its slot than
the reference model does (a per-identifier likelihood ratio, as the reference attack of Carlini et al. 2021 and the
counterfactual memorisation of Zhang et al. 2023, applied to identifier tokens only).

.. math:: m(\\tau) = \\frac{1}{|O_\\tau|} \\sum_{o \\in O_\\tau} \\Big( \\sum_{t \\in o} \\log p_f(x_t \\mid \\cdot)
          - \\sum_{t \\in o} \\log p_g(x_t \\mid \\cdot) \\Big)

:math:`O_\\tau` are the occurrences of type :math:`\\tau` (NFKC + lower-case), ``t`` runs over *all* tokens of the
occurrence (a multi-token identifier is measured whole), the context is the audit window around the occurrence
(:func:`~toolkit.audit.attacks.pii_inference.occurrence_window`, at most the models' position tables): causal
:math:`p(x_t \\mid x_{<t})` (the first token of a window too, given the BOS alone:
:func:`~toolkit.audit.losses.leading_token`), masked with the
occurrence's tokens masked together (:func:`toolkit.audit.losses.span_log_likelihoods`). :math:`m > 0`: the audited
model prefers the identifier more than the reference does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from toolkit.audit.attacks.pii_inference import audit_window, identifier_occurrences, occurrence_window
from toolkit.audit.losses import span_log_likelihoods
from toolkit.corpus import Corpus

SpanScorer = Callable[[list[str], list[tuple[int, int]]], np.ndarray]


def _scorer(model, tokenizer, batch_size, progress) -> SpanScorer:
    return lambda texts, spans: span_log_likelihoods(model, tokenizer, texts, spans, window=None,
                                                     batch_size=batch_size, progress=progress, label="memorisation")


def memorisation_scores(model, tokenizer, reference, corpus: Corpus, positions: pd.DataFrame, *,
                        window: int | None = 256, max_occurrences: int | None = 2000, direct_only: bool = False,
                        seed: int = 0, batch_size: int | None = None, scorer: SpanScorer | None = None,
                        reference_scorer: SpanScorer | None = None,
                        progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """Memorisation score of every identifier type in ``positions`` (see the module docstring).

    Parameters
    ----------
    reference : (model, tokenizer)
        The reference model ``g`` (usually the base model).
    max_occurrences : int or None
        A seeded sample of at most this many occurrences is measured (``None``: all).
    scorer, reference_scorer : callable, optional
        ``(texts, spans) -> log-likelihoods`` replacing the models' (dependency injection).

    Returns
    -------
    (DataFrame, dict)
        Per type: ``term`` (normalised), ``category``, ``n_occurrences``, ``score``; and a summary: per category
        ``n_types``, ``mean``, ``median``, ``q25``, ``q75``, ``max``, ``share_positive`` (types with score > 0 among
        those measured), and the same overall.
    """
    window = audit_window(window, model, reference[0] if reference is not None else None)
    occ = identifier_occurrences(corpus, positions, direct_only=direct_only)
    if max_occurrences is not None and len(occ) > max_occurrences:
        rng = np.random.default_rng(seed)
        occ = occ.iloc[np.sort(rng.choice(len(occ), size=max_occurrences, replace=False))]
    texts, spans = [], []
    for r in occ.itertuples(index=False):
        wt, s, e = occurrence_window(corpus.get(r.doc_id).text, r.start, r.end, tokenizer, window, slack=0)
        texts.append(wt)
        spans.append((s, e))
    f = scorer or _scorer(model, tokenizer, batch_size, progress)
    g = reference_scorer or _scorer(reference[0], reference[1], batch_size, progress)
    diff = (np.asarray(f(texts, spans), float) - np.asarray(g(texts, spans), float)) if texts else np.zeros(0)
    occ = occ.assign(diff=diff)
    types = (occ.groupby(["key", "category"], sort=True)
             .agg(n_occurrences=("diff", "size"), score=("diff", "mean")).reset_index()
             .rename(columns={"key": "term"}))

    def describe(s: pd.Series) -> dict:
        s = s.dropna()
        if s.empty:
            return {"n_types": 0, "mean": None, "median": None, "q25": None, "q75": None, "max": None,
                    "share_positive": None}
        return {"n_types": int(s.size), "mean": float(s.mean()), "median": float(s.median()),
                "q25": float(s.quantile(0.25)), "q75": float(s.quantile(0.75)), "max": float(s.max()),
                "share_positive": float((s > 0).mean())}

    summary = {"n_occurrences": int(len(occ)), "window": window, "seed": seed, "overall": describe(types["score"]),
               "by_category": {c: describe(t["score"]) for c, t in types.groupby("category", sort=True)}}
    return types, summary
