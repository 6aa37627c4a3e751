"""``audit``: any masked or causal model (Hugging Face id or directory) under the strongest known attacks, with a
traffic-light verdict per model (:func:`toolkit.pipelines.audit_only.audit_models`)."""

from __future__ import annotations

import argparse

from toolkit.cli.common import add_quiet, add_reading_options, csv_list, load_args_corpus

TITLE = "audit"


def pii_estimator(text: str) -> int | str:
    """``--pii-pll-copies``: ``all``, ``candidate`` or an integer (checked ≥ 1 with the other options)."""
    return text if text == "candidate" else pll_budget(text)


def pll_budget(text: str) -> int | str:
    """``--pll-positions``: ``all`` or an integer (checked ≥ 1 with the other options)."""
    if text == "all":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'all' or an integer >= 1, got {text!r}") from None


def cmd_audit(args: argparse.Namespace) -> int:
    from toolkit.errors import ToolkitError
    from toolkit.pipelines.audit_only import audit_models, check_options

    if args.identifiers and args.detector:
        raise ToolkitError("give either --identifiers DIR or --detector (with --k, --n), not both")
    if not (args.identifiers or args.detector):
        raise ToolkitError("name the identifiers: --identifiers DIR (from `python -m toolkit identifiers`) or "
                           "--detector clinical|oracle|patterns|spacy with --k and --n")
    check_options(window=args.window, n_bootstrap=args.bootstrap, seed=args.seed, n_individuals=args.n_individuals,
                  k=args.k, n=args.n, pll_positions=args.pll_positions, pll_copies=args.pll_copies,
                  pii_pll_copies=args.pii_pll_copies, flags=True)  # before anything is read
    if args.bootstrap == 0 and not args.quiet:
        print("[audit] --bootstrap 0: AUC intervals by Hanley-McNeil's normal approximation, no TPR intervals")
    reference = False if args.reference == "none" else args.reference

    def show(result) -> None:  # before the top-level files: a full disk cannot hide the verdicts
        for label, ref in result.references.items():
            print(f"{label}: reference {ref or 'none'}; files in {result.out_dir / label}")
        print(f"report: {result.out_dir / 'report.html'}")
        for line in result.lines():
            print(line, flush=True)

    audit_models(args.models, load_args_corpus(args, split=""), members=csv_list(args.members),
                 nonmembers=csv_list(args.nonmembers), reference=reference, identifiers=args.identifiers,
                 detector=args.detector, k=args.k, n=args.n, out_dir=args.out, dtype=args.dtype,
                 device_map=args.device_map, window=args.window, n_individuals=args.n_individuals, seed=args.seed,
                 public=csv_list(args.public) if args.public else None,
                 n_bootstrap=args.bootstrap, pll_positions=args.pll_positions, pll_copies=args.pll_copies,
                 pii_pll_copies=args.pii_pll_copies, hash_predictions=not args.raw_predictions,
                 progress=not args.quiet, echo=not args.quiet,
                 on_verdicts=show)
    return 0


def register(sub) -> None:
    s = sub.add_parser("audit", help="audit any masked or causal model with the strongest known attacks and give a "
                                     "verdict (methods.md §10-11)",
                       description="Membership attacks (loss, zlib, Min-K%, Min-K%++, reference, identifier count), "
                                   "PII inference, memorisation and the §4 probe of every MODEL on the members vs "
                                   "non-members of --corpus; writes OUT/attacks/<model>/ (attacks.json, roc.json, "
                                   "scores.parquet, identifiers.json, verdict.json), OUT/audit/<model>/ (the probe; "
                                   "its predictions as keyed hashes), OUT/verdicts.json and OUT/report.html "
                                   "(PRIVACY.md lists what each holds). One audit per OUT at a time (OUT/.lock); an "
                                   "earlier audit's outputs that this one would not rewrite as they are are removed "
                                   "first. The last lines: one verdict per model, printed before the files are "
                                   "written.")
    s.add_argument("models", nargs="+", metavar="MODEL", help="Hugging Face model ids or model directories")
    s.add_argument("--corpus", required=True, help="corpus holding the members and the non-members")
    add_reading_options(s, of="--corpus")
    s.add_argument("--members", required=True, help="split(s) of the members: the models' training documents")
    s.add_argument("--nonmembers", required=True, help="split(s) of the non-members (never trained on)")
    s.add_argument("--public", help="split(s) of --corpus the base model was trained on (public data): identifiers "
                                    "named there are public, never a finding; the others are novel, judged "
                                    "members against non-members (methods.md §4, §11)")
    s.add_argument("--reference", help="reference model of the attacks (default: the base named by a checkpoint's "
                                       "run.json; 'none': no reference)")
    s.add_argument("--identifiers", help="identifiers of the audited documents (output folder of `identifiers`)")
    s.add_argument("--detector", help="or analyse them here: clinical, oracle, patterns, spacy or a '+' "
                                      "combination")
    s.add_argument("--k", type=int, default=2, help="with --detector: indirect identifiers are used by < k "
                                                    "individuals (default 2; at least 2)")
    s.add_argument("--n", type=int, default=1, help="with --detector: largest m-gram size (default 1)")
    s.add_argument("--n-individuals", type=int, help="first N individuals of the members and of the non-members")
    s.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], help="load the models in this precision")
    s.add_argument("--device-map", help="dispatch large models over the devices (e.g. auto)")
    s.add_argument("--window", type=int, default=256, help="audit window in tokens (default 256, at least 8; "
                                                           "clipped to a model's position table, with a note)")
    s.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples of the AUC intervals (default "
                                                               "1000; 0: Hanley-McNeil intervals, no resampling)")
    s.add_argument("--pll-positions", type=pll_budget, default="all", metavar="N|all",
                   help="masked models: pseudo-log-likelihood over every position of a window (all, the default) "
                        "or over N random positions per window (budgeted, faster, noisier; methods.md §10)")
    s.add_argument("--pll-copies", type=pll_budget, default="all", metavar="K|all",
                   help="masked models: every position scored from K masked copies per window, every K-th position "
                        "masked together (strided; membership, and PII inference and canaries unless "
                        "--pii-pll-copies; 32 agrees with "
                        "exact within 0.011 AUC on notebook 02's models: docs/performance.md)")
    s.add_argument("--pii-pll-copies", type=pii_estimator, default=None, metavar="K|all|candidate",
                   help="masked models: the same for PII inference and canaries only (default: as --pll-copies); "
                        "candidate: each candidate window scored over the candidate's own tokens, one masked copy "
                        "per token (candidate-token pseudo-log-likelihood; its agreement with exact is not measured "
                        "yet, the CPU profile does not use it)")
    s.add_argument("--seed", type=int, default=0, help="seed of the samples, candidates and masks (default 0)")
    s.add_argument("--raw-predictions", action="store_true",
                   help="keep the probe's predicted words in OUT/audit/<model>/predictions.parquet and "
                        "mia_predictions.parquet (personal data: names, record numbers) instead of keyed hashes")
    s.add_argument("--out", required=True, help="output folder")
    add_quiet(s)
    s.set_defaults(func=cmd_audit)
