"""Min-K% Prob (Shi et al., "Detecting Pretraining Data from Large Language Models", ICLR 2024).

.. math:: s_{\\mathrm{min}\\text{-}k}(x) = -\\frac{1}{|K|} \\sum_{t \\in K} \\ell_t

where :math:`K` holds the :math:`\\lceil kT \\rceil` tokens with the *largest* loss (the lowest-probability k%),
``k = 0.2``. As ``mimir/attacks/min_k.py`` (window 1, stride 1) except that the number of tokens is rounded up
(mimir rounds down), so a short document still keeps one token.
"""

from __future__ import annotations

import math

import numpy as np

from toolkit.audit.losses import TokenLosses


def n_kept(n_tokens: int, k: float) -> int:
    """:math:`\\lceil kT \\rceil` (at least 1 when T ≥ 1), computed robustly against floating point noise."""
    if not 0 < k <= 1:
        raise ValueError(f"k must be in (0, 1], got {k}")
    return min(n_tokens, max(1, math.ceil(k * n_tokens - 1e-9))) if n_tokens else 0


def min_k_score(losses: TokenLosses, *, k: float = 0.2, **_) -> np.ndarray:
    out = np.full(len(losses), np.nan)
    for i, a in enumerate(losses.losses):
        m = n_kept(a.size, k)
        if m:
            out[i] = -np.sort(a)[::-1][:m].mean()
    return out
