"""Experiment configs (YAML → typed dataclasses) and ``python -m toolkit run``: a whole experiment with cached steps.

An experiment is data: which corpus and splits, which detector and ``k``/``n`` (methods.md §2), which base model and
strategies (methods.md §3), which checkpoint epochs, which audits (methods.md §4–5). ``load_experiment(path)`` validates
the YAML and names the file and the key of every problem; :func:`run_experiment` chains the steps of
``toolkit.pipelines.steps``:

    data (→ canaries inserted into the members) → base model → identifiers (members; members ∪ non-members)
         → training of every strategy → audit of the base model and of every checkpoint
         → free-running regurgitation (causal LM) → attacks on the base model and every strategy's last checkpoint
         → the gold identifiers the detector missed, attacked the same way (a non-oracle detector on gold spans)

A config with ``models:`` instead of ``training:`` audits those models without training
(:func:`toolkit.pipelines.audit_only.audit_config`, the layout of ``python -m toolkit audit``).

Each step is skipped when its output exists and was made from the same inputs: a SHA-256 of the step's config
section and of the keys of the steps it depends on (corpus fingerprints for the data) is stored next to the output
(``toolkit.pipelines.cache``). A changed parameter therefore re-runs exactly the steps that depend on it — a new
``k`` re-runs the identifier analysis, the training of the strategies that protect identifiers and the audits, not
the training of ``clm``. Every run writes ``manifest.json`` (versions, seeds, config, data fingerprints, per-step
status and timings, git commit).

Layout of a run directory (:class:`toolkit.results.layout.RunLayout`, the same as the work directories of notebooks
02 and 03, so the report reads both)::

    RUN_DIR/
      manifest.json  config.yaml
      base_clm/                      tiny base built from the public split (CPU profile) + step.json
      identifiers_members/  identifiers_all/   summary.json, terms / individuals / positions / spans .parquet
      runs/NAME/epoch-N/             Hugging Face checkpoints (toolkit.training layout) + step.json
      audit/base/  audit/NAME/epoch-N/         metrics.json, roc.json, predictions.parquet + step.json
      regurgitation/NAME/regurgitation.json    (causal LM) free-running regurgitation of the last checkpoint
      canaries/canaries.parquet      the canaries inserted into the members (training.canaries)
      attacks/base/  attacks/NAME/epoch-N/     attacks.json, roc.json, scores.parquet, identifiers.json,
                                     verdict.json (toolkit.pipelines.attack_steps) + step.json
      missed/base/  missed/NAME/epoch-N/       missed.json (toolkit.pipelines.missed_steps; non-oracle detector)
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from toolkit.config.experiment import ExperimentConfig, load_experiment, resolved_settings
from toolkit.errors import ToolkitError

from toolkit.pipelines.data import ExperimentData, load_data

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    """What :func:`run_experiment` returns: the run directory, its manifest, the audits of every checkpoint, the
    checkpoints, the base model, the data (``corpus``, ``public``, ``members``, ``nonmembers``), the identifier
    tables (``members``, ``all``), the free-running regurgitation results (causal LM), the attacks (``(name,
    epoch) →`` :func:`~toolkit.audit.model_audit.read_attack_files`'s dict) and their verdicts (``(name, epoch) →``
    ``Verdict.to_dict()``). A ``models:`` run keys its models ``(label, 0)``."""

    run_dir: Path
    manifest: dict[str, Any]
    audits: dict[tuple[str, int], dict[str, Any]]
    checkpoints: dict[str, list[tuple[int, Path]]]
    base: Path | str | None = None
    data: ExperimentData | None = None
    identifiers: dict[str, dict[str, Any]] = field(default_factory=dict)
    regurgitation: dict[str, dict[str, Any]] = field(default_factory=dict)
    attacks: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    verdicts: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    #: ``(name, epoch) → missed.json``'s dict (:mod:`toolkit.pipelines.missed_steps`); empty for an oracle detector
    missed: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    main: bool = True  # False on the other processes of `accelerate launch` / `torchrun` (they print nothing)

    def steps(self, status: str | None = None) -> list[str]:
        """Names of the steps (with the given status: ``ran`` / ``cached``)."""
        return [s["name"] for s in self.manifest["steps"] if status is None or s["status"] == status]


def _distributed_state():
    """accelerate's process state when launched with several processes (``accelerate launch``), else None."""
    import os

    if int(os.environ.get("WORLD_SIZE", "1") or 1) <= 1:
        return None
    import torch
    from accelerate import PartialState

    # without a GPU accelerate only sets up a process group (gloo) when told to run on the CPU
    return PartialState(cpu=not torch.cuda.is_available())


def tiny_base_inputs(settings: dict[str, Any], public_fingerprint: Any):
    """The inputs of the ``base`` step of a tiny base (:class:`~toolkit.pipelines.registry.BaseInputs`: architecture,
    pre-training schedule and the public split's fingerprint)."""
    from toolkit.pipelines.registry import BaseInputs

    return BaseInputs.pretrained(settings["base"], settings["pretrain"], public_fingerprint)


def base_step(cfg: ExperimentConfig, settings: dict[str, Any], data: ExperimentData, fp: dict[str, Any],
              run_dir: Path, cache, manifest, *, state=None, progress: bool = True):
    """The base model of a run: ``(model path or id, its key)``. An external base (``model.base``, a profile's
    pre-trained model) is recorded; a tiny base is the step ``base`` (pre-trained on the public split, or copied
    from ``model.prebuilt`` when a base of the same key was built before, :mod:`toolkit.pipelines.prebuilt`)."""
    from toolkit.pipelines import registry, steps
    from toolkit.pipelines.cache import StepCache
    from toolkit.results.layout import RunLayout
    from toolkit.training.provenance import model_fingerprint

    kind, spec = cfg.model.kind, settings["base"]
    if isinstance(spec, str):
        base = Path(spec) if Path(spec).exists() else spec
        base_key = registry.ExternalBase(str(spec), model_fingerprint(base) if isinstance(base, Path) else None)
        manifest.record("base", "external", 0.0, key=StepCache.digest(base_key), output=str(spec))
        return base, base_key
    base_inputs = tiny_base_inputs(settings, fp["public"])
    base_dir = RunLayout(run_dir).base(kind)
    key = registry.key("base", base_inputs)
    if state is not None and not registry.current("base", base_dir, base_inputs):
        # building a tiny base is itself a training run: do it once on one process (then it is cached)
        raise ToolkitError("the tiny base model must be built before `accelerate launch`: run `python -m "
                           "toolkit run CONFIG` once on one process, or set model.base to a pre-trained model")
    registry.run_step(cache, "base", base_inputs,
                      lambda: steps.base_model(data.public, base_dir, kind, spec=spec, pretrain=settings["pretrain"],
                                               progress=progress),
                      out_dir=base_dir, prebuilt=cfg.model.prebuilt)
    return base_dir, key


def run_experiment(cfg: ExperimentConfig, out_dir: str | Path, *, progress: bool = True,
                   echo: bool | None = None) -> RunResult:
    """Run ``cfg`` into ``out_dir`` (see the module docstring): every step skipped when up to date. ``echo``: one
    ``[run]`` line per step; by default on a terminal or in a log, not in a notebook kernel (a notebook shows the
    manifest's step table instead; its executed copy must hold no log lines).

    Under ``accelerate launch`` (several processes) every process trains (the HF Trainer's data parallelism); the
    analysis runs on the main process first, the others then find it cached; audits and the manifest are written by
    the main process only.
    """
    from contextlib import ExitStack, nullcontext

    from toolkit.audit.evaluate import corpus_word_types, identifier_sets
    from toolkit.corpus import Corpus
    from toolkit.identifiers import load_identifiers
    from toolkit.audit.hashing import keyed_hashing
    from toolkit.io import atomic_write_json, atomic_write_text, make_private_dir, private_umask
    from toolkit.audit.attacks import canary_ranges
    from toolkit.pipelines import steps
    from toolkit.pipelines.attack_steps import run_attacks, run_canaries
    from toolkit.pipelines.registry import (ABSENT, AuditInputs, IdentifiersInputs, ProbeSettings, RegurgitationInputs,
                                            TrainInputs, identifier_settings, run_step)
    from toolkit.pipelines.registry import key as key_of
    from toolkit.pipelines.audit_only import audit_config
    from toolkit.pipelines.cache import StepCache
    from toolkit.pipelines.lock import run_lock
    from toolkit.pipelines.manifest import Manifest, corpus_files_fingerprint
    from toolkit.results.layout import RunLayout, read_json
    from toolkit.strategies import get_strategy
    from toolkit.training import checkpoint_dirs, corpus_fingerprint

    if echo is None:
        from toolkit.progress import stream_kind

        echo = stream_kind() != "notebook"
    with private_umask(), keyed_hashing(out_dir), ExitStack() as held:  # owner-only files; the run's hash key
        run_dir = make_private_dir(out_dir)
        layout = RunLayout(run_dir)
        state = _distributed_state()
        main = state is None or state.is_main_process
        if main:
            held.enter_context(run_lock(run_dir))  # one run per directory: a second one stops with a clear error
        first = state.main_process_first if state is not None else nullcontext
        settings = resolved_settings(cfg)
        manifest = Manifest(run_dir, cfg, settings, write=main)
        cache = StepCache(manifest, echo=echo and main, state=state)
        if main:
            atomic_write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False, allow_unicode=True), layout.config)

        try:
            # data
            t0 = time.perf_counter()
            data = load_data(cfg)
            canaries, canary_key = run_canaries(cfg, data, cache, run_dir)
            fp = {"corpus_files": corpus_files_fingerprint(cfg.corpus.path),
                  "members": corpus_fingerprint(data.members), "nonmembers": corpus_fingerprint(data.nonmembers)}
            if data.public is not None:
                fp["public"] = corpus_fingerprint(data.public)
            if data.reserve is not None:
                fp["public_reserve"] = corpus_fingerprint(data.reserve)
            manifest.set_datasets(fp)
            manifest.record("data", "ran", time.perf_counter() - t0, key=None, output=None)
            both = Corpus(list(data.members) + list(data.nonmembers))
            if cfg.models is not None:  # audit only, no training
                only = audit_config(cfg, data, run_dir, cache=cache, progress=progress)
                manifest.finish("done")
                keys = {label: (label, 0) for label in only.models}
                return RunResult(run_dir=run_dir, manifest=manifest.data, checkpoints={}, data=data, main=main,
                                 audits={keys[k]: v for k, v in only.audits.items()},
                                 attacks={keys[k]: v for k, v in only.attacks.items()},
                                 verdicts={keys[k]: v for k, v in only.verdicts.items()})

            # base model
            base, base_key = base_step(cfg, settings, data, fp, run_dir, cache, manifest, state=state,
                                       progress=progress)

            # identifiers (methods.md §2): of the members (what training protects, what privacy counts) and of members ∪
            # non-members (the attack's graph, methods.md §5)
            id_cfg = identifier_settings(cfg.identifiers)
            ids, tables = {}, {}
            excluded = canary_ranges(data.members, canaries) if canaries is not None else None
            for part, docs in (("members", data.members), ("all", both)):
                inputs = IdentifiersInputs.of(id_cfg, corpus_fingerprint(docs), canary_key)
                d = layout.identifiers(part)
                with first():
                    tables[part] = run_step(cache, "identifiers", inputs,
                                            lambda d=d, docs=docs: steps.identifiers(docs, d, exclude=excluded, **id_cfg),
                                            lambda d=d: load_identifiers(d), out_dir=d, name=f"identifiers_{part}")
                ids[part] = key_of("identifiers", inputs, f"identifiers_{part}")
            ids_train, ids_all = tables["members"], tables["all"]
            manifest.set_identifiers({"members": ids_train["summary"], "all": ids_all["summary"]})

            # training (methods.md §3)
            checkpoints: dict[str, list[tuple[int, Path]]] = {}
            train_keys: dict[str, str] = {}
            from toolkit.training import train

            plans = []
            for name in cfg.training.strategies:
                strat = get_strategy(name)
                tcfg = settings["strategy_finetune"].get(name) or (settings["dp_finetune"] if strat.dp
                                                                   else settings["finetune"])
                # under `accelerate launch` every process trains (HF Trainer data parallelism); Opacus DP-SGD runs in
                # the main process only (its Poisson sampling and accountant are single-process here): the others go on
                # to the barrier after the loop
                if not (strat.dp and not main):
                    d = layout.train(name)
                    inputs = TrainInputs.of(strat, tcfg, base_key, fp["members"], ids["members"],
                                            fp.get("public_reserve", fp.get("public")))
                    kw = dict(corpus=data.members, base=base, run_dir=d, strategy=name, config=tcfg,
                              positions=ids_train["positions"], spans=ids_train["spans"], progress=progress,
                              **({"public": data.tuning_public} if strat.subspace else {}))  # the subspace's anchors
                    plans.append((name, strat, tcfg, inputs, d, kw))
            # on a machine without a GPU the strategies not yet trained train side by side, one process each
            # (toolkit.pipelines.parallel: a tiny model's step does not keep two cores busy)
            from toolkit.pipelines.parallel import steps_side_by_side
            from toolkit.pipelines.registry import prebuilt_ready

            side = [("train", f"train/{name}", d, inputs, train, lambda kw=kw: kw)
                    for name, _, _, inputs, d, kw in plans]
            if cfg.audit.attacks.enabled:  # RMIA's reference models beside them (run_attacks then finds them trained)
                from toolkit.pipelines.reference_models import reference_models_plan, train_references

                refs = reference_models_plan(cfg, run_dir, public=data.public, base=base, base_key=base_key,
                                             public_fingerprint=fp.get("public"),
                                             n_train=len(set(data.members.person_ids)), progress=False)
                if refs is not None and not prebuilt_ready("rmia_references", refs[1], cfg.model.prebuilt):
                    refs_dir, refs_inputs, _, refs_kw = refs  # (built before: run_attacks copies them)
                    side.append(("rmia_references", "rmia_references", refs_dir, refs_inputs, train_references,
                                 lambda: refs_kw))
            side_by_side = steps_side_by_side(cache, side, enabled=state is None)
            for name, strat, tcfg, inputs, d, kw in plans:
                if f"train/{name}" not in side_by_side:
                    run_step(cache, "train", inputs, lambda kw=kw: train(**kw), out_dir=d, name=f"train/{name}",
                             all_processes=not strat.dp)
                checkpoints[name] = [(e, p) for e, p in checkpoint_dirs(d) if e in set(tcfg.epochs)]
                train_keys[name] = key_of("train", inputs, f"train/{name}")

            if state is not None:
                state.wait_for_everyone()
            audits: dict[tuple[str, int], dict[str, Any]] = {}
            regurgitation: dict[str, dict[str, Any]] = {}
            attacks: dict[tuple[str, int], dict[str, Any]] = {}
            missed: dict[tuple[str, int], dict[str, Any]] = {}
            if main:
                # audits (methods.md §4–5)
                base_vocabulary = corpus_word_types(data.public) if data.public is not None else None
                probe = ProbeSettings(max_length=cfg.audit.max_length, n_bootstrap=cfg.audit.n_bootstrap,
                                      batch_size=cfg.audit.batch_size, seed=cfg.seed)
                targets = []
                if cfg.audit.base_model:
                    targets.append(("base", 0, base, base_key))
                for name, ckpts in checkpoints.items():
                    chosen = ckpts if cfg.audit.checkpoints == "all" else ckpts[-1:]
                    targets += [(name, e, p, train_keys[name]) for e, p in chosen]
                audit_plans = []
                for name, epoch, path, model in targets:
                    d = layout.audit(name, epoch)
                    inputs = AuditInputs(model=model, epoch=ABSENT if name == "base" else epoch, audit=probe,
                                         identifiers_members=ids["members"], identifiers_all=ids["all"],
                                         base_vocabulary=fp.get("public"), nonmembers=fp["nonmembers"])
                    kw = dict(checkpoint=path, members=data.members, nonmembers=data.nonmembers, ids_train=ids_train,
                              ids_all=ids_all, out_dir=d, base_vocabulary=base_vocabulary, **probe.options())
                    audit_plans.append((name, epoch, d, inputs, layout.step("audit", name, epoch), kw))
                # side by side on a machine without a GPU, as the training steps
                in_workers = steps_side_by_side(
                    cache, [("audit", step, d, inputs, steps.audit_checkpoint, lambda kw=kw: {**kw, "progress": False})
                            for _, _, d, inputs, step, kw in audit_plans], enabled=state is None,
                    beyond_threads=False)  # short steps: a worker's imports and reused scores serve several
                for name, epoch, d, inputs, step, kw in audit_plans:
                    audits[(name, epoch)] = steps.load_audit(d) if step in in_workers else run_step(
                        cache, "audit", inputs, lambda kw=kw: steps.audit_checkpoint(**kw, progress=progress),
                        lambda d=d: steps.load_audit(d), out_dir=d, name=step)

                # free-running regurgitation of the last checkpoints (causal LM)
                reg = cfg.audit.regurgitation
                if reg is not None:
                    sets = identifier_sets(ids_all)  # both groups' identifiers: members and non-members are prompted
                    vocab = sets["I_direct"] | sets["I_indirect"]
                    models = ([("base", base, base_key)] if cfg.audit.base_model else []) + \
                             [(n, c[-1][1], train_keys[n]) for n, c in checkpoints.items() if c]
                    for name, path, key in models:
                        d = layout.regurgitation(name)
                        inputs = RegurgitationInputs(key, ids["members"], reg,
                                                     None if name == "base" else checkpoints[name][-1][0],
                                                     nonmembers=fp["nonmembers"], identifiers_all=ids["all"])

                        def regurgitate(path=path, d=d, name=name, inputs=inputs):
                            from toolkit.audit import regurgitation_rate
                            from toolkit.audit.probe_causal import with_nonmembers
                            from toolkit.models import load_model

                            model, tok = load_model(path, kind="clm")
                            kw = dict(prefix_tokens=reg.prefix_tokens, max_new_tokens=reg.max_new_tokens,
                                      progress=progress)
                            r = regurgitation_rate(model, tok, data.members, vocab, **kw)
                            r = with_nonmembers(r, regurgitation_rate(model, tok, data.nonmembers, vocab, **kw),
                                                seed=cfg.seed)
                            r["strategy"] = name
                            r["epoch"] = inputs.epoch
                            atomic_write_json(r, layout.regurgitation_file(name))
                            return r

                        regurgitation[name] = run_step(
                            cache, "regurgitation", inputs, regurgitate,
                            lambda name=name: read_json(layout.regurgitation_file(name)), out_dir=d,
                            name=layout.step("regurgitation", name))

                # attacks (methods.md §10–11): the base model and the last checkpoint of every strategy
                attacks = run_attacks(cfg, cache, run_dir, data=data, tables=tables, audits=audits,
                                      regurgitation=regurgitation, checkpoints=checkpoints, train_keys=train_keys,
                                      base=base, base_key=base_key, canaries=canaries, canary_key=canary_key,
                                      identifier_keys=ids, fingerprints=fp, progress=progress,
                                      side_by_side=state is None)
                # the gold identifiers the detector missed (methods.md §2.1): planned only for a non-oracle detector
                from toolkit.pipelines.missed_steps import run_missed

                missed = run_missed(cfg, cache, run_dir, data=data, tables=tables, checkpoints=checkpoints,
                                    train_keys=train_keys, base=base, base_key=base_key, canary_key=canary_key,
                                    identifier_keys=ids, fingerprints=fp, progress=progress)
            manifest.finish("done")
        except BaseException as exc:
            # the toolkit's own messages name files and records, never their text; another library's may quote data
            said = str(exc).splitlines()[0][:300] if isinstance(exc, ToolkitError) and str(exc) else ""
            manifest.finish("failed", error=f"{type(exc).__name__}: {said}" if said else type(exc).__name__)
            raise
        if state is not None:
            state.wait_for_everyone()
        return RunResult(run_dir=run_dir, manifest=manifest.data, audits=audits, checkpoints=checkpoints, base=base,
                         main=main,
                         data=data, identifiers=tables, regurgitation=regurgitation, attacks=attacks, missed=missed,
                         verdicts={k: a["verdict"] for k, a in attacks.items()})


def run(config: str | Path | ExperimentConfig, out_dir: str | Path | None = None, *,
        overrides: dict[str, Any] | None = None, progress: bool = True, echo: bool | None = None) -> RunResult:
    """Library entry point of ``python -m toolkit run``: load (a path, an example name or a config) and run.
    ``out_dir`` defaults to ``runs/NAME``."""
    cfg = config if isinstance(config, ExperimentConfig) else load_experiment(config, overrides)
    if isinstance(config, ExperimentConfig) and overrides:
        raise ToolkitError("overrides apply to a config file; edit the ExperimentConfig directly")
    return run_experiment(cfg, out_dir or Path("runs") / cfg.name, progress=progress, echo=echo)


def results_lines(result: RunResult) -> list[str]:
    """The final results table of a run, one line per audited model (the base, every strategy's last checkpoint; the
    models of a ``models:`` run): privacy (methods.md §4), the strongest attack and its AUC, the verdict and its
    rule."""
    keys = list(result.attacks) or [(n, c[-1][0]) for n, c in result.checkpoints.items() if c]
    if not keys:
        return []
    rows = []
    for name, epoch in keys:
        metrics = (result.audits.get((name, epoch)) or {}).get("metrics") or {}
        att = (result.attacks.get((name, epoch)) or {}).get("attacks") or {}
        v = result.verdicts.get((name, epoch))
        best = att.get("strongest")
        auc = att["attacks"][best]["auc"] if best else None
        rows.append((name if name == "base" or not epoch else f"{name} epoch {epoch}",
                     "-" if metrics.get("privacy") is None else f"{metrics['privacy']:.3f}",
                     f"{best} {auc:.3f}" if best else "-",
                     "-" if v is None else v["level"] + ("" if v["level"] == "green" else f" ({v['rule']})")))
    head = ("model", "privacy", "strongest attack (AUC)", "verdict")
    width = [max(len(r[i]) for r in [head, *rows]) for i in range(3)]
    return ["  ".join(c.ljust(w) for c, w in zip(r[:3], width)) + "  " + r[3] for r in [head, *rows]]


__all__ = ["ExperimentData", "RunResult", "base_step", "load_data", "tiny_base_inputs", "results_lines", "run", "run_experiment"]
