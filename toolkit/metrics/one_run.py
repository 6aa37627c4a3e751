"""The ε lower bound of the one-run privacy audit (Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training
Run", NeurIPS 2023), as pure functions of counts and scores (methods.md §10).

**Setting.** ``m`` audit examples (canaries) are each included in the training data independently with probability
½ (:math:`S_i \\in \\{0, 1\\}`, uniform). After training, an auditor that sees the model (and ``S`` of no canary)
guesses "included" for some canaries, "excluded" for others and abstains on the rest: ``r`` guesses, ``v`` of them
correct (``W`` the random number of correct guesses).

**Theorem** (their Theorems 2 and 3). If training is ε-DP with respect to each canary's inclusion, ``W`` is
stochastically dominated by :math:`W' \\sim \\mathrm{Binomial}(r, q)`, :math:`q = e^\\varepsilon / (1 + e^\\varepsilon)`
(the accuracy of ε-DP randomised response). If it is (ε, δ)-DP,

.. math:: \\Pr[W \\ge v] \\;\\le\\; \\Pr[W' \\ge v] \\;+\\; 2 m \\delta \\max_{i = 1, \\dots, v}
          \\frac{\\Pr[v > W' \\ge v - i]}{i} \\;=:\\; p_{\\varepsilon, \\delta}(v),

the p-value of observing ``v`` correct guesses under the hypothesis "the training is (ε, δ)-DP"
(:func:`one_run_p_value`; for δ = 0 the first term alone). The **ε lower bound at confidence c** is the largest ε
that the observation rejects, :math:`\\sup\\{\\varepsilon \\ge 0 : p_{\\varepsilon, \\delta}(v) < 1 - c\\}` (0 when it
rejects none), found by bisection as in their appendix code (:func:`one_run_epsilon_lower_bound`). With probability at
least ``c`` a correctly implemented (ε, δ)-DP training gives a bound ≤ ε.

**Guesses.** :func:`one_run_guesses` guesses "included" for the ``k₊`` highest scores and "excluded" for the ``k₋``
lowest. ``(k₊, k₋)`` must be fixed before the scores are seen; :func:`one_run_epsilon_score` tries a few pairs fixed
in advance (:func:`default_guesses`) and keeps the largest bound, each pair tested at confidence
:math:`1 - (1 - c) / H` for ``H`` pairs (Bonferroni), so the largest holds at confidence ``c``. The largest bound an
audit can give is limited by ``r``: ``v = r`` correct guesses prove at most
:math:`\\varepsilon = \\mathrm{logit}((1 - c)^{1/r})` (e.g. 2.55 for r = 40, 3.49 for r = 100 at c = 0.95, δ = 0).

Reference code: the appendix of Steinke et al. (``p_value_DP_audit``, ``get_eps_audit``), also in Google's
``jax_privacy/auditing.py`` (``_one_run_p_value``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["GUESS_FRACTIONS", "OneRunBound", "default_guesses", "one_run_epsilon_lower_bound",
           "one_run_epsilon_score", "one_run_guesses", "one_run_p_value"]

#: the shares of the m canaries guessed "included" (k₊ = share × m) by :func:`default_guesses`, each once with no
#: "excluded" guess (k₋ = 0) and once with as many (k₋ = k₊; the share ½ then guesses every canary)
GUESS_FRACTIONS = (0.05, 0.1, 0.25, 0.5)


def _check_counts(n_guesses: int, n_correct: int, m: int) -> None:
    if not 0 <= n_correct <= n_guesses <= m:
        raise ValueError(f"need 0 <= correct ({n_correct}) <= guesses ({n_guesses}) <= m ({m})")


def one_run_p_value(n_guesses: int, n_correct: int, epsilon: float, *, m: int, delta: float = 0.0) -> float:
    """:math:`p_{\\varepsilon, \\delta}(v)` of the module docstring: the probability of ``n_correct`` (v) or more
    correct guesses among ``n_guesses`` (r) when training is (``epsilon``, ``delta``)-DP with respect to each of the
    ``m`` canaries (Steinke et al. 2023, Theorem 3; Theorem 2 for δ = 0), capped at 1."""
    from scipy.stats import binom

    r, v = int(n_guesses), int(n_correct)
    _check_counts(r, v, int(m))
    if epsilon < 0 or not 0 <= delta <= 1:
        raise ValueError(f"need epsilon >= 0 and 0 <= delta <= 1, got {epsilon}, {delta}")
    q = 1.0 / (1.0 + math.exp(-epsilon))
    beta = float(binom.sf(v - 1, r, q))  # P[W' >= v]
    if delta == 0 or v == 0:
        return min(beta, 1.0)
    i = np.arange(1, v + 1)
    # P[v > W' >= v - i] = P[W' <= v - 1] - P[W' <= v - i - 1]
    between = binom.cdf(v - 1, r, q) - binom.cdf(v - i - 1, r, q)
    alpha = float(np.max(between / i))
    return min(beta + 2.0 * m * delta * alpha, 1.0)


def one_run_epsilon_lower_bound(n_guesses: int, n_correct: int, m: int, delta: float = 0.0,
                                confidence: float = 0.95, *, tol: float = 1e-7) -> float:
    """The ε lower bound at ``confidence``: the largest ε whose p-value (:func:`one_run_p_value`) stays below
    ``1 - confidence``, within ``tol`` from below; 0.0 when even ε = 0 is not rejected (see the module docstring).

    >>> round(one_run_epsilon_lower_bound(100, 100, 1000), 3)   # every guess right: logit(0.05 ** (1/100))
    3.493
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    _check_counts(int(n_guesses), int(n_correct), int(m))
    alpha = 1.0 - confidence

    def rejected(eps: float) -> bool:
        return one_run_p_value(n_guesses, n_correct, eps, m=m, delta=delta) < alpha

    if n_guesses == 0 or not rejected(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while rejected(hi):  # the p-value tends to 1 as ε grows (q^r → 1), so this ends
        lo, hi = hi, 2.0 * hi
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rejected(mid) else (lo, mid)
    return lo


def one_run_guesses(scores: Sequence[float], included: Sequence[bool], k_plus: int,
                    k_minus: int = 0) -> tuple[int, int]:
    """``(guesses, correct)``: "included" for the ``k_plus`` highest ``scores``, "excluded" for the ``k_minus``
    lowest, abstaining on the rest. Canaries without a finite score are never guessed; ties are ordered by position
    (which the inclusion draw does not depend on)."""
    s = np.asarray(scores, dtype=float)
    inc = np.asarray(included, dtype=bool)
    if s.shape != inc.shape or s.ndim != 1:
        raise ValueError(f"{s.size} scores for {inc.size} inclusion flags")
    finite = np.flatnonzero(np.isfinite(s))
    if k_plus < 0 or k_minus < 0 or k_plus + k_minus > finite.size:
        raise ValueError(f"k+ = {k_plus} and k- = {k_minus} guesses among {finite.size} scored canaries")
    order = finite[np.argsort(-s[finite], kind="stable")]  # highest first
    plus, minus = order[:k_plus], order[order.size - k_minus:]
    return int(k_plus + k_minus), int(inc[plus].sum() + (~inc[minus]).sum())


def default_guesses(m: int, fractions: Sequence[float] = GUESS_FRACTIONS) -> list[tuple[int, int]]:
    """The ``(k₊, k₋)`` pairs tried by :func:`one_run_epsilon_score`, fixed by ``m`` alone: for each share f,
    ``k₊ = max(1, round(f·m))`` with ``k₋ = 0`` and with ``k₋ = k₊`` (capped so that k₊ + k₋ ≤ m); duplicates
    once."""
    out: list[tuple[int, int]] = []
    for f in fractions:
        k = min(max(1, int(round(f * m))), m)
        for pair in ((k, 0), (k, min(k, m - k))):
            if pair not in out and pair[0] > 0:
                out.append(pair)
    return out


@dataclass(frozen=True)
class OneRunBound:
    """The one-run audit's result: ``m`` canaries (``n_included`` included, ``n_scored`` with a finite score), the
    chosen guesses ``k_plus`` / ``k_minus`` (``n_guesses`` = r, ``n_correct`` = v), the ``epsilon_lower_bound`` at
    ``confidence`` for ``delta``, among ``n_hypotheses`` guess pairs (each tested at ``hypothesis_confidence``)."""

    m: int
    n_included: int
    n_scored: int
    k_plus: int
    k_minus: int
    n_guesses: int
    n_correct: int
    epsilon_lower_bound: float
    confidence: float
    delta: float
    n_hypotheses: int
    hypothesis_confidence: float

    def to_dict(self) -> dict:
        return asdict(self)


def one_run_epsilon_score(scores: Sequence[float], included: Sequence[bool], *, delta: float = 0.0,
                          confidence: float = 0.95,
                          guesses: Sequence[tuple[int, int]] | None = None) -> OneRunBound:
    """The ε lower bound of the one-run audit from every canary's score (higher = more likely included) and its
    inclusion: the largest bound over the ``guesses`` pairs ``(k₊, k₋)`` (default :func:`default_guesses` of the
    number of scored canaries), each at confidence ``1 - (1 - confidence) / len(guesses)`` (Bonferroni), so that the
    result holds at ``confidence``. A tie between pairs (no bound from any: 0) keeps the one with more guesses;
    pairs guessing more canaries than have a score are left out."""
    s = np.asarray(scores, dtype=float)
    inc = np.asarray(included, dtype=bool)
    m = int(s.size)
    n_scored = int(np.isfinite(s).sum())
    pairs = list(default_guesses(n_scored) if guesses is None else guesses)
    pairs = [(int(a), int(b)) for a, b in pairs if a + b <= n_scored and a >= 0 and b >= 0 and a + b > 0]
    h = max(1, len(pairs))
    each = 1.0 - (1.0 - confidence) / h
    best = None
    for kp, km in pairs:
        r, v = one_run_guesses(s, inc, kp, km)
        eps = one_run_epsilon_lower_bound(r, v, m, delta, each)
        if best is None or eps > best[0] or (eps == best[0] and r > best[3]):
            best = (eps, kp, km, r, v)
    eps, kp, km, r, v = best or (0.0, 0, 0, 0, 0)
    return OneRunBound(m=m, n_included=int(inc.sum()), n_scored=n_scored, k_plus=kp, k_minus=km, n_guesses=r,
                       n_correct=v, epsilon_lower_bound=float(eps), confidence=float(confidence),
                       delta=float(delta), n_hypotheses=len(pairs), hypothesis_confidence=float(each))
