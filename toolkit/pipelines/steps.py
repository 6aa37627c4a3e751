"""Cached steps that the notebooks and the command line chain together (each writes its result to disk once).

A step whose output exists is loaded instead of recomputed, so re-running a notebook after a crash or with a new
strategy only does the missing work. Outputs are the same files the CLI writes (``metrics.json``, ``roc.json``,
``predictions.parquet``), so a notebook and ``python -m toolkit probe`` agree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.corpus import Corpus
from toolkit.io import atomic_write_json, atomic_write_parquet, make_private_dir


def ensure_base(corpus: Corpus, out_dir: str | Path, kind: str, *, profile, progress: bool = True) -> Path:
    """The profile's base model: a pre-trained id/path as is, or a tiny model built once from ``corpus``."""
    from toolkit.training import build_base

    spec = profile.base[kind]
    if isinstance(spec, str):
        return Path(spec) if Path(spec).exists() else spec  # a hub id stays a string
    out = Path(out_dir)
    if not (out / "config.json").is_file():
        build_base(corpus, out, kind, tiny=spec, config=profile.pretrain[kind], progress=progress)
    return out


def ensure_identifiers(corpus: Corpus, out_dir: str | Path, **config) -> dict[str, Any]:
    """Identifier analysis of ``corpus`` (cached in ``out_dir``), loaded as ``load_identifiers`` returns it."""
    from toolkit.identifiers import IdentifierConfig, analyze, load_identifiers

    out = Path(out_dir)
    if not (out / "summary.json").is_file():
        analyze(corpus, IdentifierConfig(**config), progress=False).save(out)
    return load_identifiers(out)


def audit_checkpoint(checkpoint: str | Path, members: Corpus, nonmembers: Corpus, ids_train: dict, ids_all: dict, *,
                     out_dir: str | Path, base_vocabulary: set[str] | None = None, max_length: int = 256,
                     n_bootstrap: int = 1000, progress: bool = False, **probe_kw) -> dict[str, Any]:
    """Probe a checkpoint on members and non-members once — fill-mask for a masked LM, teacher-forced next-word for a
    causal LM (chosen from the checkpoint's architecture) — then privacy metrics on members (SPEC §4) and the
    membership inference attack (SPEC §5). Cached as ``metrics.json``, ``roc.json``, ``predictions.parquet``."""
    from toolkit.audit import probe_causal, probe_masked
    from toolkit.audit.evaluate import evaluate_predictions, membership_report, membership_scores
    from toolkit.models import load_model, model_kind

    out = Path(out_dir)
    if (out / "metrics.json").is_file() and (out / "roc.json").is_file():
        return {"metrics": json.loads((out / "metrics.json").read_text()),
                "roc": json.loads((out / "roc.json").read_text()),
                "predictions": pd.read_parquet(out / "predictions.parquet")}
    member_ids, nonmember_ids = set(members.person_ids), set(nonmembers.person_ids)
    both = Corpus(list(members) + list(nonmembers))
    model, tokenizer = load_model(checkpoint)
    probe = probe_masked if model_kind(model) == "mlm" else probe_causal
    preds = probe(model, tokenizer, both, positions=ids_all["positions"], max_length=max_length,
                         progress=progress, **probe_kw)
    member_preds = preds[preds["person_id"].isin(member_ids)]
    report = evaluate_predictions(member_preds, ids_train, base_vocabulary=base_vocabulary)
    report["checkpoint"] = str(checkpoint)
    if preds.attrs.get("token_accuracy") is not None:
        report["token_accuracy"] = float(preds.attrs["token_accuracy"])
    scores = membership_scores(preds, ids_all, both)
    roc = membership_report(scores, member_ids, nonmember_ids, n_bootstrap=n_bootstrap)
    make_private_dir(out)  # predictions hold predicted identifiers: owner-only
    atomic_write_parquet(preds.assign(top_k=preds["top_k"].map(list)), out / "predictions.parquet")
    atomic_write_json(roc, out / "roc.json")
    atomic_write_json(report, out / "metrics.json")
    return {"metrics": report, "roc": roc, "predictions": preds}



def results_table(audits: dict[tuple[str, int], dict[str, Any]]) -> pd.DataFrame:
    """One row per (strategy, epoch) audit: utility, privacy variants, leaks and the attack's AUC / TPR@FPR."""
    rows = []
    for (name, epoch), a in audits.items():
        m, r = a["metrics"], a["roc"]
        rows.append({"strategy": name, "epoch": epoch, "utility": m["utility"],
                     "token_accuracy": m.get("token_accuracy"), "privacy": m["privacy"],
                     "novel_privacy": m.get("novel_privacy"), "direct_privacy": m["direct_privacy"],
                     "indirect_privacy": m["indirect_privacy"], "n_leaked": m["n_leaked"], "mia_auc": r["auc"],
                     "tpr@1%": r["tpr_at_fpr"]["0.01"], "tpr@10%": r["tpr_at_fpr"]["0.1"]})
    return pd.DataFrame(rows).dropna(axis=1, how="all")


def findings(results: pd.DataFrame) -> str:
    """Markdown bullets: each strategy's privacy, utility and MIA AUC from its first to its last checkpoint."""
    trained = results[results["strategy"] != "base"].sort_values("epoch")
    lines = []
    for name, g in trained.groupby("strategy", sort=False):
        a, b = g.iloc[0], g.iloc[-1]
        lines.append(f"- **{name}**: privacy {a['privacy']:.3f} at epoch {a['epoch']} → {b['privacy']:.3f} at epoch "
                     f"{b['epoch']} (indirect {b['indirect_privacy']:.3f}); utility {b['utility']:.3f}; "
                     f"MIA AUC {b['mia_auc']:.3f}")
    return "\n".join(lines)


def train_strategies(members: Corpus, base, run_root: str | Path, strategies: list[str], config, *, ids: dict,
                     dp_epochs: list[int] | None = None, progress: bool = True) -> dict[str, list[tuple[int, Path]]]:
    """Train every strategy into ``run_root/NAME`` (finished runs are not retrained); DP strategies use
    ``dp_epochs`` when given (DP-SGD costs several times more per epoch)."""
    from dataclasses import replace

    from toolkit.strategies import get_strategy
    from toolkit.training import train

    runs = {}
    for name in strategies:
        cfg = replace(config, epochs=list(dp_epochs)) if dp_epochs and get_strategy(name).dp else config
        runs[name] = train(members, base, Path(run_root) / name, name, cfg, positions=ids["positions"],
                           spans=ids["spans"], progress=progress)
    return runs


def runs_table(runs: dict[str, list[tuple[int, Path]]], run_root: str | Path) -> pd.DataFrame:
    """Checkpoints, training seconds, tokens/s and (DP) spent ε of each run, from its ``run.json``."""
    rows = {}
    for name, ckpts in runs.items():
        info = json.loads((Path(run_root) / name / "run.json").read_text())
        rows[name] = {"checkpoints": ", ".join(str(e) for e, _ in ckpts), "seconds": info.get("seconds"),
                      "tokens/s": info.get("tokens_per_second"),
                      "spent ε": (info.get("dp") or {}).get("spent_epsilon")}
    return pd.DataFrame(rows).T


def audit_runs(base, runs: dict[str, list[tuple[int, Path]]], members: Corpus, nonmembers: Corpus, ids_train: dict,
               ids_all: dict, *, out_dir: str | Path, **kw) -> dict[tuple[str, int], dict[str, Any]]:
    """:func:`audit_checkpoint` on the base model (epoch 0) and every checkpoint, cached under ``out_dir``."""
    out = Path(out_dir)
    audits = {("base", 0): audit_checkpoint(base, members, nonmembers, ids_train, ids_all, out_dir=out / "base", **kw)}
    for name, ckpts in runs.items():
        for epoch, path in ckpts:
            audits[(name, epoch)] = audit_checkpoint(path, members, nonmembers, ids_train, ids_all,
                                                     out_dir=out / name / f"epoch-{epoch}", **kw)
    return audits
