"""Benchmark: the e-mail extraction attack, batched with a KV cache, against prompt-by-prompt generation.

A tiny GPT-2 (byte-level BPE 4k and 2 layers x 128 hidden as the CPU profile) is fine-tuned for ``--epochs`` epochs
on the first ``--train`` training messages of ``data_samples/email/train.jsonl`` (so that its continuations hold
addresses), then the same ``--prompts`` prompts of ``data_samples/email/prompts.jsonl`` (truncated to 50 tokens,
``--new-tokens`` greedy tokens) run through

1. :func:`toolkit.audit.extraction.extract_checkpoint` — left-padded batches of ``--batch-size`` prompts, one
   ``generate`` call per batch, KV cache (what ``python -m toolkit extract`` does);
2. the obvious alternative — one ``model.generate`` call per prompt (KV cache too), then the same regex.

It prints prompts/s of both, the ratio, and checks that both give the same continuations (token for token) and the
same leaked-address counts (counts only; no address is printed).

Usage: ``python benchmarks/extraction.py [--prompts 300] [--batch-size 100] [--threads 1]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from toolkit.audit.generation import generate_ids
from toolkit.corpus import load_corpus
from toolkit.identifiers.addresses import occurrence_table
from toolkit.audit.extraction import encode_prompts, extract_from_generations, extraction_record, read_prompts
from toolkit.models import TinyModelConfig, init_model, load_model, train_tokenizer
from toolkit.training import TrainConfig, train

DATA = Path(__file__).resolve().parent.parent / "data_samples" / "email"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=300)
    ap.add_argument("--prompt-tokens", type=int, default=50)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=100)
    ap.add_argument("--train", type=int, default=300)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()

    corpus = load_corpus(DATA / "train.jsonl")[:args.train]
    tok = train_tokenizer((d.text for d in corpus), "clm", 4000)
    tiny = TinyModelConfig(kind="clm", hidden_size=128, num_layers=2, num_heads=2, intermediate_size=512,
                           max_length=256)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        init_model(tok, tiny, seed=0).save_pretrained(base)
        tok.save_pretrained(base)
        t0 = time.perf_counter()
        ck = train(corpus, base, Path(tmp) / "run", "clm",
                   TrainConfig(epochs=[args.epochs], batch_size=16, learning_rate=2e-3, lr_schedule="constant",
                               max_length=256), progress=False)
        print(f"fine-tuned on {len(corpus)} messages for {args.epochs} epochs in {time.perf_counter() - t0:.1f} s")
        model, tok = load_model(ck[-1][1], kind="clm")
    prompts = read_prompts(DATA / "prompts.jsonl").head(args.prompts)
    original = set(occurrence_table(corpus)["address"])
    ids = encode_prompts(tok, prompts["prompt"].tolist(), args.prompt_tokens)
    print(f"{len(ids)} prompts of {args.prompt_tokens} tokens, {args.new_tokens} new tokens, {args.threads} thread(s), "
          f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters")
    generate_ids(model, tok, ids[:4], max_new_tokens=8, batch_size=4, progress=False)  # warm-up

    t0 = time.perf_counter()
    batched = generate_ids(model, tok, ids, max_new_tokens=args.new_tokens, batch_size=args.batch_size,
                           progress=False)
    t_b = time.perf_counter() - t0

    eos = tok.eos_token_id
    single = []
    t0 = time.perf_counter()
    with torch.inference_mode():
        for p in ids:
            out = model.generate(input_ids=torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                                 max_new_tokens=args.new_tokens, do_sample=False, num_beams=1, use_cache=True,
                                 pad_token_id=eos, eos_token_id=eos)
            new = out[0, len(p):].tolist()
            single.append(new[:new.index(eos)] if eos in new else new)
    t_1 = time.perf_counter() - t0

    rec_b = extraction_record(extract_from_generations(tok, ids, batched), original, None)
    rec_1 = extraction_record(extract_from_generations(tok, ids, single), original, None)
    same = sum(a == b for a, b in zip(batched, single))
    print(f"batched (batch {args.batch_size}, KV cache): {len(ids) / t_b:8.1f} prompts/s ({t_b:6.2f} s)")
    print(f"one prompt per generate call:     {len(ids) / t_1:8.1f} prompts/s ({t_1:6.2f} s)")
    print(f"speed-up {t_1 / t_b:.1f}x; identical continuations: {same}/{len(ids)}; leaked addresses "
          f"{rec_b['n_leaked']} vs {rec_1['n_leaked']} (TER {rec_b['ter']:.2f}% vs {rec_1['ter']:.2f}%)")


if __name__ == "__main__":
    main()
