"""E-mail address memorisation (methods.md §6, paper 002): the data techniques ``rmft`` and ``dedup``, ``email-train``,
notebook 04's tiny base built ahead (``email-base``), the extraction attack ``extract`` and the technique comparison
``maxter``.

Addresses never go to the terminal: commands print counts and rates; the addresses stay in the files they write.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from toolkit.cli.common import (add_corpus_options, add_quiet, add_reading_options, epochs, load_args_corpus,
                                load_corpus_split, with_suffix)
from toolkit.errors import ToolkitError

TITLE = "e-mail"

PROFILE_HELP = "cpu | paper | path to a profile YAML (default cpu); "


def _print_address_summary(s: dict) -> None:
    b, a = s["before"], s["after"]
    # counts only: addresses never go to the terminal
    print(f"{s['n_documents']} documents; original addresses: {b['n_original_distinct']} distinct, "
          f"{b['n_original_occurrences']} -> {a['n_original_occurrences']} occurrences, maximum repetition "
          f"{b['original_max_repetition']} -> {a['original_max_repetition']}; all address occurrences "
          f"{b['n_occurrences']} -> {a['n_occurrences']} ({a['n_distinct']} distinct)")


def _write_transformed(res, out: Path, table, table_suffix: str) -> None:
    """The transformed corpus ``out`` with its summary and ``table`` (replacements or removed lines) beside it."""
    from toolkit.corpus import write_jsonl
    from toolkit.io import atomic_write_json, atomic_write_parquet

    write_jsonl(res.corpus, out)
    atomic_write_json(res.summary, with_suffix(out, ".summary.json"))
    atomic_write_parquet(table, with_suffix(out, table_suffix))
    _print_address_summary(res.summary)


def person_key(args: argparse.Namespace) -> bytes | None:
    """``--pseudonymise-person``: the key of the output's folder (``.hash_key``, created once, owner-only), so every
    corpus written to one folder names a person alike; ``None`` without the flag."""
    if not args.pseudonymise_person:
        return None
    from toolkit.audit.hashing import run_key

    return run_key(Path(args.out).resolve().parent)


def _print_person(args: argparse.Namespace) -> None:
    if args.pseudonymise_person:
        print(f"person_id pseudonymised with the key {Path(args.out).resolve().parent / '.hash_key'} (keep it apart "
              "from the corpus: it links each pseudonym to its person)")


def cmd_rmft(args: argparse.Namespace) -> int:
    from toolkit.strategies.rmft import rmft

    res = rmft(load_args_corpus(args), seed=args.seed, person_key=person_key(args), progress=not args.quiet)
    out = Path(args.out)
    _write_transformed(res, out, res.replacements, ".replacements.parquet")
    print(f"RMFT (seed {args.seed}): {res.summary['n_replaced']} later occurrences replaced by look-alikes")
    _print_person(args)
    print(f"wrote {out}, {with_suffix(out, '.summary.json').name}, {with_suffix(out, '.replacements.parquet').name}")
    return 0


def cmd_dedup(args: argparse.Namespace) -> int:
    from toolkit.strategies.dedup import dedup

    res = dedup(load_args_corpus(args), granularity=args.granularity, person_key=person_key(args),
                progress=not args.quiet)
    out = Path(args.out)
    _write_transformed(res, out, res.removed, ".removed.parquet")
    s = res.summary
    cut = f", {s['n_mailboxes_removed']} repeated mailboxes cut from kept lines" if s["n_mailboxes_removed"] else ""
    print(f"PII-aware dedup ({args.granularity} mode): {s['n_lines_removed']} header lines removed{cut} in "
          f"{s['n_documents_changed']} documents; {s['n_addresses_vanished']} of {s['before']['n_distinct']} distinct "
          "addresses no longer occur")
    _print_person(args)
    print(f"wrote {out}, {with_suffix(out, '.summary.json').name}, {with_suffix(out, '.removed.parquet').name}")
    return 0


def email_profile(name: str):
    """The profile ``name`` and its ``email`` section (the defaults when it has none)."""
    from toolkit.config import load_profile
    from toolkit.config.email import EmailProfile

    prof = load_profile(name)
    return prof, (prof.email or EmailProfile())


def cmd_email_train(args: argparse.Namespace) -> int:
    from toolkit.pipelines.email_extraction import train_technique

    _, email = email_profile(args.profile)
    cfg = email.finetune
    if args.epochs:
        cfg.epochs = epochs(args.epochs)
    cfg.__post_init__()
    corpus = load_args_corpus(args)
    if args.max_documents:
        corpus = corpus[:args.max_documents]
    ckpts = train_technique(corpus, args.technique, args.base, args.out, cfg,
                            seed=email.rmft_seed if args.seed is None else args.seed, granularity=args.granularity,
                            progress=not args.quiet)
    print(f"{args.technique}: {len(ckpts)} checkpoints under {args.out} (step checkpoints every "
          f"1/{cfg.checkpoints_per_epoch} epoch)" if cfg.checkpoints_per_epoch else
          f"{args.technique}: {len(ckpts)} checkpoints under {args.out}")
    return 0


def cmd_email_base(args: argparse.Namespace) -> int:
    from toolkit.pipelines.prebuilt import build_prebuilt_email
    from toolkit.samples.email import public_email_corpus

    prof, email = email_profile(args.profile)
    p = build_prebuilt_email(prof, args.into, public_email_corpus(email.public_documents), from_dir=args.copy_from,
                             progress=not args.quiet)
    size = sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    print(f"e-mail base ({args.profile}): {p} ({size / 1e6:.1f} MB)")
    return 0


def cmd_extract(args: argparse.Namespace) -> int:
    from toolkit.audit.extraction import extract_run, read_prompts
    from toolkit.identifiers.addresses import occurrence_table

    overrides = {k: v for k, v in (("prompt_tokens", args.prompt_tokens), ("max_total_tokens", args.max_total_tokens),
                                   ("batch_size", args.batch_size)) if v is not None}
    ecfg = replace(email_profile(args.profile)[1].extraction, **overrides)
    prompts = read_prompts(args.prompts)
    heldout = load_corpus_split(args.heldout, args.heldout_split) if args.heldout else None
    original = set(occurrence_table(load_args_corpus(args))["address"]) if args.corpus else None
    table = extract_run(args.run_dir, prompts, args.out, heldout=heldout, config=ecfg, original=original,
                        include_base=args.with_base, progress=not args.quiet)
    for _, r in table.iterrows():  # counts and rates only; the leaked addresses stay in extraction.parquet
        ser_txt = "n/a" if r["ser"] != r["ser"] else f"{r['ser']:.2f}%"
        ppl_txt = "" if r["perplexity"] != r["perplexity"] else f"  perplexity {r['perplexity']:.3f}"
        print(f"checkpoint {int(r['checkpoint']):>3} (epoch {r['epoch']:.2f}): TER {r['ter']:.2f}%  SER {ser_txt}  "
              f"leaked {int(r['n_leaked'])}/{int(r['n_original'])}{ppl_txt}")
    print(f"wrote {Path(args.out) / 'extraction.parquet'}")
    return 0


def named_dir(value: str) -> tuple[str, str]:
    """``NAME=DIR`` -> ``(NAME, DIR)`` (``maxter --technique``)."""
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise ToolkitError(f"--technique expects NAME=DIR, got {value!r}")
    return name, path


def cmd_maxter(args: argparse.Namespace) -> int:
    from toolkit.audit.extraction import load_extraction
    from toolkit.metrics.extraction import compare_to_baseline
    from toolkit.pipelines.email_extraction import write_maxter

    base = load_extraction(args.baseline)
    loaded = {name: load_extraction(path) for name, path in dict(named_dir(v) for v in args.technique).items()}
    comparison = compare_to_baseline(base["extraction"], {n: x["extraction"] for n, x in loaded.items()},
                                     {n: x["perplexity"] for n, x in loaded.items() if x["perplexity"] is not None},
                                     base["perplexity"])
    out = Path(args.out)
    report = write_maxter(comparison, out, args.tau_max)
    for name, a in report["aurc"].items():
        t0 = report["infeasible_below"][name]
        print(f"{name}: AURC {a:.1f} %² over τ in [0, {report['tau_max']:g}]%; "
              + ("never feasible" if t0 is None else f"infeasible below τ = {t0:.2f}%"))
    print(f"wrote {out / 'maxter.parquet'}, {out / 'aurc.json'}, {out / 'checkpoints.parquet'}")
    return 0


GRANULARITY_HELP = ("dedup: line (default, the paper's): remove every header line holding an already-seen address; "
                    "address: remove only the already-seen addresses (with their display names) from such a line, "
                    "keeping the line and every first occurrence")


def _register_transforms(sub) -> None:
    for name, helptext, func in (
            ("rmft", "RMFT: keep each e-mail address's first occurrence, replace later ones by look-alikes (methods.md §6)",
             cmd_rmft),
            ("dedup", "PII-aware dedup: remove header lines (or, --granularity address, the addresses) that repeat "
                      "an e-mail address (methods.md §6)", cmd_dedup)):
        s = sub.add_parser(name, help=helptext, description=helptext + ". Writes OUT (JSONL) and OUT's "
                           "summary.json beside it" + (" and the replacement map (.replacements.parquet)"
                                                       if name == "rmft" else " and .removed.parquet"))
        add_corpus_options(s, positional=True, skipped_beside=True)
        s.add_argument("--out", required=True, help="output corpus (JSONL)")
        if name == "rmft":
            s.add_argument("--seed", type=int, default=0, help="seed of the look-alike addresses (default 0)")
        else:
            s.add_argument("--granularity", choices=("line", "address"), default="line", help=GRANULARITY_HELP)
        s.add_argument("--pseudonymise-person", action="store_true",
                       help="replace each person_id (for mail read with --person-rule sender: the sender's raw "
                            "address) by a keyed pseudonym, the same for the same person, under the key .hash_key "
                            "of OUT's folder (created once, owner-only)")
        add_quiet(s)
        s.set_defaults(func=func)


def _register_email_train(sub) -> None:
    s = sub.add_parser("email-train", help="fine-tune a causal LM with baseline / rmft / dedup data, step "
                                           "checkpoints and seen-address logs (paper 002)")
    s.add_argument("--technique", required=True, choices=["baseline", "rmft", "dedup"],
                   help="baseline (the corpus as is), rmft or dedup (the corpus transformed first)")
    add_corpus_options(s, corpus_help="the original training corpus (TER counts its addresses)",
                       split_help="splits to train on (default: all documents)")
    s.add_argument("--base", required=True, help="causal base model: HF id or local directory")
    s.add_argument("--out", required=True, help="run directory: checkpoints, their seen-address logs, addresses.json")
    s.add_argument("--profile", default="cpu", help=PROFILE_HELP + "its `email` section sets the schedule")
    s.add_argument("--epochs", help="override the checkpoint epochs, e.g. 1,2,3")
    s.add_argument("--max-documents", type=int, help="train on the first N documents only")
    s.add_argument("--seed", type=int, default=None, help="RMFT seed (default: the profile's)")
    s.add_argument("--granularity", choices=("line", "address"), default="line", help=GRANULARITY_HELP)
    add_quiet(s)
    s.set_defaults(func=cmd_email_train)


def _register_email_base(sub) -> None:
    s = sub.add_parser("email-base", help="notebook 04's tiny e-mail base, pre-trained on the sample generator's "
                                          "public messages, built ahead into prebuilt/ (make prebuilt)")
    s.add_argument("--profile", default="cpu", help=PROFILE_HELP + "its `email` section sets the schedule")
    s.add_argument("--into", default="prebuilt", help="folder of pre-built steps (default: prebuilt)")
    s.add_argument("--copy-from", metavar="DIR",
                   help="a finished base_clm folder of notebook 04 to copy when its key is the profile's")
    add_quiet(s)
    s.set_defaults(func=cmd_email_base)


def _register_extract(sub) -> None:
    s = sub.add_parser("extract", help="e-mail extraction attack on every checkpoint of a run: TER, SER, perplexity",
                       description="Prompt every checkpoint of RUN_DIR (greedy, batched, KV cache), extract "
                                   "addresses by regex and write OUT/extraction.parquet (checkpoint, ter, ser, "
                                   "n_leaked, leaked ...), perplexity.parquet and summary.json. Leaked addresses "
                                   "are written to the files only, never printed.")
    s.add_argument("run_dir", help="run directory of `email-train`")
    s.add_argument("--prompts", required=True, help="JSONL with a 'prompt' field (or a text file, one per line)")
    s.add_argument("--out", required=True, help="folder for extraction.parquet, perplexity.parquet, summary.json")
    s.add_argument("--heldout", help="held-out corpus for perplexity (format detected, default fields: the reading "
                                     "options apply to --corpus)")
    s.add_argument("--heldout-split", help="splits of the held-out corpus to use")
    s.add_argument("--corpus", help="original training corpus (only for runs without addresses.json)")
    s.add_argument("--split", default=None, help="splits of --corpus to use")
    add_reading_options(s, of="--corpus")
    s.add_argument("--profile", default="cpu", help=PROFILE_HELP + "its `email.extraction` section sets the attack")
    s.add_argument("--prompt-tokens", type=int, help="prompts truncated to N tokens (default: the profile's)")
    s.add_argument("--max-total-tokens", type=int,
                   help="prompt + continuation at most, in tokens (default: the profile's)")
    s.add_argument("--batch-size", type=int, help="prompts per generation batch (default: the profile's)")
    s.add_argument("--with-base", action="store_true", help="also the run's base model, as checkpoint 0")
    add_quiet(s)
    s.set_defaults(func=cmd_extract)


def register(sub) -> None:
    _register_transforms(sub)
    _register_email_train(sub)
    _register_email_base(sub)
    _register_extract(sub)
    s = sub.add_parser("maxter", help="MaxTER curves and AURC of techniques against the baseline (methods.md §6)",
                       description="Compare `extract` outputs: writes OUT/maxter.parquet (technique, tau, maxter, "
                                   "feasible), OUT/aurc.json and OUT/checkpoints.parquet (MDP%%, TER drop, "
                                   "Mean Delta Perplexity, Pareto flag per checkpoint).")
    s.add_argument("--baseline", required=True, help="extract output folder of the baseline run")
    s.add_argument("--technique", required=True, action="append", help="NAME=DIR, repeatable")
    s.add_argument("--out", required=True, help="folder for maxter.parquet, aurc.json, checkpoints.parquet")
    s.add_argument("--tau-max", type=float, default=None,
                   help="largest MDP%% threshold (default: the largest MDP%% observed, rounded up)")
    s.set_defaults(func=cmd_maxter)
