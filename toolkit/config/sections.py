"""The sections of an experiment config (``corpus``, ``model``, ``training``, ``audit`` …) as typed dataclasses;
reading and validating the YAML into them is :mod:`toolkit.config.experiment`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CorpusSection:
    """Which documents play which role. Paths are resolved against the config file's folder.

    ``public_split`` builds the tiny base model (CPU profile) and defines *novel* identifiers (methods.md §4); members
    are the first ``n_individuals`` individuals of ``member_split`` (fine-tuning data), non-members the first
    ``n_individuals`` of ``nonmember_split`` (membership inference, methods.md §5). ``n_public`` limits the individuals
    of the public split (None: all). ``public_reserve``: that many individuals of the public split *after* the first
    ``n_public``, held back from the base model (never in its pre-training data): the public patients a gradient-
    subspace strategy takes its anchors from and the DP hyper-parameter search trains and validates on (methods.md
    §3); None: those use the base's own public split. ``public_reserve_start``: where the reserve starts among the
    public split's individuals (None: right after the first ``n_public``); never below ``n_public``, so the reserve is
    never in the base's data. A base-strength frontier sets it to its largest base, so every base has the same reserve.
    """

    path: list[str]
    format: str = "auto"
    public_split: str | None = "public"
    member_split: str = "train"
    nonmember_split: str = "heldout"
    n_individuals: int | None = None
    n_public: int | None = None
    public_reserve: int | None = None
    public_reserve_start: int | None = None


@dataclass
class ModelSection:
    """The base model: ``kind`` (``mlm``/``clm``), ``base`` (a Hugging Face id or local directory; None: the
    profile's base — for the CPU profile a tiny model built from the public split), and for a tiny base the
    ``architecture`` (``toolkit.models.TinyModelConfig`` fields) and ``pretrain`` schedule (``TrainConfig`` fields)
    overriding the profile's. ``prebuilt``: a folder of tiny bases built before (``make prebuilt``), each in a
    sub-folder named by its step key; a base whose key is there is copied instead of pre-trained (the same inputs
    made it, so it is the same step's output)."""

    kind: str
    base: str | None = None
    architecture: dict[str, Any] = field(default_factory=dict)
    pretrain: dict[str, Any] = field(default_factory=dict)
    prebuilt: str | None = None


@dataclass
class CanariesSection:
    """Seeded synthetic records inserted into the members' texts before identifiers and training (Carlini et al.
    2019, :func:`toolkit.audit.attacks.canaries_into_corpus`): ``n`` canaries, canary ``i`` inserted
    ``repeats[i % len(repeats)]`` times. Their made-up names and numbers are not identifiers (not protected); their
    exposure measures memorisation."""

    n: int = 20
    repeats: list[int] = field(default_factory=lambda: [1, 4, 16])


@dataclass
class TrainingSection:
    """Strategies (methods.md §3) and the fine-tuning schedule: ``schedule`` holds ``TrainConfig`` fields (``epochs``,
    ``batch_size``, ``learning_rate`` …) overriding the profile's; DP strategies use ``dp_epochs`` when given, and
    ``dp_schedule`` (``TrainConfig`` fields, e.g. ``learning_rate``, ``batch_size``) over ``schedule`` — DP-SGD's
    noise calls for its own learning rate and batch size (docs/results.md, the frontier); ``canaries`` (None: none)
    are inserted into the members' texts."""

    strategies: list[str]
    schedule: dict[str, Any] = field(default_factory=dict)
    dp_epochs: list[int] | None = None
    dp_schedule: dict[str, Any] = field(default_factory=dict)
    canaries: CanariesSection | None = None
    #: per DP strategy, ``learning_rate``, ``batch_size``, ``epochs`` and ``dp.max_grad_norm`` over ``dp_schedule`` and
    #: ``dp_epochs`` (the frontier's public hyper-parameter search, :mod:`toolkit.pipelines.hp_search`, writes its
    #: choice here)
    strategy_schedules: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class RegurgitationSection:
    """Free-running regurgitation of a causal LM (greedy continuation of each member note's first tokens)."""

    prefix_tokens: int = 32
    max_new_tokens: int = 64


@dataclass
class AttacksSection:
    """The attack battery (methods.md §10–11) on the last checkpoint of every strategy and on the base model:
    ``enabled``; the membership attacks' audit ``window`` (tokens); PII inference's ``pii_candidates`` per occurrence,
    ``pii_occurrences`` attacked (a seeded sample) and ``pii_window`` tokens of context (memorisation's too);
    ``memorisation_occurrences`` measured; ``canary_references`` random secrets per canary (exposure); ``batch_size``
    (None: adapted to the model, halved on out-of-memory); ``pll_positions``, a masked model's membership scoring:
    ``all`` (exact pseudo-log-likelihood) or N positions per window (budgeted, :mod:`toolkit.audit.pll`), or
    ``pll_copies``: ``all`` or K masked copies per window, every position scored (strided); None in the YAML meaning
    the profile's (filled in when the config is loaded; at most one of the two may be other than ``all``);
    ``pii_pll_copies``: a masked model's PII inference and canaries, ``all``, K masked copies per window (their
    windows are short, ``pii_window``, so they have an estimator setting of their own) or ``candidate`` (each window
    scored over the candidate's own tokens, each masked alone: candidate-token PLL, :mod:`toolkit.audit.pll`); None:
    the profile's when the
    membership estimator is the profile's, else the same as ``pll_copies``;
    ``rmia_references``: reference models of the ``rmia`` attack, trained on the public split (0: no RMIA;
    :mod:`toolkit.pipelines.reference_models`; None: the profile's, :data:`RMIA_REFERENCES_BY_PROFILE`), ``rmia_offline_a`` its offline coefficient in [0, 1] (None: tuned as
    ML Privacy Meter does, :func:`toolkit.audit.attacks.rmia.tune_offline_a`); ``one_run_canaries``: m canaries of
    the one-run audit, each inserted into the members' notes with probability ½ before training
    (:mod:`toolkit.audit.attacks.one_run`; 0: no audit; None: the profile's default,
    :data:`ONE_RUN_CANARIES_BY_PROFILE`; they change the training text even with ``enabled: false``)."""

    enabled: bool = True
    window: int = 256
    pii_candidates: int = 50
    pii_occurrences: int = 100
    pii_window: int = 256
    memorisation_occurrences: int = 500
    canary_references: int = 10000
    batch_size: int | None = None
    pll_positions: int | str | None = None
    pll_copies: int | str | None = None
    pii_pll_copies: int | str | None = None
    rmia_references: int | None = None
    rmia_offline_a: float | None = None
    one_run_canaries: int | None = None


#: smallest allowed value of each integer option of ``audit.attacks``
ATTACK_MINIMA = {"window": 8, "pii_candidates": 2, "pii_occurrences": 1, "pii_window": 24,
                  "memorisation_occurrences": 1, "canary_references": 10, "rmia_references": 0,
                  "one_run_canaries": 0}

#: ``audit.attacks.one_run_canaries`` left out: two canaries per member individual (about one inserted each, a few
#: tokens beside a note's hundreds), at most this many, for a run of this profile; other profiles: no one-run audit
#: unless configured (their runs reproduce the papers' training text)
ONE_RUN_CANARIES_BY_PROFILE = {"cpu": 1000}

#: ``audit.attacks.rmia_references`` left out: reference models of RMIA per profile (others: 2). The CPU profile
#: trains one (each costs as much as one audited model's fine-tuning; the paper's offline RMIA works from one).
RMIA_REFERENCES_BY_PROFILE = {"cpu": 1}
DEFAULT_RMIA_REFERENCES = 2


@dataclass
class AuditSection:
    """Probe and attack options (methods.md §4–5): which checkpoints to audit (``all`` or ``last``), whether to audit
    the base model (epoch 0), the probe window, bootstrap resamples of the ROC, the causal-LM regurgitation test
    (None: skipped), the attack battery, and (``models:`` configs only) the ``reference`` model of the attacks
    (default: the base a checkpoint's ``run.json`` names)."""

    checkpoints: str = "all"
    base_model: bool = True
    max_length: int = 256
    batch_size: int = 32
    n_bootstrap: int = 1000
    regurgitation: RegurgitationSection | None = None
    attacks: AttacksSection = field(default_factory=AttacksSection)
    reference: str | None = None


__all__ = ["ATTACK_MINIMA", "DEFAULT_RMIA_REFERENCES", "ONE_RUN_CANARIES_BY_PROFILE", "RMIA_REFERENCES_BY_PROFILE",
           "AttacksSection", "AuditSection", "CanariesSection",
           "CorpusSection", "ModelSection", "RegurgitationSection", "TrainingSection"]
