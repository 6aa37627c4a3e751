"""The attack steps of a training run (:func:`toolkit.pipelines.lm_experiment.run_experiment`, methods.md §10–11):
canaries inserted into the members' texts before identifiers and training, and the cached ``attacks/…`` step of the base
model and of the last checkpoint of every strategy.

Layout in the run directory::

    canaries/canaries.parquet            the inserted canaries (made-up names and numbers, where they went)
    attacks/base/                        the base model, audited without a reference
    attacks/<strategy>/epoch-<N>/        the last checkpoint, the base model as reference
        attacks.json roc.json scores.parquet identifiers.json verdict.json
                                         (written by :func:`toolkit.pipelines.steps.attack_model`)

An attack step's key covers the model, the reference, the §4 audit it takes the ``identifier_count`` scores and the
novel privacy from, the regurgitation step, the identifiers, the data, the canaries and ``audit.attacks``.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.errors import ToolkitError


def run_canaries(cfg, data: dict[str, Any], cache, run_dir: Path) -> tuple[pd.DataFrame | None, str | None]:
    """Insert ``training.canaries`` into ``data["members"]`` (replaced in place: every later step sees the texts
    with canaries) and save the canary table (a cached ``canaries`` step). Returns ``(table, step key)``, or
    ``(None, None)`` without canaries."""
    from toolkit.audit.attacks import canaries_into_corpus
    from toolkit.io import atomic_write_parquet
    from toolkit.training import corpus_fingerprint

    spec = cfg.training.canaries if cfg.training is not None else None
    if spec is None:
        return None, None
    members = data["members"]
    try:
        data["members"], table = canaries_into_corpus(members, spec.n, spec.repeats, seed=cfg.seed)
    except ValueError as exc:
        raise ToolkitError(f"{cfg.source or '<config>'}: training.canaries: {exc} (the members have "
                           f"{len(members)} documents)") from None
    inputs = {"canaries": asdict(spec), "seed": cfg.seed, "members": corpus_fingerprint(members)}
    d = run_dir / "canaries"

    def save() -> pd.DataFrame:
        atomic_write_parquet(table, d / "canaries.parquet")
        return table

    cache.run("canaries", d, inputs, save, lambda: table, check="canaries.parquet")
    return table, cache.key("canaries", inputs)


def run_attacks(cfg, cache, run_dir: Path, *, data: dict[str, Any], tables: dict[str, dict], audits: dict,
                regurgitation: dict, checkpoints: dict, train_keys: dict, base, base_key, canaries, canary_key,
                identifier_keys: dict[str, str], fingerprints: dict, progress: bool = True) -> dict:
    """The ``attacks/…`` steps (see the module docstring); ``(name, epoch) → load_attacks(...)`` result."""
    from toolkit.audit.evaluate import membership_scores
    from toolkit.corpus import Corpus
    from toolkit.pipelines import steps
    from toolkit.pipelines.cache import read_step

    opts = cfg.audit.attacks
    if not opts.enabled:
        return {}
    both = Corpus(list(data["members"]) + list(data["nonmembers"]))
    targets = [("base", 0, base, base_key, None)] if cfg.audit.base_model else []
    targets += [(n, c[-1][0], c[-1][1], train_keys[n], base) for n, c in checkpoints.items() if c]
    out = {}
    for name, epoch, path, key, ref in targets:
        sub = "base" if name == "base" else f"{name}/epoch-{epoch}"
        d = run_dir / "attacks" / sub
        audit = audits[(name, epoch)]
        reg = regurgitation.get(name)
        inputs = {"model": key, "epoch": epoch, "reference": base_key if ref is not None else None,
                  "audit": (read_step(run_dir / "audit" / sub) or {}).get("key"),
                  "regurgitation": (read_step(run_dir / "regurgitation" / name) or {}).get("key") if reg else None,
                  "identifiers_members": identifier_keys["members"], "identifiers_all": identifier_keys["all"],
                  "members": fingerprints["members"], "nonmembers": fingerprints["nonmembers"],
                  "canaries": canary_key, "attacks": asdict(opts), "n_bootstrap": cfg.audit.n_bootstrap,
                  "seed": cfg.seed}

        def attack(path=path, ref=ref, d=d, audit=audit, reg=reg):
            counts = membership_scores(audit["mia_predictions"], tables["all"], both)
            return steps.attack_model(path, data["members"], data["nonmembers"], tables["members"], out_dir=d,
                                      reference=ref, identifier_count=counts.to_dict(), canaries=canaries,
                                      novel_privacy=audit["metrics"].get("novel_privacy"),
                                      regurgitation=(reg or {}).get("share_reproduced"), options=opts,
                                      n_bootstrap=cfg.audit.n_bootstrap, seed=cfg.seed, progress=progress)

        out[(name, epoch)] = cache.run(f"attacks/{sub}", d, inputs, attack, lambda d=d: steps.load_attacks(d),
                                       check="verdict.json")
    return out


__all__ = ["run_attacks", "run_canaries"]
