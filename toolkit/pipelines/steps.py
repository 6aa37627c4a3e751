"""The steps of the masked/causal-LM audit experiment, each a plain function that computes its result, writes it
into its output directory and returns it. Whether a step runs at all is decided by the one cache rule of
:mod:`toolkit.pipelines.cache` (a step's key is a hash of its inputs), applied by
:func:`toolkit.pipelines.lm_experiment.run_experiment` — the single orchestration path of the CLI's ``run``, the
notebooks and the library. Outputs are the files the CLI writes (``metrics.json``, ``roc.json``,
``predictions.parquet``), so a notebook and ``python -m toolkit probe`` agree; :func:`load_audit` reads them back for
a cached step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.corpus import Corpus
from toolkit.io import atomic_write_json, atomic_write_parquet, make_private_dir


def base_model(public: Corpus | None, out_dir: str | Path, kind: str, *, spec, pretrain,
               progress: bool = True) -> Path | str:
    """The base model: a pre-trained id/path (``spec`` a string) as is, or a tiny model of architecture ``spec``
    built from ``public`` with the ``pretrain`` schedule into ``out_dir``."""
    from toolkit.training import build_base

    if isinstance(spec, str):
        return Path(spec) if Path(spec).exists() else spec  # a hub id stays a string
    build_base(public, out_dir, kind, tiny=spec, config=pretrain, progress=progress)
    return Path(out_dir)


def identifiers(corpus: Corpus, out_dir: str | Path, **config) -> dict[str, Any]:
    """Identifier analysis of ``corpus`` (docs/methods.md §2) written to ``out_dir``; returned as
    ``load_identifiers`` returns it (the same tables, dtypes included, whether computed now or cached)."""
    from toolkit.identifiers import IdentifierConfig, analyze, load_identifiers

    analyze(corpus, IdentifierConfig(**config), progress=False).save(out_dir)
    return load_identifiers(out_dir)


def audit_checkpoint(checkpoint: str | Path, members: Corpus, nonmembers: Corpus, ids_train: dict, ids_all: dict, *,
                     out_dir: str | Path, base_vocabulary: set[str] | None = None, max_length: int = 256,
                     n_bootstrap: int = 1000, progress: bool = False, **probe_kw) -> dict[str, Any]:
    """Probe a checkpoint on members and non-members once — fill-mask for a masked LM, teacher-forced next-word for a
    causal LM (chosen from the checkpoint's architecture) — then privacy metrics on members (docs/methods.md §4)
    and the count membership attack (§5). Written as ``metrics.json``, ``roc.json``, ``predictions.parquet``."""
    from toolkit.audit import probe_causal, probe_masked
    from toolkit.audit.evaluate import evaluate_predictions, membership_report, membership_scores
    from toolkit.models import load_model, model_kind

    out = Path(out_dir)
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


def load_audit(out_dir: str | Path) -> dict[str, Any]:
    """What :func:`audit_checkpoint` wrote into ``out_dir``."""
    out = Path(out_dir)
    return {"metrics": json.loads((out / "metrics.json").read_text(encoding="utf-8")),
            "roc": json.loads((out / "roc.json").read_text(encoding="utf-8")),
            "predictions": pd.read_parquet(out / "predictions.parquet")}


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


def runs_table(runs: dict[str, list[tuple[int, Path]]], run_root: str | Path) -> pd.DataFrame:
    """Checkpoints, training seconds, tokens/s and (DP) spent ε of each run, from its ``run.json``."""
    rows = {}
    for name, ckpts in runs.items():
        info = json.loads((Path(run_root) / name / "run.json").read_text())
        rows[name] = {"checkpoints": ", ".join(str(e) for e, _ in ckpts), "seconds": info.get("seconds"),
                      "tokens/s": info.get("tokens_per_second"),
                      "spent ε": (info.get("dp") or {}).get("spent_epsilon")}
    return pd.DataFrame(rows).T


__all__ = ["audit_checkpoint", "base_model", "findings", "identifiers", "load_audit", "results_table",
           "runs_table"]
