"""The membership attacks' registry: each attack one :class:`AttackEntry` that declares what it needs; one loop
(:func:`score_attacks`) runs every entry whose needs the audit has met (methods.md §10).

A need is one of :data:`NEEDS`:

* ``token_losses`` — the audited model's :class:`~toolkit.audit.losses.TokenLosses` (always there in the battery);
  ``causal`` — and they are a causal model's;
* ``moments`` — their Min-K%++ moments (:math:`\\mu_t, \\sigma_t`; causal and masked models);
* ``top1`` — per scored token, whether the model's own top-1 prediction is the true token (EZ-MIA's error positions);
* ``reference_losses`` — the reference model's token losses on the same windows (``--reference``);
* ``reference_log_probs`` — the reference model's :math:`\\log p(x_t)` per scored token, aligned with the audited
  model's (one vocabulary);
* ``rmia`` — RMIA's reference-model signals (:class:`~toolkit.audit.attacks.rmia.RMIASignals`);
* ``texts`` — the documents' audited texts; ``persons`` — their individuals; ``labels`` — membership labels, for an
  attack that is *trained* (cross-fitted over individuals: no individual is scored by a classifier that saw it);
* ``public`` — the public split's texts (the base model's own data: frequencies, never the audited notes);
* ``model`` — the audited model and tokenizer themselves, for an attack that needs forward passes of its own.

An entry's ``calibrated``: the attack calibrates each score by a reference (still judged on a confounded split,
methods.md §11); ``model_free``: the attack reads the text alone, no model (a check of the split, not evidence of
leakage, and never run on the reference model). A new attack: its module in ``audit/attacks/`` and one
:func:`register` call (here for the shipped ones); the battery, ``attacks.json``, the report and the verdict's family
pick it up with no further line.

>>> register(AttackEntry("toy", frozenset({"token_losses"}), lambda x: -x.losses.mean_loss()))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from toolkit.audit.attacks.blind import blind_score
from toolkit.audit.attacks.dc_pdd import dc_pdd_score, token_frequencies
from toolkit.audit.attacks.ez_mia import ez_mia_score
from toolkit.audit.attacks.loss import loss_score
from toolkit.audit.attacks.min_k import min_k_score
from toolkit.audit.attacks.min_k_plus_plus import min_k_plus_plus_score
from toolkit.audit.attacks.recall import recall_score
from toolkit.audit.attacks.reference import reference_score
from toolkit.audit.attacks.rmia import rmia_attack
from toolkit.audit.attacks.zlib import zlib_score
from toolkit.audit.losses import TokenLosses

NEEDS = ("token_losses", "causal", "moments", "top1", "reference_losses", "reference_log_probs", "rmia", "texts",
         "persons", "labels", "public", "model")


@dataclass
class AttackInputs:
    """What one audit has for its attacks (each field one need of :data:`NEEDS`; None = not there)."""

    losses: TokenLosses | None = None
    reference_losses: TokenLosses | None = None
    reference_normalisation: str = "token-mean"
    rmia: Any = None
    texts: Sequence[str] | None = None
    persons: Sequence | None = None
    labels: np.ndarray | None = None
    public: Sequence[str] | None = None
    model: Any = None
    tokenizer: Any = None
    k: float = 0.2
    seed: int = 0
    options: dict = field(default_factory=dict)

    def available(self) -> frozenset[str]:
        """The needs these inputs meet."""
        tl, ref = self.losses, self.reference_losses
        have = {"token_losses": tl is not None, "causal": tl is not None and tl.kind == "clm",
                "moments": tl is not None and tl.mu is not None,
                "top1": tl is not None and tl.top1 is not None, "reference_losses": ref is not None,
                "reference_log_probs": (tl is not None and ref is not None
                                        and self.reference_normalisation == "token-mean"
                                        and all(a.size == b.size for a, b in zip(tl.losses, ref.losses))),
                "rmia": self.rmia is not None, "texts": self.texts is not None, "persons": self.persons is not None,
                "labels": self.labels is not None, "public": self.public is not None,
                "model": self.model is not None and self.tokenizer is not None}
        return frozenset(k for k, v in have.items() if v)


@dataclass(frozen=True)
class AttackEntry:
    """One membership attack: its ``name`` (the column of ``scores.parquet``, the key of ``attacks.json``), the
    ``needs`` (:data:`NEEDS`) it declares, its ``score`` — ``AttackInputs -> one score per document, higher = more
    likely a member`` — and whether it is ``calibrated`` by a reference or ``model_free`` (module docstring).
    ``function``: the attack's own score function on token losses, where it has one (:data:`ATTACKS`)."""

    name: str
    needs: frozenset[str]
    score: Callable[[AttackInputs], np.ndarray]
    calibrated: bool = False
    model_free: bool = False
    function: Callable[..., np.ndarray] | None = None

    def __post_init__(self):
        unknown = set(self.needs) - set(NEEDS)
        if unknown:
            raise ValueError(f"attack {self.name!r}: unknown need(s) {sorted(unknown)}; needs are one of {NEEDS}")
        if not self.name.isidentifier():
            raise ValueError(f"attack name must be an identifier, got {self.name!r}")


#: every registered attack, in tie-break order (``BatteryResult.strongest`` prefers the earlier one on equal AUC)
REGISTRY: dict[str, AttackEntry] = {}


def register(entry: AttackEntry, *, replace: bool = False) -> AttackEntry:
    """Add ``entry`` to :data:`REGISTRY` (at the end of the tie-break order)."""
    if entry.name in REGISTRY and not replace:
        raise ValueError(f"attack {entry.name!r} is already registered")
    REGISTRY[entry.name] = entry
    return entry


def unregister(name: str) -> None:
    REGISTRY.pop(name, None)


def calibrated_attacks() -> frozenset[str]:
    """The registered attacks that calibrate by a reference (judged as usual on a confounded split)."""
    return frozenset(n for n, e in REGISTRY.items() if e.calibrated)


def model_free_attacks() -> frozenset[str]:
    return frozenset(n for n, e in REGISTRY.items() if e.model_free)


def applicable(inputs: AttackInputs, *, model_free: bool = True) -> list[AttackEntry]:
    """The entries whose needs ``inputs`` meet (``model_free=False``: without the model-free ones)."""
    have = inputs.available()
    return [e for e in REGISTRY.values() if e.needs <= have and (model_free or not e.model_free)]


def score_attacks(inputs: AttackInputs, *, model_free: bool = True) -> pd.DataFrame:
    """Document-level scores of every applicable attack: one column each, one row per document."""
    n = len(inputs.losses) if inputs.losses is not None else len(inputs.texts or ())
    cols = {}
    for e in applicable(inputs, model_free=model_free):
        s = np.asarray(e.score(inputs), dtype=float)
        if s.shape != (n,):
            raise ValueError(f"attack {e.name!r} returned {s.shape} scores for {n} documents")
        cols[e.name] = s
    return pd.DataFrame(cols, index=pd.RangeIndex(n))


class _Functions(Mapping):
    """:data:`ATTACKS`: the registered attacks' own score functions on token losses, a live view of the registry."""

    def __getitem__(self, name: str) -> Callable[..., np.ndarray]:
        e = REGISTRY[name]
        if e.function is None:
            raise KeyError(name)
        return e.function

    def __iter__(self) -> Iterator[str]:
        return (n for n, e in REGISTRY.items() if e.function is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


#: name -> score function on token losses (``fn(losses, *, reference_losses=..., k=..., rmia=...)``)
ATTACKS: Mapping[str, Callable[..., np.ndarray]] = _Functions()


def _on_losses(fn: Callable[..., np.ndarray]) -> Callable[[AttackInputs], np.ndarray]:
    def score(x: AttackInputs) -> np.ndarray:
        return fn(x.losses, reference_losses=x.reference_losses, k=x.k, rmia=x.rmia,
                  normalisation=x.reference_normalisation)
    return score


def _losses_entry(name: str, fn, needs: set[str], **kw) -> AttackEntry:
    return AttackEntry(name, frozenset({"token_losses", *needs}), _on_losses(fn), function=fn, **kw)


for _entry in (_losses_entry("loss", loss_score, set()),
               _losses_entry("zlib", zlib_score, set()),
               _losses_entry("min_k", min_k_score, set()),
               _losses_entry("min_k_plus_plus", min_k_plus_plus_score, {"moments"}),
               _losses_entry("reference", reference_score, {"reference_losses"}, calibrated=True),
               _losses_entry("rmia", rmia_attack, {"rmia"}, calibrated=True),
               _losses_entry("ez", ez_mia_score, {"top1", "reference_log_probs"}, calibrated=True),
               AttackEntry("dc_pdd", frozenset({"token_losses", "causal", "public", "model"}),
                           lambda x: dc_pdd_score(x.losses, frequencies=token_frequencies(x.tokenizer, x.public))),
               AttackEntry("recall", frozenset({"token_losses", "causal", "public", "model"}),
                           lambda x: recall_score(x.losses, x.model, x.tokenizer, x.public, seed=x.seed,
                                                  prefix_tokens=x.options.get("recall_prefix_tokens"))),
               AttackEntry("blind", frozenset({"texts", "persons", "labels"}),
                           lambda x: blind_score(x.texts, x.labels, x.persons, seed=x.seed), model_free=True)):
    register(_entry)

__all__ = ["ATTACKS", "NEEDS", "REGISTRY", "AttackEntry", "AttackInputs", "applicable", "calibrated_attacks",
           "model_free_attacks", "register", "score_attacks", "unregister"]
