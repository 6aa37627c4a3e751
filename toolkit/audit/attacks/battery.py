"""The membership-inference battery: every score-threshold attack on the same token losses, one ROC summary each.

For each attack, members and non-members (individuals by default, or documents) are separated by a threshold on the
score (higher = member); ROC, AUC with a 95% percentile-bootstrap interval (1,000 resamples, seeded; individuals are
resampled, with all their documents, also when the unit is the document; Hanley–McNeil's interval with
``n_bootstrap=0``) and TPR at FPR 0.1%, 1%, 10% (``None`` where this many non-members cannot resolve the FPR) come
from :func:`toolkit.metrics.mia_report`.

A document's ``exclude`` ranges (e.g. inserted canaries) are cut out of its text before either model scores it, so
no attack scores them or any token conditioned on them. A unit without a scored token left (an empty note) is
*unscoreable*: it is left out of every attack, extra scores included, and named (ids only) in ``meta`` and
``attacks.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from toolkit.audit.attacks.registry import ATTACKS, AttackInputs, model_free_attacks, score_attacks
from toolkit.audit.attacks.rmia import RMIAReferences, RMIASignals, rmia_signals
from toolkit.audit.losses import TokenLosses, model_max_tokens, model_name, token_losses
from toolkit.corpus import Corpus
from toolkit.metrics import mia_report

FPRS = (0.001, 0.01, 0.1)
UNITS = ("individual", "document")


def membership_scores(losses: TokenLosses, texts: Sequence[str] | None = None, *,
                      reference_losses: TokenLosses | None = None, k: float = 0.2,
                      reference_normalisation: str = "token-mean", rmia: RMIASignals | None = None,
                      inputs: AttackInputs | None = None) -> pd.DataFrame:
    """Document-level scores of every registered attack whose needs are met (one column each, one row per
    document; :func:`toolkit.audit.attacks.registry.score_attacks`).

    ``min_k_plus_plus`` needs losses with moments (causal or masked), ``reference`` needs ``reference_losses``
    (normalised per token or per byte, :func:`~toolkit.audit.attacks.reference.reference_score`), ``rmia`` the
    reference models' signals (:func:`~toolkit.audit.attacks.rmia.rmia_signals`); the others always run. ``texts``
    (optional) are the documents the losses were computed on; zlib always compresses the audited window
    (``losses.window_texts``), which must be a prefix of each text. ``inputs``: everything else an attack may need
    (texts, individuals, labels, the public split, the model), :class:`~toolkit.audit.attacks.registry.AttackInputs`;
    the arguments above override its fields.
    """
    if texts is not None:
        if len(texts) != len(losses):
            raise ValueError(f"{len(texts)} texts for {len(losses)} documents of token losses")
        bad = [i for i, (t, w) in enumerate(zip(texts, losses.window_texts)) if not t.startswith(w)]
        if bad:
            raise ValueError(f"document #{bad[0]}: the token losses were not computed on this text")
    x = inputs or AttackInputs()
    x.losses, x.reference_losses, x.k, x.rmia = losses, reference_losses, k, rmia
    x.reference_normalisation = reference_normalisation
    return score_attacks(x)


def _excluded_tokens(offsets: np.ndarray, ranges: Sequence[tuple[int, int]]) -> np.ndarray:
    """Per token: do its characters overlap one of ``ranges`` (a zero-width token: does it lie inside one)?"""
    hit = np.zeros(len(offsets), dtype=bool)
    if len(offsets):
        s, e = offsets[:, 0], offsets[:, 1]
        for a, b in ranges:
            hit |= ((s < b) & (e > a)) | ((s == e) & (s >= a) & (s < b))
    return hit


def _cut(text: str, ranges: Sequence[tuple[int, int]]) -> str:
    """``text`` without the characters of ``ranges``."""
    keep, at = [], 0
    for a, b in sorted(ranges):
        if a > at:
            keep.append(text[at:a])
        at = max(at, b)
    keep.append(text[at:])
    return "".join(keep)


def without_ranges(tokenizer, texts: Sequence[str], ranges: Sequence[Sequence[tuple[int, int]]],
                   max_tokens: int | None = None) -> tuple[list[str], np.ndarray]:
    """The texts without the characters of their ``ranges`` (what the battery scores), and per text the number of
    its tokens (among the first ``max_tokens``, special tokens never counted) that overlapped a range.

    Cutting the text, rather than dropping the range's tokens from the losses of the whole text, leaves no token
    conditioned on the excluded text (causal models) and keeps the audit window full of the note's own text: a note
    filling the window would otherwise lose as much of its text as the excluded part held, and ``zlib``, which
    depends on the window's length, would score it lower for that alone.
    """
    if len(ranges) != len(texts):
        raise ValueError(f"{len(ranges)} lists of excluded ranges for {len(texts)} texts")
    idx = [i for i, r in enumerate(ranges) if len(r)]
    for i in idx:
        if any(not 0 <= int(a) <= int(b) <= len(texts[i]) for a, b in ranges[i]):
            raise ValueError(f"text #{i}: an excluded range lies outside the text ({len(texts[i])} characters)")
    counts = np.zeros(len(texts), dtype=np.int64)
    if idx:
        enc = tokenizer([texts[i] for i in idx], truncation=max_tokens is not None, max_length=max_tokens,
                        return_offsets_mapping=True, return_special_tokens_mask=True)
        for j, i in enumerate(idx):
            offs = np.asarray(enc["offset_mapping"][j], dtype=np.int64).reshape(-1, 2)
            special = np.asarray(enc["special_tokens_mask"][j], dtype=bool)
            counts[i] = int((_excluded_tokens(offs, ranges[i]) & ~special).sum())
    cut = [_cut(t, [(int(a), int(b)) for a, b in r]) if len(r) else t for t, r in zip(texts, ranges)]
    return cut, counts


def same_vocabulary(tokenizer, other) -> bool:
    """Do two tokenizers share one vocabulary (``get_vocab()`` equal)? Then token-mean losses are comparable."""
    if tokenizer is other:
        return True
    try:
        return tokenizer.get_vocab() == other.get_vocab()
    except (AttributeError, NotImplementedError):
        return False


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
    #: the reference model's own scores per unit (the split check), where a reference was given
    reference_scores: pd.DataFrame | None = None
    #: the texts the attacks scored (each document's audited window, excluded ranges cut out), in ``doc_scores``'
    #: order, where :func:`run_battery` made the result; held in memory only, never written (they are the notes)
    window_texts: list[str] | None = field(default=None, repr=False, compare=False)

    @property
    def n_members(self) -> int:
        return int(self.scores["member"].sum())

    @property
    def n_nonmembers(self) -> int:
        return int((~self.scores["member"]).sum())

    @property
    def strongest(self) -> str:
        """The attack with the highest AUC; on a tie, the first in the registry's order, then extra scores in the
        order given. A model-free attack (the blind baseline: a check of the split, not of the model) is never the
        strongest while another attack was evaluated."""
        free = model_free_attacks()
        names = [a for a in self.reports if a not in free] or list(self.reports)
        return max(names, key=lambda a: self.reports[a]["auc"])

    @property
    def roc_curves(self) -> dict[str, dict]:
        return {a: {"fpr": r["fpr"], "tpr": r["tpr"], "auc": r["auc"]} for a, r in self.reports.items()}

    def to_json(self) -> dict:
        """The summary written as ``attacks.json``: per attack its AUC, interval (and how it was computed), TPR at
        FPR and the numbers of members and non-members it scored; the units left out as unscoreable (ids only), the
        tokens excluded (e.g. canaries), how the reference attack was normalised and how the token losses were
        computed (``scoring``: model kind, exact, budgeted (N) or strided (K copies) pseudo-log-likelihood), and
        ``rmia``: RMIA's reference models, population size and offline ``a`` (only where RMIA ran); ``one_run``: the
        one-run audit (only where it ran, :mod:`toolkit.audit.attacks.one_run`)."""
        m = self.meta
        return {"unit": self.unit, "n_members": self.n_members, "n_nonmembers": self.n_nonmembers,
                "reference": self.reference, "reference_normalisation": m.get("reference_normalisation"),
                "strongest": self.strongest, "bootstrap_unit": m.get("bootstrap_unit", self.unit),
                "n_unscoreable": int(m.get("n_unscoreable", 0)),
                "unscoreable": m.get("unscoreable", {"documents": [], "individuals": []}),
                "n_excluded_tokens": int(m.get("n_excluded_tokens", 0)), "scoring": m.get("scoring"),
                **({"rmia": m["rmia"]} if m.get("rmia") else {}),
                **({"one_run": m["one_run"]} if m.get("one_run") else {}),
                **({"reference_model_attacks": m["reference_model_attacks"]}
                   if m.get("reference_model_attacks") else {}),
                "attacks": _summaries(self.reports)}

    def save(self, out_dir) -> dict[str, Path]:
        """Write ``attacks.json`` (:meth:`to_json`), ``scores.parquet`` (per-unit scores) and ``roc.json`` (ROC points
        per attack), each atomically."""
        from toolkit.audit.files import write_attack_files

        return write_attack_files(out_dir, {"attacks": self.to_json(), "scores": self.scores, "roc": self.roc_curves})


def _summaries(reports: Mapping[str, dict]) -> dict[str, dict]:
    """Per attack what ``attacks.json`` keeps of its :func:`~toolkit.metrics.mia_report` (no ROC points)."""
    return {a: {"auc": r["auc"], "auc_ci": r["auc_ci"], "auc_ci_method": r.get("auc_ci_method"),
                "tpr_at_fpr": r["tpr_at_fpr"], "n_members": r["n_members"], "n_nonmembers": r["n_nonmembers"],
                **({"n_clusters": r["n_clusters"]} if r.get("n_clusters") else {})}
            for a, r in reports.items()}


def battery_from_scores(scores: pd.DataFrame, member: Sequence[bool], *, unit: str = "individual",
                        reference: str | None = None, seed: int = 0, n_bootstrap: int = 1000,
                        fprs: Sequence[float] = FPRS, groups: Sequence | None = None) -> BatteryResult:
    """ROC summaries of precomputed scores (one column per attack, one row per unit; higher = member).

    ``groups`` (optional): the individual of each unit; the bootstrap then resamples individuals
    (:func:`toolkit.metrics.mia_report`). Units with a non-finite score are left out of that attack only (their
    number is in ``meta["n_dropped"]``); an attack without a finite score among members or among non-members is
    left out. :func:`run_battery` leaves unscoreable units out of every attack before calling this.
    """
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    member = np.asarray(member, dtype=bool)
    if member.size != len(scores):
        raise ValueError(f"{member.size} membership labels for {len(scores)} units")
    g = None
    if groups is not None:
        g = np.asarray(list(groups), dtype=object)
        if g.size != len(scores):
            raise ValueError(f"{g.size} group labels for {len(scores)} units")
    reports, dropped = {}, {}
    for a in scores.columns:
        s = scores[a].to_numpy(dtype=float)
        ok = np.isfinite(s)
        dropped[a] = int((~ok).sum())
        if not (ok & member).any() or not (ok & ~member).any():
            continue  # no finite score on one side (e.g. documents without scored tokens): not evaluable
        reports[a] = mia_report(s[ok & member], s[ok & ~member], fprs=fprs, n_bootstrap=n_bootstrap, seed=seed,
                                groups=None if g is None else (g[ok & member], g[ok & ~member]))
    table = scores.copy()
    table.insert(0, "member", member)
    table.insert(0, "id", [str(i) for i in scores.index])
    return BatteryResult(unit=unit, reports=reports, scores=table.reset_index(drop=True), reference=reference,
                         meta={"n_dropped": dropped, "seed": seed, "n_bootstrap": n_bootstrap,
                               "bootstrap_unit": "individual" if g is not None else unit})


def run_battery(model, tokenizer, members: Corpus, nonmembers: Corpus, *, reference=None,
                extra_scores: Mapping[str, Mapping] | None = None, unit: str = "individual", window: int = 256,
                k: float = 0.2, seed: int = 0, n_bootstrap: int = 1000, batch_size: int | None = None,
                reference_name: str | None = None, exclude: Mapping[str, Sequence[tuple[int, int]]] | None = None,
                pll_positions: int | str | None = None, pll_copies: int | str | None = None,
                rmia: RMIAReferences | None = None, public: Sequence[str] | None = None,
                attack_options: Mapping | None = None, progress: bool = True) -> BatteryResult:
    """Run every membership attack on ``members`` against ``nonmembers``.

    Parameters
    ----------
    reference : (model, tokenizer), optional
        The reference model ``g`` for the ``reference`` attack (usually the base model). It scores the same audited
        windows of text as the audited model; when its vocabulary differs from ``tokenizer``'s
        (:func:`same_vocabulary`), the reference score is normalised per UTF-8 byte instead of per token
        (``meta["reference_normalisation"]``).
    extra_scores : dict, optional
        Precomputed scores treated like the others, e.g. ``{"identifier_count": {person_id: score}}``
        (:func:`toolkit.metrics.mia_scores`); keys are person ids (unit ``individual``) or doc ids (``document``).
        Every scoreable unit needs a score.
    unit : {"individual", "document"}
        An individual's score is the mean of their scoreable documents' scores. Either way the bootstrap resamples
        individuals.
    n_bootstrap : int
        Resamples of the AUC's percentile-bootstrap interval (0: Hanley–McNeil's interval).
    exclude : dict, optional
        ``doc_id -> [(start, end), ...]`` character ranges of the documents' texts (e.g. the inserted canaries,
        :func:`~toolkit.audit.attacks.canaries.canary_ranges`) that no attack scores: both models score each text
        without them (:func:`without_ranges`); ``meta["n_excluded_tokens"]`` counts the audited model's tokens that
        overlapped them (in its window of the whole text).
    pll_positions : int, "all" or None
        Masked models: budgeted pseudo-log-likelihood, N positions per window drawn with ``seed`` (the same for the
        audited and the reference model: :mod:`toolkit.audit.pll`); ``meta["scoring"]`` names the estimator.
    pll_copies : int, "all" or None
        Masked models: strided pseudo-log-likelihood, every position scored from K masked copies per window
        (:func:`toolkit.audit.pll.strided_groups`); not together with ``pll_positions``.
    rmia : RMIAReferences, optional
        Reference models trained on population data (and, optionally, population texts; left out, the non-members
        are RMIA's population, each document compared with the other individuals'): adds the ``rmia`` attack
        (:mod:`toolkit.audit.attacks.rmia`), its settings in ``meta["rmia"]``.
    public : sequence of str, optional
        The public split's texts (the base model's own data, never the audited notes): the ``public`` need of the
        registry (:mod:`toolkit.audit.attacks.registry`), e.g. DC-PDD's token frequencies.
    attack_options : mapping, optional
        Options of registered attacks (``AttackInputs.options``), by the attack's own key.

    Every registered attack whose needs these inputs meet runs (:func:`toolkit.audit.attacks.registry.applicable`):
    the audited model's token losses, its texts, individuals and labels always; the reference's losses with
    ``reference``; RMIA's signals with ``rmia``; the public split with ``public``.

    Token losses are computed once per model and document (:func:`toolkit.audit.losses.token_losses`). A document
    without a scored token (after exclusion, under either model) is unscoreable, and so is an individual all of whose
    documents are: such units are left out of every attack and listed in ``meta["unscoreable"]`` (ids only).
    """
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    docs = list(members) + list(nonmembers)
    is_member = np.r_[np.ones(len(members), bool), np.zeros(len(nonmembers), bool)]
    both = set(members.person_ids) & set(nonmembers.person_ids)
    if unit == "individual" and both:
        raise ValueError(f"{len(both)} individual(s) are both members and non-members, e.g. {sorted(both)[0]!r}")
    doc_ids = [d.doc_id for d in docs]
    person_of = [d.person_id for d in docs]
    unknown = set(exclude or {}) - set(doc_ids)
    if unknown:
        raise ValueError(f"excluded ranges given for {len(unknown)} unknown document(s), e.g. {sorted(unknown)[0]!r}")
    texts = [d.text for d in docs]
    n_excluded = 0
    if exclude:
        limits = [n for n in (window, model_max_tokens(model)) if n is not None]
        texts, counts = without_ranges(tokenizer, texts, [list(exclude.get(i, ())) for i in doc_ids],
                                       min(limits) if limits else None)
        n_excluded = int(counts.sum())
    pll = {"pll_positions": pll_positions, "pll_seed": seed, "pll_copies": pll_copies}
    tl = token_losses(model, tokenizer, texts, window=window, batch_size=batch_size, progress=progress,
                      label="membership", **pll)
    ref_tl, ref_name, norm = None, None, None
    if reference is not None:
        ref_model, ref_tok = reference
        ref_tl = token_losses(ref_model, ref_tok, tl.window_texts, window=window, batch_size=batch_size,
                              moments=False, progress=progress, label="membership (reference)", **pll)
        ref_name = reference_name or model_name(ref_model)
        norm = "token-mean" if same_vocabulary(tokenizer, ref_tok) else "per-byte"
    rmia_sig = None
    if rmia is not None:
        rmia_sig = rmia_signals(model, tokenizer, tl.window_texts, rmia, window=window, batch_size=batch_size,
                                population=~is_member, groups=person_of, pll=pll, progress=progress)
    inputs = AttackInputs(texts=tl.window_texts, persons=person_of, labels=is_member,
                          public=None if public is None else list(public), model=model, tokenizer=tokenizer,
                          seed=seed, options={"window": window, "batch_size": batch_size, **(attack_options or {})})
    doc = membership_scores(tl, reference_losses=ref_tl, k=k, reference_normalisation=norm or "token-mean",
                            rmia=rmia_sig, inputs=inputs)
    doc.index = pd.Index(doc_ids, name="doc_id")
    scoreable = tl.n_tokens > 0
    if ref_tl is not None:
        scoreable &= ref_tl.n_tokens > 0
    if rmia_sig is not None:
        scoreable &= rmia_sig.n_tokens_x > 0
    doc.loc[~scoreable, :] = np.nan  # the same documents are out of every attack
    any_ok = pd.Series(scoreable).groupby(pd.Series(person_of, dtype=object), sort=False).any()
    people_out = list(any_ok.index[~any_ok.to_numpy()])
    if unit == "individual":
        scores = person_scores(doc.reset_index(drop=True), person_of)
        member = np.isin(np.asarray(scores.index, dtype=object), list(members.person_ids))
        keep = ~np.isin(np.asarray(scores.index, dtype=object), people_out)
        groups = None
    else:
        scores, member, keep = doc.copy(), is_member, scoreable
        groups = np.asarray(person_of, dtype=object)[keep]
    scores, member = scores[keep], member[keep]
    if not member.any() or member.all():
        raise ValueError(f"no scoreable {'member' if not member.any() else 'non-member'}: every one lacks a scored "
                         "token (empty or excluded text)")
    for name, values in (extra_scores or {}).items():
        missing = [u for u in scores.index if u not in values]
        if missing:
            raise ValueError(f"extra score {name!r} lacks {len(missing)} {unit}(s), e.g. {missing[0]!r}")
        scores[name] = [float(values[u]) for u in scores.index]
    doc_table = doc.reset_index()
    doc_table.insert(1, "person_id", person_of)
    doc_table.insert(2, "member", is_member)
    doc_table.insert(3, "scoreable", scoreable)
    res = battery_from_scores(scores, member, unit=unit, reference=ref_name, seed=seed, n_bootstrap=n_bootstrap,
                              groups=groups)
    res.doc_scores = doc_table
    res.window_texts = list(tl.window_texts)
    if ref_tl is not None:
        # the split check (methods.md §11): the reference model — which saw neither group — attacked on the same
        # units by the attacks that need no reference, from the token losses it already computed
        ref_doc = score_attacks(AttackInputs(losses=ref_tl, k=k), model_free=False)
        ref_doc.index = doc.index
        ref_doc.loc[~scoreable, :] = np.nan
        ref_scores = (person_scores(ref_doc.reset_index(drop=True), person_of) if unit == "individual"
                      else ref_doc.copy())[keep]
        ref_res = battery_from_scores(ref_scores, member, unit=unit, reference=None, seed=seed,
                                      n_bootstrap=n_bootstrap, groups=groups)
        res.meta["reference_model_attacks"] = _summaries(ref_res.reports)
        res.reference_scores = ref_scores
    out_docs = [i for i, ok in zip(doc_ids, scoreable) if not ok]
    res.meta.update({"window": window, "k": k, "model": tl.model_name, "n_truncated": tl.n_truncated,
                     "n_excluded_tokens": n_excluded, "reference_normalisation": norm,
                     "rmia": None if rmia_sig is None else rmia_sig.meta,
                     "scoring": {"kind": tl.kind, **tl.meta.get("pll", {"estimator": "exact"})},
                     "n_unscoreable": int((~keep).sum()),
                     "unscoreable": {"documents": [str(i) for i in out_docs],
                                     "individuals": [str(p) for p in people_out]},
                     "bootstrap_unit": "individual"})
    return res
