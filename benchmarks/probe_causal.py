"""Benchmark: the causal-LM audit's batched routes against one-at-a-time loops, in one run.

On the first ``--documents`` training notes of ``data_samples/clinical/notes.jsonl`` and a tiny GPT-2 (byte-level BPE
4k trained on the public split, 2 layers x 128 hidden as the CPU profile, random weights: timing only) it measures

1. teacher-forced probe — ``toolkit.audit.probe_causal`` with ``--batch-size`` chunks per forward pass against the
   same function with ``batch_size=1`` (a per-document loop: the notes fit one 256-token window, so one chunk is one
   document); prints documents/s, the ratio, and whether both give the same predictions;
2. greedy generation — ``toolkit.audit.generation.generate_ids`` (KV cache, left padding, ``--batch-size`` prompts
   per ``generate`` call) against one ``generate`` call per prompt, for ``--prompts`` prompts of the first
   ``--prompt-tokens`` tokens of a note and ``--new-tokens`` new tokens; prints prompts/s, the ratio and checks that
   the continuations are identical.

Usage: ``python benchmarks/probe_causal.py [--documents 100] [--prompts 64] [--threads 1] [--device cpu]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from toolkit.audit import probe_causal
from toolkit.audit.generation import generate_ids
from toolkit.corpus import Corpus, load_corpus
from toolkit.identifiers import analyze
from toolkit.models import TinyModelConfig, init_model, train_tokenizer

DATA = Path(__file__).resolve().parent.parent / "data_samples" / "clinical" / "notes.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--documents", type=int, default=100)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--prompt-tokens", type=int, default=50)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()

    corpus = load_corpus(DATA)
    tokenizer = train_tokenizer([d.text for d in corpus.filter(split="public")], "clm", 4000)
    train = Corpus(list(corpus.filter(split="train"))[:args.documents])
    model = init_model(tokenizer, TinyModelConfig(kind="clm", hidden_size=128, num_layers=2, num_heads=2,
                                                  intermediate_size=512, max_length=args.max_length),
                       seed=args.seed).eval().to(args.device)
    positions = analyze(train, detector="oracle", progress=False).positions()
    n_tok = [len(tokenizer(d.text)["input_ids"]) for d in train]
    print(f"{len(train)} documents, {sum(n_tok)} tokens (longest {max(n_tok)}), "
          f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, {args.threads} thread(s)")

    # ---- 1. teacher-forced probe: batched vs one document at a time -----------------------------------------------
    kw = dict(positions=positions, max_length=args.max_length, progress=False, device=args.device)
    probe_causal(model, tokenizer, Corpus(list(train)[:4]), **kw)  # warm-up
    t0 = time.perf_counter()
    batched = probe_causal(model, tokenizer, train, batch_size=args.batch_size, **kw)
    t_b = time.perf_counter() - t0
    t0 = time.perf_counter()
    single = probe_causal(model, tokenizer, train, batch_size=1, **kw)
    t_1 = time.perf_counter() - t0
    same = (batched["predicted"].fillna("").to_numpy() == single["predicted"].fillna("").to_numpy()).mean()
    print(f"probe, batch {args.batch_size:3d}: {len(train) / t_b:8.1f} documents/s ({t_b:6.2f} s, "
          f"{len(batched)} words, {batched.attrs['n_chunks']} chunks, head only: {batched.attrs['head_only']}, "
          f"token accuracy {batched.attrs['token_accuracy']:.3f})")
    print(f"probe, batch   1: {len(train) / t_1:8.1f} documents/s ({t_1:6.2f} s)")
    print(f"probe speed-up: {t_1 / t_b:.1f}x; same predictions: {same:.2%} of {len(batched)} words")

    # ---- 2. greedy generation: batched + KV cache vs one prompt at a time ------------------------------------------
    docs = [d for d in train if len(tokenizer(d.text)["input_ids"]) >= args.prompt_tokens][:args.prompts]
    prompts = [tokenizer(d.text)["input_ids"][:args.prompt_tokens] for d in docs]
    gen_kw = dict(max_new_tokens=args.new_tokens, progress=False, device=args.device)
    generate_ids(model, tokenizer, prompts[:2], batch_size=2, **gen_kw)  # warm-up
    t0 = time.perf_counter()
    out_b = generate_ids(model, tokenizer, prompts, batch_size=args.batch_size, **gen_kw)
    t_gb = time.perf_counter() - t0
    t0 = time.perf_counter()
    out_1 = [generate_ids(model, tokenizer, [p], batch_size=1, **gen_kw)[0] for p in prompts]
    t_g1 = time.perf_counter() - t0
    n_same = sum(a == b for a, b in zip(out_b, out_1))
    n_new = sum(len(o) for o in out_b)
    print(f"generate, batch {args.batch_size:3d}: {len(prompts) / t_gb:8.1f} prompts/s ({t_gb:6.2f} s, "
          f"{len(prompts)} prompts x {args.prompt_tokens} tokens, {n_new} new tokens)")
    print(f"generate, batch   1: {len(prompts) / t_g1:8.1f} prompts/s ({t_g1:6.2f} s)")
    print(f"generation speed-up: {t_g1 / t_gb:.1f}x; identical continuations: {n_same}/{len(prompts)}")


if __name__ == "__main__":
    main()
