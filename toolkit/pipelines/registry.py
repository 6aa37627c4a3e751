"""The step registry: every cached step of every pipeline, defined once (:data:`STEPS`).

A step is a record (:class:`Step`): its *kind* (the name its cache key is made under), the frozen dataclass of its
typed inputs, its place in the run layout (:class:`~toolkit.results.layout.RunLayout`) or the folder a caller names,
the file whose presence says it finished (``check``), whether an interrupted run resumes (``resumable``) and a
one-line description. :func:`run_step` runs one under the one cache rule (:mod:`toolkit.pipelines.cache`): the key is
``step_key(name, key_inputs(inputs))`` — derived from the typed inputs here and nowhere else (besides ``cache.py``
itself), so no pipeline writes a key by hand. ``toolkit run`` (:mod:`~toolkit.pipelines.lm_experiment`),
``toolkit audit`` (:mod:`~toolkit.pipelines.audit_only`), the CLI's ``probe`` and ``mia``, notebook 04's base
(:mod:`~toolkit.pipelines.email_extraction`) and notebook 05's steps (:mod:`~toolkit.pipelines.vocabulary_scrub`) are
selections of this registry.

The inputs' dict (:func:`key_inputs`) is ``dataclasses.asdict`` of the inputs without the fields left
:data:`ABSENT`: an optional input that a caller does not have is *omitted* from the key, not written as ``None``
(``None`` is a value: the base model has no reference). That keeps every key byte-identical to the dicts the pipelines
built by hand before the registry (``tests/test_registry.py`` holds them), so cached runs stay valid.

Not a cache key: the trainer's own resume fingerprint (``run.json``'s base and identifier fingerprints, checked
before a run resumes) is :class:`toolkit.training.provenance.TrainingInputs`, in ``training/`` (below ``pipelines/``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from toolkit.audit import files
from toolkit.pipelines.cache import StepCache, cached_step, is_current, prebuilt_copy, step_key
from toolkit.results.layout import RunLayout

Fingerprint = dict[str, Any]  # corpus_fingerprint: counts and a SHA-256 of doc ids and texts


class _Absent:
    """The value of an optional input a caller does not have: left out of the key (see the module docstring)."""

    _one: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._one is None:
            cls._one = super().__new__(cls)
        return cls._one

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __deepcopy__(self, memo) -> _Absent:  # dataclasses.asdict deep-copies plain values
        return self

    def __reduce__(self):
        return _Absent, ()


ABSENT: Any = _Absent()


def _strip(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if v is not ABSENT}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def key_inputs(inputs: Any) -> dict[str, Any]:
    """The step's inputs as its key hashes them (and ``step.json`` records them): ``asdict`` without the
    :data:`ABSENT` fields (nested config sections become dicts, as ``asdict`` makes them)."""
    return _strip(asdict(inputs))


# --------------------------------------------------------------------------------------------------------------------
# the typed inputs of each step kind (field names and order: the keys' dicts)


@dataclass(frozen=True)
class ExternalBase:
    """What stands for the key of a base model the run does not build (``model.base``, a profile's pre-trained
    model): its name and, for a local directory, its fingerprint (None for a hub id)."""

    base: str
    fingerprint: str | None


@dataclass(frozen=True)
class CanariesInputs:
    """``canaries``: ``training.canaries`` (CanariesSection); ``seed``; ``members``: their fingerprint before the
    canaries went in."""

    canaries: Any
    seed: int
    members: Fingerprint


@dataclass(frozen=True, kw_only=True)
class BaseInputs:
    """A tiny base model built by :func:`toolkit.training.build_base`: its architecture (TinyModelConfig), its
    pre-training schedule (TrainConfig) and the fingerprint of the corpus it learns from.

    Two spellings of the same three inputs: :meth:`pretrained` (``architecture``, ``pretrain``, ``public``: ``toolkit
    run`` and notebook 04, pre-trained on a public split) and :meth:`from_scratch` (``tiny``, ``config``, ``corpus``:
    notebook 05's masked LM trained from scratch on the anonymised notes). The second is the name the scrubbing
    pipeline's bases were cached under before the registry; kept so that their keys stay valid."""

    architecture: Any = ABSENT
    pretrain: Any = ABSENT
    public: Fingerprint | None = ABSENT
    corpus: Fingerprint = ABSENT
    tiny: Any = ABSENT
    config: Any = ABSENT

    def __post_init__(self) -> None:
        given = {k for k, v in vars(self).items() if v is not ABSENT}
        if given not in ({"architecture", "pretrain", "public"}, {"corpus", "tiny", "config"}):
            raise ValueError(f"BaseInputs: give architecture, pretrain, public or corpus, tiny, config; got {given}")

    @classmethod
    def pretrained(cls, architecture, pretrain, public: Fingerprint | None) -> BaseInputs:
        return cls(architecture=architecture, pretrain=pretrain, public=public)

    @classmethod
    def from_scratch(cls, corpus: Fingerprint, tiny, config) -> BaseInputs:
        return cls(corpus=corpus, tiny=tiny, config=config)


def identifier_settings(cfg) -> dict[str, Any]:
    """An IdentifierConfig as the identifier step's compute takes it (``spacy_labels`` a list)."""
    return {**asdict(cfg), "spacy_labels": list(cfg.spacy_labels)}


@dataclass(frozen=True)
class IdentifiersInputs:
    """``identifiers``: the analysis settings (:func:`identifier_settings`); ``documents``: the analysed documents'
    fingerprint; ``canaries``: the canaries step's key when canaries were inserted (their ranges are excluded), with
    ``canary_exclusion``: how (``"blanked"``: the analysis runs on the texts with the ranges blanked, for every n;
    the unigram re-flagging before 2026-11-26 had no such field, so its cached tables are not reused)."""

    identifiers: dict[str, Any]
    documents: Fingerprint
    canaries: str = ABSENT
    canary_exclusion: str = ABSENT

    @classmethod
    def of(cls, settings: dict[str, Any], documents: Fingerprint, canaries: str | None = None, *,
           with_cache_location: bool = False) -> IdentifiersInputs:
        """Where the NER cache lives changes no output: ``toolkit run`` leaves ``cache_dir`` / ``ner_cache`` out of
        the key; ``toolkit audit``'s key has always held them (``with_cache_location``), kept so its keys stay."""
        keyed = settings if with_cache_location else \
            {k: v for k, v in settings.items() if k not in ("cache_dir", "ner_cache")}
        return cls(identifiers=keyed, documents=documents, canaries=canaries or ABSENT,
                   canary_exclusion="blanked" if canaries else ABSENT)


@dataclass(frozen=True)
class TrainInputs:
    """``strategy``; ``train``: its TrainConfig; ``base``: the base step's key (an external base: its name and
    fingerprint); ``members``: their fingerprint; ``identifiers``: the members' identifier step's key, only for the
    strategies that read positions or spans; ``public``: the fingerprint of the public documents the
    gradient-subspace strategies compute their basis from (the public reserve, else the public split), only for
    them (:meth:`of`)."""

    strategy: str
    train: Any
    base: str | dict[str, Any]
    members: Fingerprint
    identifiers: str = ABSENT
    public: Fingerprint = ABSENT

    @classmethod
    def of(cls, strategy, train, base, members: Fingerprint, identifiers: str,
           public: Fingerprint | None = None) -> TrainInputs:
        """The inputs of ``strategy``'s training: what it reads, nothing else — a strategy without DP never reads
        ``train.dp`` (the trainer's resume check ignores it too), so it is keyed at the default DPConfig, and a
        change of ε leaves a plain fine-tuning cached."""
        from toolkit.training import DPConfig

        reads = strategy.protect or strategy.text != "original"  # only these strategies read positions / spans
        return cls(strategy.name, train if strategy.dp else replace(train, dp=DPConfig()), base, members,
                   identifiers if reads else ABSENT, public if strategy.subspace and public is not None else ABSENT)


@dataclass(frozen=True, kw_only=True)
class ProbeSettings:
    """The §4 probe's settings: window, bootstrap resamples of the count attack's AUC, batch size, seed (the
    fill-mask pass assignment and the bootstrap); ``toolkit audit`` also keys the public corpus here."""

    max_length: int
    n_bootstrap: int
    batch_size: int
    seed: int
    base_vocabulary: Fingerprint | None = ABSENT

    def options(self) -> dict[str, Any]:
        """The keyword arguments of :func:`toolkit.pipelines.steps.audit_checkpoint` they stand for: every caller
        passes the keyed settings, the seed included, the same way."""
        return {"max_length": self.max_length, "n_bootstrap": self.n_bootstrap, "batch_size": self.batch_size,
                "seed": self.seed}


@dataclass(frozen=True, kw_only=True)
class AuditInputs:
    """The §4 probe of one model (:func:`toolkit.pipelines.steps.audit_checkpoint`). ``model``: the train (or base)
    step's key (``toolkit audit``: the model's fingerprint); ``epoch`` (a checkpoint of a run); the identifier steps'
    keys; ``members`` / ``dtype`` / ``predictions`` (``toolkit audit``: its documents, the weights' type, keyed hashes
    instead of words); ``nonmembers``; ``audit``: :class:`ProbeSettings`; ``base_vocabulary`` (``toolkit run``: the
    public split's fingerprint, None without one); ``evidence``: what ``metrics.json`` holds for the verdict (the
    non-members' side of novel-identifier privacy, methods.md §11)."""

    model: Any
    epoch: int = ABSENT
    identifiers_members: str
    identifiers_all: str
    members: Fingerprint = ABSENT
    nonmembers: Fingerprint
    dtype: str | None = ABSENT
    predictions: dict[str, str] = ABSENT
    audit: ProbeSettings
    base_vocabulary: Fingerprint | None = ABSENT
    evidence: str = "novel-member-advantage"


@dataclass(frozen=True)
class RegurgitationInputs:
    """Free-running regurgitation of a causal model's last checkpoint (``epoch`` None: the base model)."""

    model: Any
    identifiers_members: str
    regurgitation: Any
    epoch: int | None
    #: the non-members prompted too (their fingerprint, the key of both groups' identifiers): the verdict's
    #: member-advantage test (methods.md §11)
    nonmembers: Fingerprint | None = ABSENT
    identifiers_all: str | None = ABSENT


@dataclass(frozen=True, kw_only=True)
class AttacksInputs:
    """The attack battery and the verdict of one model (:func:`toolkit.audit.model_audit.audit_model`): the model's
    and its reference's keys (or fingerprints), the audit step's key, the regurgitation steps' keys (``toolkit run``),
    the identifiers, the data, the canaries, ``attacks`` (AttacksSection), bootstrap, seed, RMIA's references."""

    model: Any
    epoch: int = ABSENT
    reference: Any
    audit: str | None
    regurgitation: str | None = ABSENT
    regurgitation_reference: str | None = ABSENT
    identifiers_members: str
    identifiers_all: str
    members: Fingerprint
    nonmembers: Fingerprint
    dtype: str | None = ABSENT
    predictions: dict[str, str] = ABSENT
    canaries: str | None = ABSENT
    attacks: Any
    n_bootstrap: int
    seed: int
    rmia_references: str | None = ABSENT
    #: the verdict's evidence (methods.md §11): PII inference on the non-members too, the reference model attacked
    #: on the same split; the public split's fingerprint (its identifiers are public); "strided-pii": a masked model's
    #: PII inference and canaries use a strided estimator too (``pii_pll_copies``, by default ``pll_copies``)
    evidence: str = "member-advantage+split-check+strided-pii"
    public: Fingerprint | None = ABSENT


@dataclass(frozen=True, kw_only=True)
class MissedInputs:
    """The gold identifiers the detector missed and what one model does with them
    (:func:`toolkit.pipelines.missed_steps.missed_model`, methods.md §2.1): the model's and its reference's keys (or
    fingerprints), the identifier steps' keys, the documents' fingerprints and their gold spans' (``gold``:
    :func:`toolkit.audit.missed.gold_fingerprint`), ``attacks`` (AttacksSection: PII inference's settings),
    ``regurgitation`` (RegurgitationSection or None), seed, the public split, the canaries, the weights' type."""

    model: Any
    epoch: int = ABSENT
    reference: Any
    identifiers_members: str
    identifiers_all: str
    members: Fingerprint
    nonmembers: Fingerprint
    gold: str
    attacks: Any
    regurgitation: Any
    seed: int
    public: Fingerprint | None = ABSENT
    canaries: str | None = ABSENT
    dtype: str | None = ABSENT


@dataclass(frozen=True, kw_only=True)
class RmiaReferencesInputs:
    """RMIA's reference models: how many, how the public split is cut (independent halves of all of it, capped at
    ``n_train`` individuals; RMIA's population is the audited non-members, not a held-back part of the public split),
    seed, their kind, their TrainConfig, the base step's key and the public split's fingerprint."""

    references: int
    split: str = "independent halves of the whole public split"
    n_train: int | None
    seed: int
    strategy: str
    train: Any
    base: Any
    public: Fingerprint | None


@dataclass(frozen=True)
class AnonymizeInputs:
    """Notebook 05's NER anonymisation: the corpus' fingerprint and the AnonymizeConfig."""

    corpus: Fingerprint
    config: Any


@dataclass(frozen=True, kw_only=True)
class ProbeInputs:
    """``toolkit probe``: the checkpoint as named (recorded in ``metrics.json``), its fingerprint, the identifier
    folder's ``run_key``, the probed documents, the base corpus (novel identifiers), window, batch size, seed."""

    checkpoint: str
    model: str
    identifiers: str
    documents: Fingerprint
    base_vocabulary: Fingerprint | None
    window: int
    batch_size: int
    seed: int


@dataclass(frozen=True, kw_only=True)
class MiaInputs:
    """``toolkit mia``: as :class:`ProbeInputs`, with the members and non-members and the bootstrap resamples."""

    checkpoint: str
    model: str
    identifiers: str
    members: Fingerprint
    nonmembers: Fingerprint
    window: int
    batch_size: int
    seed: int
    n_bootstrap: int


# --------------------------------------------------------------------------------------------------------------------
# the registry


@dataclass(frozen=True)
class Step:
    """One step kind. ``place``: ``RunLayout.<attribute>`` (its folder in a run directory) or the folder a caller
    names; ``name``: the step names it runs under (the key's kind is the name up to the first ``/``)."""

    kind: str
    inputs: type
    place: str
    check: str
    doc: str
    name: str = ""
    resumable: bool = False

    def accepts(self, name: str) -> bool:
        return name == self.kind or name.startswith((f"{self.kind}/", f"{self.kind}_"))

    def folder(self, layout: RunLayout, *parts) -> Path:
        """Its folder in ``layout`` (a step placed in the run layout)."""
        if not self.place.startswith("RunLayout."):
            raise ValueError(f"step {self.kind}: no place in the run layout ({self.place})")
        where = getattr(layout, self.place.removeprefix("RunLayout."))
        return where(*parts) if callable(where) else where


STEPS: dict[str, Step] = {s.kind: s for s in (
    Step("canaries", CanariesInputs, "RunLayout.canaries", "canaries.parquet",
         "the exposure canaries inserted into the members (training.canaries)"),
    Step("base", BaseInputs, "RunLayout.base", "config.json",
         "a tiny base model: pre-trained on the public split (toolkit run, notebook 04) or from scratch (notebook 05)"),
    Step("identifiers", IdentifiersInputs, "RunLayout.identifiers", "summary.json",
         "the identifier analysis of the members, or of members and non-members (methods.md §2)",
         name="identifiers_members, identifiers_all"),
    Step("train", TrainInputs, "RunLayout.train", "run.json", "fine-tuning with one strategy (methods.md §3)",
         name="train/<strategy>", resumable=True),
    Step("audit", AuditInputs, "RunLayout.audit", "metrics.json",
         "the §4 probe: privacy, utility and the count membership attack of one model (methods.md §4–5)",
         name="audit/<model part>"),
    Step("regurgitation", RegurgitationInputs, "RunLayout.regurgitation", "regurgitation.json",
         "free-running regurgitation of a causal model's last checkpoint", name="regurgitation/<strategy>"),
    Step("attacks", AttacksInputs, "RunLayout.attacks", files.DONE,
         "the attack battery, PII inference, memorisation, canaries and the verdict of one model (methods.md §10–11)",
         name="attacks/<model part>"),
    Step("missed", MissedInputs, "RunLayout.missed", "missed.json",
         "the gold identifiers the detector missed: PII inference and regurgitation on them, members against "
         "non-members (methods.md §2.1); planned only for a detector other than the gold spans",
         name="missed/<model part>"),
    Step("rmia_references", RmiaReferencesInputs, "RunLayout.rmia_references", "references.json",
         "RMIA's reference models, trained on independent halves of the public split", resumable=True),
    Step("anonymize", AnonymizeInputs, "notebook 05's work folder: anonymized/", "anonymized.jsonl",
         "the NER anonymisation of the corpus (methods.md §7)"),
    Step("probe", ProbeInputs, "the --out folder of `toolkit probe`", "metrics.json",
         "the CLI's fill-mask / next-word probe of one corpus (methods.md §4)"),
    Step("mia", MiaInputs, "the --out folder of `toolkit mia`", "roc.json",
         "the CLI's count membership attack (methods.md §5)"),
)}


def _resolve(step: Step | str, inputs: Any, name: str | None) -> tuple[Step, str, dict[str, Any]]:
    s = STEPS[step] if isinstance(step, str) else step
    if not isinstance(inputs, s.inputs):
        raise TypeError(f"step {s.kind} takes {s.inputs.__name__}, got {type(inputs).__name__}")
    name = name or s.kind
    if not s.accepts(name):
        raise ValueError(f"{name!r} is not a name of the step {s.kind}")
    return s, name, key_inputs(inputs)


def key(step: Step | str, inputs: Any, name: str | None = None) -> str:
    """The cache key of ``step`` (its kind or record) run as ``name`` (default: its kind) on ``inputs``."""
    _, name, d = _resolve(step, inputs, name)
    return step_key(name, d)


def current(step: Step | str, out_dir: str | Path, inputs: Any, name: str | None = None) -> bool:
    """True when ``out_dir`` holds the finished step of this key (and its check file)."""
    s, name, d = _resolve(step, inputs, name)
    return is_current(out_dir, step_key(name, d), s.check)


def prebuilt_ready(step: Step | str, inputs: Any, prebuilt: str | Path | None, name: str | None = None) -> bool:
    """True when ``prebuilt`` holds a finished output of this step and key (:func:`run_step` then copies it)."""
    s, name, d = _resolve(step, inputs, name)
    return prebuilt_copy(prebuilt, step_key(name, d), s.check) is not None


def run_step(cache: StepCache | None, step: Step | str, inputs: Any, compute: Callable[[], Any],
             load: Callable[[], Any] | None = None, *, out_dir: str | Path, name: str | None = None,
             **options) -> Any:
    """Run ``step`` under the cache rule and return its result (``compute()``'s, or ``load()``'s when current).

    ``cache``: a run's :class:`~toolkit.pipelines.cache.StepCache` (the step recorded in its manifest; ``options``:
    ``prebuilt``, ``all_processes``), or None: :func:`~toolkit.pipelines.cache.cached_step` in ``out_dir`` alone
    (``options``: ``prebuilt``).
    ``name``: the step's name in the run (``train/clm``, ``audit/base``; default its kind)."""
    s, name, d = _resolve(step, inputs, name)
    if cache is None:
        if set(options) - {"prebuilt"}:
            raise TypeError(f"{sorted(set(options) - {'prebuilt'})}: options of a run's StepCache, not of a single "
                            "step")
        return cached_step(name, out_dir, d, compute, load, check=s.check, resumable=s.resumable, **options)
    return cache.run(name, out_dir, d, compute, load, check=s.check, resumable=s.resumable, **options)


__all__ = ["ABSENT", "AnonymizeInputs", "AttacksInputs", "AuditInputs", "BaseInputs", "CanariesInputs",
           "ExternalBase", "IdentifiersInputs", "MiaInputs", "MissedInputs", "ProbeInputs", "ProbeSettings", "RegurgitationInputs",
           "RmiaReferencesInputs", "STEPS", "Step", "TrainInputs", "current", "identifier_settings", "key",
           "key_inputs", "prebuilt_ready", "run_step"]
