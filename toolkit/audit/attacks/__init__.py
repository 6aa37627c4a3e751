"""Membership and identifier attacks on an audited language model (methods.md §10, §11); one module per attack, as
mimir.

Membership attacks (higher score = more likely a member) are the entries of one registry
(:mod:`toolkit.audit.attacks.registry`): each declares what it needs (token losses, moments, the reference's losses,
texts, individuals, the public split, the model…) and the battery runs every entry whose needs the audit meets. The
shipped ones, from one :class:`~toolkit.audit.losses.TokenLosses` per model:

* ``loss`` (Yeom et al. 2018), ``zlib`` (Carlini et al. 2021), ``min_k`` (Shi et al. 2024), ``min_k_plus_plus``
  (Zhang et al. 2024; masked models: under the masked position's distribution), ``reference`` (needs a reference
  model), ``rmia`` (Zarifzadeh et al. 2024, as ML Privacy Meter; needs reference models trained on population data,
  :class:`RMIAReferences`);
* precomputed scores such as ``identifier_count`` (:func:`toolkit.metrics.mia_scores`) join the battery through
  ``run_battery(..., extra_scores=...)``.

Identifier attacks: :func:`pii_inference` (Lukas et al. 2023), :func:`memorisation_scores` and canary
:func:`exposure` (Carlini et al. 2019). Privacy audit: :func:`one_run_audit`, the ε lower bound of Steinke et al.
(2023) from canaries each inserted with probability ½ (:func:`one_run_canaries_into_corpus`).

>>> res = run_battery(model, tokenizer, members, nonmembers, reference=(base, base_tok))   # doctest: +SKIP
>>> res.save("out/audit"); res.strongest                                                  # doctest: +SKIP
"""

from __future__ import annotations

from toolkit.audit.attacks.battery import (
    ATTACKS,
    FPRS,
    BatteryResult,
    battery_from_scores,
    membership_scores,
    person_scores,
    run_battery,
)
from toolkit.audit.attacks.canaries import (
    canaries_into_corpus,
    canary_ranges,
    exposure,
    exposure_from_samples,
    exposure_summary,
    insert_canaries,
    make_canaries,
)
from toolkit.audit.attacks.memorisation import memorisation_scores
from toolkit.audit.attacks.one_run import (one_run_audit, one_run_canaries_into_corpus, one_run_scores,
                                           without_canaries)
from toolkit.audit.attacks.pii_inference import (identifier_occurrences, occurrence_window, pii_inference,
                                                 pii_member_advantage, public_identifier_keys)
from toolkit.audit.attacks.registry import (NEEDS, REGISTRY, AttackEntry, AttackInputs, applicable,
                                            calibrated_attacks, model_free_attacks, register, score_attacks,
                                            unregister)
from toolkit.audit.attacks.rmia import RMIAReferences, rmia_score, tune_offline_a

__all__ = [
    "ATTACKS", "FPRS", "NEEDS", "REGISTRY", "AttackEntry", "AttackInputs", "BatteryResult", "applicable",
    "calibrated_attacks", "model_free_attacks", "register", "score_attacks", "unregister", "battery_from_scores", "canaries_into_corpus",
    "canary_ranges", "exposure",
    "exposure_from_samples", "exposure_summary", "identifier_occurrences", "insert_canaries", "make_canaries",
    "membership_scores", "memorisation_scores", "occurrence_window", "person_scores", "pii_inference", "pii_member_advantage",
    "public_identifier_keys", "run_battery",
    "RMIAReferences", "rmia_score", "tune_offline_a",
    "one_run_audit", "one_run_canaries_into_corpus", "one_run_scores", "without_canaries",
]
