"""The attack steps of a training run (:func:`toolkit.pipelines.lm_experiment.run_experiment`, methods.md §10–11):
canaries inserted into the members' texts before identifiers and training, and the cached ``attacks/…`` step of the base
model and of the last checkpoint of every strategy.

Layout in the run directory (:class:`toolkit.results.layout.RunLayout`)::

    canaries/canaries.parquet            the inserted canaries (made-up names and numbers, where they went)
    attacks/base/                        the base model, audited without a reference
    attacks/<strategy>/epoch-<N>/        the last checkpoint, the base model as reference
    rmia_references/                     RMIA's reference models (:mod:`toolkit.pipelines.reference_models`)
        attacks.json roc.json scores.parquet identifiers.json verdict.json
                                         (written by :meth:`toolkit.audit.model_audit.ModelAudit.to_files`)
        one_run.parquet                  the one-run audit's canaries and scores (when on; ``one_run`` in
                                         attacks.json, :func:`insert_one_run_canaries`)

An attack step's key covers the model, the reference, the §4 audit it takes the ``identifier_count`` scores and the
novel privacy from, the regurgitation step, the identifiers, the data, the canaries, ``audit.attacks`` and RMIA's
reference models.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from toolkit.errors import ToolkitError

if TYPE_CHECKING:
    from toolkit.pipelines.data import ExperimentData


def run_canaries(cfg, data: ExperimentData, cache, run_dir: Path) -> tuple[pd.DataFrame | None, str | None]:
    """Insert ``training.canaries`` into ``data.members`` (replaced in place: every later step sees the texts
    with canaries) and save the canary table (a cached ``canaries`` step). Returns ``(table, step key)``, or
    ``(None, None)`` without canaries."""
    from toolkit.audit.attacks import canaries_into_corpus
    from toolkit.io import atomic_write_parquet
    from toolkit.pipelines.registry import CanariesInputs, key, run_step
    from toolkit.results.layout import RunLayout
    from toolkit.training import corpus_fingerprint

    spec = cfg.training.canaries if cfg.training is not None else None
    if spec is None:
        return insert_one_run_canaries(cfg, data, None), None
    members = data.members
    try:
        data.members, table = canaries_into_corpus(members, spec.n, spec.repeats, seed=cfg.seed)
    except ValueError as exc:
        raise ToolkitError(f"{cfg.source or '<config>'}: training.canaries: {exc} (the members have "
                           f"{len(members)} documents)") from None
    inputs = CanariesInputs(spec, cfg.seed, corpus_fingerprint(members))
    layout = RunLayout(run_dir)
    d = layout.canaries

    def save() -> pd.DataFrame:
        atomic_write_parquet(table, layout.canary_table)
        return table

    run_step(cache, "canaries", inputs, save, lambda: table, out_dir=d)
    return insert_one_run_canaries(cfg, data, table), key("canaries", inputs)


def one_run_canary_count(cfg, members) -> int:
    """m of the one-run audit: ``audit.attacks.one_run_canaries``, else the profile's default (two per member
    individual, capped: :data:`~toolkit.config.sections.ONE_RUN_CANARIES_BY_PROFILE`); 0 without training."""
    from toolkit.config.experiment import experiment_profile
    from toolkit.config.sections import ONE_RUN_CANARIES_BY_PROFILE

    if cfg.training is None:
        return 0
    m = cfg.audit.attacks.one_run_canaries
    if m is None:
        m = min(ONE_RUN_CANARIES_BY_PROFILE.get(experiment_profile(cfg).name, 0), 2 * len(members.person_ids))
    return int(m)


def insert_one_run_canaries(cfg, data: ExperimentData, table: pd.DataFrame | None) -> pd.DataFrame | None:
    """Insert the one-run audit's canaries (each with probability ½, :mod:`toolkit.audit.attacks.one_run`) into
    ``data.members`` after the exposure canaries of ``table`` (never inside one), their table in
    ``data.one_run_canaries``. Returns every inserted canary (``table``'s and the audit's: what the identifiers
    step leaves out), or ``table`` unchanged when the audit is off. Deterministic from the seed and the members, so the
    members' fingerprint (in every later step's key) covers it."""
    from toolkit.audit.attacks import canary_ranges
    from toolkit.audit.attacks.one_run import one_run_canaries_into_corpus

    m = one_run_canary_count(cfg, data.members)
    data.one_run_canaries = None
    if m <= 0:
        return table
    avoid = canary_ranges(data.members, table, with_separator=True) if table is not None else None
    data.members, one = one_run_canaries_into_corpus(data.members, m, seed=cfg.seed, avoid=avoid)
    data.one_run_canaries = one
    return one if table is None else pd.concat([table, one], ignore_index=True)


#: RMIA's reference models as a worker process loaded them (key of the references → RMIAReferences): once per
#: process, as the main process does for every attack step
_RMIA_IN_WORKER: dict[str, Any] = {}


def attack_and_write(*, out_dir: Path, rmia=None, **audit) -> dict[str, Any]:
    """One attack step: :func:`toolkit.audit.model_audit.audit_model` of ``audit``'s model (``rmia``: RMIA's
    reference models, loaded by the caller) written into ``out_dir`` by :meth:`ModelAudit.to_files`; returns what
    :func:`~toolkit.audit.model_audit.read_attack_files` reads back."""
    from dataclasses import replace

    from toolkit.audit.model_audit import audit_model

    result = audit_model(**{**audit, "context": replace(audit["context"], rmia=rmia)})
    result.to_files(out_dir)
    return result.to_dict()


def attack_in_worker(rmia_spec=None, **kwargs) -> None:
    """:func:`attack_and_write` in a worker process (:mod:`toolkit.pipelines.parallel`), RMIA's reference models
    loaded there from ``rmia_spec`` = ``(ReferenceModels, public corpus, offline a)`` (once per process) rather than
    pickled from the main process."""
    from toolkit.audit.model_audit import load_models
    from toolkit.pipelines.reference_models import rmia_inputs

    rmia = None
    if rmia_spec is not None:
        refs, public, offline_a = rmia_spec
        if refs.key not in _RMIA_IN_WORKER:
            _RMIA_IN_WORKER[refs.key] = rmia_inputs(refs, public, lambda p: load_models(p)[0],
                                                    offline_a=offline_a)
        rmia = _RMIA_IN_WORKER[refs.key]
    attack_and_write(**kwargs, rmia=rmia)


def run_attacks(cfg, cache, run_dir: Path, *, data: ExperimentData, tables: dict[str, dict], audits: dict,
                regurgitation: dict, checkpoints: dict, train_keys: dict, base, base_key, canaries, canary_key,
                identifier_keys: dict[str, str], fingerprints: dict, progress: bool = True,
                side_by_side: bool = True) -> dict:
    """The ``attacks/…`` steps (see the module docstring); ``(name, epoch) → read_attack_files(...)`` result.

    With ``side_by_side`` (a run not under ``accelerate launch``) and more than one step to compute on a machine
    without a GPU, those steps run in worker processes as the training steps do
    (:func:`toolkit.pipelines.parallel.step_processes`; the same function, inputs and seeds, so the same outputs;
    each worker scores the reference model once for the steps it computes)."""
    from toolkit.audit.evaluate import membership_scores, novel_evidence
    from toolkit.audit.model_audit import AuditContext, AuditSettings, load_models, read_attack_files
    from toolkit.corpus import Corpus
    from toolkit.pipelines.cache import read_step
    from toolkit.pipelines.registry import AttacksInputs, run_step
    from toolkit.results.layout import RunLayout
    from toolkit.pipelines.reference_models import rmia_inputs, run_reference_models

    from toolkit.audit.attacks.one_run import without_canaries

    opts = cfg.audit.attacks
    if not opts.enabled:
        return {}
    one = data.one_run_canaries  # the one-run audit's canaries (insert_one_run_canaries), None when off
    both = Corpus(list(data.members) + list(data.nonmembers))
    targets = [("base", 0, base, base_key, None)] if cfg.audit.base_model else []
    targets += [(n, c[-1][0], c[-1][1], train_keys[n], base) for n, c in checkpoints.items() if c]
    refs = run_reference_models(cfg, cache, run_dir, public=data.public, base=base, base_key=base_key,
                                public_fingerprint=fingerprints.get("public"), progress=progress,
                                n_train=len(set(data.members.person_ids)))
    loaded: dict = {}  # the reference models, loaded once for every attack step that runs

    def rmia():
        if refs is not None and "refs" not in loaded:
            loaded["refs"] = rmia_inputs(refs, data.public, lambda p: load_models(p)[0],
                                         offline_a=opts.rmia_offline_a)
        return loaded.get("refs")

    # the same for every model: the audit canaries are no membership evidence, the battery sees notes without them
    members, ids, exposed = data.members, tables["members"], canaries
    if one is not None:
        members, ids = without_canaries(members, one, ids)
        exposed = canaries[~canaries["canary_id"].isin(one["canary_id"])] if canaries is not None else None
    layout = RunLayout(run_dir)
    plans = []
    for name, epoch, path, key, ref in targets:
        d = layout.attacks(name, epoch)
        audit = audits[(name, epoch)]
        reg = regurgitation.get(name)
        base_reg = regurgitation.get("base") if name != "base" else None
        if reg is not None:  # judged against the base model's regurgitation where it was measured (verdict rule)
            reg = {**reg, "reference": base_reg}
        inputs = AttacksInputs(
            model=key, epoch=epoch, reference=base_key if ref is not None else None,
            audit=(read_step(layout.audit(name, epoch)) or {}).get("key"),
            regurgitation=(read_step(layout.regurgitation(name)) or {}).get("key") if reg else None,
            regurgitation_reference=(read_step(layout.regurgitation("base")) or {}).get("key")
            if reg and base_reg else None,
            identifiers_members=identifier_keys["members"], identifiers_all=identifier_keys["all"],
            members=fingerprints["members"], nonmembers=fingerprints["nonmembers"], canaries=canary_key,
            attacks=opts, n_bootstrap=cfg.audit.n_bootstrap, seed=cfg.seed,
            rmia_references=refs.key if refs is not None else None, public=fingerprints.get("public"))

        def arguments(name=name, path=path, ref=ref, d=d, audit=audit, reg=reg, progress=progress) -> dict[str, Any]:
            """attack_and_write's arguments but RMIA's (computed only for a step that runs)."""
            counts = membership_scores(audit["mia_predictions"], tables["all"], both)
            context = AuditContext(
                identifiers_all=tables["all"], identifier_count=counts.to_dict(),
                canaries=exposed if exposed is not None and len(exposed) else None, one_run=one,
                novel_privacy=novel_evidence(audit["metrics"]), regurgitation=reg, saw_neither=name == "base",
                public_texts=[x.text for x in data.public] if data.public is not None else None)
            return dict(model=path, members=members, nonmembers=data.nonmembers, identifiers=ids, out_dir=d,
                        reference=ref, context=context,
                        settings=AuditSettings(opts, n_bootstrap=cfg.audit.n_bootstrap, seed=cfg.seed,
                                               progress=progress))

        plans.append((name, epoch, d, inputs, layout.step("attacks", name, epoch), arguments))
    from toolkit.pipelines.parallel import steps_side_by_side

    spec = (refs, data.public, opts.rmia_offline_a) if refs is not None else None
    in_workers = steps_side_by_side(
        cache, [("attacks", step, d, inputs, attack_in_worker,
                 lambda a=arguments: {**a(progress=False), "rmia_spec": spec})
                for _, _, d, inputs, step, arguments in plans], enabled=side_by_side,
        beyond_threads=False)  # a worker scores the reference model once for all its steps: no third process for it
    out = {}
    for name, epoch, d, inputs, step, arguments in plans:
        if step in in_workers:
            out[(name, epoch)] = read_attack_files(d)
            continue
        out[(name, epoch)] = run_step(cache, "attacks", inputs,
                                      lambda arguments=arguments: attack_and_write(**arguments(), rmia=rmia()),
                                      lambda d=d: read_attack_files(d), out_dir=d, name=step)
    return out


__all__ = ["attack_and_write", "attack_in_worker", "insert_one_run_canaries", "one_run_canary_count", "run_attacks", "run_canaries"]
