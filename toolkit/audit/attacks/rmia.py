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
``z`` that neither the audited model (its base model included) nor a reference model was trained on:

.. math:: \\mathrm{score}(x) = \\Pr_z\\Big[\\frac{p(x \\mid \\theta) / p(x)}{p(z \\mid \\theta) / p(z)} > \\gamma\\Big],
          \\qquad \\gamma = 1 .

Higher = more likely a member. The paper writes ``≥ γ``; ML Privacy Meter counts ``ratios > 1.0`` — they differ only
on exact ties, which need ``z = x`` (left out, below).

**The population: the audited non-members, each document compared with the other individuals'.** ML Privacy Meter
draws ``z`` from a population set of its own; the toolkit's pipelines take the audited non-members (``population`` of
:func:`rmia_signals`), and a document is never compared with its own individual's documents (``x_groups`` /
``z_groups`` of :func:`rmia_score`), so members and non-members are compared with the same kind of ``z``. Why we
depart: the population must be OUT for the audited model *including its base model*, and the only other text a run
has — the public split — is what the base model was pre-trained on. Until 2026-11-26 ``z`` was a third of the public
split: the base model and every DP model near it scored every member and non-member 0 (all ``z`` ratios above every
``x`` ratio: the frontier at 100 individuals, 200 of 200 documents), so RMIA was blind exactly where it was to decide
green; even a non-DP model's non-members had median score 0.04 where OUT documents like the population's have 0.5.
The non-members are OUT for the audited model, its base and every reference model, and drawn from the members' own
population. With γ = 1 the score is the share of the population's ratios below ``x``'s ratio, so a non-member's score
is its rank among the other non-members — uniform under no leakage, which is what makes TPR at a low FPR meaningful.

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
import pandas as pd

from toolkit.audit.losses import TokenLosses, token_losses

_ROWS = 1024  # rows of x compared with the whole population at once (rmia_score)

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
               reference_x_in=None, x_groups=None, z_groups=None) -> np.ndarray:
    """RMIA score of each ``x`` (see the module docstring).

    ``target_x`` (n,) and ``target_z`` (m,): probabilities under the audited model; ``reference_x`` (n, R) and
    ``reference_z`` (m, R): under the reference models (every population document OUT of every one; ``reference_x_in``
    flags the IN ones of ``x``, for :func:`tune_offline_a`). A nan probability of ``x`` gives nan; population
    documents with a nan probability are left out. ``x_groups`` (n,) and ``z_groups`` (m,), e.g. person ids: a pair
    with equal groups is left out (a document is not compared with its own individual's); an ``x`` left with no
    population document gets nan.
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
    valid = np.isfinite(ratio_z)
    if not valid.any():
        raise ValueError("RMIA needs at least one population document with a probability")
    if (x_groups is None) != (z_groups is None):
        raise ValueError("x_groups and z_groups go together")
    if x_groups is not None:
        codes, _ = pd.factorize(pd.Series(list(x_groups) + list(z_groups), dtype=object))
        if codes.size != px.size + pz.size:
            raise ValueError("x_groups and z_groups must have one entry per x and per z")
        gx, gz = codes[:px.size], codes[px.size:]
    hits, pairs = np.empty(px.size), np.empty(px.size)
    for start in range(0, px.size, _ROWS):  # rows at a time: n × m comparisons need not fit in memory at once
        rows = slice(start, start + _ROWS)
        with np.errstate(invalid="ignore", divide="ignore"):
            ok = np.broadcast_to(valid, (len(ratio_x[rows]), pz.size))
            if x_groups is not None:
                ok = ok & (gx[rows, None] != gz[None, :])
            hits[rows] = ((ratio_x[rows, None] / ratio_z[None, :] > gamma) & ok).sum(axis=1)
            pairs[rows] = ok.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = hits / pairs
    return np.where(np.isfinite(ratio_x) & (pairs > 0), out, np.nan)


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
    document), the ``population`` texts — None (the pipelines): the audited non-members are the population (module
    docstring); given texts must be OUT for the audited model, its base model and every reference model — and either
    ``offline_a`` or what tunes it: ``tune_texts`` with ``tune_in`` ((documents, R), True where reference r trained on
    the text; column 0 is the temporary target)."""

    models: list
    population: list[str] | None = None
    offline_a: float | None = None
    tune_texts: list[str] = field(default_factory=list)
    tune_in: np.ndarray | None = None
    meta: dict = field(default_factory=dict)


@dataclass
class RMIASignals:
    """Document probabilities for :func:`rmia_attack`: the reference models' on the audited windows (``reference_x``,
    (n, R)) and the resolved ``offline_a``; the population either as given texts (``target_z``, ``reference_z``) or as
    the audited documents flagged ``population`` (the non-members), with ``groups`` (each document's individual: a
    document is not compared with its own individual's)."""

    reference_x: np.ndarray
    target_z: np.ndarray | None
    reference_z: np.ndarray | None
    offline_a: float
    n_tokens_x: np.ndarray
    population: np.ndarray | None = None
    groups: np.ndarray | None = None
    meta: dict = field(default_factory=dict)


def rmia_signals(model, tokenizer, window_texts: Sequence[str], references: RMIAReferences, *, window: int,
                 population: Sequence[bool] | None = None, groups: Sequence | None = None,
                 batch_size: int | None = None, pll: dict | None = None, progress: bool = True) -> RMIASignals:
    """Score the audited windows under every reference model (and, where ``references.population`` gives texts, those
    under the audited model and the references), the tuning texts under the references (when ``offline_a`` is None)
    and resolve ``a``. Without population texts, ``population`` flags the audited windows that are the population
    (the non-members) and ``groups`` names each window's individual. Every model uses the same window and estimator
    (``pll``: ``pll_positions``, ``pll_seed``, ``pll_copies``), and the token losses are reused across audited models
    of one process (:mod:`toolkit.audit.reuse`)."""
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
    reference_x = np.column_stack(xs)
    target_z = mask = group = None
    if references.population is not None:
        target_z = probs(model, tokenizer, references.population, "RMIA population")[0]
        ref_z = np.column_stack([probs(m, t, references.population, f"RMIA population, reference {i}")[0]
                                 for i, (m, t) in enumerate(references.models)])
        source, n_population = "given texts", len(references.population)
    else:
        if population is None:
            raise ValueError("RMIA needs a population: texts (RMIAReferences.population) or the audited documents "
                             "that are (population=)")
        mask = np.asarray(population, dtype=bool)
        if mask.shape != (len(window_texts),) or not mask.any():
            raise ValueError(f"population flags: {mask.size} for {len(window_texts)} documents, "
                             f"{int(mask.sum())} flagged; RMIA needs one per document and at least one flagged")
        group = None if groups is None else np.asarray(list(groups), dtype=object)
        if group is not None and group.shape != mask.shape:
            raise ValueError(f"groups: {group.size} for {mask.size} documents")
        ref_z = reference_x[mask]
        source, n_population = "the audited non-members, each compared with the other individuals'", int(mask.sum())
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
    meta = {**references.meta, "population": source, "n_references": len(references.models),
            "n_population": n_population, "offline_a": float(a), "offline_a_tuned": aucs is not None,
            "tuning_auc": None if aucs is None else {str(k): v for k, v in aucs.items()}}
    return RMIASignals(reference_x=reference_x, target_z=target_z, reference_z=None if mask is not None else ref_z,
                       offline_a=float(a), n_tokens_x=n_tok, population=mask, groups=group, meta=meta)


def rmia_attack(losses: TokenLosses, *, rmia: RMIASignals | None = None, **_) -> np.ndarray:
    """RMIA score of each document of ``losses`` (the audited model's token losses) with the precomputed ``rmia``
    signals (:func:`rmia_signals`)."""
    if rmia is None:
        raise ValueError("the rmia attack needs reference models' signals (rmia_signals)")
    if rmia.reference_x.shape[0] != len(losses):
        raise ValueError(f"RMIA signals cover {rmia.reference_x.shape[0]} documents, the model's losses {len(losses)}")
    px = document_probabilities(losses)
    if rmia.population is None:
        return rmia_score(px, rmia.reference_x, rmia.target_z, rmia.reference_z, offline_a=rmia.offline_a)
    mask = rmia.population
    groups = rmia.groups if rmia.groups is not None else np.arange(px.size)  # at least not x against itself
    return rmia_score(px, rmia.reference_x, px[mask], rmia.reference_x[mask], offline_a=rmia.offline_a,
                      x_groups=groups, z_groups=groups[mask])


__all__ = ["A_GRID", "RMIAReferences", "RMIASignals", "document_probabilities", "out_probabilities", "rmia_attack",
           "rmia_score", "rmia_signals", "tune_offline_a"]
