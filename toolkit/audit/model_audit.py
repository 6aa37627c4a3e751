"""The audit of one model: every attack, PII inference, memorisation, canaries and the one-run audit, one typed result.

:func:`audit_model` is the one function that audits a model, whichever path asks (``toolkit run``'s attack steps,
``toolkit audit``, the notebooks through them): it loads the model and its reference once, runs the membership
battery (:func:`toolkit.audit.attacks.run_battery`: every registered attack whose needs are met, the reference's
token losses computed once for all of them), PII inference on members and non-members, memorisation (with a
reference), the exposure of inserted canaries and the one-run audit, then composes the verdict
(:func:`toolkit.audit.verdict.verdict`, methods.md §10–11). It writes nothing: :meth:`ModelAudit.to_files` does,
under the names of :mod:`toolkit.audit.files`, and :func:`read_attack_files` reads them back for a cached step.

What the audit needs beyond the two groups is passed in two typed parts: :class:`AuditSettings` (how it runs: the
``audit.attacks`` options, bootstrap, seed, precision, devices) and :class:`AuditContext` (what the pipeline already
measured for this model: the §4 probe's count-attack scores and novel-identifier evidence, regurgitation, inserted
canaries, RMIA's reference models, the public split).

    >>> result = audit_model("runs/clm/epoch-8", members, nonmembers, identifiers, reference="runs/base_clm",
    ...                      settings=AuditSettings(cfg.audit.attacks, seed=0))          # doctest: +SKIP
    >>> result.verdict.level; result.to_files("runs/attacks/clm/epoch-8")                 # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from toolkit.audit import files
from toolkit.corpus import Corpus


@dataclass(frozen=True)
class AuditSettings:
    """How one model is audited. ``options``: the ``audit.attacks`` options
    (:class:`~toolkit.config.sections.AttacksSection`: window, candidates, sample sizes, a masked model's estimator);
    ``n_bootstrap`` resamples of the AUC intervals (0: Hanley–McNeil); ``seed`` of the samples, candidates and masks;
    ``dtype`` / ``device_map`` how the models are loaded; ``progress`` bars."""

    options: Any
    n_bootstrap: int = 1000
    seed: int = 0
    dtype: Any = None
    device_map: Any = None
    progress: bool = False


@dataclass(frozen=True)
class AuditContext:
    """What the audit of one model reads beyond its two groups, every part optional.

    ``identifiers_all``: the identifier tables of members and non-members — with them PII inference attacks the
    non-members' notes too and ``pii_inference.member_advantage`` holds the members' advantage, the verdict's test
    (methods.md §11); ``identifier_count``: the §4 probe's count-attack score per individual (the ``identifier_count``
    attack); ``canaries``: the canaries inserted into the members' notes (their tokens are no membership evidence;
    their exposure is measured); ``one_run``: the one-run audit's canary table
    (:func:`~toolkit.audit.attacks.one_run.one_run_canaries_into_corpus`); ``novel_privacy``: the §4 probe's
    novel-identifier evidence (:func:`toolkit.audit.evaluate.novel_evidence`); ``regurgitation``: the free-running
    regurgitation share (with the non-members' and the base model's); ``public_texts``: the public split's texts
    (identifiers they name are public; ReCaLL's prefix and DC-PDD's frequencies); ``saw_neither``: the model is the
    reference itself (its own attacks are the split check); ``rmia``: RMIA's reference models
    (:class:`~toolkit.audit.attacks.rmia.RMIAReferences`)."""

    identifiers_all: dict[str, Any] | None = None
    identifier_count: Mapping[str, float] | None = None
    canaries: pd.DataFrame | None = None
    one_run: pd.DataFrame | None = None
    novel_privacy: Any = None
    regurgitation: Any = None
    public_texts: list[str] | None = None
    saw_neither: bool = False
    rmia: Any = None


@dataclass
class ModelAudit:
    """The audit of one model (:func:`audit_model`): the membership ``battery``
    (:class:`~toolkit.audit.attacks.battery.BatteryResult`), the identifier attacks (``identifiers``: PII inference,
    memorisation, canaries; aggregates only), the ``verdict`` (:class:`~toolkit.audit.verdict.Verdict`), the one-run
    audit's per-canary table (``one_run``, when it ran) and ``settings``: what the caller records beside the battery
    in ``attacks.json`` (``toolkit audit``: window asked and used, interval method, estimator)."""

    battery: Any
    identifiers: dict[str, Any]
    verdict: Any
    one_run: pd.DataFrame | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    def with_settings(self, settings: Mapping[str, Any]) -> ModelAudit:
        """The same audit with ``settings`` recorded in ``attacks.json`` beside the battery's summary."""
        return replace(self, settings={**self.settings, **settings})

    def to_dict(self) -> dict[str, Any]:
        """What :func:`read_attack_files` reads back: ``attacks`` (``attacks.json``), ``roc``, ``scores``,
        ``identifiers``, ``verdict``."""
        return {"attacks": {**self.battery.to_json(), **self.settings}, "roc": self.battery.roc_curves,
                "scores": self.battery.scores, "identifiers": self.identifiers, "verdict": self.verdict.to_dict()}

    def to_files(self, out_dir: str | Path) -> dict[str, Path]:
        """Write the attack folder (:mod:`toolkit.audit.files`: :meth:`to_dict`'s parts and, where the one-run audit
        ran, ``one_run.parquet``; ``verdict.json`` last, its presence says the audit finished) into ``out_dir``,
        created owner-only; returns the paths by key."""
        parts = self.to_dict()
        if self.one_run is not None:
            parts["one_run"] = self.one_run
        return files.write_attack_files(out_dir, parts)


def read_attack_files(out_dir: str | Path) -> dict[str, Any]:
    """What :meth:`ModelAudit.to_files` wrote into ``out_dir``, as :meth:`ModelAudit.to_dict` gives it; a damaged
    JSON file is a one-line error naming it."""
    import json

    from toolkit.errors import ToolkitError

    out = Path(out_dir)
    found: dict[str, Any] = {}
    for key, name in files.ATTACK_JSON.items():
        try:
            found[key] = json.loads((out / name).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ToolkitError(f"{out / name}: cannot read JSON ({exc})") from None
    found["scores"] = pd.read_parquet(out / files.SCORES)
    return found


def load_models(name: str | Path, reference: str | Path | None = None, *, dtype=None, device_map=None):
    """``((model, tokenizer), reference pair or None)``, each loaded by :func:`toolkit.audit.losses.load_audit_model`
    and, without a ``device_map``, moved to the GPU when there is one."""
    import torch

    from toolkit.audit.losses import load_audit_model

    def one(src):
        model, tok = load_audit_model(src, dtype=dtype, device_map=device_map)
        if device_map is None and torch.cuda.is_available():
            model.to("cuda")
        return model, tok

    return one(name), (one(reference) if reference is not None else None)


def audit_model(model: str | Path, members: Corpus, nonmembers: Corpus, identifiers: dict[str, Any], *,
                reference: str | Path | None = None, context: AuditContext | None = None,
                settings: AuditSettings) -> ModelAudit:
    """The attack battery on one model (methods.md §10–11) and its verdict.

    Membership attacks on ``members`` vs ``nonmembers`` (:func:`toolkit.audit.attacks.run_battery`, with the
    ``reference`` model when given, scored once for every attack that needs it, and the probe's count-attack
    scores; the inserted canaries' tokens left out of every membership score), PII inference on the members' PII
    entities (the ``spans`` of ``identifiers``, the members' identifier tables; with ``context.identifiers_all`` the
    non-members' too and the members' advantage over them), memorisation of every identifier type of their
    ``positions`` (with a reference only), the exposure of inserted canaries, the one-run audit (with
    ``context.one_run``), then :func:`toolkit.audit.verdict.verdict` with the probe's novel-identifier evidence and the
    regurgitation share. Loads the models once; writes nothing (:meth:`ModelAudit.to_files`).
    """
    from toolkit.audit.attacks import canary_ranges, exposure, exposure_summary, memorisation_scores, run_battery
    from toolkit.audit.verdict import verdict

    ctx, how = context or AuditContext(), settings
    opt, seed, progress = how.options, how.seed, how.progress
    copies = opt.pll_copies  # a masked model's estimator: membership …
    pii_copies = copies if opt.pii_pll_copies is None else opt.pii_pll_copies  # … and PII inference and canaries
    (f, tok), ref = load_models(model, reference, dtype=how.dtype, device_map=how.device_map)
    ref_name = str(reference) if reference is not None else None
    people = members.person_ids + nonmembers.person_ids
    extra = {"identifier_count": {p: float(ctx.identifier_count.get(p, 0.0)) for p in people}} \
        if ctx.identifier_count is not None else None
    canaries = ctx.canaries if ctx.canaries is not None and len(ctx.canaries) else None
    # the members' texts carry the inserted canaries: their tokens are no membership evidence (methods.md §10)
    canary_text = canary_ranges(members, canaries, with_separator=True) if canaries is not None else None
    battery = run_battery(f, tok, members, nonmembers, reference=ref, extra_scores=extra, window=opt.window,
                          seed=seed, n_bootstrap=how.n_bootstrap, batch_size=opt.batch_size, reference_name=ref_name,
                          exclude=canary_text, pll_positions=opt.pll_positions,
                          pll_copies=copies, rmia=ctx.rmia, public=ctx.public_texts, progress=progress)
    if ctx.saw_neither:  # the model that saw neither group: its own attacks say whether the groups differ
        battery.meta["reference_model_attacks"] = battery.to_json()["attacks"]
    pii = _pii_inference(f, tok, members, nonmembers, identifiers, ctx, dict(
        reference=ref, n_candidates=opt.pii_candidates, max_occurrences=opt.pii_occurrences, window=opt.pii_window,
        seed=seed, batch_size=opt.batch_size, reference_name=ref_name, progress=progress, pll_copies=pii_copies))
    memo = {"reference": None, "n_occurrences": 0, "overall": None, "by_category": {}}
    if ref is not None:
        _, memo = memorisation_scores(f, tok, ref, members, identifiers["positions"], window=opt.pii_window,
                                      max_occurrences=opt.memorisation_occurrences, seed=seed,
                                      batch_size=opt.batch_size, progress=progress)
        memo = {"reference": ref_name, **memo}
    found = {"pii_inference": pii, "memorisation": memo}
    if canaries is not None:
        table = exposure(f, tok, canaries, n_reference=opt.canary_references, seed=seed, batch_size=opt.batch_size,
                         progress=progress, pll_copies=pii_copies)
        found["canaries"] = {**exposure_summary(table), "canaries": [
            {"canary_id": r.canary_id, "repeats": int(r.repeats), "exposure": float(r.exposure),
             "rank": float(r.rank)} for r in table.itertuples(index=False)]}
    one_run, one_run_table = None, None
    if ctx.one_run is not None:
        from toolkit.audit.attacks.one_run import accountant_privacy, one_run_audit

        one_run = one_run_audit(f, tok, ctx.one_run, reference=ref, accountant=accountant_privacy(model),
                                batch_size=opt.batch_size, progress=progress)
        battery.meta["one_run"] = one_run.to_json()
        one_run_table = one_run.scores.assign(person_id=list(ctx.one_run["person_id"]),
                                              repeats=list(ctx.one_run["repeats"]))
    v = verdict(attacks=battery, pii=pii, novel_privacy=ctx.novel_privacy, regurgitation=ctx.regurgitation,
                canaries=found.get("canaries"), one_run=one_run)
    return ModelAudit(battery=battery, identifiers=found, verdict=v, one_run=one_run_table)


def _pii_inference(f, tok, members: Corpus, nonmembers: Corpus, identifiers, ctx: AuditContext,
                   kw: dict) -> dict[str, Any]:
    """PII inference on the members' notes and, with the non-members' tables, on theirs too (the same candidate
    pool, drawn from both groups; identifiers of the public split public), with the members' advantage."""
    from toolkit.audit.attacks import pii_inference

    if ctx.identifiers_all is None:
        return pii_inference(f, tok, members, identifiers["spans"], **kw)
    from toolkit.audit.attacks import identifier_occurrences, pii_member_advantage, public_identifier_keys

    both = Corpus(list(members) + list(nonmembers))
    mine = {d.doc_id for d in members}  # the members' own table (their texts may have had canaries cut out)
    spans = ctx.identifiers_all["spans"]
    spans = pd.concat([identifiers["spans"], spans[~spans["doc_id"].astype(str).isin(mine)]], ignore_index=True)
    every = identifier_occurrences(both, spans)  # once: the candidates and who shares what, for both calls
    public = public_identifier_keys(set(every["key"]), ctx.public_texts) if ctx.public_texts is not None else None
    kw = {**kw, "population": every, "public_keys": public, "return_table": True}
    pii, table_m = pii_inference(f, tok, members, spans, **kw)
    pii_n, table_n = pii_inference(f, tok, nonmembers, spans, **kw)
    pii["nonmembers"] = {k: pii_n[k] for k in ("n_occurrences", "n_occurrences_total", "overall", "by_category",
                                               "by_sharing", "n_public")}
    pii["member_advantage"] = pii_member_advantage(table_m, table_n, seed=kw["seed"])
    return pii


__all__ = ["AuditContext", "AuditSettings", "ModelAudit", "audit_model", "load_models", "read_attack_files"]
