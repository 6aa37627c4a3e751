"""Training: ``base`` (a tiny base model pre-trained from scratch) and ``train`` (fine-tuning with a strategy,
methods.md §3)."""

from __future__ import annotations

import argparse

from toolkit.cli.common import add_corpus_options, add_quiet, epochs, load_args_corpus
from toolkit.errors import ToolkitError

TITLE = "training"

PROFILE_HELP = "cpu | paper | path to a profile YAML (default cpu)"


def cmd_base(args: argparse.Namespace) -> int:
    from toolkit.config import load_profile
    from toolkit.training import build_base

    profile = load_profile(args.profile)
    tiny = profile.base.get(args.kind)
    if isinstance(tiny, str) or tiny is None:
        raise ToolkitError(f"profile {profile.name!r} uses a pre-trained {args.kind} base ({tiny}); nothing to build")
    cfg = profile.pretrain[args.kind]
    if args.epochs:
        cfg.epochs = epochs(args.epochs)
    corpus = load_args_corpus(args)
    out = build_base(corpus, args.out, args.kind, tiny=tiny, config=cfg, progress=not args.quiet)
    print(f"base {args.kind} model built from {len(corpus)} documents: {out}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from toolkit.config import load_profile
    from toolkit.identifiers import load_identifiers
    from toolkit.strategies import get_strategy
    from toolkit.training import train

    strat = get_strategy(args.strategy)
    cfg = load_profile(args.profile).finetune[strat.kind]
    if args.epochs:
        cfg.epochs = epochs(args.epochs)
    cfg.__post_init__()
    ids = load_identifiers(args.identifiers) if args.identifiers else {}
    ckpts = train(load_args_corpus(args), args.base, args.out, strat, cfg, positions=ids.get("positions"),
                  spans=ids.get("spans"), progress=not args.quiet)
    print(f"{strat.name}: {len(ckpts)} checkpoints under {args.out}: " + ", ".join(p.name for _, p in ckpts))
    return 0


def register(sub) -> None:
    s = sub.add_parser("base", help="build a tiny base model offline: tokenizer + pre-training from scratch",
                       description="Train a tokenizer on CORPUS and pre-train a tiny masked/causal LM from scratch "
                                   "(profile architecture), saved in Hugging Face format.")
    s.add_argument("--kind", choices=["mlm", "clm"], required=True, help="masked (mlm) or causal (clm) LM")
    add_corpus_options(s, split="public", split_help="splits to train on (default public)", skipped_beside=True)
    s.add_argument("--out", required=True, help="model directory to write (Hugging Face format)")
    s.add_argument("--profile", default="cpu", help=PROFILE_HELP + "; sets the architecture and pre-training")
    s.add_argument("--epochs", help="override the pre-training epochs, e.g. 15")
    add_quiet(s)
    s.set_defaults(func=cmd_base)

    s = sub.add_parser("train", help="fine-tune a base model with a strategy (methods.md §3)",
                       description="Fine-tune BASE (HF id or directory) on CORPUS with STRATEGY; checkpoints under "
                                   "OUT/epoch-N/; an interrupted run resumes from its last checkpoint.")
    s.add_argument("--strategy", required=True, help="mlm, mlm_pseudo, ppmlm, dppmlm, ippmlm, mlm_dp, clm, ...")
    add_corpus_options(s, split="train", split_help="splits to train on (default train; empty: all documents)")
    s.add_argument("--identifiers", help="output folder of `identifiers` on the same documents")
    s.add_argument("--base", required=True, help="base model: HF id or local directory")
    s.add_argument("--out", required=True, help="run directory: checkpoints in OUT/epoch-N/")
    s.add_argument("--profile", default="cpu", help=PROFILE_HELP + "; sets the fine-tuning schedule")
    s.add_argument("--epochs", help="checkpoint epochs, e.g. 2,4,8 (overrides the profile)")
    add_quiet(s)
    s.set_defaults(func=cmd_train)
