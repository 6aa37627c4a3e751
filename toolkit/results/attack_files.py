"""Read the files of the attack battery and the verdict (``toolkit.audit.attacks``, ``toolkit.audit.verdict``).

Each model has its folder below ``attacks/`` (:class:`~toolkit.results.layout.RunLayout`) with ``attacks.json``,
``roc.json``, ``scores.parquet``, ``identifiers.json`` and ``verdict.json`` (every file optional, a folder counts
when it has ``attacks.json`` or ``verdict.json``): ``attacks/base/`` and ``attacks/<strategy>/epoch-<N>/`` of a run
(labelled ``"base (epoch 0)"`` and ``"<strategy> (epoch <N>)"`` as in the report's other figures), and
``attacks/<label>/`` of a ``python -m toolkit audit`` folder or a ``models:`` run, whose ``verdicts.json``
(``{label: verdict}``) stands in where a folder has no ``verdict.json``.

Runs made before the battery existed have none: they are reported without it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from toolkit.audit import files
from toolkit.results.layout import ATTACK_FILES, RunLayout, read_json


def read_attack_dir(d: Path) -> dict[str, Any] | None:
    """``{"dir", "attacks", "roc", "identifiers", "verdict", "scores"}`` of one model's folder (None for a missing
    file; ``scores`` is the path of ``scores.parquet``, read on demand); None when the folder holds neither
    ``attacks.json`` nor ``verdict.json``."""
    entry: dict[str, Any] = {"dir": d}
    for key, name in ATTACK_FILES.items():
        entry[key] = read_json(d / name) if (d / name).is_file() else None
    if entry["attacks"] is None and entry["verdict"] is None:
        return None
    entry["scores"] = d / files.SCORES if (d / files.SCORES).is_file() else None
    return entry


def collect_attacks(root: Path, current: set[str] | None = None) -> dict[str, dict[str, Any]]:
    """Every model with attack files below ``root``: ``label → entry`` (:func:`read_attack_dir` plus ``label``,
    ``strategy`` and ``epoch``; ``epoch`` is None for an audited model, whose ``strategy`` is its label).

    ``current``: the outputs the run's manifest lists; when it lists attack folders, only those count (a changed
    config can leave the folder of a dropped checkpoint behind).
    """
    layout = RunLayout(root)
    listed = current is not None and any(c == "attacks" or c.startswith("attacks/") for c in current)

    def is_current(d: Path) -> bool:
        rel = layout.relative(d)
        return not listed or any(rel == c or rel.startswith(c + "/") for c in current)

    out: dict[str, dict[str, Any]] = {}
    for strategy, epoch, d in layout.attack_dirs():
        entry = read_attack_dir(d) if is_current(d) else None
        if entry is not None:
            label = strategy if epoch is None else f"{strategy} (epoch {epoch})"
            out[label] = {**entry, "label": label, "strategy": strategy, "epoch": epoch}
    labelled = [k for k, m in out.items() if m["epoch"] is None]
    if labelled and layout.verdicts.is_file():
        for label, v in (read_json(layout.verdicts) or {}).items():
            if label in labelled and out[label]["verdict"] is None:
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


__all__ = ["collect_attacks", "order_models", "read_attack_dir"]
