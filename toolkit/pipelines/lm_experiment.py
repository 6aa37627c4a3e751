"""Experiment configs (YAML → typed dataclasses) and ``python -m toolkit run``: a whole experiment with cached steps.

An experiment is data: which corpus and splits, which detector and ``k``/``n`` (SPEC §2), which base model and
strategies (SPEC §3), which checkpoint epochs, which audits (SPEC §4–5). ``load_experiment(path)`` validates the
YAML and names the file and the key of every problem; :func:`run_experiment` chains the steps of
``toolkit.pipelines.steps``:

    data → base model → identifiers (members; members ∪ non-members) → training of every strategy
         → audit of the base model and of every checkpoint → free-running regurgitation (causal LM)

Each step is skipped when its output exists and was made from the same inputs: a SHA-256 of the step's config
section and of the keys of the steps it depends on (corpus fingerprints for the data) is stored next to the output
(``toolkit.pipelines.manifest.StepCache``). A changed parameter therefore re-runs exactly the steps that depend on it — a new
``k`` re-runs the identifier analysis, the training of the strategies that protect identifiers and the audits, not
the training of ``clm``. Every run writes ``manifest.json`` (versions, seeds, config, data fingerprints, per-step
status and timings, git commit).

Layout of a run directory (the same as the work directories of notebooks 02 and 03, so the report reads both)::

    RUN_DIR/
      manifest.json  config.yaml
      base_clm/                      tiny base built from the public split (CPU profile) + step.json
      identifiers_members/  identifiers_all/   summary.json, terms / individuals / positions / spans .parquet
      runs/NAME/epoch-N/             Hugging Face checkpoints (toolkit.training layout) + step.json
      audit/base/  audit/NAME/epoch-N/         metrics.json, roc.json, predictions.parquet + step.json
      regurgitation/NAME/regurgitation.json    (causal LM) free-running regurgitation of the last checkpoint
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from toolkit.errors import ToolkitError

log = logging.getLogger(__name__)

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"  # the example configs of the repository


# ---------------------------------------------------------------------------------------------------------------------
# config sections


@dataclass
class CorpusSection:
    """Which documents play which role. Paths are resolved against the config file's folder.

    ``public_split`` builds the tiny base model (CPU profile) and defines *novel* identifiers (SPEC §4); members are
    the first ``n_individuals`` individuals of ``member_split`` (fine-tuning data), non-members the first
    ``n_individuals`` of ``nonmember_split`` (membership inference, SPEC §5). ``n_public`` limits the individuals of
    the public split (None: all).
    """

    path: list[str]
    format: str = "auto"
    public_split: str | None = "public"
    member_split: str = "train"
    nonmember_split: str = "heldout"
    n_individuals: int | None = None
    n_public: int | None = None


@dataclass
class ModelSection:
    """The base model: ``kind`` (``mlm``/``clm``), ``base`` (a Hugging Face id or local directory; None: the
    profile's base — for the CPU profile a tiny model built from the public split), and for a tiny base the
    ``architecture`` (``toolkit.models.TinyModelConfig`` fields) and ``pretrain`` schedule (``TrainConfig`` fields)
    overriding the profile's."""

    kind: str
    base: str | None = None
    architecture: dict[str, Any] = field(default_factory=dict)
    pretrain: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrainingSection:
    """Strategies (SPEC §3) and the fine-tuning schedule: ``schedule`` holds ``TrainConfig`` fields (``epochs``,
    ``batch_size``, ``learning_rate`` …) overriding the profile's; DP strategies use ``dp_epochs`` when given."""

    strategies: list[str]
    schedule: dict[str, Any] = field(default_factory=dict)
    dp_epochs: list[int] | None = None


@dataclass
class RegurgitationSection:
    """Free-running regurgitation of a causal LM (greedy continuation of each member note's first tokens)."""

    prefix_tokens: int = 32
    max_new_tokens: int = 64


@dataclass
class AuditSection:
    """Probe and attack options (SPEC §4–5): which checkpoints to audit (``all`` or ``last``), whether to audit the
    base model (epoch 0), the probe window, bootstrap resamples of the ROC, and the causal-LM regurgitation test
    (None: skipped)."""

    checkpoints: str = "all"
    base_model: bool = True
    max_length: int = 256
    batch_size: int = 32
    n_bootstrap: int = 1000
    regurgitation: RegurgitationSection | None = None


@dataclass
class ExperimentConfig:
    """A whole experiment (see the module docstring). ``source`` is the YAML file it came from."""

    name: str
    corpus: CorpusSection
    model: ModelSection
    training: TrainingSection
    identifiers: Any  # toolkit.identifiers.IdentifierConfig
    audit: AuditSection = field(default_factory=AuditSection)
    profile: str = "cpu"
    seed: int = 0
    description: str = ""
    source: str | None = None

    def summary(self) -> dict[str, Any]:
        """The settings that define the experiment, one line each (for notebooks and logs)."""
        c, t, a = self.corpus, self.training, self.audit
        return {
            "corpus": ", ".join(Path(p).name for p in c.path),
            "members / non-members": f"split {c.member_split!r} / {c.nonmember_split!r}, "
                                     + (f"first {c.n_individuals} individuals each" if c.n_individuals else "all"),
            "base model": self.model.base or f"profile {self.profile!r} ({self.model.kind})"
                          + (f", built from split {c.public_split!r}" if c.public_split else ""),
            "identifiers": f"detector {self.identifiers.detector}, k = {self.identifiers.k}, n = {self.identifiers.n}",
            "strategies": ", ".join(t.strategies),
            "checkpoint epochs": ", ".join(map(str, t.schedule.get("epochs", []))) or f"profile {self.profile!r}",
            "audits": f"{a.checkpoints} checkpoints" + (" + base model" if a.base_model else "")
                      + f", {a.n_bootstrap} bootstrap resamples"
                      + (", free-running regurgitation" if a.regurgitation else ""),
            "seed": self.seed,
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the config (YAML keys), as written to ``config.yaml`` and the manifest."""
        d = asdict(self)
        d.pop("source")
        d["identifiers"]["spacy_labels"] = list(d["identifiers"]["spacy_labels"])
        return d


# ---------------------------------------------------------------------------------------------------------------------
# loading and validation


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that refuses a key given twice in one mapping (PyYAML keeps the last silently)."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {seen[key] + 1})", key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

_TOP_KEYS = {"name", "description", "profile", "seed", "corpus", "identifiers", "model", "training", "audit"}


class _Where:
    """Error messages that name the file and the key: ``configs/x.yaml: training.epochs: ...``."""

    def __init__(self, source: str):
        self.source = source

    def error(self, key: str, msg: str) -> ToolkitError:
        return ToolkitError(f"{self.source}: {key}: {msg}" if key else f"{self.source}: {msg}")

    def mapping(self, data: Any, key: str, allowed: set[str], required: set[str] = frozenset()) -> dict:
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise self.error(key, f"expected a mapping, got {type(data).__name__} {data!r}")
        unknown = sorted(set(map(str, data)) - allowed)
        if unknown:
            raise self.error(key, f"unknown key(s) {unknown}; allowed: {sorted(allowed)}")
        missing = sorted(required - set(data))
        if missing:
            raise self.error(key, f"missing required key(s) {missing}")
        return dict(data)

    def integer(self, value: Any, key: str, *, minimum: int | None = None, allow_none: bool = False) -> int | None:
        if value is None and allow_none:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or (minimum is not None and value < minimum):
            bound = f" >= {minimum}" if minimum is not None else ""
            raise self.error(key, f"must be an integer{bound}{' or null' if allow_none else ''}, got {value!r}")
        return value

    def epochs(self, value: Any, key: str) -> list[int]:
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if (not isinstance(value, list) or not value
                or any(isinstance(e, bool) or not isinstance(e, int) or e < 1 for e in value)):
            raise self.error(key, f"must be a non-empty list of positive integers (checkpoint epochs), got {value!r}")
        return sorted(set(value))


def _field_names(cls) -> set[str]:
    return {f.name for f in fields(cls)}


def _set_dotted(raw: dict, dotted: str, value: Any, where: _Where) -> None:
    node = raw
    parts = dotted.split(".")
    for i, part in enumerate(parts[:-1]):
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise where.error(".".join(parts[:i + 1]), f"is not a mapping; cannot set {dotted!r}")
        node = nxt
    node[parts[-1]] = value


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["training.schedule.epochs=[1,2]", "seed=3"]`` → ``{"training.schedule.epochs": [1, 2], "seed": 3}``
    (values are parsed as YAML), for ``python -m toolkit run --set``."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ToolkitError(f"--set expects KEY=VALUE (e.g. training.schedule.epochs=[2,4]), got {item!r}")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise ToolkitError(f"--set {key}: invalid YAML value {value!r} ({exc})") from None
    return out


def resolve_config_path(path: str | Path) -> Path:
    """A config path as given, or the name of an example config in ``configs/`` (``cpu_causal``)."""
    p = Path(path)
    if p.is_file():
        return p
    for cand in (CONFIG_DIR / p, CONFIG_DIR / f"{p}.yaml"):
        if cand.is_file():
            return cand
    available = sorted(q.stem for q in CONFIG_DIR.glob("*.yaml")) if CONFIG_DIR.is_dir() else []
    raise ToolkitError(f"experiment config {str(path)!r} not found; a YAML file path or one of {available}")


def load_experiment(path: str | Path, overrides: dict[str, Any] | None = None) -> ExperimentConfig:
    """Read and validate an experiment YAML; ``overrides`` maps dotted keys to values (``"training.strategies"``).

    Every problem is a :class:`ToolkitError` naming the file and the key: unknown keys, a missing corpus file, an
    unknown strategy or one of the other model kind, bad epochs, a bad identifier setting, a profile that does not
    exist.
    """
    p = resolve_config_path(path)
    try:
        raw = yaml.load(p.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 — a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ToolkitError(f"{p}: invalid YAML ({exc})") from None
    except UnicodeDecodeError as exc:
        raise ToolkitError(f"{p}: not UTF-8 text ({exc})") from None
    where = _Where(str(p))
    raw = where.mapping(raw, "", _TOP_KEYS, {"corpus", "model", "training"})
    raw = copy.deepcopy(raw)
    for key, value in (overrides or {}).items():
        _set_dotted(raw, key, value, _Where(f"{p} (override)"))
    return experiment_from_dict(raw, source=p)


def experiment_from_dict(raw: dict[str, Any], *, source: str | Path = "<config>") -> ExperimentConfig:
    """Build and validate an :class:`ExperimentConfig` from a plain dict (YAML keys); relative paths are resolved
    against ``source``'s folder."""
    from toolkit.config import load_profile
    from toolkit.identifiers import IdentifierConfig
    from toolkit.models import MODEL_KINDS, TinyModelConfig
    from toolkit.strategies import STRATEGIES
    from toolkit.training import TrainConfig

    where = _Where(str(source))
    base_dir = Path(source).parent if Path(str(source)).suffix else Path.cwd()
    raw = where.mapping(raw, "", _TOP_KEYS, {"corpus", "model", "training"})

    name = raw.get("name") or (Path(str(source)).stem if Path(str(source)).suffix else "experiment")
    if not isinstance(name, str) or not name.replace("-", "_").replace(".", "_").isidentifier():
        raise where.error("name", f"must be a short name of letters, digits, '-', '_' or '.', got {name!r}")
    seed = where.integer(raw.get("seed", 0), "seed", minimum=0)

    # profile
    profile_name = raw.get("profile", "cpu")
    if not isinstance(profile_name, str):
        raise where.error("profile", f"must be a profile name (cpu, paper) or a YAML path, got {profile_name!r}")
    prof_ref = profile_name
    if Path(profile_name).suffix and not Path(profile_name).is_absolute():
        prof_ref = str((base_dir / profile_name).resolve())
    try:
        profile = load_profile(prof_ref)
    except ToolkitError as exc:
        raise where.error("profile", str(exc)) from None

    # corpus
    c = where.mapping(raw["corpus"], "corpus", _field_names(CorpusSection), {"path"})
    paths = c["path"] if isinstance(c["path"], list) else [c["path"]]
    if not paths or not all(isinstance(x, str) and x for x in paths):
        raise where.error("corpus.path", f"must be a file/folder path or a list of them, got {c['path']!r}")
    resolved = []
    for x in paths:
        q = Path(x).expanduser()
        q = q if q.is_absolute() else (base_dir / q)
        if not q.exists():
            raise where.error("corpus.path", f"{q.resolve()} does not exist")
        resolved.append(str(q.resolve()))
    c["path"] = resolved
    for key in ("n_individuals", "n_public"):
        c[key] = where.integer(c.get(key), f"corpus.{key}", minimum=1, allow_none=True)
    for key in ("member_split", "nonmember_split"):
        if key in c and not isinstance(c[key], str):
            raise where.error(f"corpus.{key}", f"must be a split name, got {c[key]!r}")
    if c.get("public_split") is not None and not isinstance(c["public_split"], str):
        raise where.error("corpus.public_split", f"must be a split name or null, got {c['public_split']!r}")
    corpus = CorpusSection(**c)
    if corpus.member_split == corpus.nonmember_split:
        raise where.error("corpus.nonmember_split", "must differ from member_split (non-members are held out)")

    # identifiers
    i = where.mapping(raw.get("identifiers"), "identifiers", _field_names(IdentifierConfig))
    i.setdefault("detector", "oracle")
    try:
        identifiers = IdentifierConfig(**i)
    except (ToolkitError, TypeError, ValueError) as exc:
        raise where.error("identifiers", str(exc)) from None

    # model
    m = where.mapping(raw["model"], "model", _field_names(ModelSection), {"kind"})
    if m["kind"] not in MODEL_KINDS:
        raise where.error("model.kind", f"must be one of {list(MODEL_KINDS)}, got {m['kind']!r}")
    for sub, cls in (("architecture", TinyModelConfig), ("pretrain", TrainConfig)):
        m[sub] = where.mapping(m.get(sub), f"model.{sub}", _field_names(cls) - {"kind"})
    if "epochs" in m["pretrain"]:
        m["pretrain"]["epochs"] = where.epochs(m["pretrain"]["epochs"], "model.pretrain.epochs")
    if m.get("base") is not None:
        if not isinstance(m["base"], str) or not m["base"]:
            raise where.error("model.base", f"must be a Hugging Face model id or a local directory, got {m['base']!r}")
        local = base_dir / m["base"]
        if not Path(m["base"]).is_absolute() and local.exists():
            m["base"] = str(local.resolve())
    model = ModelSection(**m)
    base_spec = model.base if model.base is not None else profile.base.get(model.kind)
    if base_spec is None:
        raise where.error("model.base", f"profile {profile.name!r} defines no {model.kind} base; give one here")
    if not isinstance(base_spec, str):
        if corpus.public_split is None:
            raise where.error("corpus.public_split", f"profile {profile.name!r} builds a tiny {model.kind} base from "
                                                     "the public split; name the split or set model.base")
        try:
            TinyModelConfig(**{**asdict(base_spec), **model.architecture})
            if model.kind not in profile.pretrain:
                raise ToolkitError(f"profile {profile.name!r} has no pretrain.{model.kind} schedule")
            TrainConfig(**{**asdict(profile.pretrain[model.kind]), **model.pretrain})
        except (ToolkitError, TypeError, ValueError) as exc:
            raise where.error("model", str(exc)) from None
    elif model.architecture or model.pretrain:
        raise where.error("model.architecture", f"the base {base_spec!r} is a pre-trained model: architecture and "
                                                "pretrain apply only to a tiny base built from scratch")

    # training
    t = where.mapping(raw["training"], "training", {"strategies", "dp_epochs", *_field_names(TrainConfig)},
                      {"strategies"})
    strategies = t.pop("strategies")
    if isinstance(strategies, str):
        strategies = [strategies]
    if not isinstance(strategies, list) or not strategies:
        raise where.error("training.strategies", f"must be a non-empty list of strategy names, got {strategies!r}")
    for j, s in enumerate(strategies):
        if s not in STRATEGIES:
            raise where.error(f"training.strategies[{j}]", f"unknown strategy {s!r}; available: "
                                                           f"{', '.join(STRATEGIES)}")
        if STRATEGIES[s].kind != model.kind:
            raise where.error(f"training.strategies[{j}]", f"{s} trains a {STRATEGIES[s].kind} model but "
                                                           f"model.kind is {model.kind}")
    if len(set(strategies)) != len(strategies):
        raise where.error("training.strategies", f"a strategy is listed twice: {strategies}")
    dp_epochs = t.pop("dp_epochs", None)
    if dp_epochs is not None:
        dp_epochs = where.epochs(dp_epochs, "training.dp_epochs")
    if "epochs" in t:
        t["epochs"] = where.epochs(t["epochs"], "training.epochs")
    if "seed" in t:
        raise where.error("training.seed", "set the top-level `seed` (it seeds training, probes and base model)")
    if model.kind not in profile.finetune:
        raise where.error("profile", f"profile {profile.name!r} has no finetune.{model.kind} schedule")
    try:
        TrainConfig(**{**asdict(profile.finetune[model.kind]), **t})
    except (ToolkitError, TypeError, ValueError) as exc:
        raise where.error("training", str(exc)) from None
    training = TrainingSection(strategies=list(strategies), schedule=t, dp_epochs=dp_epochs)

    # audit
    a = where.mapping(raw.get("audit"), "audit", _field_names(AuditSection))
    if a.get("checkpoints", "all") not in ("all", "last"):
        raise where.error("audit.checkpoints", f"must be 'all' or 'last', got {a['checkpoints']!r}")
    if not isinstance(a.get("base_model", True), bool):
        raise where.error("audit.base_model", f"must be true or false, got {a['base_model']!r}")
    a["max_length"] = where.integer(a.get("max_length", 256), "audit.max_length", minimum=8)
    a["batch_size"] = where.integer(a.get("batch_size", 32), "audit.batch_size", minimum=1)
    a["n_bootstrap"] = where.integer(a.get("n_bootstrap", 1000), "audit.n_bootstrap", minimum=0)
    if a.get("regurgitation") is not None:
        r = where.mapping(a["regurgitation"], "audit.regurgitation", _field_names(RegurgitationSection))
        for key in r:
            r[key] = where.integer(r[key], f"audit.regurgitation.{key}", minimum=1)
        if model.kind != "clm":
            raise where.error("audit.regurgitation", "free-running regurgitation needs a causal LM (model.kind: clm)")
        a["regurgitation"] = RegurgitationSection(**r)
    audit = AuditSection(**a)

    description = raw.get("description", "")
    if not isinstance(description, str):
        raise where.error("description", "must be text")
    return ExperimentConfig(name=name, corpus=corpus, model=model, training=training, identifiers=identifiers,
                            audit=audit, profile=profile_name, seed=seed, description=description,
                            source=str(source))


# ---------------------------------------------------------------------------------------------------------------------
# resolved settings


def _profile(cfg: ExperimentConfig):
    from toolkit.config import load_profile

    ref = cfg.profile
    if Path(ref).suffix and not Path(ref).is_absolute() and cfg.source:
        ref = str((Path(cfg.source).parent / ref).resolve())
    return load_profile(ref)


def resolved_settings(cfg: ExperimentConfig) -> dict[str, Any]:
    """The profile merged with the config: ``base`` (id/path or TinyModelConfig), ``pretrain`` (TrainConfig or
    None), ``finetune`` (TrainConfig, seeded), ``dp_finetune`` (TrainConfig of DP strategies)."""
    from toolkit.models import TinyModelConfig
    from toolkit.training import TrainConfig

    prof = _profile(cfg)
    spec = cfg.model.base if cfg.model.base is not None else prof.base[cfg.model.kind]
    pretrain = None
    if not isinstance(spec, str):
        spec = TinyModelConfig(**{**asdict(spec), **cfg.model.architecture})
        pretrain = TrainConfig(**{**asdict(prof.pretrain[cfg.model.kind]), **cfg.model.pretrain, "seed": cfg.seed})
    finetune = TrainConfig(**{**asdict(prof.finetune[cfg.model.kind]), **cfg.training.schedule, "seed": cfg.seed})
    dp = replace(finetune, epochs=list(cfg.training.dp_epochs)) if cfg.training.dp_epochs else finetune
    return {"profile": prof.name, "base": spec, "pretrain": pretrain, "finetune": finetune, "dp_finetune": dp}


# ---------------------------------------------------------------------------------------------------------------------
# the run


@dataclass
class RunResult:
    """What :func:`run_experiment` returns: the run directory, its manifest and the loaded audits."""

    run_dir: Path
    manifest: dict[str, Any]
    audits: dict[tuple[str, int], dict[str, Any]]
    checkpoints: dict[str, list[tuple[int, Path]]]

    def steps(self, status: str | None = None) -> list[str]:
        """Names of the steps (with the given status: ``ran`` / ``cached``)."""
        return [s["name"] for s in self.manifest["steps"] if status is None or s["status"] == status]


def _select(corpus, split: str, n: int | None, what: str, where: str):
    from toolkit.errors import CorpusError

    try:
        part = corpus.filter(split=split)
    except CorpusError:
        raise ToolkitError(f"{where}: corpus.{what}: no document of split {split!r}; the corpus has splits "
                           f"{corpus.splits}") from None
    people = part.person_ids[:n] if n else part.person_ids
    return part.filter(person_ids=people)


def load_data(cfg: ExperimentConfig) -> dict[str, Any]:
    """Load the corpus and select ``public``, ``members``, ``nonmembers`` (a :class:`Corpus` each, public may be
    None) as the config says."""
    from toolkit.corpus import Corpus, load_corpus

    docs = []
    for p in cfg.corpus.path:
        docs.extend(load_corpus(p, format=cfg.corpus.format))
    corpus = Corpus(docs, source=cfg.corpus.path[0] if len(cfg.corpus.path) == 1 else ", ".join(cfg.corpus.path))
    src = cfg.source or "<config>"
    members = _select(corpus, cfg.corpus.member_split, cfg.corpus.n_individuals, "member_split", src)
    nonmembers = _select(corpus, cfg.corpus.nonmember_split, cfg.corpus.n_individuals, "nonmember_split", src)
    shared = set(members.person_ids) & set(nonmembers.person_ids)
    if shared:
        raise ToolkitError(f"{src}: {len(shared)} individuals are both members and non-members; splits must be "
                           "disjoint by individual")
    public = None
    if cfg.corpus.public_split is not None:
        public = _select(corpus, cfg.corpus.public_split, cfg.corpus.n_public, "public_split", src)
    return {"corpus": corpus, "public": public, "members": members, "nonmembers": nonmembers}


def _distributed_state():
    """accelerate's process state when launched with several processes (``accelerate launch``), else None."""
    import os

    if int(os.environ.get("WORLD_SIZE", "1") or 1) <= 1:
        return None
    import torch
    from accelerate import PartialState

    # without a GPU accelerate only sets up a process group (gloo) when told to run on the CPU
    return PartialState(cpu=not torch.cuda.is_available())


def run_experiment(cfg: ExperimentConfig, out_dir: str | Path, *, progress: bool = True,
                   echo: bool = True) -> RunResult:
    """Run ``cfg`` into ``out_dir`` (see the module docstring): every step skipped when up to date.

    Under ``accelerate launch`` (several processes) every process trains (the HF Trainer's data parallelism); the
    analysis runs on the main process first, the others then find it cached; audits and the manifest are written by
    the main process only.
    """
    from contextlib import nullcontext

    from toolkit.pipelines import steps as pipeline
    from toolkit.audit.evaluate import corpus_word_types, identifier_sets
    from toolkit.corpus import Corpus
    from toolkit.io import atomic_write_json, atomic_write_text, make_private_dir
    from toolkit.pipelines.manifest import (Manifest, StepCache, corpus_files_fingerprint, model_fingerprint)
    from toolkit.strategies import get_strategy
    from toolkit.training import checkpoint_dirs, corpus_fingerprint

    run_dir = make_private_dir(out_dir)
    state = _distributed_state()
    main = state is None or state.is_main_process
    first = state.main_process_first if state is not None else nullcontext
    settings = resolved_settings(cfg)
    manifest = Manifest(run_dir, cfg, settings, write=main)
    cache = StepCache(manifest, echo=echo and main, state=state)
    if main:
        atomic_write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False, allow_unicode=True), run_dir / "config.yaml")

    try:
        # data
        t0 = time.perf_counter()
        data = load_data(cfg)
        fp = {"corpus_files": corpus_files_fingerprint(cfg.corpus.path),
              "members": corpus_fingerprint(data["members"]), "nonmembers": corpus_fingerprint(data["nonmembers"])}
        if data["public"] is not None:
            fp["public"] = corpus_fingerprint(data["public"])
        manifest.set_datasets(fp)
        manifest.record("data", "ran", time.perf_counter() - t0, key=None, output=None)
        both = Corpus(list(data["members"]) + list(data["nonmembers"]))

        # base model
        kind = cfg.model.kind
        spec = settings["base"]
        if isinstance(spec, str):
            base = Path(spec) if Path(spec).exists() else spec
            base_key = {"base": str(spec), "fingerprint": model_fingerprint(base) if isinstance(base, Path) else None}
            manifest.record("base", "external", 0.0, key=StepCache.digest(base_key), output=str(spec))
        else:
            base_inputs = {"architecture": asdict(spec), "pretrain": asdict(settings["pretrain"]),
                           "public": fp["public"]}
            base_dir = run_dir / f"base_{kind}"
            if state is not None and not cache.is_current(base_dir, cache.key("base", base_inputs), "config.json"):
                # building a tiny base is itself a training run: do it once on one process (then it is cached)
                raise ToolkitError("the tiny base model must be built before `accelerate launch`: run `python -m "
                                   "toolkit run CONFIG` once on one process, or set model.base to a pre-trained model")
            prof = copy.copy(_profile(cfg))
            prof.base = {kind: spec}
            prof.pretrain = {kind: settings["pretrain"]}
            cache.run("base", base_dir, base_inputs,
                      lambda: pipeline.ensure_base(data["public"], base_dir, kind, profile=prof, progress=progress),
                      check="config.json")
            base, base_key = base_dir, cache.key("base", base_inputs)

        # identifiers (SPEC §2): of the members (what training protects, what privacy counts) and of members ∪
        # non-members (the attack's graph, SPEC §5)
        id_cfg = {**asdict(cfg.identifiers), "spacy_labels": list(cfg.identifiers.spacy_labels)}
        ids = {}
        for part, docs in (("members", data["members"]), ("all", both)):
            inputs = {"identifiers": id_cfg, "documents": corpus_fingerprint(docs)}
            d = run_dir / f"identifiers_{part}"
            with first():
                cache.run(f"identifiers_{part}", d, inputs,
                          lambda d=d, docs=docs: pipeline.ensure_identifiers(docs, d, **id_cfg), check="summary.json")
            ids[part] = cache.key(f"identifiers_{part}", inputs)
        from toolkit.identifiers import load_identifiers

        ids_train = load_identifiers(run_dir / "identifiers_members")
        ids_all = load_identifiers(run_dir / "identifiers_all")
        manifest.set_identifiers({"members": ids_train["summary"], "all": ids_all["summary"]})

        # training (SPEC §3)
        checkpoints: dict[str, list[tuple[int, Path]]] = {}
        train_keys: dict[str, str] = {}
        for name in cfg.training.strategies:
            strat = get_strategy(name)
            tcfg = settings["dp_finetune"] if strat.dp else settings["finetune"]
            inputs = {"strategy": name, "train": asdict(tcfg), "base": base_key, "members": fp["members"]}
            if strat.protect or strat.text != "original":
                inputs["identifiers"] = ids["members"]  # only these strategies read positions / spans
            d = run_dir / "runs" / name

            def train_one(d=d, strat=strat, tcfg=tcfg):
                from toolkit.training import train

                return train(data["members"], base, d, strat, tcfg, positions=ids_train["positions"],
                             spans=ids_train["spans"], progress=progress)

            # under `accelerate launch` every process trains (HF Trainer data parallelism); Opacus DP-SGD runs in the
            # main process only (its Poisson sampling and accountant are single-process here): the others go on to
            # the barrier after the loop
            if strat.dp and not main:
                continue
            cache.run(f"train/{name}", d, inputs, train_one, resumable=True, check="run.json",
                      all_processes=not strat.dp)
            checkpoints[name] = [(e, p) for e, p in checkpoint_dirs(d) if e in set(tcfg.epochs)]
            train_keys[name] = cache.key(f"train/{name}", inputs)

        if state is not None:
            state.wait_for_everyone()
        audits: dict[tuple[str, int], dict[str, Any]] = {}
        if main:
            # audits (SPEC §4–5)
            base_vocabulary = corpus_word_types(data["public"]) if data["public"] is not None else None
            audit_opts = {"max_length": cfg.audit.max_length, "n_bootstrap": cfg.audit.n_bootstrap,
                          "batch_size": cfg.audit.batch_size, "seed": cfg.seed}
            common = {"identifiers_members": ids["members"], "identifiers_all": ids["all"], "audit": audit_opts,
                      "base_vocabulary": fp.get("public"), "nonmembers": fp["nonmembers"]}
            probe_kw = {"batch_size": cfg.audit.batch_size}
            if kind == "mlm":
                probe_kw["seed"] = cfg.seed
            targets = []
            if cfg.audit.base_model:
                targets.append(("base", 0, base, {"model": base_key}))
            for name, ckpts in checkpoints.items():
                chosen = ckpts if cfg.audit.checkpoints == "all" else ckpts[-1:]
                targets += [(name, e, p, {"model": train_keys[name], "epoch": e}) for e, p in chosen]
            for name, epoch, path, model_key in targets:
                d = run_dir / "audit" / name if name == "base" else run_dir / "audit" / name / f"epoch-{epoch}"
                inputs = {**model_key, **common}
                cache.run(f"audit/{name}" + ("" if name == "base" else f"/epoch-{epoch}"), d, inputs,
                          lambda path=path, d=d: pipeline.audit_checkpoint(
                              path, data["members"], data["nonmembers"], ids_train, ids_all, out_dir=d,
                              base_vocabulary=base_vocabulary, max_length=cfg.audit.max_length,
                              n_bootstrap=cfg.audit.n_bootstrap, progress=progress, **probe_kw),
                          check="metrics.json")
                audits[(name, epoch)] = pipeline.audit_checkpoint(path, data["members"], data["nonmembers"],
                                                                  ids_train, ids_all, out_dir=d)

            # free-running regurgitation of the last checkpoints (causal LM)
            reg = cfg.audit.regurgitation
            if reg is not None:
                sets = identifier_sets(ids_train)
                vocab = sets["I_direct"] | sets["I_indirect"]
                models = ([("base", base, base_key)] if cfg.audit.base_model else []) + \
                         [(n, c[-1][1], train_keys[n]) for n, c in checkpoints.items() if c]
                for name, path, key in models:
                    d = run_dir / "regurgitation" / name
                    inputs = {"model": key, "identifiers_members": ids["members"], "regurgitation": asdict(reg),
                              "epoch": None if name == "base" else checkpoints[name][-1][0]}

                    def regurgitate(path=path, d=d, name=name):
                        from toolkit.audit import regurgitation_rate
                        from toolkit.models import load_model

                        model, tok = load_model(path, kind="clm")
                        r = regurgitation_rate(model, tok, data["members"], vocab, prefix_tokens=reg.prefix_tokens,
                                               max_new_tokens=reg.max_new_tokens, progress=progress)
                        r["strategy"] = name
                        r["epoch"] = inputs["epoch"]
                        atomic_write_json(r, d / "regurgitation.json")

                    cache.run(f"regurgitation/{name}", d, inputs, regurgitate, check="regurgitation.json")
        manifest.finish("done")
    except BaseException as exc:
        manifest.finish("failed", error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}")
        raise
    if state is not None:
        state.wait_for_everyone()
    return RunResult(run_dir=run_dir, manifest=manifest.data, audits=audits, checkpoints=checkpoints)


def run(config: str | Path | ExperimentConfig, out_dir: str | Path | None = None, *,
        overrides: dict[str, Any] | None = None, progress: bool = True, echo: bool = True) -> RunResult:
    """Library entry point of ``python -m toolkit run``: load (a path, an example name or a config) and run.
    ``out_dir`` defaults to ``runs/NAME``."""
    cfg = config if isinstance(config, ExperimentConfig) else load_experiment(config, overrides)
    if isinstance(config, ExperimentConfig) and overrides:
        raise ToolkitError("overrides apply to a config file; edit the ExperimentConfig directly")
    return run_experiment(cfg, out_dir or Path("runs") / cfg.name, progress=progress, echo=echo)


__all__ = ["AuditSection", "CorpusSection", "ExperimentConfig", "ModelSection", "RegurgitationSection", "RunResult",
           "TrainingSection", "experiment_from_dict", "load_data", "load_experiment", "parse_overrides",
           "resolve_config_path", "resolved_settings", "run", "run_experiment"]
