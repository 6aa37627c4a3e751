"""Named profiles (``cpu``, ``paper``) are data: YAML files in ``toolkit/configs`` loaded into typed dataclasses.

``load_profile("cpu")`` or ``load_profile("path/to/my_profile.yaml")``; unknown keys and bad values are errors that
name the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from toolkit.audit.pll import ALL, check_budget, check_pii_estimator
from toolkit.errors import ToolkitError
from toolkit.config.email import EmailProfile
from toolkit.models import TinyModelConfig
from toolkit.training import TrainConfig

PROFILE_DIR = Path(__file__).resolve().parents[1] / "configs"


@dataclass
class Profile:
    name: str
    base: dict[str, TinyModelConfig | str]  # kind -> architecture to build from scratch, or a model id / path
    pretrain: dict[str, TrainConfig]
    finetune: dict[str, TrainConfig]
    email: "EmailProfile | None" = None  # e-mail extraction experiment (paper 002), ``toolkit.config.email``
    #: default ``audit.attacks.pll_positions``: ``"all"`` (exact masked PLL) or N positions per window (budgeted)
    pll_positions: int | str = "all"
    #: default ``audit.attacks.pll_copies``: ``"all"`` or K masked copies per window (strided, every position scored)
    pll_copies: int | str = "all"
    #: default ``audit.attacks.pii_pll_copies``: a masked model's PII inference and canaries (short windows), ``"all"``
    #: K masked copies per window or ``"candidate"`` (candidate-token PLL, :mod:`toolkit.audit.pll`); None: the same
    #: estimator as membership (``pll_copies``)
    pii_pll_copies: int | str | None = None


def check_keys(cls, data: Any, where: str) -> None:
    """``data`` is a mapping whose keys are fields of the dataclass ``cls``; else a ``ToolkitError`` naming ``where``."""
    if not isinstance(data, dict):
        raise ToolkitError(f"{where}: expected a mapping, got {type(data).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ToolkitError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(known)}")


def typed_section(cls, data: Any, where: str):
    """The dataclass ``cls`` built from the YAML mapping ``data``; every problem is a ``ToolkitError`` naming ``where``."""
    check_keys(cls, data, where)
    try:
        return cls(**data)
    except (TypeError, ValueError) as exc:
        raise ToolkitError(f"{where}: {exc}") from exc


def load_profile(name_or_path: str | Path) -> Profile:
    path = Path(name_or_path)
    if not path.suffix:
        path = PROFILE_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        available = sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))
        raise ToolkitError(f"profile {str(name_or_path)!r} not found; available: {available} or a YAML file path")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ToolkitError(f"{path}: invalid YAML ({exc})") from exc
    unknown = sorted(set(raw) - {"name", "base", "pretrain", "finetune", "email", "pll_positions",
                                 "pll_copies", "pii_pll_copies"})
    if unknown:
        raise ToolkitError(f"{path}: unknown key(s) {unknown}")
    base = {k: v if isinstance(v, str) else typed_section(TinyModelConfig, v, f"{path}: base.{k}")
            for k, v in (raw.get("base") or {}).items()}
    pretrain = {k: typed_section(TrainConfig, v, f"{path}: pretrain.{k}") for k, v in (raw.get("pretrain") or {}).items()}
    finetune = {k: typed_section(TrainConfig, v, f"{path}: finetune.{k}") for k, v in (raw.get("finetune") or {}).items()}
    email = EmailProfile.from_dict(raw["email"], f"{path}: email") if raw.get("email") is not None else None
    pll = check_budget(raw.get("pll_positions", ALL), f"{path}: pll_positions")
    copies = check_budget(raw.get("pll_copies", ALL), f"{path}: pll_copies")
    if pll is not None and copies is not None:
        raise ToolkitError(f"{path}: pll_positions and pll_copies: give one estimator, the other 'all'")
    pii = raw.get("pii_pll_copies")
    pii = None if pii is None else (check_pii_estimator(pii, f"{path}: pii_pll_copies") or ALL)
    return Profile(name=str(raw.get("name", path.stem)), base=base, pretrain=pretrain, finetune=finetune,
                   email=email, pll_positions=ALL if pll is None else pll, pll_copies=ALL if copies is None else copies,
                   pii_pll_copies=pii)
