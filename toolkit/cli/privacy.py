"""Privacy housekeeping: ``purge`` (delete what a run directory holds about people, keep its numbers)."""

from __future__ import annotations

import argparse
from collections import Counter

TITLE = "privacy"


def cmd_purge(args: argparse.Namespace) -> int:
    from toolkit.errors import ToolkitError
    from toolkit.pipelines.purge import purge_ner_cache, purge_run

    if args.run_dir is None and not args.ner_cache:
        raise ToolkitError("purge: give a RUN_DIR, --ner-cache, or both")
    if args.ner_cache:
        nc = purge_ner_cache(args.cache_dir, dry_run=args.dry_run)
        print(f"{nc.cache_dir}: {'would remove' if args.dry_run else 'removed'} the NER cache: {nc.n_files} files "
              f"({nc.bytes_removed / 1e6:.1f} MB, {nc.n_models} model/option sets)"
              + ("; nothing was deleted (--dry-run)" if args.dry_run else ""))
    if args.run_dir is None:
        return 0
    res = purge_run(args.run_dir, keep_report=args.keep_report, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    # counts by kind of file, not the files' names: a name in a run directory (a .txt corpus, a reviewer's file) can
    # be an identifier
    kinds = Counter(p.suffix or "(no suffix)" for p in res.removed)
    print(f"{args.run_dir}: {verb} {len(res.removed)} files ({res.bytes_removed / 1e6:.1f} MB"
          + ("".join(f", {n} {k}" for k, n in kinds.most_common())) + f"), kept {len(res.kept)} (counts, settings, "
          "fingerprints, keyed hashes" + (", report" if args.keep_report else "") + ")"
          + ("; nothing was deleted (--dry-run)" if args.dry_run else ""))
    return 0


def register(sub) -> None:
    s = sub.add_parser("purge", help="delete everything in a run directory that holds raw identifiers",
                       description="Remove from RUN_DIR every file that holds raw identifiers or text of the corpus: "
                                   "identifier tables, predictions, model weights and tokenizers (they memorise "
                                   "training text), transformed corpora, review and candidate files, executed "
                                   "notebooks, the hash key. Keeps only metrics, ROC, summaries, manifests and "
                                   "configs (counts, settings, fingerprints, keyed hashes). See PRIVACY.md.")
    s.add_argument("run_dir", metavar="RUN_DIR", nargs="?", default=None,
                   help="a run directory (`run` output or notebook work directory)")
    s.add_argument("--ner-cache", action="store_true",
                   help="also (or only) remove the NER cache shared by all runs: spaCy spans keyed by SHA-256 of "
                        "text pieces, no text (default folder $XDG_CACHE_HOME/lm-anonymity-toolkit/ner)")
    s.add_argument("--cache-dir", default=None, help="with --ner-cache: the cache folder, if not the default")
    s.add_argument("--keep-report", action="store_true",
                   help="keep HTML reports built with hashed identifiers (a --show-identifiers report is removed)")
    s.add_argument("--dry-run", action="store_true", help="list what would be removed; remove nothing")
    s.set_defaults(func=cmd_purge)
