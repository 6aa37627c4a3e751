"""Min-K%++ (Zhang et al., "Min-K%++: Improved Baseline for Detecting Pre-Training Data from LLMs", 2024), causal and
masked models.

.. math:: z_t = \\frac{\\log p(x_t \\mid c_t) - \\mu_t}{\\sigma_t}, \\quad
          \\mu_t = \\sum_v p(v \\mid c_t) \\log p(v \\mid c_t), \\quad
          \\sigma_t^2 = \\sum_v p(v \\mid c_t) (\\log p(v \\mid c_t))^2 - \\mu_t^2

.. math:: s_{\\mathrm{min}\\text{-}k\\text{++}}(x) = \\frac{1}{|K|} \\sum_{t \\in K} z_t

with :math:`K` the :math:`\\lceil kT \\rceil` tokens of smallest :math:`z_t`, ``k = 0.2``. The context
:math:`c_t` is the prefix :math:`x_{<t}` for a causal model (as ``mimir/attacks/min_k_plus_plus.py``,
iamgroot42/mimir, sign flipped so that higher = more likely a member) and, for a masked model, the rest of the window
:math:`x_{\\setminus t}` with token ``t`` masked — the distribution of the pseudo-log-likelihood term (an adaptation:
the paper defines it for causal models only). With budgeted PLL (:mod:`toolkit.audit.pll`) ``T`` counts the drawn
positions. A token with :math:`\\sigma_t = 0` (a point-mass prediction) gets :math:`z_t = 0`.
"""

from __future__ import annotations

import numpy as np

from toolkit.audit.attacks.min_k import n_kept
from toolkit.audit.losses import TokenLosses


def z_scores(log_p: np.ndarray, mu: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sigma > 0, (log_p - mu) / np.where(sigma > 0, sigma, 1.0), 0.0)


def min_k_plus_plus_score(losses: TokenLosses, *, k: float = 0.2, **_) -> np.ndarray:
    if losses.mu is None or losses.sigma is None:
        raise ValueError("min_k_plus_plus needs token losses computed with moments=True")
    out = np.full(len(losses), np.nan)
    for i, (a, mu, sd) in enumerate(zip(losses.losses, losses.mu, losses.sigma)):
        m = n_kept(a.size, k)
        if m:
            out[i] = np.sort(z_scores(-a, mu, sd))[:m].mean()
    return out
