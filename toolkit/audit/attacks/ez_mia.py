"""EZ-MIA, the ``ez`` attack (Ilić, Stanojević, Cvejoski, arXiv 2601.12104, 2026; code
``mia/ez_score.py``, ``error_zone_pos_neg_sum_ratio``, in JetBrains-Research/ez-mia).

At the *error positions* :math:`E = \\{t : \\arg\\max_v p_f(v \\mid c_t) \\ne x_t\\}` — where the audited model's own
top-1 prediction is wrong — the shift of the true token's log-probability against the reference model ``g``,
:math:`\\delta_t = \\log p_f(x_t \\mid c_t) - \\log p_g(x_t \\mid c_t)`, is summed by sign:

.. math:: s_{\\mathrm{EZ}}(x) = \\frac{\\sum_{t \\in E} \\max(\\delta_t, 0)}{\\sum_{t \\in E} \\max(-\\delta_t, 0)
          + 10^{-12}}

and 0 where :math:`|E| < 2` or no shift is negative (the authors' conventions). Higher = more likely a member:
fine-tuning raised the true token where the model still errs. Two forward passes (the audited model, the reference),
both already made by the battery.

* **causal** (:math:`c_t = x_{<t}`): the authors' attack. Their code leaves out the first predicted position
  (``ignore_bos``); here the scored tokens are the battery's — the first content token scored given the BOS alone
  (:mod:`toolkit.audit.losses`) is one of them.
* **masked** (:math:`c_t = x_{\\setminus t}`): the same ratio over the pseudo-log-likelihood's error positions — the
  masked position's top-1 against its true token, both models scored on the same masked copies (exact, budgeted or
  strided, :mod:`toolkit.audit.pll`). **This is the toolkit's own extension** (methods.md §10), not in the paper.

Needs the audited model's top-1 flags (computed with its moments), the reference's log-probabilities on the same
tokens (one vocabulary: ``reference_normalisation = token-mean``). Limits: on the tiny models the toolkit trains it was
weaker than Min-K%++ (issue 57: AUC 0.635 against 0.680 on one GPT-2); the paper's figure is on pretrained GPT-2.
"""

from __future__ import annotations

import numpy as np

from toolkit.audit.losses import TokenLosses

#: the authors' minimum number of error positions and the ratio's guard
MIN_TOKENS = 2
EPS = 1e-12


def ez_ratio(target_log_p: np.ndarray, reference_log_p: np.ndarray, top1_right: np.ndarray, *,
             min_tokens: int = MIN_TOKENS) -> float:
    """The EZ ratio of one document (module docstring) from its scored tokens' log-probabilities under the audited
    and the reference model and whether the audited model's top-1 was right."""
    err = ~np.asarray(top1_right, dtype=bool)
    if int(err.sum()) < min_tokens:
        return 0.0
    d = (np.asarray(target_log_p, float) - np.asarray(reference_log_p, float))[err]
    neg = float(np.abs(d[d < 0]).sum())
    if neg == 0.0:
        return 0.0
    value = float(d[d > 0].sum()) / (neg + EPS)
    return value if value == value and value >= 0 else 0.0


def ez_mia_score(losses: TokenLosses, *, reference_losses: TokenLosses | None = None, **_) -> np.ndarray:
    """EZ score of each document (nan for a document without scored tokens)."""
    if reference_losses is None or losses.top1 is None:
        raise ValueError("EZ-MIA needs the reference model's token losses and the audited model's top-1 flags")
    out = np.full(len(losses), np.nan)
    for i, (a, r, top) in enumerate(zip(losses.losses, reference_losses.losses, losses.top1)):
        if a.size != r.size:
            raise ValueError(f"document #{i}: {a.size} scored tokens under the model, {r.size} under the reference")
        if a.size:
            out[i] = ez_ratio(-a, -r, top)
    return out
