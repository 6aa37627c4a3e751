"""The reference models of the ``rmia`` attack (methods.md §10; :mod:`toolkit.audit.attacks.rmia`): a cached step of a
training run, shared by every audited model of the run.

The public split's individuals are shuffled (seeded by the run's seed), and each reference model trains on its own
seeded random half of them (independent halves: a reference model's membership tells nothing of another's, which the
tuning of ``a`` needs — complementary pairs would give it away), at most as many individuals as the audited models'
members. Each reference model fine-tunes the run's base model with the plain strategy of its kind (``clm`` / ``mlm``)
and the run's fine-tuning schedule up to its last epoch, so it is trained as the audited models are, on other
individuals: OUT for every member and non-member. The halves also give each reference model documents of known
membership, on which the offline coefficient ``a`` is tuned. RMIA's population ``z`` are the audited non-members
(:mod:`toolkit.audit.attacks.rmia` says why: the public split is the base model's pre-training text, not OUT for the
audited model); until 2026-11-26 a third of the public split was held back as the population.

Layout::

    rmia_references/ref-<i>/              a training run (:func:`toolkit.training.train`)
    rmia_references/references.json       the checkpoints used and the sizes of the split (counts only)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from toolkit.corpus import Corpus
from toolkit.errors import ToolkitError


@dataclass
class ReferenceSplit:
    """Individuals (person ids) of each reference model's training half."""

    training: list[list]

    @property
    def pool(self) -> list:
        """The individuals the reference models train on (each in some of them)."""
        seen = dict.fromkeys(p for half in self.training for p in half)
        return list(seen)


def reference_split(person_ids, n_references: int, seed: int, *, n_train: int | None = None) -> ReferenceSplit:
    """The seeded split of the module docstring over ``person_ids`` (in their given order). ``n_train`` caps each
    reference model's individuals (the audited models' member count: a reference model is trained as they are, on a
    dataset of at most the same size, as shadow models are [Shokri et al. 2017; Zarifzadeh et al. 2024]). None: no
    cap."""
    people = list(person_ids)
    if n_references < 1:
        raise ValueError(f"n_references must be >= 1, got {n_references}")
    if len(people) < 2:
        raise ToolkitError(f"audit.attacks.rmia_references: the public split has {len(people)} individual(s); RMIA "
                           "needs at least 2 (two halves to train on)")
    rng = np.random.default_rng([int(seed), 0x524D4941])  # "RMIA": a stream of its own
    pool = [people[i] for i in rng.permutation(len(people))]
    half = len(pool) // 2 if n_train is None else max(1, min(len(pool) // 2, int(n_train)))
    training = [[pool[i] for i in sorted(rng.permutation(len(pool))[:half])] for _ in range(n_references)]
    return ReferenceSplit(training=training)


def _docs_of(corpus: Corpus, people) -> Corpus:
    keep = set(people)
    return Corpus([d for d in corpus if d.person_id in keep])


@dataclass
class ReferenceModels:
    """The trained reference models (last checkpoints, in reference order), the split and the step's key."""

    paths: list[Path]
    split: ReferenceSplit
    key: str


def rmia_reference_count(cfg) -> int:
    """``audit.attacks.rmia_references``, else the profile's default
    (:data:`~toolkit.config.sections.RMIA_REFERENCES_BY_PROFILE`, otherwise ``DEFAULT_RMIA_REFERENCES``)."""
    from toolkit.config.experiment import experiment_profile
    from toolkit.config.sections import DEFAULT_RMIA_REFERENCES, RMIA_REFERENCES_BY_PROFILE

    n = cfg.audit.attacks.rmia_references
    if n is None:
        n = RMIA_REFERENCES_BY_PROFILE.get(experiment_profile(cfg).name, DEFAULT_RMIA_REFERENCES)
    return int(n)


def train_references(public: Corpus, training: list, base, out_dir: Path, kind: str, config,
                     progress: bool = True) -> list[Path]:
    """One reference model per group of individuals of ``training``, fine-tuned from ``base`` on their documents
    of ``public`` into ``out_dir/ref-<i>``, and ``references.json``; returns their last checkpoints."""
    from toolkit.io import atomic_write_json
    from toolkit.training import train

    d = Path(out_dir)
    paths = []
    for i, people in enumerate(training):
        ckpts = train(_docs_of(public, people), base, d / f"ref-{i}", kind, config, progress=progress)
        paths.append(Path(ckpts[-1][1]))
    atomic_write_json({"checkpoints": [str(p.relative_to(d)) for p in paths],
                       "n_training_individuals": [len(t) for t in training],
                       "epochs": config.epochs[-1], "strategy": kind}, d / "references.json")
    return paths


def reference_models_plan(cfg, run_dir: Path, *, public: Corpus | None, base, base_key: str, public_fingerprint,
                          n_train: int | None = None, progress: bool = True):
    """The ``rmia_references`` step of a run: ``(out_dir, inputs, split, train_references's arguments)``, or None
    when ``audit.attacks.rmia_references`` is 0 or the run has no public split (then no ``rmia`` attack)."""
    from toolkit.config.experiment import resolved_settings
    from toolkit.pipelines.registry import RmiaReferencesInputs
    from toolkit.results.layout import RunLayout
    from toolkit.training import DPConfig

    n = rmia_reference_count(cfg)
    a = cfg.audit.attacks.rmia_offline_a
    if a is not None and (isinstance(a, bool) or not isinstance(a, (int, float)) or not 0 <= a <= 1):
        raise ToolkitError(f"{cfg.source or '<config>'}: audit.attacks.rmia_offline_a: a number in [0, 1] or null "
                           f"(tuned), got {a!r}")
    if not n or public is None:  # no public split (corpus.public_split: null): nothing to train them on
        return None
    finetune = resolved_settings(cfg)["finetune"]
    # plain fine-tuning of the model's kind: the run's DP settings (training.dp, a frontier's ε) change nothing in
    # them, so the step keys the default DPConfig — reference models of one base and public split are shared by every
    # ε of a frontier (before, each ε trained its own, and attacked its base again)
    tcfg = replace(finetune, epochs=[max(finetune.epochs)], checkpoints_per_epoch=0, dp=DPConfig())
    split = reference_split(public.person_ids, n, cfg.seed, n_train=n_train)
    kind = cfg.model.kind
    inputs = RmiaReferencesInputs(references=n, n_train=n_train, seed=cfg.seed, strategy=kind, train=tcfg,
                                  base=base_key, public=public_fingerprint)
    d = RunLayout(run_dir).rmia_references
    return d, inputs, split, dict(public=public, training=split.training, base=base, out_dir=d, kind=kind,
                                  config=tcfg, progress=progress)


def run_reference_models(cfg, cache, run_dir: Path, *, public: Corpus | None, base, base_key: str,
                         public_fingerprint, progress: bool = True,
                         n_train: int | None = None) -> ReferenceModels | None:
    """Train (or load) ``audit.attacks.rmia_references`` reference models as the cached step ``rmia_references``
    (:func:`reference_models_plan`, :func:`train_references`); None when that is 0 or the run has no public split
    (then no ``rmia`` attack). ``n_train``: :func:`reference_split`'s cap (the run passes its member count). Reference
    models of this key built before under ``model.prebuilt`` (:mod:`toolkit.pipelines.prebuilt`: they depend on the
    base and the public split only, never on a member) are copied instead of trained."""
    from toolkit.pipelines.registry import key, run_step

    plan = reference_models_plan(cfg, run_dir, public=public, base=base, base_key=base_key,
                                 public_fingerprint=public_fingerprint, n_train=n_train, progress=progress)
    if plan is None:
        return None
    d, inputs, split, kwargs = plan

    def load() -> list[Path]:
        import json

        rel = json.loads((d / "references.json").read_text(encoding="utf-8"))["checkpoints"]
        return [d / r for r in rel]

    paths = run_step(cache, "rmia_references", inputs, lambda: train_references(**kwargs), load, out_dir=d,
                     prebuilt=cfg.model.prebuilt)
    return ReferenceModels(paths=list(paths), split=split, key=key("rmia_references", inputs))


def rmia_inputs(refs: ReferenceModels, public: Corpus, load, offline_a: float | None = None):
    """:class:`~toolkit.audit.attacks.rmia.RMIAReferences` of ``refs``: each model loaded by ``load(path)`` (→ model,
    tokenizer), no population texts (the battery takes the audited non-members), ``offline_a`` (None: tuned) and the
    pool's texts with the IN flags that tune it."""
    from toolkit.audit.attacks.rmia import RMIAReferences

    pool = list(_docs_of(public, refs.split.pool))
    halves = [set(t) for t in refs.split.training]
    tune_in = np.array([[d.person_id in h for h in halves] for d in pool], dtype=bool).reshape(len(pool), len(halves))
    meta = {"n_training_individuals": [len(t) for t in refs.split.training]}
    return RMIAReferences(models=[load(p) for p in refs.paths], offline_a=None if offline_a is None else float(offline_a),
                          tune_texts=[d.text for d in pool], tune_in=tune_in, meta=meta)


__all__ = ["ReferenceModels", "ReferenceSplit", "reference_models_plan", "reference_split", "rmia_inputs",
           "rmia_reference_count", "run_reference_models", "train_references"]
