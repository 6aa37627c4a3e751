"""Read the files of the attack battery and the verdict (``toolkit.audit.attacks``, ``toolkit.audit.verdict``).

Two layouts hold them, each model in its own folder with ``attacks.json``, ``roc.json``, ``scores.parquet``,
``identifiers.json`` and ``verdict.json`` (every file optional, a folder counts when it has ``attacks.json`` or
``verdict.json``):

* a run directory (``python -m toolkit run``, notebooks 00/02/03): ``attacks/base/`` and
  ``attacks/<strategy>/epoch-<N>/``; the models are labelled ``"base (epoch 0)"`` and ``"<strategy> (epoch <N>)"``
  as in the report's other figures;
* an audit directory (``python -m toolkit audit``): ``<model label>/`` folders and ``verdicts.json``
  (``{label: verdict}``, used where a folder has no ``verdict.json``).

Runs made before the battery existed have neither: they are reported without it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from toolkit.errors import ToolkitError

FILES = {"attacks": "attacks.json", "roc": "roc.json", "identifiers": "identifiers.json", "verdict": "verdict.json"}
SKIP = {"trainer", "__pycache__", "attacks", "audit", "runs", "regurgitation"}


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ToolkitError(f"{path}: cannot read JSON ({exc})") from None


def read_attack_dir(d: Path) -> dict[str, Any] | None:
    """``{"dir", "attacks", "roc", "identifiers", "verdict", "scores"}`` of one model's folder (None for a missing
    file; ``scores`` is the path of ``scores.parquet``, read on demand); None when the folder holds neither
    ``attacks.json`` nor ``verdict.json``."""
    entry: dict[str, Any] = {"dir": d}
    for key, name in FILES.items():
        entry[key] = read_json(d / name) if (d / name).is_file() else None
    if entry["attacks"] is None and entry["verdict"] is None:
        return None
    entry["scores"] = d / "scores.parquet" if (d / "scores.parquet").is_file() else None
    return entry


def collect_attacks(root: Path, current: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """Every model with attack files below ``root``: ``label → entry`` (:func:`read_attack_dir` plus ``label``,
    ``strategy`` and ``epoch``; ``epoch`` is None in an audit directory, where ``strategy`` is the label).

    ``current``: the outputs the run's manifest lists; when it lists attack folders, only those count (a changed
    config can leave the folder of a dropped checkpoint behind).
    """
    out: dict[str, dict[str, Any]] = {}
    att = root / "attacks"
    if att.is_dir():
        listed = current is not None and any(c == "attacks" or c.startswith("attacks/") for c in current)

        def is_current(d: Path) -> bool:
            rel = d.relative_to(root).as_posix()
            return not listed or any(rel == c or rel.startswith(c + "/") for c in current)

        dirs = [(att / "base", "base", 0)]
        for d in sorted(att.glob("*/epoch-*")):
            if d.is_dir() and d.name[6:].isdigit() and d.parent.name != "base":
                dirs.append((d, d.parent.name, int(d.name[6:])))
        for d, strategy, epoch in dirs:
            entry = read_attack_dir(d) if d.is_dir() and is_current(d) else None
            if entry is not None:
                label = f"{strategy} (epoch {epoch})"
                out[label] = {**entry, "label": label, "strategy": strategy, "epoch": epoch}
        return out
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        if d.name.startswith(".") or d.name in SKIP:
            continue
        entry = read_attack_dir(d)
        if entry is not None:
            out[d.name] = {**entry, "label": d.name, "strategy": d.name, "epoch": None}
    if (root / "verdicts.json").is_file() and out:
        for label, v in (read_json(root / "verdicts.json") or {}).items():
            if label in out and out[label]["verdict"] is None:
                out[label]["verdict"] = v
    return out


def order_models(models: dict[str, dict[str, Any]], strategies: Iterable[str] = (),
                 last_only: bool = True) -> dict[str, dict[str, Any]]:
    """The base model first, then the strategies in ``strategies`` order (others after, by name), checkpoints by
    epoch; with ``last_only`` only each strategy's last checkpoint. Models of an audit directory keep their order."""
    from toolkit.strategies import STRATEGIES

    order = list(dict.fromkeys([*strategies, *STRATEGIES]))
    rank = {s: i for i, s in enumerate(order)}
    with_epoch = [m for m in models.values() if m.get("epoch") is not None]
    if not with_epoch:
        return dict(models)
    items = sorted(with_epoch, key=lambda m: (m["strategy"] != "base", rank.get(m["strategy"], len(rank)),
                                              m["strategy"], m["epoch"]))
    if last_only:
        last = {m["strategy"]: m for m in items}
        items = [m for m in items if last[m["strategy"]] is m]
    return {m["label"]: m for m in items}


__all__ = ["FILES", "collect_attacks", "order_models", "read_attack_dir", "read_json"]
