"""LOSS attack (Yeom et al., "Privacy Risk in Machine Learning", CSF 2018).

.. math:: s_{\\mathrm{loss}}(x) = -\\frac{1}{T} \\sum_{t=1}^{T} \\ell_t

Higher = more likely a member (the negative of mimir's ``LOSSAttack`` score, ``mimir/attacks/loss.py``).
"""

from __future__ import annotations

import numpy as np

from toolkit.audit.losses import TokenLosses


def loss_score(losses: TokenLosses, **_) -> np.ndarray:
    """Negative mean token loss of each document (nan for a document without scored tokens)."""
    return -losses.mean_loss()
