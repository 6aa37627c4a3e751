"""DC-PDD (Zhang et al., "Pretraining Data Detection for Large Language Models: A Divergence-based Calibration
Method", EMNLP 2024; as ``mimir/attacks/dc_pdd.py`` in iamgroot42/mimir, after the authors' zhang-wei-chao/DC-PDD).

The token probabilities are calibrated by the tokens' frequency in a reference corpus:

.. math:: f(v) = \\frac{1 + n(v)}{\\sum_u n(u) + |V|}, \\qquad \\alpha_t = p(x_t \\mid x_{<t}) \\log\\frac{1}{f(x_t)},
          \\qquad s_{\\mathrm{DC\\text{-}PDD}}(x) = \\frac{1}{|F|} \\sum_{t \\in F} \\min(\\alpha_t, a)

with :math:`n(v)` the count of token ``v`` in the reference corpus (Laplace-smoothed over the vocabulary
:math:`|V|` = ``len(tokenizer)``, each text tokenised with at most 1,024 tokens as mimir), :math:`F` the *first
occurrence* of each distinct token of the window, and ``a = 0.01`` (mimir's default). Higher = more likely a member
(mimir returns the negative, lower = member). mimir counts frequencies on C4; **here the reference corpus is the public
split** — the base model's own data, never the audited notes (a frequency counted on them would carry the members'
identifiers into the calibration). The first token is scored given the BOS (mimir injects the EOS in front: the same
for GPT-2, :mod:`toolkit.audit.losses`).

Needs the audited model's token losses and the public split's texts; causal models (the paper's setting; on a masked
model the PLL term would stand in for :math:`p(x_t \\mid x_{<t})`, untested, so it is not run).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolkit.audit.losses import TokenLosses

#: mimir's clip ``a`` and the longest tokenised reference text
A = 0.01
MAX_TOKENS = 1024


def token_frequencies(tokenizer, texts: Sequence[str], *, max_tokens: int = MAX_TOKENS) -> np.ndarray:
    """:math:`f(v)`, Laplace-smoothed over ``len(tokenizer)`` (module docstring), from ``texts``."""
    counts = np.zeros(len(tokenizer), dtype=np.float64)
    for ids in tokenizer(list(texts), truncation=True, max_length=max_tokens)["input_ids"]:
        np.add.at(counts, np.asarray(ids, dtype=np.int64), 1.0)
    return (1.0 + counts) / (counts.sum() + counts.size)


def dc_pdd_document(log_p: np.ndarray, token_ids: np.ndarray, freq: np.ndarray, *, a: float = A) -> float:
    """The score of one document from its scored tokens' :math:`\\log p` and ids (module docstring)."""
    ids = np.asarray(token_ids, dtype=np.int64)
    if not ids.size:
        return float("nan")
    _, first = np.unique(ids, return_index=True)
    first = np.sort(first)
    alpha = np.exp(np.asarray(log_p, float)[first]) * np.log(1.0 / freq[ids[first]])
    return float(np.minimum(alpha, a).mean())


def dc_pdd_score(losses: TokenLosses, *, frequencies: np.ndarray, a: float = A, **_) -> np.ndarray:
    """DC-PDD score of each document (nan without scored tokens)."""
    return np.array([dc_pdd_document(-l, t, frequencies, a=a) for l, t in zip(losses.losses, losses.token_ids)])
