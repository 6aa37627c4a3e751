"""RMIA, the relative membership inference attack (Zarifzadeh, Liu & Shokri, "Low-Cost High-Power Membership
Inference Attacks", ICML 2024), transcribed from ML Privacy Meter (privacytrustlab/ml_privacy_meter,
``modules/mia/attacks/rmia.py``: ``get_out_ref_signals``, ``run_rmia``, ``tune_offline_a``).

The signal of a document under a model θ is its likelihood per token, as ML Privacy Meter's ``get_softmax`` for a
Hugging Face model (``exp`` of the mean token log-probability): :math:`p(x \\mid \\theta) = \\exp(-\\bar\\ell(x))`,
:math:`\\bar\\ell` the mean token loss of the audited window (:mod:`toolkit.audit.losses`; masked models: the
pseudo-log-likelihood terms). With reference models :math:`\\theta_1 \\dots \\theta_R` that never saw ``x``
(OUT models) and the offline coefficient ``a``:

.. math:: p(x) = \\tfrac12\\big((1 + a)\\, p_{\\mathrm{OUT}}(x) + (1 - a)\\big), \\qquad
          p_{\\mathrm{OUT}}(x) = \\frac1R \\sum_r p(x \\mid \\theta_r)

(the offline attack: :math:`p_{\\mathrm{IN}} \\approx a\\, p_{\\mathrm{OUT}} + 1 - a`), and over population documents
``z`` that neither the audited model nor a reference model was trained on:

.. math:: \\mathrm{score}(x) = \\Pr_z\\Big[\\frac{p(x \\mid \\theta) / p(x)}{p(z \\mid \\theta) / p(z)} > \\gamma\\Big],
          \\qquad \\gamma = 1 .

Higher = more likely a member. The paper writes ``≥ γ``; ML Privacy Meter counts ``ratios > 1.0`` — they differ only
on exact ties, which need ``z = x`` here (population and audited documents are disjoint).

``a`` is chosen as ML Privacy Meter does when it is not given (:func:`tune_offline_a`): the grid 0, 0.1, …, 1, each
value scored by the AUC of RMIA against reference model 0 taken as a temporary target, whose own training documents
are known, with the other reference models as its references; a reference that saw a document (IN) counts with
:math:`(p + a - 1)/a` instead of ``p`` (``(p - 0.7)/0.3`` at ``a = 0``), their ``num_reference_models = 1`` path.
One difference: the temporary target is compared with the population under its own signals (ML Privacy Meter passes
the audited model's population signals there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from toolkit.audit.losses import TokenLosses, token_losses

#: the grid of the offline coefficient ``a`` (ML Privacy Meter: ``np.arange(0, 1.1, 0.1)``)
A_GRID = tuple(np.round(np.arange(0, 1.1, 0.1), 1))


def document_probabilities(losses: TokenLosses) -> np.ndarray:
    """:math:`p(x \\mid \\theta) = \\exp(-\\text{mean token loss})` of each document (nan without a scored token)."""
    return np.exp(-losses.mean_loss())


def out_probabilities(reference: np.ndarray, reference_in: np.ndarray | None = None, *,
                      offline_a: float) -> np.ndarray:
    """:math:`p_{\\mathrm{OUT}}` per row of ``reference`` (``(n, R)``, one column per reference model): the mean over
    the columns, an IN column (``reference_in`` True) counted as :math:`(p + a - 1)/a` (ML Privacy Meter's
    ``get_out_ref_signals`` with one reference model)."""
    ref = np.asarray(reference, dtype=float)
    if ref.ndim != 2 or ref.shape[1] < 1:
        raise ValueError(f"reference probabilities must be (documents, reference models), got shape {ref.shape}")
    if reference_in is not None:
        inn = np.asarray(reference_in, dtype=bool)
        if inn.shape != ref.shape:
            raise ValueError(f"IN flags of shape {inn.shape} for reference probabilities of shape {ref.shape}")
        converted = (ref + offline_a - 1) / offline_a if offline_a != 0 else (ref - 0.7) / 0.3
        ref = np.where(inn, converted, ref)
    return ref.mean(axis=1)


def rmia_score(target_x, reference_x, target_z, reference_z, *, offline_a: float, gamma: float = 1.0,
               reference_x_in=None) -> np.ndarray:
    """RMIA score of each ``x`` (see the module docstring).

    ``target_x`` (n,) and ``target_z`` (m,): probabilities under the audited model; ``reference_x`` (n, R) and
    ``reference_z`` (m, R): under the reference models (every population document OUT of every one; ``reference_x_in``
    flags the IN ones of ``x``, for :func:`tune_offline_a`). A nan probability of ``x`` gives nan; population
    documents with a nan probability are left out.
    """
    if not 0.0 <= offline_a <= 1.0:
        raise ValueError(f"offline_a must lie in [0, 1], got {offline_a}")
    px = np.asarray(target_x, dtype=float).ravel()
    pz = np.asarray(target_z, dtype=float).ravel()
    mean_x = (1 + offline_a) / 2 * out_probabilities(reference_x, reference_x_in, offline_a=offline_a) \
        + (1 - offline_a) / 2
    mean_z = (1 + offline_a) / 2 * out_probabilities(reference_z, offline_a=offline_a) + (1 - offline_a) / 2
    if mean_x.size != px.size or mean_z.size != pz.size:
        raise ValueError("the audited model's and the reference models' probabilities cover different documents")
    ratio_x, ratio_z = px / mean_x, pz / mean_z
    ratio_z = ratio_z[np.isfinite(ratio_z)]
    if ratio_z.size == 0:
        raise ValueError("RMIA needs at least one population document with a probability")
    out = np.mean(ratio_x[:, None] / ratio_z[None, :] > gamma, axis=1)
    return np.where(np.isfinite(ratio_x), out, np.nan)


def tune_offline_a(target_x, member, reference_x, reference_x_in, target_z, reference_z,
                   grid: Sequence[float] = A_GRID) -> tuple[float, dict[float, float]]:
    """The ``a`` of :data:`A_GRID` whose RMIA has the largest AUC against a model of known membership (``member``,
    :func:`rmia_score` with ``reference_x_in``); the first on a tie, 0.0 when none beats AUC 0 (ML Privacy Meter's
    ``tune_offline_a``). Returns ``(a, {a: AUC})``."""
    from sklearn.metrics import roc_auc_score

    member = np.asarray(member, dtype=bool)
    best, best_auc, aucs = 0.0, 0.0, {}
    for a in grid:
        s = rmia_score(target_x, reference_x, target_z, reference_z, offline_a=float(a), reference_x_in=reference_x_in)
        ok = np.isfinite(s)
        auc = float(roc_auc_score(member[ok], s[ok]))
        aucs[float(a)] = auc
        if auc > best_auc:
            best, best_auc = float(a), auc
    return best, aucs


@dataclass
class RMIAReferences:
    """What RMIA needs besides the audited model: ``models`` ((model, tokenizer) pairs, OUT for every audited
    document), the ``population`` texts (OUT for the audited and every reference model), and either ``offline_a`` or
    what tunes it: ``tune_texts`` with ``tune_in`` ((documents, R), True where reference r trained on the text; column
    0 is the temporary target)."""

    models: list
    population: list[str]
    offline_a: float | None = None
    tune_texts: list[str] = field(default_factory=list)
    tune_in: np.ndarray | None = None
    meta: dict = field(default_factory=dict)


@dataclass
class RMIASignals:
    """Document probabilities for :func:`rmia_attack`: the reference models' on the audited windows (``reference_x``,
    (n, R)), the audited model's and the references' on the population, and the resolved ``offline_a``."""

    reference_x: np.ndarray
    target_z: np.ndarray
    reference_z: np.ndarray
    offline_a: float
    n_tokens_x: np.ndarray
    meta: dict = field(default_factory=dict)


def rmia_signals(model, tokenizer, window_texts: Sequence[str], references: RMIAReferences, *, window: int,
                 batch_size: int | None = None, pll: dict | None = None, progress: bool = True) -> RMIASignals:
    """Score the audited windows under every reference model, the population under the audited model and the
    references, the tuning texts under the references (when ``offline_a`` is None) and resolve ``a``. Every model
    uses the same window and estimator (``pll``: ``pll_positions``, ``pll_seed``, ``pll_copies``), and the token
    losses are reused across audited models of one process (:mod:`toolkit.audit.reuse`)."""
    if not references.models:
        raise ValueError("RMIA needs at least one reference model")
    kw = {"window": window, "batch_size": batch_size, "moments": False, "progress": progress, **(pll or {})}

    def probs(m, t, texts, label):
        tl = token_losses(m, t, list(texts), label=label, **kw)
        return document_probabilities(tl), tl.n_tokens

    xs, n_tok = [], np.full(len(window_texts), np.iinfo(np.int64).max)
    for i, (m, t) in enumerate(references.models):
        p, n = probs(m, t, window_texts, f"RMIA reference {i}")
        xs.append(p)
        n_tok = np.minimum(n_tok, n)
    target_z = probs(model, tokenizer, references.population, "RMIA population")[0]
    ref_z = np.column_stack([probs(m, t, references.population, f"RMIA population, reference {i}")[0]
                             for i, (m, t) in enumerate(references.models)])
    a, aucs = references.offline_a, None
    if a is None:
        if len(references.models) < 2 or references.tune_in is None or not len(references.tune_texts):
            a = 0.3  # ML Privacy Meter's default (get_out_ref_signals) when it cannot tune
        else:
            tune = np.column_stack([probs(m, t, references.tune_texts, f"RMIA tuning, reference {i}")[0]
                                    for i, (m, t) in enumerate(references.models)])
            inn = np.asarray(references.tune_in, dtype=bool)
            ok = np.isfinite(tune).all(axis=1)
            a, aucs = tune_offline_a(tune[ok, 0], inn[ok, 0], tune[ok, 1:], inn[ok, 1:], ref_z[:, 0], ref_z[:, 1:])
    meta = {**references.meta, "n_references": len(references.models), "n_population": len(references.population),
            "offline_a": float(a), "offline_a_tuned": aucs is not None,
            "tuning_auc": None if aucs is None else {str(k): v for k, v in aucs.items()}}
    return RMIASignals(reference_x=np.column_stack(xs), target_z=target_z, reference_z=ref_z, offline_a=float(a),
                       n_tokens_x=n_tok, meta=meta)


def rmia_attack(losses: TokenLosses, *, rmia: RMIASignals | None = None, **_) -> np.ndarray:
    """RMIA score of each document of ``losses`` (the audited model's token losses) with the precomputed ``rmia``
    signals (:func:`rmia_signals`)."""
    if rmia is None:
        raise ValueError("the rmia attack needs reference models' signals (rmia_signals)")
    if rmia.reference_x.shape[0] != len(losses):
        raise ValueError(f"RMIA signals cover {rmia.reference_x.shape[0]} documents, the model's losses {len(losses)}")
    return rmia_score(document_probabilities(losses), rmia.reference_x, rmia.target_z, rmia.reference_z,
                      offline_a=rmia.offline_a)


__all__ = ["A_GRID", "RMIAReferences", "RMIASignals", "document_probabilities", "out_probabilities", "rmia_attack",
           "rmia_score", "rmia_signals", "tune_offline_a"]
