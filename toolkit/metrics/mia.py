"""Membership inference figures (methods.md §5, §10): the papers' count attack score and, for any attack's scores, the
ROC, AUC and TPR at fixed FPRs with bootstrap (score or cluster) or Hanley–McNeil intervals (an FPR below
1/n_nonmembers is reported as unresolvable).

* **Count MIA** (000 §5.4): score(individual) = number of that individual's indirect-identifier types predicted when
  probing that individual's own documents.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score, roc_curve

from toolkit.metrics.probing import check_columns, norm_set, normalize_word, prediction_words

__all__ = ["auc_interval", "auxiliary_knowledge_identifiable", "detectable_auc", "hanley_mcneil_ci", "mia_report",
           "mia_scores", "roc", "tpr_at_fpr"]

#: relative tolerance when comparing FPRs (k / n computed in floating point) with a target FPR
_FPR_TOL = 1e-9


# ---------------------------------------------------------------------------------------------------------------------
# membership inference by indirect identifiers (methods.md §5)


def mia_scores(predictions: pd.DataFrame, indirect_by_person: dict[str, set[str]], *,
               restrict_to: set | None = None) -> pd.Series:
    """MIA score of every individual (methods.md §5; 000 §5.4).

    .. math:: s(p) = |\\{t \\in I_p : t \\text{ predicted in a row of } p\\text{'s own documents}\\}|

    where ``I_p`` is the set of individual ``p``'s indirect-identifier types (optionally ``I_p ∩ restrict_to``,
    for the auxiliary-knowledge attacker of 001 §6.1) and "``p``'s own documents" are the rows with
    ``person_id == p``. A type is predicted when it is one of the words of a prediction (the ``L`` of
    :func:`toolkit.metrics.probing.privacy_report`: ``": okafor"`` predicts ``okafor``). A type predicted several
    times counts once; ties between individuals are kept.

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
    check_columns(predictions, ("person_id", "predicted"))
    allowed = None if restrict_to is None else norm_set(restrict_to)
    persons, terms = [], []
    for p, ts in indirect_by_person.items():
        for t in norm_set(ts):
            if allowed is None or t in allowed:
                persons.append(p)
                terms.append(t)
    pairs = pd.DataFrame({"person_id": pd.Series(persons, dtype=object), "term": pd.Series(terms, dtype=object)})
    pred = predictions[["person_id", "predicted"]].astype(object).drop_duplicates()
    pred = pd.DataFrame({"person_id": pred["person_id"].to_numpy(),
                         "term": prediction_words(pred["predicted"]).to_numpy()})
    pred = pred.explode("term").dropna().drop_duplicates()
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
    """ROC curve and AUC of a score-threshold membership attack (methods.md §5), label 1 = member.

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
    """TPR at a fixed FPR: the largest TPR among ROC points with FPR ≤ ``target`` (methods.md §5; 000 Table 2).

    No interpolation between ROC points (a threshold attack cannot realise them without randomising).

    Returns
    -------
    float or None
        ``None`` when ``target < 1 / n_negatives``: with ``n_negatives`` non-members the smallest non-zero FPR is
        ``1 / n_negatives``, so a lower FPR cannot be resolved and is reported as such, never as 0 (methods.md §5).
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
                     rng: np.random.Generator, groups: tuple[np.ndarray, np.ndarray] | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """AUC (shape ``(B,)``) and TPR at each FPR (shape ``(B, len(fprs))``) of ``n_bootstrap`` resamples.

    Members and non-members are resampled separately with replacement: scores, or (``groups``: the cluster index,
    0..G−1 in order of first appearance, of each member and each non-member score) whole clusters, every score of a
    drawn cluster counted as often as the cluster is drawn. Scores are coded by rank among the distinct values of
    both samples, so each resample is two rows of per-code counts: TPR(k) and FPR(k) are the shares with a code
    ≥ k, and AUC = Σ_k c_m(k) (c_n(<k) + ½ c_n(k)) / (|m| |n|). With one score per cluster, the draws (and so the
    intervals) are those of the score bootstrap.
    """
    values, codes = np.unique(np.r_[m, n], return_inverse=True)
    cm_codes, cn_codes = codes[:m.size], codes[m.size:]
    K = values.size
    if groups is None:
        sides = [(m.size, None), (n.size, None)]
    else:
        sides = []
        for g, c in zip(groups, (cm_codes, cn_codes)):
            n_g = int(g.max()) + 1
            table = np.zeros((n_g, K))                 # cluster x code: how many of the cluster's scores have code k
            np.add.at(table, (g, c), 1.0)
            sides.append((n_g, table))
    aucs = np.empty(n_bootstrap)
    tprs = np.empty((n_bootstrap, len(fprs)))
    chunk = max(1, int(4_000_000 // max(K, m.size, n.size)))  # bounds memory to a few B×K arrays of 4e6 cells
    for lo in range(0, n_bootstrap, chunk):
        hi = min(lo + chunk, n_bootstrap)
        counts = []
        for (size, table), own in zip(sides, (cm_codes, cn_codes)):
            draw = rng.integers(0, size, size=(hi - lo, size))
            if table is None:
                counts.append(_counts(own[draw], K))
            else:
                counts.append(_counts(draw, size) @ table)
        aucs[lo:hi], tprs[lo:hi] = _stats_from_counts(counts[0], counts[1], fprs)
    return aucs, tprs


def _counts(codes: np.ndarray, K: int) -> np.ndarray:
    """``(B, K)`` float counts of each code 0..K−1 in each row of ``codes`` (B×n)."""
    B = codes.shape[0]
    offs = (np.arange(B) * K)[:, None]
    return np.bincount((codes + offs).ravel(), minlength=B * K).reshape(B, K).astype(float)


def _stats_from_counts(count_m: np.ndarray, count_n: np.ndarray, fprs: Sequence[float]):
    """AUC and TPR@FPR for each row of per-code counts of members ``count_m`` and non-members ``count_n`` (B×K)."""
    nm = count_m.sum(axis=1)
    nn = count_n.sum(axis=1)
    below_n = np.cumsum(count_n, axis=1) - count_n
    auc = (count_m * (below_n + 0.5 * count_n)).sum(axis=1) / (nm * nn)
    # shares with a score >= value k (threshold at each distinct value), plus the origin (threshold above all)
    tpr = np.cumsum(count_m[:, ::-1], axis=1)[:, ::-1] / nm[:, None]
    fpr = np.cumsum(count_n[:, ::-1], axis=1)[:, ::-1] / nn[:, None]
    out = np.empty((count_m.shape[0], len(fprs)))
    for j, target in enumerate(fprs):
        out[:, j] = np.where(fpr <= target * (1.0 + _FPR_TOL), tpr, 0.0).max(axis=1)
    return auc, out


def detectable_auc(n_members: int, n_nonmembers: int, confidence: float = 0.95) -> float:
    """Smallest AUC distinguishable from 0.5: ``min(1, 0.5 + z sqrt((n_m + n_n + 1) / (12 n_m n_n)))``, the half-width
    of the AUC's interval under no leakage (Hanley & McNeil 1982); 1.0 (nothing detectable) when either count is 0."""
    from scipy.stats import norm

    if n_members < 1 or n_nonmembers < 1:
        return 1.0
    z = float(norm.ppf(0.5 + confidence / 2))
    return min(1.0, 0.5 + z * float(np.sqrt((n_members + n_nonmembers + 1) / (12.0 * n_members * n_nonmembers))))


def hanley_mcneil_ci(auc: float, n_pos: int, n_neg: int, confidence: float = 0.95) -> list[float]:
    """Normal-approximation interval of an AUC from its standard error (Hanley & McNeil 1982; methods.md §10).

    .. math:: SE^2 = \\frac{A(1-A) + (n_p - 1)(Q_1 - A^2) + (n_n - 1)(Q_2 - A^2)}{n_p n_n},\\quad
              Q_1 = \\frac{A}{2 - A},\\quad Q_2 = \\frac{2A^2}{1 + A}

    and the interval is ``A ± z SE`` with ``z`` the ``(1 + confidence)/2`` standard-normal quantile, clipped to
    [0, 1]. It needs no resampling, so it exists for any sample (it is the interval of :func:`mia_report` with
    ``n_bootstrap=0``); it assumes independent scores and is exact only asymptotically (Q1, Q2 are those of
    exponential score distributions). At A = 0 or 1 the SE is 0 and the interval collapses to the point.

    Hanley, J. A. & McNeil, B. J. (1982). The meaning and use of the area under a receiver operating characteristic
    (ROC) curve. Radiology 143(1), 29–36.

    Parameters
    ----------
    auc : float
        The AUC ``A``, in [0, 1].
    n_pos, n_neg : int
        Numbers of positives (members) and negatives (non-members), each ≥ 1.
    confidence : float
        In (0, 1).

    Returns
    -------
    list of float
        ``[lo, hi]``.
    """
    from scipy.stats import norm

    a = float(auc)
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"auc must be in [0, 1] (got {a})")
    if int(n_pos) < 1 or int(n_neg) < 1:
        raise ValueError(f"need at least one positive and one negative (got {n_pos} and {n_neg})")
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    q1 = a / (2.0 - a)
    q2 = 2.0 * a * a / (1.0 + a)
    var = (a * (1 - a) + (n_pos - 1) * (q1 - a * a) + (n_neg - 1) * (q2 - a * a)) / (n_pos * n_neg)
    half = float(norm.ppf((1 + confidence) / 2)) * float(np.sqrt(max(var, 0.0)))
    return [max(0.0, a - half), min(1.0, a + half)]


def auc_interval(report: dict, n_members: int | None = None, n_nonmembers: int | None = None,
                 confidence: float = 0.95) -> tuple[float, float, str] | None:
    """``(lower, upper, method)`` of one attack's AUC interval as ``attacks.json`` records it: its own ``auc_ci``
    (method ``auc_ci_method``, bootstrap by default; an upper end not recorded is 1), else :func:`hanley_mcneil_ci`
    from its ``auc`` and counts (the report's ``n_members`` / ``n_nonmembers``, else the ones given — a battery's).
    None without an AUC, or without an interval and at least 2 members and 2 non-members. The verdict (methods.md
    §11) and the report's split check use it."""
    def finite(x):
        try:
            v = float(x)
        except (TypeError, ValueError):
            return None
        return v if np.isfinite(v) else None

    report = report if isinstance(report, dict) else {}
    auc = finite(report.get("auc"))
    if auc is None:
        return None
    ci = report.get("auc_ci")
    lo = finite(ci[0]) if isinstance(ci, (list, tuple)) and len(ci) == 2 else None
    if lo is not None:
        method = str(report.get("auc_ci_method") or "bootstrap")
        hi = finite(ci[1])
        return lo, 1.0 if hi is None else hi, {"hanley-mcneil": "Hanley–McNeil"}.get(method, method)
    n_m = finite(report.get("n_members")) if finite(report.get("n_members")) is not None else finite(n_members)
    n_n = finite(report.get("n_nonmembers")) if finite(report.get("n_nonmembers")) is not None else finite(n_nonmembers)
    if n_m is None or n_n is None or n_m < 2 or n_n < 2:
        return None
    return (*hanley_mcneil_ci(min(max(auc, 0.0), 1.0), int(n_m), int(n_n), confidence), "Hanley–McNeil")


def _cluster_index(groups, size: int, side: str) -> np.ndarray:
    g = np.asarray(pd.factorize(pd.Series(list(groups), dtype=object), sort=False)[0])
    if g.size != size:
        raise ValueError(f"{g.size} {side} group labels for {size} {side} scores")
    if (g < 0).any():
        raise ValueError(f"{side} group labels must not be missing")
    return g


def mia_report(scores_members, scores_nonmembers, fprs: Sequence[float] = (0.001, 0.01, 0.1),
               n_bootstrap: int = 1000, seed: int = 0, ci: float = 0.95,
               groups: tuple[Sequence, Sequence] | None = None) -> dict:
    """ROC summary of the membership attack with an interval for the AUC (methods.md §5, §10; 000 Fig. 6, Table 2).

    Point estimates come from :func:`roc` and :func:`tpr_at_fpr`. With ``n_bootstrap > 0`` the intervals are
    percentile bootstrap intervals: members and non-members are resampled separately with replacement
    (``numpy.random.default_rng(seed)``; in chunks of resamples, members' draws before non-members'), the statistic
    is recomputed on each of the ``n_bootstrap`` resamples, and the ``(1 − ci)/2`` and ``(1 + ci)/2`` quantiles are
    reported. With ``groups`` (the cluster, e.g. the individual, of each member score and of each non-member score)
    the bootstrap resamples clusters, not scores (cluster bootstrap; Davison & Hinkley 1997, §3.8): clusters are
    drawn with replacement within members and within non-members and every score of a drawn cluster enters the
    resample, so correlated scores of one individual widen the interval as they should. With one score per cluster
    this is the score bootstrap, draw for draw.

    With ``n_bootstrap == 0`` the AUC interval is Hanley & McNeil's (:func:`hanley_mcneil_ci`), with the numbers of
    clusters as sample sizes when ``groups`` are given (a conservative effective size); the TPR intervals are then
    None.

    Returns
    -------
    dict
        ``auc``, ``auc_ci`` (``[lo, hi]``), ``auc_ci_method`` (``"bootstrap"`` or ``"hanley-mcneil"``),
        ``n_clusters`` (``{"members": int, "nonmembers": int}`` with ``groups``, else None), ``tpr_at_fpr``
        (``{"0.001": float or None, ...}``, keys ``format(fpr, "g")``, None where the FPR cannot be resolved with
        this many non-members), ``tpr_at_fpr_ci`` (same keys, ``[lo, hi]`` or None), ``n_members``,
        ``n_nonmembers``, ``fpr`` and ``tpr`` (lists, the ROC points). Plain Python types, ready for JSON.
    """
    if not 0 < ci < 1:
        raise ValueError("ci must be in (0, 1)")
    if int(n_bootstrap) != n_bootstrap or n_bootstrap < 0:
        raise ValueError(f"n_bootstrap must be a non-negative integer (got {n_bootstrap!r})")
    m, n = _two_class(scores_members, scores_nonmembers)
    clusters = None
    if groups is not None:
        clusters = (_cluster_index(groups[0], m.size, "member"), _cluster_index(groups[1], n.size, "non-member"))
    r = roc(m, n)
    fprs = [float(f) for f in fprs]
    keys = [_fpr_key(f) for f in fprs]
    out = {"auc": r["auc"], "auc_ci": None, "auc_ci_method": "bootstrap" if n_bootstrap > 0 else "hanley-mcneil",
           "n_clusters": None if clusters is None else {"members": int(clusters[0].max()) + 1,
                                                        "nonmembers": int(clusters[1].max()) + 1},
           "tpr_at_fpr": {k: tpr_at_fpr(r["fpr"], r["tpr"], f, n.size) for k, f in zip(keys, fprs)},
           "tpr_at_fpr_ci": {k: None for k in keys},
           "n_members": int(m.size), "n_nonmembers": int(n.size),
           "fpr": r["fpr"].tolist(), "tpr": r["tpr"].tolist()}
    if n_bootstrap > 0:
        aucs, tprs = _bootstrap_stats(m, n, fprs, int(n_bootstrap), np.random.default_rng(seed), clusters)
        q = [100 * (1 - ci) / 2, 100 * (1 + ci) / 2]
        out["auc_ci"] = [float(v) for v in np.percentile(aucs, q)]
        for j, (k, f) in enumerate(zip(keys, fprs)):
            if _resolvable(f, n.size):
                out["tpr_at_fpr_ci"][k] = [float(v) for v in np.percentile(tprs[:, j], q)]
    else:
        sizes = (m.size, n.size) if out["n_clusters"] is None else tuple(out["n_clusters"].values())
        out["auc_ci"] = hanley_mcneil_ci(r["auc"], *sizes, confidence=ci)
    return out


def auxiliary_knowledge_identifiable(indirect_by_person: dict[str, set[str]], term_categories: dict[str, str],
                                     known_categories: Iterable[str]) -> dict:
    """Individuals identifiable by an attacker who knows only some categories of words (001 §6.1, Fig. 8; methods.md
    §5).

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
    restricted = {p: norm_set(ts) & restrict for p, ts in indirect_by_person.items()}
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
