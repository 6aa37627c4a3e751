"""Reference-model attack (Carlini et al. 2021; Mireshghallah et al. 2022; mimir ``mimir/attacks/reference.py``).

With one tokenizer for both models (``normalisation="token-mean"``):

.. math:: s_{\\mathrm{ref}}(x) = \\frac{1}{T_g} \\sum_t \\ell^g_t - \\frac{1}{T_f} \\sum_t \\ell^f_t

When the two vocabularies differ, token means are not comparable (a token of one model may be several of the
other's), so both sums are normalised by the UTF-8 length in bytes of the window text ``w`` they scored
(``normalisation="per-byte"``, the bits-per-byte convention of e.g. Gao et al., "The Pile", 2020, in nats):

.. math:: s_{\\mathrm{ref}}(x) = -\\left(\\frac{\\sum_t \\ell^f_t}{|w_f|_{\\mathrm{bytes}}}
          - \\frac{\\sum_t \\ell^g_t}{|w_g|_{\\mathrm{bytes}}}\\right)

``w_g`` is ``w_f`` unless the reference's own token limit cut it shorter. ``g`` is the reference model (by default
the base model the audited model was fine-tuned from), evaluated on the same audited window of text. Higher = more
likely a member (the audited model finds the text easier than the reference). A document without a scored token
under either model scores nan.
"""

from __future__ import annotations

import numpy as np

from toolkit.audit.losses import TokenLosses

NORMALISATIONS = ("token-mean", "per-byte")


def _per_byte(losses: TokenLosses) -> np.ndarray:
    """Summed token loss over the window's UTF-8 bytes (nan without a scored token)."""
    total = np.array([a.sum() if a.size else np.nan for a in losses.losses])
    n_bytes = np.array([len(t.encode("utf-8")) for t in losses.window_texts], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n_bytes > 0, total / np.where(n_bytes > 0, n_bytes, 1.0), np.nan)


def reference_score(losses: TokenLosses, *, reference_losses: TokenLosses | None = None,
                    normalisation: str = "token-mean", **_) -> np.ndarray:
    """Reference score of each document, ``normalisation`` one of :data:`NORMALISATIONS` (see the module
    docstring)."""
    if reference_losses is None:
        raise ValueError("the reference attack needs reference_losses (the reference model's token losses)")
    if len(reference_losses) != len(losses):
        raise ValueError(f"reference losses cover {len(reference_losses)} documents, the model's {len(losses)}")
    if normalisation == "token-mean":
        return reference_losses.mean_loss() - losses.mean_loss()
    if normalisation == "per-byte":
        return _per_byte(reference_losses) - _per_byte(losses)
    raise ValueError(f"normalisation must be one of {NORMALISATIONS}, got {normalisation!r}")
