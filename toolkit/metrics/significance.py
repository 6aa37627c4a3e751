"""Significance tests of the verdict's rules (methods.md §11): one stated test per rule, Holm's step-down procedure
over the family one verdict runs.

Each function returns a one-sided or two-sided p-value under a stated null hypothesis; :func:`holm` decides which of
a family of p-values are significant with the family-wise error rate controlled at ``alpha`` under any dependence
between the tests (Holm 1979). The tests:

* :func:`binomial_p_value` — a rate on ``n`` independent trials above a given rate (PII inference's top-1 against
  chance: each occurrence's candidates are drawn independently, and a model that knows nothing ranks the true one
  first with probability 1/|C|).
* :func:`auc_p_value` — two-sided test of AUC = 0.5. Under the null (member and non-member scores exchangeable) the
  Mann–Whitney U has mean :math:`n_m n_n / 2` and variance :math:`n_m n_n (n_m + n_n + 1) / 12` (no ties; ties only
  lower it, so the test is conservative with ties); the AUC is :math:`U / (n_m n_n)` and the p-value is the normal
  tail :math:`2\\,\\Phi(-|A - 1/2| / \\sigma)`, :math:`\\sigma^2 = (n_m + n_n + 1) / (12 n_m n_n)` (Mann & Whitney
  1947; the same :math:`\\sigma` as :func:`toolkit.metrics.mia.detectable_auc`).
* :func:`tpr_p_value` — TPR at a fixed FPR against that FPR, *with the threshold's own uncertainty*. The attack's
  threshold is set on the same non-members (:func:`toolkit.metrics.mia.tpr_at_fpr`: at most
  :math:`k = \\lfloor f n_n \\rfloor` non-members at or above it), so it lies just above the :math:`(k+1)`-th largest
  non-member score. Under the null the population mass above that order statistic is :math:`U \\sim
  \\mathrm{Beta}(k + 1, n_n - k)` and the number of members above it is :math:`\\mathrm{Binomial}(n_m, U)`, i.e.
  beta-binomial: :math:`p = P(X \\ge h)`, :math:`X \\sim \\mathrm{BetaBinomial}(n_m, k + 1, n_n - k)`, ``h`` the
  members found. Exact for continuous scores; with ties the attack finds fewer members (conservative).
* :func:`exposure_p_value` — canaries: the rank of a secret that was never inserted is uniform among the :math:`|R|`
  possible secrets, so :math:`P(\\mathrm{exposure} \\ge e) = 2^{-e}` (Carlini et al. 2019, §4); for the largest of
  ``m`` canaries' exposures, Bonferroni over the canaries: :math:`\\min(1, m\\,2^{-e_{\\max}})`.
* :func:`member_advantage_test` — do the members' occurrences score higher than the non-members' (PII inference hits,
  regurgitated identifiers)? A permutation test over *individuals* (their occurrences move together, so occurrences of
  one person are never treated as independent): the statistic is the members' pooled rate minus the non-members',
  its null distribution the same statistic under random relabellings of the individuals with the group sizes kept
  (``n_permutations`` seeded draws), :math:`p = (1 + \\#\\{T^* \\ge T\\}) / (1 + B)` (Phipson & Smyth 2010).
* :func:`auc_difference_p_value` — is the audited model's AUC above the reference model's on the same split (a split
  whose groups differ before fine-tuning)? :math:`z = (A - A_r) / \\sqrt{SE^2 + SE_r^2}`, one-sided; the two AUCs are
  computed on the same individuals, positively correlated, so ignoring the covariance overstates the variance
  (conservative).
* :func:`clopper_pearson` — exact binomial interval of a share (the verdict's measured false-alarm rate and power).

Holm, S. (1979). A simple sequentially rejective multiple test procedure. Scand. J. Statist. 6(2), 65–70.
Mann, H. B. & Whitney, D. R. (1947). On a test of whether one of two random variables is stochastically larger than
the other. Ann. Math. Statist. 18(1), 50–60.
Phipson, B. & Smyth, G. K. (2010). Permutation p-values should never be zero. Stat. Appl. Genet. Mol. Biol. 9(1).
Carlini, N., Liu, C., Erlingsson, Ú., Kos, J. & Song, D. (2019). The Secret Sharer. USENIX Security.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: the family-wise error rate of one verdict's tests (methods.md §11)
ALPHA = 0.05
#: tolerance of FPR · n_n ≥ 1 (as :mod:`toolkit.metrics.mia`)
_FPR_TOL = 1e-9


def binomial_p_value(share: float, n: int, rate: float) -> float:
    """One-sided p-value :math:`P(X \\ge h \\mid n, q)`, :math:`X \\sim \\mathrm{Binomial}(n, q)`, of
    ``h`` = round(``share`` · n) successes or more among ``n`` trials at rate ``q`` = ``rate`` (clipped to [0, 1]);
    1 when ``h`` = 0. ``share``'s tied credits (PII inference counts 1/#tied per tie) are summed and rounded."""
    from scipy.stats import binom

    hits = int(np.floor(share * n + 0.5))
    return float(binom.sf(hits - 1, n, min(max(rate, 0.0), 1.0))) if hits > 0 else 1.0


def auc_p_value(auc: float, n_members: int, n_nonmembers: int) -> float:
    """Two-sided p-value of AUC = 0.5 from the Mann–Whitney null (module docstring); 1.0 without 1 of each."""
    from scipy.stats import norm

    if n_members < 1 or n_nonmembers < 1:
        return 1.0
    sd = math.sqrt((n_members + n_nonmembers + 1) / (12.0 * n_members * n_nonmembers))
    return float(min(1.0, 2.0 * norm.sf(abs(float(auc) - 0.5) / sd)))


def fpr_resolvable(fpr: float, n_nonmembers: int) -> bool:
    """An FPR is resolvable with ``n_nonmembers`` iff ``fpr · n_nonmembers ≥ 1`` (as :func:`toolkit.metrics.mia.tpr_at_fpr`)."""
    return n_nonmembers > 0 and fpr * n_nonmembers >= 1.0 - _FPR_TOL


def tpr_p_value(tpr: float, fpr: float, n_members: int, n_nonmembers: int) -> float | None:
    """One-sided p-value of TPR ``tpr`` at FPR ``fpr`` against the null of no leakage, the threshold estimated on the
    same ``n_nonmembers`` (beta-binomial, module docstring); None where the FPR is not resolvable."""
    from scipy.stats import betabinom

    if not fpr_resolvable(fpr, n_nonmembers) or n_members < 1:
        return None
    k = int(math.floor(fpr * n_nonmembers + _FPR_TOL))
    h = int(math.floor(float(tpr) * n_members + 0.5))
    if h <= 0:
        return 1.0
    return float(betabinom.sf(h - 1, n_members, k + 1, n_nonmembers - k))


def exposure_p_value(exposure: float, n_canaries: int = 1) -> float:
    """P-value of the largest exposure ``exposure`` (bits) among ``n_canaries`` canaries: :math:`\\min(1, m 2^{-e})`."""
    return float(min(1.0, max(1, int(n_canaries)) * 2.0 ** (-max(0.0, float(exposure)))))


def auc_difference_p_value(auc: float, se: float, auc_reference: float, se_reference: float) -> float:
    """One-sided p-value of :math:`A \\le A_r` (module docstring); 1.0 where both standard errors are 0 and
    :math:`A \\le A_r`, 0.0 where they are 0 and :math:`A > A_r`."""
    from scipy.stats import norm

    sd = math.sqrt(max(se, 0.0) ** 2 + max(se_reference, 0.0) ** 2)
    if sd == 0:
        return 0.0 if auc > auc_reference else 1.0
    return float(norm.sf((auc - auc_reference) / sd))


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down procedure: which of ``p_values`` are significant at family-wise error rate ``alpha``.

    Sorted ascending :math:`p_{(1)} \\le \\dots \\le p_{(m)}`, reject :math:`H_{(1)}, \\dots, H_{(j)}` for the largest
    ``j`` such that :math:`p_{(i)} \\le \\alpha / (m - i + 1)` for every ``i ≤ j``. Valid under any dependence."""
    p = np.asarray([1.0 if v is None or not np.isfinite(v) else float(v) for v in p_values], dtype=float)
    m = p.size
    out = np.zeros(m, dtype=bool)
    for rank, i in enumerate(np.argsort(p, kind="stable")):
        if p[i] <= alpha / (m - rank):
            out[i] = True
        else:
            break
    return out.tolist()


def member_advantage_test(hits_members: Sequence[float], trials_members: Sequence[float],
                          hits_nonmembers: Sequence[float], trials_nonmembers: Sequence[float], *,
                          n_permutations: int = 9999, seed: int = 0) -> dict:
    """Permutation test over individuals (module docstring): per individual its hits (credits) and trials
    (occurrences), individuals with no trial left out.

    Returns ``{"members_rate", "nonmembers_rate", "difference", "p_value", "n_members", "n_nonmembers",
    "n_trials_members", "n_trials_nonmembers", "n_permutations", "method"}``; ``p_value`` None where either group has
    no individual with a trial.
    """
    hm, tm = np.asarray(hits_members, float), np.asarray(trials_members, float)
    hn, tn = np.asarray(hits_nonmembers, float), np.asarray(trials_nonmembers, float)
    km, kn = tm > 0, tn > 0
    hm, tm, hn, tn = hm[km], tm[km], hn[kn], tn[kn]
    out = {"members_rate": float(hm.sum() / tm.sum()) if tm.size else None,
           "nonmembers_rate": float(hn.sum() / tn.sum()) if tn.size else None,
           "difference": None, "p_value": None, "n_members": int(tm.size), "n_nonmembers": int(tn.size),
           "n_trials_members": int(round(tm.sum())), "n_trials_nonmembers": int(round(tn.sum())),
           "n_permutations": int(n_permutations), "method": "permutation over individuals"}
    if not tm.size or not tn.size:
        return out
    h, t = np.r_[hm, hn], np.r_[tm, tn]
    n, n1 = h.size, tm.size
    observed = hm.sum() / tm.sum() - hn.sum() / tn.sum()
    out["difference"] = float(observed)
    rng = np.random.default_rng(seed)
    H, T = h.sum(), t.sum()
    count, done = 0, 0
    while done < n_permutations:
        b = min(2000, n_permutations - done)
        idx = np.argsort(rng.random((b, n)), axis=1)[:, :n1]  # b random member sets of size n1
        hs, ts = h[idx].sum(axis=1), t[idx].sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            stat = hs / ts - (H - hs) / (T - ts)
        count += int(np.sum(np.nan_to_num(stat, nan=-np.inf) >= observed - 1e-12))
        done += b
    out["p_value"] = float((1 + count) / (1 + n_permutations))
    return out


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper–Pearson) interval of a share ``k / n``; ``(0, 1)`` for ``n = 0``."""
    from scipy.stats import beta

    if n <= 0:
        return 0.0, 1.0
    a = (1 - confidence) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


__all__ = ["ALPHA", "auc_difference_p_value", "auc_p_value", "binomial_p_value", "clopper_pearson",
           "exposure_p_value", "fpr_resolvable", "holm", "member_advantage_test", "tpr_p_value"]
