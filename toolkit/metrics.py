"""Audit metrics: pure functions on arrays, sets and DataFrames (SPEC.md §4, §5).

Nothing here loads a model or reads a file. The probing code (``toolkit.audit``) produces a *predictions* frame with
one row per probed word position and at least the columns

``doc_id``, ``person_id``
    the document probed and the individual it is about;
``original``
    the word at that position in the training text;
``predicted``
    the word the model predicted there (NaN/None when nothing was predicted: such rows predict no type);
``protected``
    whether the position is protected (SPEC §2); utility is computed over the other positions.

Every word is compared after :func:`normalize_word` (NFKC + lower-case, SPEC §1), applied here again to both sides so
that a caller who passes raw strings gets the same numbers as one who passes normalised ones.

Definitions (SPEC §4, paper 000 §5.1, 001 §5.3):

* **Utility** = ``mean(normalize(predicted) == normalize(original))`` over non-protected positions.
* **Privacy** = ``1 − |L ∩ I| / |I|`` with ``L`` the set of word types predicted *anywhere* (any row, protected or
  not, at the right place or not) and ``I`` the identifier vocabulary; direct / indirect / novel privacy use
  ``I_direct``, ``I_indirect`` and ``I ∩ novel``.
* **MIA** (SPEC §5, 000 §5.4): score(individual) = number of that individual's indirect-identifier types predicted
  when probing that individual's own documents; ROC, AUC and TPR at fixed FPRs with bootstrap intervals.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score, roc_curve

from toolkit.identifiers import normalize_term

__all__ = [
    "auxiliary_knowledge_identifiable", "leaked", "leaked_by_category", "mia_report", "mia_scores", "normalize_word",
    "privacy", "privacy_report", "regurgitation_table", "roc", "tpr_at_fpr", "utility",
]

#: relative tolerance when comparing FPRs (k / n computed in floating point) with a target FPR
_FPR_TOL = 1e-9


# ---------------------------------------------------------------------------------------------------------------------
# normalisation helpers


def normalize_word(w: str) -> str:
    """NFKC-normalise and lower-case one word (SPEC §1); the same as ``toolkit.identifiers.normalize_term(w)``."""
    return normalize_term(w, lowercase=True)


def _norm_set(words: Iterable[str] | None) -> set[str]:
    """Normalised set of ``words``; missing values (None/NaN) are dropped."""
    if words is None:
        return set()
    return {normalize_word(w) for w in words if isinstance(w, str)}


def _norm_series(values) -> pd.Series:
    """Normalise a column of words, calling :func:`normalize_word` once per distinct value; non-strings → NaN."""
    s = pd.Series(values, copy=False) if not isinstance(values, pd.Series) else values
    s = s.astype(object)
    uniq = pd.unique(s)
    mapping = {u: normalize_word(u) for u in uniq if isinstance(u, str)}
    return s.map(mapping)  # values absent from the mapping (None, NaN, numbers) become NaN


def _predicted_types(predictions: pd.DataFrame) -> set[str]:
    """``L``: the set of normalised word types predicted in any row."""
    return set(_norm_series(pd.unique(predictions["predicted"].astype(object))).dropna())


def _accuracy(pred: pd.Series, orig: pd.Series) -> float:
    """Share of rows with equal (already normalised) words; a missing prediction is wrong; empty → nan."""
    if len(pred) == 0:
        return float("nan")
    eq = (pred.to_numpy(dtype=object) == orig.to_numpy(dtype=object)) & pred.notna().to_numpy()
    return float(np.mean(eq))


def _check_columns(predictions: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in predictions.columns]
    if missing:
        raise ValueError(f"predictions frame lacks column(s) {missing}; it has {list(predictions.columns)}")


# ---------------------------------------------------------------------------------------------------------------------
# utility and privacy (SPEC §4)


def utility(predicted: Sequence[str], original: Sequence[str]) -> float:
    """Fill-mask / next-word utility: accuracy of normalised equality (SPEC §4 *Utility*; 000 §5.1).

    .. math:: U = \\frac{1}{N} \\sum_{i=1}^{N} [\\mathrm{norm}(\\hat w_i) = \\mathrm{norm}(w_i)]

    Callers pass only the non-protected positions. A missing prediction (None/NaN) counts as wrong.

    Returns
    -------
    float
        The accuracy in [0, 1]; ``nan`` when there are no positions.
    """
    if len(predicted) != len(original):
        raise ValueError(f"predicted and original differ in length ({len(predicted)} != {len(original)})")
    return _accuracy(_norm_series(list(predicted)), _norm_series(list(original)))


def leaked(predicted_types: Iterable[str], identifiers: Iterable[str]) -> set[str]:
    """``L ∩ I``: the normalised identifier types that were predicted at least once (SPEC §4 *Privacy*)."""
    return _norm_set(predicted_types) & _norm_set(identifiers)


def privacy(predicted_types: Iterable[str], identifiers: Iterable[str]) -> float:
    """Privacy = 1 − |L ∩ I| / |I| (SPEC §4 *Privacy*; 000 §5.1 "Metrics", 001 §5.3).

    ``L`` is the set of word types predicted anywhere (at the right place or not), ``I`` the identifier vocabulary;
    both are compared after :func:`normalize_word`. Privacy = 1 means no identifier was ever predicted, 0 that all
    were.

    Returns
    -------
    float
        In [0, 1]. **1.0 when** ``I`` **is empty**: there is nothing to leak (choice; the alternative, nan, would
        make an empty identifier category poison averages).
    """
    ids = _norm_set(identifiers)
    if not ids:
        return 1.0
    return 1.0 - len(_norm_set(predicted_types) & ids) / len(ids)


def _privacy_counts(L: set[str], ids: set[str]) -> tuple[float, int, int]:
    n_leaked = len(L & ids)
    return (1.0 - n_leaked / len(ids) if ids else 1.0), len(ids), n_leaked


def privacy_report(predictions: pd.DataFrame, i_direct: set, i_indirect: set, *,
                   novel: set | None = None) -> dict:
    """Utility and privacy of one probed checkpoint (SPEC §4).

    Parameters
    ----------
    predictions : DataFrame
        One row per probed position with columns ``predicted``, ``original``, ``protected`` (bool), ``doc_id``,
        ``person_id`` (see the module docstring).
    i_direct, i_indirect : set of str
        The identifier vocabulary ``I_direct`` and ``I_indirect`` (SPEC §2); ``I = I_direct ∪ I_indirect``.
    novel : set of str, optional
        Identifier types absent from the base model's training data. When given, privacy is also reported over
        ``I_novel = I ∩ novel`` (types in ``novel`` that are not identifiers are ignored).

    Returns
    -------
    dict
        ``utility`` (over rows with ``protected == False``; nan when there are none), ``n_utility_positions``,
        ``privacy``, ``direct_privacy``, ``indirect_privacy`` (each ``1 − |L ∩ X| / |X|``, 1.0 for an empty ``X``),
        ``n_identifiers``, ``n_leaked``, ``n_direct``, ``n_direct_leaked``, ``n_indirect``, ``n_indirect_leaked``,
        and with ``novel``: ``novel_privacy``, ``n_novel``, ``n_novel_leaked``. ``L`` is the set of words predicted
        in **all** rows, protected or not.
    """
    _check_columns(predictions, ("predicted", "original", "protected"))
    unprotected = ~predictions["protected"].astype(bool).to_numpy()
    pred = _norm_series(predictions["predicted"])
    orig = _norm_series(predictions["original"])
    L = set(pred.dropna().unique())
    direct, indirect = _norm_set(i_direct), _norm_set(i_indirect)
    all_ids = direct | indirect

    out: dict = {"utility": _accuracy(pred[unprotected], orig[unprotected]),
                 "n_utility_positions": int(unprotected.sum())}
    out["privacy"], out["n_identifiers"], out["n_leaked"] = _privacy_counts(L, all_ids)
    out["direct_privacy"], out["n_direct"], out["n_direct_leaked"] = _privacy_counts(L, direct)
    out["indirect_privacy"], out["n_indirect"], out["n_indirect_leaked"] = _privacy_counts(L, indirect)
    if novel is not None:
        out["novel_privacy"], out["n_novel"], out["n_novel_leaked"] = _privacy_counts(L, all_ids & _norm_set(novel))
    return out


def leaked_by_category(predictions: pd.DataFrame, identifier_categories: dict[str, str]) -> pd.DataFrame:
    """Identifiers and leaked identifiers per category (SPEC §2 categories, §4 *Privacy*).

    Parameters
    ----------
    predictions : DataFrame
        With a ``predicted`` column; ``L`` = all predicted types.
    identifier_categories : dict
        Identifier type → category (a PII category for direct identifiers, or e.g. a biomedical NER class for
        indirect ones, 001 Fig. 7). Terms are normalised; when two spellings normalise to one term, the first
        category wins.

    Returns
    -------
    DataFrame
        Columns ``category``, ``n_identifiers`` (distinct types), ``n_leaked`` (of those, predicted at least once),
        one row per category, sorted by category.
    """
    _check_columns(predictions, ("predicted",))
    L = _predicted_types(predictions)
    t = pd.DataFrame({"term": [normalize_word(k) for k in identifier_categories],
                      "category": list(identifier_categories.values())}).drop_duplicates("term")
    t["leaked"] = t["term"].isin(L)
    out = (t.groupby("category", sort=True)
           .agg(n_identifiers=("term", "size"), n_leaked=("leaked", "sum"))
           .reset_index())
    out["n_leaked"] = out["n_leaked"].astype(np.int64)
    out["n_identifiers"] = out["n_identifiers"].astype(np.int64)
    return out


def regurgitation_table(predictions: pd.DataFrame, train_frequency: dict[str, int] | pd.Series,
                        identifiers: set) -> pd.DataFrame:
    """How often each identifier type was predicted, against its training frequency (SPEC §4 *Regurgitation*;
    000 Fig. 5).

    Parameters
    ----------
    predictions : DataFrame
        Columns ``predicted`` and ``original``.
    train_frequency : dict or Series
        Term → number of occurrences in the training data (keys normalised and summed when they collide;
        an identifier missing here gets 0).
    identifiers : set of str
        The identifier types to report (usually ``I``).

    Returns
    -------
    DataFrame
        One row per normalised identifier type, with columns ``term``, ``train_frequency``,
        ``n_predicted`` (rows where the predicted word is the term, anywhere) and ``n_predicted_correct`` (rows
        where it was predicted at its own position: ``predicted == original == term``). Sorted by
        ``n_predicted`` (descending), then ``train_frequency`` (descending), then ``term``. Identifiers never
        predicted are kept with 0.
    """
    _check_columns(predictions, ("predicted", "original"))
    pred = _norm_series(predictions["predicted"])
    orig = _norm_series(predictions["original"])
    n_pred = pred.value_counts()
    n_correct = pred[(pred == orig) & pred.notna()].value_counts()
    freq = pd.Series(train_frequency, dtype=float) if not isinstance(train_frequency, pd.Series) \
        else train_frequency.astype(float)
    if len(freq):
        freq = freq.groupby(_norm_series(pd.Series(freq.index, index=freq.index)).to_numpy()).sum()
    terms = sorted(_norm_set(identifiers))
    out = pd.DataFrame({
        "term": terms,
        "train_frequency": freq.reindex(terms).fillna(0).to_numpy(dtype=np.int64),
        "n_predicted": n_pred.reindex(terms).fillna(0).to_numpy(dtype=np.int64),
        "n_predicted_correct": n_correct.reindex(terms).fillna(0).to_numpy(dtype=np.int64),
    })
    return out.sort_values(["n_predicted", "train_frequency", "term"], ascending=[False, False, True],
                           kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------------------------
# membership inference by indirect identifiers (SPEC §5)


def mia_scores(predictions: pd.DataFrame, indirect_by_person: dict[str, set[str]], *,
               restrict_to: set | None = None) -> pd.Series:
    """MIA score of every individual (SPEC §5; 000 §5.4).

    .. math:: s(p) = |\\{t \\in I_p : t \\text{ predicted in a row of } p\\text{'s own documents}\\}|

    where ``I_p`` is the set of individual ``p``'s indirect-identifier types (optionally ``I_p ∩ restrict_to``,
    for the auxiliary-knowledge attacker of 001 §6.1) and "``p``'s own documents" are the rows with
    ``person_id == p``. A type predicted several times counts once; ties between individuals are kept.

    Parameters
    ----------
    predictions : DataFrame
        Columns ``person_id`` and ``predicted``. ``person_id`` values must equal the keys of ``indirect_by_person``
        (no type conversion is done).
    indirect_by_person : dict
        Individual → set of their indirect-identifier types (built over members ∪ non-members).
    restrict_to : set of str, optional
        Only these types count (see :func:`auxiliary_knowledge_identifiable`).

    Returns
    -------
    Series
        Integer scores named ``score``, indexed by ``person_id``: every key of ``indirect_by_person`` (in its
        order), then any other individual present in ``predictions`` (they have no indirect identifier: 0).
        Individuals without rows score 0.
    """
    _check_columns(predictions, ("person_id", "predicted"))
    allowed = None if restrict_to is None else _norm_set(restrict_to)
    persons, terms = [], []
    for p, ts in indirect_by_person.items():
        for t in _norm_set(ts):
            if allowed is None or t in allowed:
                persons.append(p)
                terms.append(t)
    pairs = pd.DataFrame({"person_id": pd.Series(persons, dtype=object), "term": pd.Series(terms, dtype=object)})
    pred = pd.DataFrame({"person_id": predictions["person_id"].astype(object).to_numpy(),
                         "term": _norm_series(predictions["predicted"]).to_numpy()}).dropna().drop_duplicates()
    hits = pairs.merge(pred, on=["person_id", "term"], how="inner").groupby("person_id", sort=False).size()

    index = list(indirect_by_person)
    known = set(index)
    index += [p for p in pd.unique(predictions["person_id"].astype(object)) if p not in known]
    scores = pd.Series(0, index=pd.Index(index, name="person_id", dtype=object), dtype=np.int64, name="score")
    if len(hits):
        scores.loc[hits.index] = hits.to_numpy(dtype=np.int64)
    return scores


def _two_class(scores_members, scores_nonmembers) -> tuple[np.ndarray, np.ndarray]:
    m = np.asarray(scores_members, dtype=float).ravel()
    n = np.asarray(scores_nonmembers, dtype=float).ravel()
    if m.size == 0 or n.size == 0:
        raise ValueError(f"need at least one member and one non-member (got {m.size} and {n.size})")
    if not (np.isfinite(m).all() and np.isfinite(n).all()):
        raise ValueError("scores must be finite")
    return m, n


def roc(scores_members, scores_nonmembers) -> dict:
    """ROC curve and AUC of a score-threshold membership attack (SPEC §5), label 1 = member.

    Uses :func:`sklearn.metrics.roc_curve` (``drop_intermediate=False``: one point per distinct score, plus the
    origin) and :func:`sklearn.metrics.roc_auc_score`. Ties are kept as ties: individuals with equal scores are
    always on the same side of a threshold, so AUC = P(s_m > s_n) + ½ P(s_m = s_n).

    Returns
    -------
    dict
        ``fpr``, ``tpr``, ``thresholds`` (arrays; the first threshold is ``inf``), ``auc`` (float),
        ``n_members``, ``n_nonmembers``.
    """
    m, n = _two_class(scores_members, scores_nonmembers)
    y = np.r_[np.ones(m.size, dtype=int), np.zeros(n.size, dtype=int)]
    s = np.r_[m, n]
    fpr, tpr, thresholds = roc_curve(y, s, drop_intermediate=False)
    return {"fpr": fpr, "tpr": tpr, "thresholds": thresholds, "auc": float(roc_auc_score(y, s)),
            "n_members": int(m.size), "n_nonmembers": int(n.size)}


def _resolvable(target: float, n_negatives: int) -> bool:
    """An FPR of ``target`` can be resolved with ``n_negatives`` non-members iff ``target ≥ 1 / n_negatives``."""
    return n_negatives > 0 and target * n_negatives >= 1.0 - _FPR_TOL


def tpr_at_fpr(fpr, tpr, target: float, n_negatives: int) -> float | None:
    """TPR at a fixed FPR: the largest TPR among ROC points with FPR ≤ ``target`` (SPEC §5; 000 Table 2).

    No interpolation between ROC points (a threshold attack cannot realise them without randomising).

    Returns
    -------
    float or None
        ``None`` when ``target < 1 / n_negatives``: with ``n_negatives`` non-members the smallest non-zero FPR is
        ``1 / n_negatives``, so a lower FPR cannot be resolved and is reported as such, never as 0 (SPEC §5).
        ``target == 1 / n_negatives`` is resolvable.
    """
    if not _resolvable(target, n_negatives):
        return None
    fpr = np.asarray(fpr, dtype=float)
    tpr = np.asarray(tpr, dtype=float)
    ok = fpr <= target * (1.0 + _FPR_TOL)
    return float(tpr[ok].max()) if ok.any() else 0.0


def _fpr_key(x: float) -> str:
    return format(x, "g")


def _bootstrap_stats(m: np.ndarray, n: np.ndarray, fprs: Sequence[float], n_bootstrap: int,
                     rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """AUC (shape ``(B,)``) and TPR at each FPR (shape ``(B, len(fprs))``) of ``n_bootstrap`` resamples.

    Members and non-members are resampled separately with replacement. Scores are coded by rank among the distinct
    values of both samples, so each resample is two rows of per-code counts: TPR(k) and FPR(k) are the shares with a
    code ≥ k, and AUC = Σ_k c_m(k) (c_n(<k) + ½ c_n(k)) / (|m| |n|).
    """
    values, codes = np.unique(np.r_[m, n], return_inverse=True)
    cm_codes, cn_codes = codes[:m.size], codes[m.size:]
    K = values.size
    aucs = np.empty(n_bootstrap)
    tprs = np.empty((n_bootstrap, len(fprs)))
    chunk = max(1, int(4_000_000 // max(K, m.size, n.size)))  # bounds memory to a few B×K arrays of 4e6 cells
    for lo in range(0, n_bootstrap, chunk):
        hi = min(lo + chunk, n_bootstrap)
        im = rng.integers(0, m.size, size=(hi - lo, m.size))
        inn = rng.integers(0, n.size, size=(hi - lo, n.size))
        aucs[lo:hi], tprs[lo:hi] = _stats_from_codes(cm_codes[im], cn_codes[inn], K, fprs)
    return aucs, tprs


def _stats_from_codes(cm: np.ndarray, cn: np.ndarray, K: int, fprs: Sequence[float]):
    """AUC and TPR@FPR for each row of member codes ``cm`` (B×m) and non-member codes ``cn`` (B×n)."""
    B, nm = cm.shape
    nn = cn.shape[1]
    offs = (np.arange(B) * K)[:, None]
    count_m = np.bincount((cm + offs).ravel(), minlength=B * K).reshape(B, K)
    count_n = np.bincount((cn + offs).ravel(), minlength=B * K).reshape(B, K)
    below_n = np.cumsum(count_n, axis=1) - count_n
    auc = (count_m * (below_n + 0.5 * count_n)).sum(axis=1) / (nm * nn)
    # shares with a score >= value k (threshold at each distinct value), plus the origin (threshold above all)
    tpr = np.cumsum(count_m[:, ::-1], axis=1)[:, ::-1] / nm
    fpr = np.cumsum(count_n[:, ::-1], axis=1)[:, ::-1] / nn
    out = np.empty((B, len(fprs)))
    for j, target in enumerate(fprs):
        out[:, j] = np.where(fpr <= target * (1.0 + _FPR_TOL), tpr, 0.0).max(axis=1)
    return auc, out


def mia_report(scores_members, scores_nonmembers, fprs: Sequence[float] = (0.001, 0.01, 0.1),
               n_bootstrap: int = 1000, seed: int = 0, ci: float = 0.95) -> dict:
    """ROC summary of the membership attack with bootstrap intervals (SPEC §5; 000 Fig. 6, Table 2).

    Point estimates come from :func:`roc` and :func:`tpr_at_fpr`. Intervals are percentile bootstrap intervals:
    members and non-members are resampled separately with replacement (``numpy.random.default_rng(seed)``;
    in chunks of resamples, members' indices drawn before non-members'), the statistic is recomputed on each of
    the ``n_bootstrap`` resamples, and the
    ``(1 − ci)/2`` and ``(1 + ci)/2`` quantiles are reported.

    Returns
    -------
    dict
        ``auc``, ``auc_ci`` (``[lo, hi]``, None when ``n_bootstrap == 0``), ``tpr_at_fpr`` (``{"0.001": float or
        None, ...}``, keys ``format(fpr, "g")``, None where the FPR cannot be resolved with this many non-members),
        ``tpr_at_fpr_ci`` (same keys, ``[lo, hi]`` or None), ``n_members``, ``n_nonmembers``, ``fpr`` and ``tpr``
        (lists, the ROC points). Plain Python types, ready for JSON.
    """
    if not 0 < ci < 1:
        raise ValueError("ci must be in (0, 1)")
    m, n = _two_class(scores_members, scores_nonmembers)
    r = roc(m, n)
    fprs = [float(f) for f in fprs]
    keys = [_fpr_key(f) for f in fprs]
    out = {"auc": r["auc"], "auc_ci": None,
           "tpr_at_fpr": {k: tpr_at_fpr(r["fpr"], r["tpr"], f, n.size) for k, f in zip(keys, fprs)},
           "tpr_at_fpr_ci": {k: None for k in keys},
           "n_members": int(m.size), "n_nonmembers": int(n.size),
           "fpr": r["fpr"].tolist(), "tpr": r["tpr"].tolist()}
    if n_bootstrap > 0:
        aucs, tprs = _bootstrap_stats(m, n, fprs, int(n_bootstrap), np.random.default_rng(seed))
        q = [100 * (1 - ci) / 2, 100 * (1 + ci) / 2]
        out["auc_ci"] = [float(v) for v in np.percentile(aucs, q)]
        for j, (k, f) in enumerate(zip(keys, fprs)):
            if _resolvable(f, n.size):
                out["tpr_at_fpr_ci"][k] = [float(v) for v in np.percentile(tprs[:, j], q)]
    return out


def auxiliary_knowledge_identifiable(indirect_by_person: dict[str, set[str]], term_categories: dict[str, str],
                                     known_categories: Iterable[str]) -> dict:
    """Individuals identifiable by an attacker who knows only some categories of words (001 §6.1, Fig. 8; SPEC §5).

    Each individual's indirect identifiers are restricted to the terms whose category (``term_categories``, e.g.
    from a biomedical NER) is in ``known_categories``; an individual is *identifiable* when at least one remains.
    This is an upper bound of the attacker's success (001 §6.1): it assumes every such word is learned by the
    model. Run the attack itself with ``mia_scores(..., restrict_to=result["restrict_to"])``.

    Returns
    -------
    dict
        ``known_categories`` (sorted list), ``n_individuals``, ``n_identifiable``, ``share_identifiable`` (nan when
        there are no individuals), ``counts`` (Series ``person_id`` → number of known-category indirect
        identifiers), ``by_category`` (DataFrame ``category``, ``n_identifiable``, ``share_identifiable``: each
        known category alone, as the bars of 001 Fig. 8) and ``restrict_to`` (set of the normalised terms in
        known categories).
    """
    known = sorted(set(known_categories))
    cat = {}
    for t, c in term_categories.items():
        cat.setdefault(normalize_word(t), c)
    restrict = {t for t, c in cat.items() if c in known}
    persons = list(indirect_by_person)
    restricted = {p: _norm_set(ts) & restrict for p, ts in indirect_by_person.items()}
    counts = pd.Series([len(restricted[p]) for p in persons], index=pd.Index(persons, name="person_id", dtype=object),
                       dtype=np.int64, name="n_known_indirect")
    n = len(persons)
    share = (lambda k: k / n) if n else (lambda k: float("nan"))
    rows = []
    for c in known:
        k = sum(1 for p in persons if any(cat[t] == c for t in restricted[p]))
        rows.append({"category": c, "n_identifiable": k, "share_identifiable": share(k)})
    n_ident = int((counts > 0).sum())
    return {"known_categories": known, "n_individuals": n, "n_identifiable": n_ident,
            "share_identifiable": share(n_ident), "counts": counts,
            "by_category": pd.DataFrame(rows, columns=["category", "n_identifiable", "share_identifiable"]),
            "restrict_to": restrict}
