"""Reference-model attack (Carlini et al. 2021; Mireshghallah et al. 2022; mimir ``mimir/attacks/reference.py``).

.. math:: s_{\\mathrm{ref}}(x) = \\frac{1}{T_g} \\sum_t \\ell^g_t - \\frac{1}{T_f} \\sum_t \\ell^f_t

``g`` is the reference model (by default the base model the audited model was fine-tuned from), evaluated on the same
audited window of text. Higher = more likely a member (the audited model finds the text easier than the reference).
"""

from __future__ import annotations

import numpy as np

from toolkit.audit.losses import TokenLosses


def reference_score(losses: TokenLosses, *, reference_losses: TokenLosses | None = None, **_) -> np.ndarray:
    if reference_losses is None:
        raise ValueError("the reference attack needs reference_losses (the reference model's token losses)")
    if len(reference_losses) != len(losses):
        raise ValueError(f"reference losses cover {len(reference_losses)} documents, the model's {len(losses)}")
    return reference_losses.mean_loss() - losses.mean_loss()
