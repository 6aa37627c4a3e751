"""Benchmark: batched fill-masked-name probing (``toolkit.scrubbing.fill_mask``) against the Hugging Face
``pipeline("fill-mask")`` called once per sentence, in one run, on the same sentences and model.

Sentences: every distinct sentence of the clinical sample's ``train`` + ``heldout`` notes with exactly one ``PERSON``
tag, the notes anonymised with the gold PATIENT/DOCTOR spans as the "NER" (no spaCy: this times the probe, not the
NER); the first ``--sentences`` of them. Model: a tiny BERT (WordPiece 4k trained on the anonymised ``train`` notes,
2 layers x 128 hidden, random weights: timing only). Both routes collect the top ``--top-k`` (40, methods.md §7.3)
predictions per sentence; the script checks that they return the same token ids in the same order for every sentence
(and probabilities within 1e-4), then prints sentences/s and the ratio.

Usage: ``python benchmarks/scrubbing.py [--sentences 400] [--top-k 40] [--threads 2] [--batch-size 64]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from toolkit.corpus import Span, load_corpus
from toolkit.models import TinyModelConfig, init_model, train_tokenizer
from toolkit.scrub.anonymize import anonymize_corpus
from toolkit.scrub.candidates import fill_mask
from toolkit.scrub.sentences import tag_sentences, with_model_mask

DATA = Path(__file__).resolve().parent.parent / "data_samples" / "clinical" / "notes.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", type=int, default=400)
    ap.add_argument("--top-k", type=int, default=40)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from transformers import pipeline
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    corpus = load_corpus(DATA).filter(split=["train", "heldout"])
    gold = [[Span(s.start, s.end, "PERSON") for s in d.spans if s.label in ("PATIENT", "DOCTOR")] for d in corpus]
    anon = anonymize_corpus(corpus, entities=gold, progress=False)
    pool = tag_sentences(anon, seen_splits="train", unseen_splits="heldout")
    sents = pool["sentence"].head(args.sentences).tolist()
    tokenizer = train_tokenizer([d.text for d in anon.corpus.filter(split="train")], "mlm", 4000)
    model = init_model(tokenizer, TinyModelConfig(kind="mlm"), seed=args.seed).eval()
    n_tok = [len(x) for x in tokenizer(with_model_mask(sents, tokenizer))["input_ids"]]
    print(f"{len(sents)} sentences (of {len(pool)} distinct), {np.mean(n_tok):.1f} tokens on average (longest "
          f"{max(n_tok)}), top {args.top_k}, {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
          f"{args.threads} threads")

    fill_mask(model, tokenizer, sents[:8], top_k=args.top_k, progress=False)  # warm-up
    t0 = time.perf_counter()
    ours = fill_mask(model, tokenizer, sents, top_k=args.top_k, batch_size=args.batch_size, progress=False)
    t_ours = time.perf_counter() - t0
    print(f"batched fill_mask: {t_ours:7.2f} s = {len(sents) / t_ours:8.1f} sentences/s")

    fill = pipeline("fill-mask", model=model, tokenizer=tokenizer, top_k=args.top_k, device=-1)
    inputs = with_model_mask(sents, tokenizer)
    fill(inputs[0])  # warm-up
    t0 = time.perf_counter()
    outs = [fill(x) for x in inputs]
    t_pipe = time.perf_counter() - t0
    print(f"pipeline, 1 call per sentence: {t_pipe:7.2f} s = {len(sents) / t_pipe:8.1f} sentences/s")

    ids = ours["token_id"].to_numpy().reshape(len(sents), -1)
    probs = ours["prob"].to_numpy().reshape(len(sents), -1)
    same_ids = np.mean([[r["token"] for r in o] == ids[i].tolist() for i, o in enumerate(outs)])
    max_dp = max(float(np.max(np.abs(np.array([r["score"] for r in o]) - probs[i]))) for i, o in enumerate(outs))
    print(f"same top-{args.top_k} token ids in the same order: {same_ids:.1%} of sentences; largest probability "
          f"difference {max_dp:.1e}")
    print(f"speed-up: batched fill_mask {t_pipe / t_ours:.1f}x the per-sentence pipeline")


if __name__ == "__main__":
    main()
