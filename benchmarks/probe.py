"""Benchmark: the toolkit's batched fill-mask probe against the Hugging Face ``fill-mask`` pipeline, in one run.

On the first ``--documents`` training notes of ``data_samples/clinical/notes.jsonl`` and a tiny BERT (WordPiece 4k
trained on the public split, 2 layers x 128 hidden, random weights: timing only) it measures

* ``probe``             — ``toolkit.audit.probe_masked`` as the audit runs it: every word masked once, ~15% of a
                          document's words per pass (7 passes), batched, LM head only at masked positions;
* ``probe, 1 mask``     — the same function with one word masked per sequence (``mask_rate=1e-9``): exactly the
                          inputs the pipeline gets, still batched;
* ``pipeline``          — the naive route: ``pipeline("fill-mask")`` called once per prediction on the whole
                          document with one (single-token) word replaced by the mask token, on ``--words`` sampled
                          words (per-prediction time extrapolated);

checks that the pipeline's arg-max (and top-5) agree with ``probe, 1 mask`` on those words, and prints predictions/s
and the ratios. Documents are probed in one chunk (``max_length=512`` > the longest note) so that both routes see the
same context.

Usage: ``python benchmarks/probe.py [--documents 100] [--words 300] [--threads 2]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from toolkit.audit import probe_masked
from toolkit.corpus import Corpus, load_corpus
from toolkit.identifiers import analyze, normalize_term
from toolkit.models import TinyModelConfig, init_model, train_tokenizer

DATA = Path(__file__).resolve().parent.parent / "data_samples" / "clinical" / "notes.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--documents", type=int, default=100)
    ap.add_argument("--words", type=int, default=300, help="pipeline calls (single-token words)")
    ap.add_argument("--agreement-docs", type=int, default=15, help="documents the sampled words come from")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from transformers import pipeline
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    corpus = load_corpus(DATA)
    tokenizer = train_tokenizer([d.text for d in corpus.filter(split="public")], "mlm", 4000)
    train = Corpus(list(corpus.filter(split="train"))[:args.documents])
    model = init_model(tokenizer, TinyModelConfig(kind="mlm", hidden_size=128, num_layers=2, num_heads=2,
                                                  intermediate_size=512, max_length=512), seed=args.seed).eval()
    positions = analyze(train, detector="oracle", progress=False).positions()
    n_tok = [len(tokenizer(d.text)["input_ids"]) for d in train]
    print(f"{len(train)} documents, {sum(n_tok)} tokens (longest {max(n_tok)}), "
          f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {args.threads} threads")

    # ---- probe, as the audit runs it ---------------------------------------------------------------------------
    probe_masked(model, tokenizer, Corpus(list(train)[:5]), positions=positions, max_length=512, progress=False)
    t0 = time.perf_counter()
    df = probe_masked(model, tokenizer, train, positions=positions, max_length=512, batch_size=args.batch_size,
                      progress=False, seed=args.seed)
    t_probe = time.perf_counter() - t0
    rate_probe = len(df) / t_probe
    print(f"probe (15%/pass):  {len(df):6d} predictions in {t_probe:7.2f} s = {rate_probe:8.1f} predictions/s "
          f"({df.attrs['n_sequences']} sequences, head only: {df.attrs['head_only']})")

    # ---- the same single-mask inputs as the pipeline, batched ------------------------------------------------------
    sub = Corpus(list(train)[:args.agreement_docs])
    t0 = time.perf_counter()
    one = probe_masked(model, tokenizer, sub, positions=None, max_length=512, mask_rate=1e-9,
                       batch_size=args.batch_size, progress=False)
    t_one = time.perf_counter() - t0
    rate_one = len(one) / t_one
    print(f"probe (1 mask):    {len(one):6d} predictions in {t_one:7.2f} s = {rate_one:8.1f} predictions/s")

    # ---- the naive route: one pipeline call per prediction ----------------------------------------------------------
    fill = pipeline("fill-mask", model=model, tokenizer=tokenizer, top_k=5, device=-1)
    rng = np.random.default_rng(args.seed)
    cand = one.index[one["n_tokens"] == 1].to_numpy()
    pick = np.sort(rng.choice(cand, size=min(args.words, len(cand)), replace=False))
    texts = {d.doc_id: d.text for d in sub}
    inputs = []
    for i in pick:
        r = one.loc[i]
        t = texts[r["doc_id"]]
        inputs.append(t[:r["start"]] + tokenizer.mask_token + t[r["end"]:])
    fill(inputs[0])  # warm-up
    t0 = time.perf_counter()
    outs = [fill(x) for x in inputs]
    t_pipe = time.perf_counter() - t0
    rate_pipe = len(inputs) / t_pipe
    print(f"pipeline:          {len(inputs):6d} predictions in {t_pipe:7.2f} s = {rate_pipe:8.1f} predictions/s "
          f"(-> {len(df) / rate_pipe:.0f} s for the {len(df)} predictions of the probe)")

    def norm(s: str) -> str:
        return normalize_term(s.strip())

    top1 = np.mean([norm(o[0]["token_str"]) == (one.loc[i, "predicted"] or "") for o, i in zip(outs, pick)])
    top5 = np.mean([[norm(x["token_str"]) for x in o] == one.loc[i, "top_k"] for o, i in zip(outs, pick)])
    print(f"agreement with the pipeline on {len(pick)} single-token words masked alone: "
          f"arg-max {top1:.1%}, top-5 lists {top5:.1%}")
    print(f"speed-up: probe {rate_probe / rate_pipe:.1f}x the pipeline (audit setting, 15%/pass); "
          f"{rate_one / rate_pipe:.1f}x with the pipeline's single-mask inputs")


if __name__ == "__main__":
    main()
