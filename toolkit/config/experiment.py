"""Experiment configs: YAML → typed dataclasses (``load_experiment``), validated with messages naming the file and the
key; ``resolved_settings`` merges a config with its profile. Running one is :mod:`toolkit.pipelines.lm_experiment`.

An experiment is data: which corpus and splits, which detector and ``k``/``n`` (docs/methods.md §2), which base model
and strategies (§3), which checkpoint epochs, which audits (§4–5).
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from toolkit.config.sections import (ATTACK_MINIMA, AttacksSection, AuditSection, CanariesSection, CorpusSection,
                                     ModelSection, RegurgitationSection, TrainingSection)
from toolkit.audit.pll import check_budget, check_pii_estimator
from toolkit.config.validation import UniqueKeyLoader, Where, field_names, set_dotted
from toolkit.errors import ToolkitError

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"  # the example configs of the repository


@dataclass
class ExperimentConfig:
    """A whole experiment (see the module docstring). ``source`` is the YAML file it came from. Exactly one of
    ``training`` (train strategies from ``model``, then audit) and ``models`` (audit these Hugging Face ids or
    directories, masked or causal, without training; ``model`` is then None)."""

    name: str
    corpus: CorpusSection
    model: ModelSection | None
    training: TrainingSection | None
    identifiers: Any  # toolkit.identifiers.IdentifierConfig
    audit: AuditSection = field(default_factory=AuditSection)
    profile: str = "cpu"
    seed: int = 0
    description: str = ""
    source: str | None = None
    models: list[str] | None = None

    def summary(self) -> dict[str, Any]:
        """The settings that define the experiment, one line each (for notebooks and logs)."""
        c, t, a = self.corpus, self.training, self.audit
        if t is None:
            return {"corpus": ", ".join(Path(p).name for p in c.path),
                    "members / non-members": f"split {c.member_split!r} / {c.nonmember_split!r}",
                    "identifiers": f"detector {self.identifiers.detector}, k = {self.identifiers.k}, "
                                   f"n = {self.identifiers.n}",
                    "audited models": ", ".join(self.models or []), "reference": a.reference or "from run.json",
                    "seed": self.seed}
        start = c.public_reserve_start
        reserve = ("" if not c.public_reserve
                   else f" ({c.n_public} individuals; the next {c.public_reserve} held back from it)" if start is None
                   else f" ({c.n_public} individuals; {c.public_reserve} held back from it: individuals {start + 1}–"
                        f"{start + c.public_reserve} of the split)")
        return {
            "corpus": ", ".join(Path(p).name for p in c.path),
            "members / non-members": f"split {c.member_split!r} / {c.nonmember_split!r}, "
                                     + (f"first {c.n_individuals} individuals each" if c.n_individuals else "all"),
            "base model": self.model.base or f"profile {self.profile!r} ({self.model.kind})"
                          + (f", built from split {c.public_split!r}" if c.public_split else "")
                          + reserve,
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


_TOP_KEYS = {"name", "description", "profile", "seed", "corpus", "identifiers", "model", "training", "audit", "models"}


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
        raw = yaml.load(p.read_text(encoding="utf-8"), Loader=UniqueKeyLoader)  # noqa: S506 — a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ToolkitError(f"{p}: invalid YAML ({exc})") from None
    except UnicodeDecodeError as exc:
        raise ToolkitError(f"{p}: not UTF-8 text ({exc})") from None
    where = Where(str(p))
    raw = where.mapping(raw, "", _TOP_KEYS, {"corpus"})
    raw = copy.deepcopy(raw)
    for key, value in (overrides or {}).items():
        set_dotted(raw, key, value, Where(f"{p} (override)"))
    return experiment_from_dict(raw, source=p)


def experiment_from_dict(raw: dict[str, Any], *, source: str | Path = "<config>") -> ExperimentConfig:
    """Build and validate an :class:`ExperimentConfig` from a plain dict (YAML keys); relative paths are resolved
    against ``source``'s folder."""
    from toolkit.config import load_profile
    from toolkit.identifiers import IdentifierConfig

    where = Where(str(source))
    base_dir = Path(source).parent if Path(str(source)).suffix else Path.cwd()
    raw = where.mapping(raw, "", _TOP_KEYS, {"corpus"})
    if ("training" in raw) == ("models" in raw):
        raise where.error("", "give exactly one of `training` (train strategies, then audit them) and `models` "
                              "(audit these models, no training)")
    if "models" in raw and "model" in raw:
        raise where.error("model", "with `models:` each model's kind is read from its architecture; name the "
                                   "attacks' reference model in audit.reference")
    where.mapping(raw, "", _TOP_KEYS, {"corpus"} | ({"model"} if "training" in raw else set()))

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
    c = where.mapping(raw["corpus"], "corpus", field_names(CorpusSection), {"path"})
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
    for key in ("n_individuals", "n_public", "public_reserve"):
        c[key] = where.integer(c.get(key), f"corpus.{key}", minimum=1, allow_none=True)
    if c.get("public_reserve") is not None and (c.get("public_split", "public") is None or c.get("n_public") is None):
        raise where.error("corpus.public_reserve", "needs corpus.public_split and corpus.n_public (the reserve is the "
                                                   "public individuals after the first n_public)")
    c["public_reserve_start"] = where.integer(c.get("public_reserve_start"), "corpus.public_reserve_start", minimum=0,
                                              allow_none=True)
    if c["public_reserve_start"] is not None:
        if c.get("public_reserve") is None:
            raise where.error("corpus.public_reserve_start", "needs corpus.public_reserve (where that reserve starts)")
        if c["public_reserve_start"] < c["n_public"]:
            raise where.error("corpus.public_reserve_start",
                              f"{c['public_reserve_start']} is below corpus.n_public ({c['n_public']}): the reserve "
                              "would hold patients of the base's pre-training data")
    for key in ("member_split", "nonmember_split"):
        if key in c and not isinstance(c[key], str):
            raise where.error(f"corpus.{key}", f"must be a split name, got {c[key]!r}")
    if c.get("public_split") is not None and not isinstance(c["public_split"], str):
        raise where.error("corpus.public_split", f"must be a split name or null, got {c['public_split']!r}")
    corpus = CorpusSection(**c)
    if corpus.member_split == corpus.nonmember_split:
        raise where.error("corpus.nonmember_split", "must differ from member_split (non-members are held out)")

    # identifiers
    i = where.mapping(raw.get("identifiers"), "identifiers", field_names(IdentifierConfig))
    i.setdefault("detector", "oracle")
    try:
        identifiers = IdentifierConfig(**i)
    except (ToolkitError, TypeError, ValueError) as exc:
        raise where.error("identifiers", str(exc)) from None

    if "models" in raw:
        model, training, models = None, None, _models(raw["models"], where, base_dir)
    else:
        model = _model(raw["model"], where, profile, corpus, base_dir)
        training, models = _training(raw["training"], where, profile, model.kind), None
    audit = _audit(raw.get("audit"), where, model)
    at = audit.attacks
    if at.pll_positions is None and at.pll_copies is None:  # the profile's, so that the attack steps' keys name it
        at.pll_positions, at.pll_copies = profile.pll_positions, profile.pll_copies
        if at.pii_pll_copies is None and profile.pii_pll_copies is not None:
            at.pii_pll_copies = profile.pii_pll_copies
    at.pll_positions = "all" if at.pll_positions is None else at.pll_positions
    at.pll_copies = "all" if at.pll_copies is None else at.pll_copies
    at.pii_pll_copies = at.pll_copies if at.pii_pll_copies is None else at.pii_pll_copies
    if at.pll_positions != "all" and at.pll_copies != "all":
        raise where.error("audit.attacks", "pll_positions and pll_copies: give one estimator, the other 'all'")

    description = raw.get("description", "")
    if not isinstance(description, str):
        raise where.error("description", "must be text")
    return ExperimentConfig(name=name, corpus=corpus, model=model, training=training, identifiers=identifiers,
                            audit=audit, profile=profile_name, seed=seed, description=description,
                            source=str(source), models=models)


def _models(value: Any, where: Where, base_dir: Path) -> list[str]:
    """``models:``: Hugging Face ids or directories (relative ones resolved against the config's folder; a path that
    does not exist yet, e.g. a checkpoint of a run still to come, stays a path)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(x, str) and x for x in items):
        raise where.error("models", f"must be a non-empty list of Hugging Face ids or model directories, got {value!r}")
    out = []
    for x in items:
        local = Path(x).expanduser() if Path(x).expanduser().is_absolute() else base_dir / x
        path_like = x.startswith((".", "/", "~")) or x.count("/") > 1  # a hub id is NAME or ORG/NAME
        out.append(str(local.resolve()) if local.exists() or path_like else x)
    if len(set(out)) != len(out):
        raise where.error("models", "a model is listed twice")
    return out


def _model(raw: Any, where: Where, profile, corpus: CorpusSection, base_dir: Path) -> ModelSection:
    from toolkit.models import MODEL_KINDS, TinyModelConfig
    from toolkit.training import TrainConfig

    m = where.mapping(raw, "model", field_names(ModelSection), {"kind"})
    if m["kind"] not in MODEL_KINDS:
        raise where.error("model.kind", f"must be one of {list(MODEL_KINDS)}, got {m['kind']!r}")
    for sub, cls in (("architecture", TinyModelConfig), ("pretrain", TrainConfig)):
        m[sub] = where.mapping(m.get(sub), f"model.{sub}", field_names(cls) - {"kind"})
    if "epochs" in m["pretrain"]:
        m["pretrain"]["epochs"] = where.epochs(m["pretrain"]["epochs"], "model.pretrain.epochs")
    if m.get("base") is not None:
        if not isinstance(m["base"], str) or not m["base"]:
            raise where.error("model.base", f"must be a Hugging Face model id or a local directory, got {m['base']!r}")
        local = base_dir / m["base"]
        if not Path(m["base"]).is_absolute() and local.exists():
            m["base"] = str(local.resolve())
    if m.get("prebuilt") is not None:
        if not isinstance(m["prebuilt"], str) or not m["prebuilt"]:
            raise where.error("model.prebuilt", f"must be a folder, got {m['prebuilt']!r}")
        m["prebuilt"] = str((base_dir / m["prebuilt"]).resolve())  # may not exist yet: then nothing is pre-built
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
    return model


def _training(raw: Any, where: Where, profile, kind: str) -> TrainingSection:
    from toolkit.strategies import STRATEGIES
    from toolkit.training import TrainConfig

    t = where.mapping(raw, "training", {"strategies", "dp_epochs", "dp_schedule", "canaries", "strategy_schedules",
                                        *field_names(TrainConfig)}, {"strategies"})
    strategies = t.pop("strategies")
    if isinstance(strategies, str):
        strategies = [strategies]
    if not isinstance(strategies, list) or not strategies:
        raise where.error("training.strategies", f"must be a non-empty list of strategy names, got {strategies!r}")
    for j, s in enumerate(strategies):
        if s not in STRATEGIES:
            raise where.error(f"training.strategies[{j}]", f"unknown strategy {s!r}; available: "
                                                           f"{', '.join(STRATEGIES)}")
        if STRATEGIES[s].kind != kind:
            raise where.error(f"training.strategies[{j}]", f"{s} trains a {STRATEGIES[s].kind} model but "
                                                           f"model.kind is {kind}")
    if len(set(strategies)) != len(strategies):
        raise where.error("training.strategies", f"a strategy is listed twice: {strategies}")
    dp_epochs = t.pop("dp_epochs", None)
    if dp_epochs is not None:
        dp_epochs = where.epochs(dp_epochs, "training.dp_epochs")
    dp_schedule = where.mapping(t.pop("dp_schedule", None) or {}, "training.dp_schedule",
                                field_names(TrainConfig) - {"seed"})
    if "dp" in dp_schedule:  # DP-SGD settings of the DP strategies only (e.g. max_grad_norm), over training.dp
        from toolkit.training import DPConfig

        dp_schedule["dp"] = where.mapping(dp_schedule["dp"], "training.dp_schedule.dp", field_names(DPConfig))
    if "epochs" in dp_schedule:
        if dp_epochs is not None:
            raise where.error("training.dp_schedule.epochs", "give the DP strategies' epochs once: training.dp_epochs "
                                                             "or training.dp_schedule.epochs")
        dp_epochs = where.epochs(dp_schedule.pop("epochs"), "training.dp_schedule.epochs")
    own = where.mapping(t.pop("strategy_schedules", None) or {}, "training.strategy_schedules", set(strategies))
    for name in own:
        if not STRATEGIES[name].dp:
            raise where.error(f"training.strategy_schedules.{name}", "only a DP strategy has a schedule of its own")
        own[name] = where.mapping(own[name], f"training.strategy_schedules.{name}", {"learning_rate", "batch_size",
                                                                                    "epochs", "dp"})
        if "epochs" in own[name]:  # the strategy's own checkpoint epochs (a search's choice), over dp_epochs
            own[name]["epochs"] = where.epochs(own[name]["epochs"], f"training.strategy_schedules.{name}.epochs")
        if "dp" in own[name]:
            own[name]["dp"] = where.mapping(own[name]["dp"], f"training.strategy_schedules.{name}.dp",
                                            {"max_grad_norm"})
    canaries = t.pop("canaries", None)
    if canaries is not None:
        c = where.mapping(canaries, "training.canaries", field_names(CanariesSection))
        c["n"] = where.integer(c.get("n", 20), "training.canaries.n", minimum=1)
        c["repeats"] = where.epochs(c.get("repeats", [1, 4, 16]), "training.canaries.repeats")
        canaries = CanariesSection(**c)
    if "epochs" in t:
        t["epochs"] = where.epochs(t["epochs"], "training.epochs")
    if "seed" in t:
        raise where.error("training.seed", "set the top-level `seed` (it seeds training, probes and base model)")
    if kind not in profile.finetune:
        raise where.error("profile", f"profile {profile.name!r} has no finetune.{kind} schedule")
    for section, extra in (("training", {}), ("training.dp_schedule", dp_schedule),
                           *((f"training.strategy_schedules.{n}", {**dp_schedule, **o, "dp": {
                               **dp_schedule.get("dp", {}), **o.get("dp", {})}}) for n, o in own.items())):
        try:
            merged = {**asdict(profile.finetune[kind]), **t}
            TrainConfig(**{**merged, **extra, "dp": {**(asdict(merged["dp"]) if not isinstance(merged.get("dp"), dict)
                                                          else merged["dp"]), **extra.get("dp", {})}})
        except (ToolkitError, TypeError, ValueError) as exc:
            raise where.error(section, str(exc)) from None
    return TrainingSection(strategies=list(strategies), schedule=t, dp_epochs=dp_epochs, dp_schedule=dp_schedule,
                           canaries=canaries, strategy_schedules=own)


def _audit(raw: Any, where: Where, model: ModelSection | None) -> AuditSection:
    a = where.mapping(raw, "audit", field_names(AuditSection))
    if a.get("checkpoints", "all") not in ("all", "last"):
        raise where.error("audit.checkpoints", f"must be 'all' or 'last', got {a['checkpoints']!r}")
    if not isinstance(a.get("base_model", True), bool):
        raise where.error("audit.base_model", f"must be true or false, got {a['base_model']!r}")
    a["max_length"] = where.integer(a.get("max_length", 256), "audit.max_length", minimum=8)
    a["batch_size"] = where.integer(a.get("batch_size", 32), "audit.batch_size", minimum=1)
    a["n_bootstrap"] = where.integer(a.get("n_bootstrap", 1000), "audit.n_bootstrap", minimum=0)
    if a.get("regurgitation") is not None:
        r = where.mapping(a["regurgitation"], "audit.regurgitation", field_names(RegurgitationSection))
        for key in r:
            r[key] = where.integer(r[key], f"audit.regurgitation.{key}", minimum=1)
        if model is None or model.kind != "clm":
            raise where.error("audit.regurgitation", "free-running regurgitation needs a causal LM trained by the "
                                                     "run (model.kind: clm)")
        a["regurgitation"] = RegurgitationSection(**r)
    at = where.mapping(a.get("attacks"), "audit.attacks", field_names(AttacksSection))
    if not isinstance(at.get("enabled", True), bool):
        raise where.error("audit.attacks.enabled", f"must be true or false, got {at['enabled']!r}")
    for key, low in ATTACK_MINIMA.items():
        if key in at:
            at[key] = where.integer(at[key], f"audit.attacks.{key}", minimum=low)
    at["batch_size"] = where.integer(at.get("batch_size"), "audit.attacks.batch_size", minimum=1, allow_none=True)
    for key in ("pll_positions", "pll_copies", "pii_pll_copies"):
        if at.get(key) is not None:  # None: the profile's (experiment_from_dict)
            (check_pii_estimator if key == "pii_pll_copies" else check_budget)(
                at[key], f"{where.source}: audit.attacks.{key}")
    a["attacks"] = AttacksSection(**at)
    if a.get("reference") is not None and (model is not None or not isinstance(a["reference"], str)):
        raise where.error("audit.reference", "a model id or directory, for `models:` configs only (a training run's "
                                             "reference is its base model)")
    return AuditSection(**a)


# ---------------------------------------------------------------------------------------------------------------------
# resolved settings


def experiment_profile(cfg: ExperimentConfig):
    from toolkit.config import load_profile

    ref = cfg.profile
    if Path(ref).suffix and not Path(ref).is_absolute() and cfg.source:
        ref = str((Path(cfg.source).parent / ref).resolve())
    return load_profile(ref)


def resolved_settings(cfg: ExperimentConfig) -> dict[str, Any]:
    """The profile merged with the config: ``base`` (id/path or TinyModelConfig), ``pretrain`` (TrainConfig or
    None), ``finetune`` (TrainConfig, seeded), ``dp_finetune`` (TrainConfig of DP strategies); for a ``models:``
    config those are None and ``models`` / ``reference`` say what is audited."""
    from toolkit.models import TinyModelConfig
    from toolkit.training import TrainConfig

    prof = experiment_profile(cfg)
    if cfg.models is not None:  # audit only: nothing to build or train
        return {"profile": prof.name, "base": None, "pretrain": None, "finetune": None, "dp_finetune": None,
                "models": list(cfg.models), "reference": cfg.audit.reference}
    spec = cfg.model.base if cfg.model.base is not None else prof.base[cfg.model.kind]
    pretrain = None
    if not isinstance(spec, str):
        spec = TinyModelConfig(**{**asdict(spec), **cfg.model.architecture})
        pretrain = TrainConfig(**{**asdict(prof.pretrain[cfg.model.kind]), **cfg.model.pretrain, "seed": cfg.seed})
    finetune = TrainConfig(**{**asdict(prof.finetune[cfg.model.kind]), **cfg.training.schedule, "seed": cfg.seed})
    over = dict(cfg.training.dp_schedule)
    dp = replace(finetune, **{k: v for k, v in over.items() if k != "dp"})
    if over.get("dp"):
        dp = replace(dp, dp=replace(dp.dp, **over["dp"]))
    dp = replace(dp, epochs=list(cfg.training.dp_epochs)) if cfg.training.dp_epochs else dp
    own = {name: replace(dp, **{k: v for k, v in o.items() if k != "dp"}, dp=replace(dp.dp, **o.get("dp", {})))
           for name, o in cfg.training.strategy_schedules.items()}  # a DP strategy's own values over dp_schedule
    return {"profile": prof.name, "base": spec, "pretrain": pretrain, "finetune": finetune, "dp_finetune": dp,
            "strategy_finetune": own}


__all__ = ["AttacksSection", "AuditSection", "CONFIG_DIR", "CanariesSection", "CorpusSection", "ExperimentConfig",
           "ModelSection", "RegurgitationSection", "TrainingSection", "experiment_from_dict", "experiment_profile",
           "load_experiment", "parse_overrides", "resolve_config_path", "resolved_settings"]
