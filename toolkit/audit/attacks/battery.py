"""The membership-inference battery: every score-threshold attack on the same token losses, one ROC summary each.

For each attack, members and non-members (individuals by default, or documents) are separated by a threshold on the
score (higher = member); ROC, AUC with a 95% percentile-bootstrap interval (1,000 resamples, seeded) and TPR at FPR
0.1%, 1%, 10% (``None`` where this many non-members cannot resolve the FPR) come from
:func:`toolkit.metrics.mia_report`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from toolkit.audit.attacks.loss import loss_score
from toolkit.audit.attacks.min_k import min_k_score
from toolkit.audit.attacks.min_k_plus_plus import min_k_plus_plus_score
from toolkit.audit.attacks.reference import reference_score
from toolkit.audit.attacks.zlib import zlib_score
from toolkit.audit.losses import TokenLosses, model_name, token_losses
from toolkit.corpus import Corpus
from toolkit.io import atomic_write_json, atomic_write_parquet
from toolkit.metrics import mia_report

#: membership attacks on token losses, in tie-break order (``strongest`` prefers the earlier one on equal AUC)
ATTACKS: dict[str, Callable[..., np.ndarray]] = {
    "loss": loss_score,
    "zlib": zlib_score,
    "min_k": min_k_score,
    "min_k_plus_plus": min_k_plus_plus_score,
    "reference": reference_score,
}
FPRS = (0.001, 0.01, 0.1)
UNITS = ("individual", "document")


def membership_scores(losses: TokenLosses, texts: Sequence[str] | None = None, *,
                      reference_losses: TokenLosses | None = None, k: float = 0.2) -> pd.DataFrame:
    """Document-level scores of every applicable attack (one column each, one row per document).

    ``min_k_plus_plus`` needs causal losses with moments, ``reference`` needs ``reference_losses``; the others always
    run. ``texts`` (optional) are the documents the losses were computed on; zlib always compresses the audited
    window (``losses.window_texts``), which must be a prefix of each text.
    """
    if texts is not None:
        if len(texts) != len(losses):
            raise ValueError(f"{len(texts)} texts for {len(losses)} documents of token losses")
        bad = [i for i, (t, w) in enumerate(zip(texts, losses.window_texts)) if not t.startswith(w)]
        if bad:
            raise ValueError(f"document #{bad[0]}: the token losses were not computed on this text")
    cols = {}
    for name, fn in ATTACKS.items():
        if name == "min_k_plus_plus" and losses.mu is None:
            continue
        if name == "reference" and reference_losses is None:
            continue
        cols[name] = fn(losses, reference_losses=reference_losses, k=k)
    return pd.DataFrame(cols)


def person_scores(doc_scores: pd.DataFrame, person_ids: Sequence) -> pd.DataFrame:
    """Per-individual scores: the mean of each column over the individual's documents (nan ones skipped); index
    ``person_id`` in order of first appearance."""
    if len(person_ids) != len(doc_scores):
        raise ValueError(f"{len(person_ids)} person ids for {len(doc_scores)} documents")
    df = doc_scores.reset_index(drop=True).copy()
    df["person_id"] = list(person_ids)
    order = list(dict.fromkeys(df["person_id"]))
    return df.groupby("person_id", sort=False).mean().reindex(order)


@dataclass
class BatteryResult:
    """ROC summaries of every attack. ``scores``: one row per unit (``id``, ``member``, one column per attack)."""

    unit: str
    reports: dict[str, dict]
    scores: pd.DataFrame
    reference: str | None = None
    doc_scores: pd.DataFrame | None = None
    meta: dict = field(default_factory=dict)

    @property
    def n_members(self) -> int:
        return int(self.scores["member"].sum())

    @property
    def n_nonmembers(self) -> int:
        return int((~self.scores["member"]).sum())

    @property
    def strongest(self) -> str:
        """The attack with the highest AUC; on a tie, the first in :data:`ATTACKS` order, then extra scores in the
        order given."""
        return max(self.reports, key=lambda a: self.reports[a]["auc"])

    @property
    def roc_curves(self) -> dict[str, dict]:
        return {a: {"fpr": r["fpr"], "tpr": r["tpr"], "auc": r["auc"]} for a, r in self.reports.items()}

    def to_json(self) -> dict:
        return {"unit": self.unit, "n_members": self.n_members, "n_nonmembers": self.n_nonmembers,
                "reference": self.reference, "strongest": self.strongest,
                "attacks": {a: {"auc": r["auc"], "auc_ci": r["auc_ci"], "tpr_at_fpr": r["tpr_at_fpr"]}
                            for a, r in self.reports.items()}}

    def save(self, out_dir) -> dict[str, Path]:
        """Write ``attacks.json`` (:meth:`to_json`), ``scores.parquet`` (per-unit scores) and ``roc.json`` (ROC points
        per attack), each atomically."""
        out = Path(out_dir)
        return {"attacks": atomic_write_json(self.to_json(), out / "attacks.json"),
                "scores": atomic_write_parquet(self.scores, out / "scores.parquet"),
                "roc": atomic_write_json(self.roc_curves, out / "roc.json")}


def battery_from_scores(scores: pd.DataFrame, member: Sequence[bool], *, unit: str = "individual",
                        reference: str | None = None, seed: int = 0, n_bootstrap: int = 1000,
                        fprs: Sequence[float] = FPRS) -> BatteryResult:
    """ROC summaries of precomputed scores (one column per attack, one row per unit; higher = member).

    Units with a non-finite score are left out of that attack only (their number is in ``meta["n_dropped"]``); an
    attack without a finite score among members or among non-members is left out.
    """
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    member = np.asarray(member, dtype=bool)
    if member.size != len(scores):
        raise ValueError(f"{member.size} membership labels for {len(scores)} units")
    reports, dropped = {}, {}
    for a in scores.columns:
        s = scores[a].to_numpy(dtype=float)
        ok = np.isfinite(s)
        dropped[a] = int((~ok).sum())
        if not (ok & member).any() or not (ok & ~member).any():
            continue  # no finite score on one side (e.g. documents without scored tokens): not evaluable
        reports[a] = mia_report(s[ok & member], s[ok & ~member], fprs=fprs, n_bootstrap=n_bootstrap, seed=seed)
    table = scores.copy()
    table.insert(0, "member", member)
    table.insert(0, "id", [str(i) for i in scores.index])
    return BatteryResult(unit=unit, reports=reports, scores=table.reset_index(drop=True), reference=reference,
                         meta={"n_dropped": dropped, "seed": seed, "n_bootstrap": n_bootstrap})


def run_battery(model, tokenizer, members: Corpus, nonmembers: Corpus, *, reference=None,
                extra_scores: Mapping[str, Mapping] | None = None, unit: str = "individual", window: int = 256,
                k: float = 0.2, seed: int = 0, n_bootstrap: int = 1000, batch_size: int | None = None,
                reference_name: str | None = None, progress: bool = True) -> BatteryResult:
    """Run every membership attack on ``members`` against ``nonmembers``.

    Parameters
    ----------
    reference : (model, tokenizer), optional
        The reference model ``g`` for the ``reference`` attack (usually the base model). It scores the same audited
        windows of text as the audited model.
    extra_scores : dict, optional
        Precomputed scores treated like the others, e.g. ``{"identifier_count": {person_id: score}}``
        (:func:`toolkit.metrics.mia_scores`); keys are person ids (unit ``individual``) or doc ids (``document``).
        Every audited unit needs a score.
    unit : {"individual", "document"}
        An individual's score is the mean of their documents' scores.
    n_bootstrap : int
        Resamples of the AUC's percentile-bootstrap interval.

    Token losses are computed once per model and document (:func:`toolkit.audit.losses.token_losses`).
    """
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    docs = list(members) + list(nonmembers)
    is_member = np.r_[np.ones(len(members), bool), np.zeros(len(nonmembers), bool)]
    both = set(members.person_ids) & set(nonmembers.person_ids)
    if unit == "individual" and both:
        raise ValueError(f"{len(both)} individual(s) are both members and non-members, e.g. {sorted(both)[0]!r}")
    texts = [d.text for d in docs]
    tl = token_losses(model, tokenizer, texts, window=window, batch_size=batch_size, progress=progress)
    ref_tl, ref_name = None, None
    if reference is not None:
        ref_model, ref_tok = reference
        ref_tl = token_losses(ref_model, ref_tok, tl.window_texts, window=window, batch_size=batch_size,
                              moments=False, progress=progress)
        ref_name = reference_name or model_name(ref_model)
    doc = membership_scores(tl, texts, reference_losses=ref_tl, k=k)
    doc.index = pd.Index([d.doc_id for d in docs], name="doc_id")
    if unit == "individual":
        scores = person_scores(doc.reset_index(drop=True), [d.person_id for d in docs])
        member = np.isin(np.asarray(scores.index, dtype=object), list(members.person_ids))
    else:
        scores, member = doc.copy(), is_member
    for name, values in (extra_scores or {}).items():
        missing = [u for u in scores.index if u not in values]
        if missing:
            raise ValueError(f"extra score {name!r} lacks {len(missing)} {unit}(s), e.g. {missing[0]!r}")
        scores[name] = [float(values[u]) for u in scores.index]
    doc_table = doc.reset_index()
    doc_table.insert(1, "person_id", [d.person_id for d in docs])
    doc_table.insert(2, "member", is_member)
    res = battery_from_scores(scores, member, unit=unit, reference=ref_name, seed=seed, n_bootstrap=n_bootstrap)
    res.doc_scores = doc_table
    res.meta.update({"window": window, "k": k, "model": tl.model_name, "n_truncated": tl.n_truncated})
    return res
