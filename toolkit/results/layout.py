"""The one layout of a run directory: every path that ``toolkit run``, ``toolkit audit`` and the notebooks write and
that the report and notebook 06 read, named once (:class:`RunLayout`).

One layout whatever the entry point: a model of a ``toolkit audit`` folder (or of a ``models:`` run) is stored as a
strategy without epochs, under its label::

    RUN_DIR/
      config.yaml  manifest.json  .lock  .hash_key
      base_<kind>/                          the tiny base model built from the public split
      canaries/canaries.parquet             the canaries inserted into the members
      rmia_references/                      RMIA's reference models
      identifiers_members/  identifiers_all/
      runs/<strategy>/epoch-<N>/            training runs (run.json) and their checkpoints
      audit/base/  audit/<strategy>/epoch-<N>/  audit/<label>/          the §4 probe (metrics.json, roc.json, …)
      regurgitation/<strategy>/regurgitation.json
      attacks/base/  attacks/<strategy>/epoch-<N>/  attacks/<label>/    the attacks and the verdict
      missed/base/  missed/<strategy>/epoch-<N>/  missed/<label>/       missed gold identifiers (missed.json)
      attacks.json  identifiers.json  verdicts.json  report.html        the summary of a ``toolkit audit`` folder

The model part of a path (:func:`model_part`) is ``base`` for the base model, ``<strategy>/epoch-<N>`` for a
checkpoint and ``<label>`` for an audited model (``epoch`` None); a step's name is its path below the run directory
for the ``identifiers_*``, ``audit/…``, ``regurgitation/…`` and ``attacks/…`` steps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.audit import files
from toolkit.errors import ToolkitError

BASE = "base"
#: the identifier analyses: of the members (what training protects) and of members ∪ non-members (the attacks')
IDENTIFIER_PARTS = ("members", "all")
#: files of one model's attack folder (every one optional; a folder counts when it has attacks.json or verdict.json)
ATTACK_FILES = files.ATTACK_JSON
#: top-level folders of the layout: no model label may take one of these names
RESERVED = frozenset({BASE, "audit", "attacks", "canaries", "identifiers_members", "identifiers_all", "runs",
                      "regurgitation", "rmia_references", "missed"})


def read_json(path: str | Path) -> Any:
    """The JSON document at ``path``; a damaged or unreadable file is a one-line :class:`ToolkitError` naming it."""
    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ToolkitError(f"{p}: cannot read JSON ({exc})") from None


def model_part(name: str, epoch: int | None = None) -> str:
    """``base``, ``<strategy>/epoch-<N>`` or, with ``epoch`` None (an audited model), ``<label>``."""
    return BASE if name == BASE else name if epoch is None else f"{name}/epoch-{epoch}"


def parse_epoch(folder: str) -> int | None:
    """``N`` of an ``epoch-N`` folder name, else None."""
    return int(folder[6:]) if folder.startswith("epoch-") and folder[6:].isdigit() else None


def epoch_text(epoch: int | None) -> str:
    """``epoch N``, or ``epochs unknown`` for an audited model (``epoch`` None: trained outside the run, e.g. with a
    plain Hugging Face ``Trainer``; what the run does not know is shown as unknown, never as 0)."""
    return "epochs unknown" if epoch is None else f"epoch {epoch}"


@dataclass(frozen=True)
class RunLayout:
    """The paths of the run directory ``root`` (see the module docstring). Writers and readers ask it, never join
    names themselves."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    # --- top-level files
    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def verdicts(self) -> Path:
        return self.root / "verdicts.json"

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    def summary(self, name: str) -> Path:
        """A top-level summary file of an audit folder: ``attacks``, ``identifiers`` or ``verdicts`` (``.json``)."""
        return self.root / f"{name}.json"

    # --- step folders (writers)
    def base(self, kind: str) -> Path:
        return self.root / f"base_{kind}"

    @property
    def canaries(self) -> Path:
        return self.root / "canaries"

    @property
    def canary_table(self) -> Path:
        return self.canaries / "canaries.parquet"

    @property
    def rmia_references(self) -> Path:
        """RMIA's reference models (``toolkit.pipelines.reference_models``)."""
        return self.root / "rmia_references"

    def identifiers(self, part: str) -> Path:
        if part not in IDENTIFIER_PARTS:
            raise ValueError(f"identifier part must be one of {IDENTIFIER_PARTS}, got {part!r}")
        return self.root / f"identifiers_{part}"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    def train(self, strategy: str) -> Path:
        return self.runs / strategy

    @property
    def audit_root(self) -> Path:
        return self.root / "audit"

    def audit(self, name: str, epoch: int | None = None) -> Path:
        return self.audit_root / model_part(name, epoch)

    @property
    def regurgitation_root(self) -> Path:
        return self.root / "regurgitation"

    def regurgitation(self, strategy: str) -> Path:
        return self.regurgitation_root / strategy

    def regurgitation_file(self, strategy: str) -> Path:
        return self.regurgitation(strategy) / "regurgitation.json"

    @property
    def attacks_root(self) -> Path:
        return self.root / "attacks"

    def attacks(self, name: str, epoch: int | None = None) -> Path:
        return self.attacks_root / model_part(name, epoch)

    @property
    def missed_root(self) -> Path:
        return self.root / "missed"

    def missed(self, name: str, epoch: int | None = None) -> Path:
        """The missed gold identifiers of one model (:mod:`toolkit.pipelines.missed_steps`)."""
        return self.missed_root / model_part(name, epoch)

    @staticmethod
    def step(kind: str, name: str, epoch: int | None = None) -> str:
        """The cache step name of an ``audit``, ``attacks``, ``missed`` or ``regurgitation`` step (its path below the
        root)."""
        return f"{kind}/{model_part(name, epoch) if kind != 'regurgitation' else name}"

    def relative(self, path: Path) -> str:
        return Path(path).relative_to(self.root).as_posix()

    # --- readers
    def audit_dirs(self) -> list[tuple[tuple[str, int | None], Path]]:
        """``((name, epoch), folder)`` of every folder of ``audit/`` holding ``metrics.json`` and ``roc.json``: the
        base model ``("base", 0)``, checkpoints ``(strategy, N)``, audited models ``(label, None)`` (epochs unknown,
        as in :meth:`attack_dirs`)."""
        found = []
        for m in sorted(self.audit_root.glob("**/metrics.json")) if self.audit_root.is_dir() else []:
            d = m.parent
            if not (d / "roc.json").is_file():
                continue
            rel = d.relative_to(self.audit_root).parts
            if len(rel) == 1:
                found.append(((rel[0], 0 if rel[0] == BASE else None), d))
            elif len(rel) == 2 and parse_epoch(rel[1]) is not None:
                found.append(((rel[0], parse_epoch(rel[1])), d))
        return found

    def attack_dirs(self) -> list[tuple[str, int | None, Path]]:
        """``(name, epoch, folder)`` of every model folder of ``attacks/``: ``("base", 0)``, a checkpoint
        ``(strategy, N)``, an audited model ``(label, None)``; base first, then by name and epoch."""
        root = self.attacks_root
        if not root.is_dir():
            return []
        out = [(BASE, 0, root / BASE)] if (root / BASE).is_dir() else []
        for d in sorted(p for p in root.iterdir() if p.is_dir() and p.name != BASE and not p.name.startswith(".")):
            epochs = sorted((parse_epoch(e.name), e) for e in d.glob("epoch-*")
                            if e.is_dir() and parse_epoch(e.name) is not None)
            if epochs:
                out += [(d.name, n, e) for n, e in epochs]
            elif any((d / f).is_file() for f in ATTACK_FILES.values()):
                out.append((d.name, None, d))
        return out

    def missed_files(self) -> list[tuple[str, int | None, Path]]:
        """``(name, epoch, missed.json)`` of every model folder of ``missed/``, as :meth:`attack_dirs` names them."""
        root = self.missed_root
        if not root.is_dir():
            return []
        out = []
        for f in sorted(root.glob("**/missed.json")):
            rel = f.parent.relative_to(root).parts
            if len(rel) == 1:
                out.append((rel[0], 0 if rel[0] == BASE else None, f))
            elif len(rel) == 2 and parse_epoch(rel[1]) is not None:
                out.append((rel[0], parse_epoch(rel[1]), f))
        return sorted(out, key=lambda x: (x[0] != BASE, x[0], x[1] or 0))

    def train_records(self) -> list[tuple[str, Path]]:
        """``(strategy, run.json)`` of every training run."""
        return [(rj.parent.name, rj) for rj in sorted(self.runs.glob("*/run.json"))] if self.runs.is_dir() else []

    def regurgitation_files(self) -> list[tuple[str, Path]]:
        """``(strategy, regurgitation.json)`` of every free-running regurgitation result."""
        root = self.regurgitation_root
        return [(f.parent.name, f) for f in sorted(root.glob("*/regurgitation.json"))] if root.is_dir() else []

    def step_info(self, d: Path) -> dict | None:
        """``step.json`` of the step folder ``d`` (None when absent, unreadable or not a step's)."""
        try:
            info = json.loads((Path(d) / "step.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return info if isinstance(info, dict) and isinstance(info.get("step"), str) else None

    def unfinished_models(self) -> list[str]:
        """Labels of the models an audit folder started on but holds no verdict for: an ``audit/<label>`` or
        ``attacks/<label>`` step folder without a finished ``attacks/<label>/verdict.json`` (interrupted, or stopped
        by an error). A run directory (``manifest.json``: its own record of what finished) has none."""
        if self.manifest.exists():
            return []
        labels = []
        for parent, prefix in ((self.audit_root, "audit/"), (self.attacks_root, "attacks/")):
            for d in sorted(parent.iterdir()) if parent.is_dir() else []:
                info = self.step_info(d) if d.is_dir() else None
                if info is not None and info["step"].startswith(prefix):
                    labels.append(info["step"][len(prefix):])
        out = []
        for label in dict.fromkeys(labels):
            d = self.attacks(label)
            info = self.step_info(d)
            if not (info and info.get("status") == "done" and (d / files.VERDICT).is_file()):
                out.append(label)
        return out


__all__ = ["ATTACK_FILES", "BASE", "IDENTIFIER_PARTS", "RESERVED", "RunLayout", "epoch_text", "model_part",
           "parse_epoch", "read_json"]
