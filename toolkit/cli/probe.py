"""The §4 probe of a checkpoint: ``probe`` (privacy and utility on its training documents, methods.md §4) and ``mia``
(the count attack: membership inference by the indirect identifiers the probe predicts, methods.md §5). The audit
of a model under every attack is ``toolkit audit`` (:mod:`toolkit.cli.audit`).

Both pick the probe from the checkpoint's architecture, as
:func:`toolkit.pipelines.steps.audit_checkpoint` does: fill-mask (:func:`toolkit.audit.probe_masked`) for a masked LM,
teacher-forced next-word (:func:`toolkit.audit.probe_causal`) for a causal LM. Each is a cached step of the step
registry (``probe``, ``mia``: :mod:`toolkit.pipelines.registry`) in its ``--out`` folder: called again with the same
checkpoint, documents, identifiers and settings it loads what it wrote instead of probing again.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from toolkit.cli.common import add_quiet, add_reading_options, csv_list, load_args_corpus, load_corpus_split

TITLE = "probe"


def probe_checkpoint(checkpoint, corpus, positions, *, window: int = 256, batch_size: int = 64, seed: int = 0,
                     progress: bool = True):
    """One row per probed word of ``corpus`` (the probes' common columns): fill-mask for a masked LM (``seed`` sets
    its pass assignment), teacher-forced next-word for a causal LM (deterministic; first occurrences of protected
    types only, its ``attrs["token_accuracy"]`` set)."""
    from toolkit.audit import probe_causal, probe_masked
    from toolkit.models import load_model, model_kind

    model, tokenizer = load_model(checkpoint)
    if model_kind(model) == "mlm":
        return probe_masked(model, tokenizer, corpus, positions=positions, max_length=window, seed=seed,
                            batch_size=batch_size, progress=progress)
    return probe_causal(model, tokenizer, corpus, positions=positions, max_length=window, batch_size=batch_size,
                        progress=progress)


def _probe(args: argparse.Namespace, corpus, ids):
    return probe_checkpoint(args.checkpoint, corpus, ids["positions"], window=args.window,
                            batch_size=args.batch_size, seed=args.seed, progress=not args.quiet)


def _settings(args: argparse.Namespace) -> dict:
    """What both commands' keys share: the checkpoint as named and its fingerprint, the identifier folder (the
    SHA-256 of its manifest, which lists the SHA-256 of each of its files), window, batch size, seed."""
    from toolkit.identifiers.storage import MANIFEST
    from toolkit.training.provenance import file_sha256, model_fingerprint

    model = Path(args.checkpoint)
    return {"checkpoint": str(args.checkpoint), "model": model_fingerprint(model) if model.is_dir() else str(model),
            "identifiers": file_sha256(Path(args.identifiers) / MANIFEST), "window": args.window,
            "batch_size": args.batch_size, "seed": args.seed}


def _cached(command: str, out, inputs, compute, load, written: tuple[str, ...]):
    """Run the registry's step ``command`` in ``out`` (the one cache rule: the same inputs load what an earlier call
    wrote). A folder holding files the command did not write is refused: a stale output folder is replaced whole."""
    from toolkit.errors import ToolkitError
    from toolkit.pipelines.registry import run_step

    out = Path(out)
    foreign = [p for p in out.iterdir() if p.name not in (*written, "step.json")] if out.is_dir() else \
        [out] if out.exists() else []
    if foreign:
        raise ToolkitError(f"{out}: holds {len(foreign)} files that `toolkit {command}` did not write; give a new "
                           "or empty --out folder")
    return run_step(None, command, inputs, compute, load, out_dir=out)  # under the command line's umask 077


def cmd_probe(args: argparse.Namespace) -> int:
    from toolkit.audit.evaluate import corpus_word_types, evaluate_predictions
    from toolkit.identifiers import load_identifiers
    from toolkit.io import atomic_write_json, atomic_write_parquet
    from toolkit.pipelines.registry import ProbeInputs
    from toolkit.results.layout import read_json
    from toolkit.training import corpus_fingerprint

    ids, out = load_identifiers(args.identifiers), Path(args.out)
    corpus = load_args_corpus(args)
    base = load_corpus_split(args.base_corpus, args.base_split) if args.base_corpus else None
    inputs = ProbeInputs(**_settings(args), documents=corpus_fingerprint(corpus),
                         base_vocabulary=corpus_fingerprint(base) if base is not None else None)

    def compute() -> dict:
        preds = _probe(args, corpus, ids)
        report = evaluate_predictions(preds, ids, base_vocabulary=corpus_word_types(base) if base is not None else None)
        report["checkpoint"] = str(args.checkpoint)
        if preds.attrs.get("token_accuracy") is not None:
            report["token_accuracy"] = float(preds.attrs["token_accuracy"])
        atomic_write_json(report, out / "metrics.json")
        atomic_write_parquet(preds.drop(columns=["top_k"]).assign(top_k=preds["top_k"].map(list)),
                             out / "predictions.parquet")
        return report

    report = _cached("probe", out, inputs, compute, lambda: read_json(out / "metrics.json"),
                     ("metrics.json", "predictions.parquet"))
    print(f"utility {report['utility']:.3f}  privacy {report['privacy']:.3f}  direct {report['direct_privacy']:.3f}  "
          f"indirect {report['indirect_privacy']:.3f}  leaked {report['n_leaked']}/{report['n_identifiers']}")
    return 0


def cmd_mia(args: argparse.Namespace) -> int:
    from toolkit.audit.evaluate import membership_report, membership_scores
    from toolkit.identifiers import load_identifiers
    from toolkit.io import atomic_write_json, atomic_write_parquet
    from toolkit.pipelines.registry import MiaInputs
    from toolkit.results.layout import read_json
    from toolkit.training import corpus_fingerprint

    ids, out = load_identifiers(args.identifiers), Path(args.out)
    corpus = load_args_corpus(args)
    member_docs, nonmember_docs = corpus.filter(split=csv_list(args.members)), \
        corpus.filter(split=csv_list(args.nonmembers))
    members, nonmembers = set(member_docs.person_ids), set(nonmember_docs.person_ids)
    corpus = corpus.filter(person_ids=members | nonmembers)
    inputs = MiaInputs(**_settings(args), members=corpus_fingerprint(member_docs),
                       nonmembers=corpus_fingerprint(nonmember_docs), n_bootstrap=args.bootstrap)

    def compute() -> dict:
        scores = membership_scores(_probe(args, corpus, ids), ids, corpus)
        report = membership_report(scores, members, nonmembers, n_bootstrap=args.bootstrap, seed=args.seed)
        report["checkpoint"] = str(args.checkpoint)
        atomic_write_json(report, out / "roc.json")
        frame = scores.rename("score").rename_axis("person_id").reset_index()
        frame["member"] = frame["person_id"].isin(members)
        atomic_write_parquet(frame, out / "scores.parquet")
        return report

    report = _cached("mia", out, inputs, compute, lambda: read_json(out / "roc.json"),
                     ("roc.json", "scores.parquet"))
    tprs = ", ".join(f"{k}: {'n/r' if v is None else f'{v:.3f}'}" for k, v in report["tpr_at_fpr"].items())
    print(f"AUC {report['auc']:.3f} [{report['auc_ci'][0]:.3f}, {report['auc_ci'][1]:.3f}]; TPR at FPR {tprs}")
    return 0


def _add_common(s: argparse.ArgumentParser, identifiers_help: str, out_help: str) -> None:
    s.add_argument("checkpoint", help="a checkpoint directory (RUN_DIR/epoch-N) or a base model, masked or causal")
    s.add_argument("--corpus", required=True, help="corpus file or folder holding the probed documents")
    add_reading_options(s, of="--corpus")
    s.add_argument("--identifiers", required=True, help=identifiers_help)
    s.add_argument("--out", required=True, help=out_help)
    s.add_argument("--window", type=int, default=256, help="probe window in tokens (default 256), as `toolkit audit`'s")
    s.add_argument("--max-length", dest="window", type=int, default=argparse.SUPPRESS, help=argparse.SUPPRESS)  # the flag's name before
    s.add_argument("--batch-size", type=int, default=64, help="sequences per forward pass (default 64)")
    s.add_argument("--seed", type=int, default=0,
                   help="seed of the fill-mask pass assignment (masked LMs) and of the bootstrap (mia) (default 0)")
    add_quiet(s)


def register(sub) -> None:
    s = sub.add_parser("probe", help="privacy and utility audit of a checkpoint on its training documents: fill-mask "
                                     "or next-word probe, from its architecture (methods.md §4)",
                       description="Probe every word of the training documents (fill-mask for a masked LM, "
                                   "teacher-forced next word for a causal LM) and write OUT/metrics.json (utility, "
                                   "privacy, leaks) and OUT/predictions.parquet (predicted words: personal data).")
    _add_common(s, "identifiers of the probed documents (output folder of `identifiers`)",
                "folder for metrics.json and predictions.parquet")
    s.add_argument("--split", default="train", help="splits of --corpus to probe (default train)")
    s.add_argument("--base-corpus", help="the base model's training corpus, for novel-identifier privacy (format "
                                         "detected, default fields: the reading options apply to --corpus)")
    s.add_argument("--base-split", default="public", help="splits of --base-corpus to use (default public)")
    s.set_defaults(func=cmd_probe)

    s = sub.add_parser("mia", help="membership inference by predicted indirect identifiers (methods.md §5)",
                       description="Probe members and non-members (fill-mask or next word, from the checkpoint's "
                                   "architecture), score each individual by its predicted indirect identifiers and "
                                   "write OUT/roc.json (AUC with bootstrap interval, TPR at low FPR) and "
                                   "OUT/scores.parquet.")
    _add_common(s, "identifiers of the probed documents (members and non-members)",
                "folder for roc.json and scores.parquet")
    # the documents are chosen by --members / --nonmembers; a hidden --split keeps older command lines working
    s.add_argument("--split", default=None, help=argparse.SUPPRESS)
    s.add_argument("--members", default="train", help="splits of the members: the training documents (default train)")
    s.add_argument("--nonmembers", default="heldout", help="splits of the non-members (default heldout)")
    s.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of the AUC interval (default 1000)")
    s.set_defaults(func=cmd_mia)
