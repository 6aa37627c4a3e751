"""Benchmark: the privacy-preserving whole-word collator against the stock token-level collator, in one run.

On real examples of the clinical sample (``data_samples/clinical/notes.jsonl``: a WordPiece tokenizer trained on the
``public`` split, oracle identifiers on the other splits, ``training_examples(..., "ppmlm", max_length=256)``) it
times, per batch size, the same shuffled batches through

* ``stock``   — ``transformers.DataCollatorForLanguageModeling`` (token-level 15% masking, 80/10/10), given
                ``input_ids`` and ``special_tokens_mask`` (its fastest path: no per-row special-token lookup);
* ``ppmlm``   — ``toolkit.strategies.masked.ProtectedWholeWordCollator`` (whole eligible words, 80/10/10), given
                the same examples plus ``word_ids``.

Both pad through the tokenizer and return PyTorch tensors. Warm-up batches are excluded; every round alternates the
two collators batch by batch and the median round is reported, with the ratio ppmlm / stock (target: at most 1.05).
The masking step alone (``torch_mask_tokens`` on already padded tensors) is timed too.

Usage: ``python benchmarks/collator.py [--batches 400] [--rounds 5] [--batch-sizes 8 32] [--max-length 256]``
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from transformers import DataCollatorForLanguageModeling

from toolkit.corpus import load_corpus
from toolkit.identifiers import analyze
from toolkit.models import train_tokenizer
from toolkit.strategies import training_examples
from toolkit.strategies.masked import ProtectedWholeWordCollator

NOTES = Path(__file__).resolve().parents[1] / "data_samples" / "clinical" / "notes.jsonl"


def build_examples(max_length: int, vocab_size: int):
    corpus = load_corpus(NOTES)
    tokenizer = train_tokenizer([d.text for d in corpus.filter(split="public")], "mlm", vocab_size)
    train = corpus.filter(split=[s for s in corpus.splits if s != "public"])
    positions = analyze(train, detector="oracle", progress=False).positions()
    examples = training_examples(train, tokenizer, "ppmlm", positions=positions, max_length=max_length,
                                 progress=False)
    return tokenizer, examples


def make_batches(examples: list[dict], batch_size: int, n_batches: int, seed: int) -> list[list[dict]]:
    rng = np.random.default_rng(seed)
    out: list[list[dict]] = []
    while len(out) < n_batches:
        order = rng.permutation(len(examples))
        out += [[examples[i] for i in order[b:b + batch_size]]
                for b in range(0, len(order) - batch_size + 1, batch_size)]
    return out[:n_batches]


def time_interleaved(first, second, batches_first, batches_second) -> tuple[float, float]:
    """ms/batch of two collators over the same batches, alternating them batch by batch (so that load changes on a
    shared machine hit both) and alternating which one goes first."""
    gc.collect()
    t_first = t_second = 0.0
    clock = time.perf_counter
    for i, (a, b) in enumerate(zip(batches_first, batches_second)):
        if i % 2:
            t0 = clock(); second(b); t1 = clock(); first(a); t2 = clock()  # noqa: E702
            t_second += t1 - t0
            t_first += t2 - t1
        else:
            t0 = clock(); first(a); t1 = clock(); second(b); t2 = clock()  # noqa: E702
            t_first += t1 - t0
            t_second += t2 - t1
    n = len(batches_first)
    return t_first / n * 1e3, t_second / n * 1e3


def masking_only(stock, ours, tokenizer, batches) -> tuple[float, float]:
    """ms/batch of the masking step alone (``torch_mask_tokens`` on already padded tensors)."""
    padded = []
    for b in batches:
        enc = tokenizer.pad([{k: v for k, v in e.items() if k != "word_ids"} for e in b], return_tensors="pt")
        keep = enc["attention_mask"].bool()
        words = torch.full(keep.shape, -1, dtype=torch.int64).masked_scatter_(
            keep, torch.tensor([w for e in b for w in e["word_ids"]]))
        padded.append((enc["input_ids"], enc["special_tokens_mask"], words))
    t_s = t_o = 0.0
    for ids, smask, words in padded:
        t0 = time.perf_counter()
        stock.torch_mask_tokens(ids.clone(), smask)
        t1 = time.perf_counter()
        ours.torch_mask_tokens(ids.clone(), smask, word_ids=words)
        t2 = time.perf_counter()
        t_s += t1 - t0
        t_o += t2 - t1
    return t_s / len(padded) * 1e3, t_o / len(padded) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=400, help="timed batches per round and batch size")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--vocab-size", type=int, default=4000)
    args = ap.parse_args()

    t0 = time.perf_counter()
    tokenizer, examples = build_examples(args.max_length, args.vocab_size)
    lengths = np.array([len(e["input_ids"]) for e in examples])
    flagged = np.mean([np.mean(e["special_tokens_mask"]) for e in examples])
    print(f"{len(examples)} ppmlm examples (max_length {args.max_length}, mean {lengths.mean():.0f} tokens, "
          f"{flagged:.0%} of tokens never targets), vocab {len(tokenizer)}, built in {time.perf_counter() - t0:.1f}s; "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")

    stock = DataCollatorForLanguageModeling(tokenizer=tokenizer, seed=0)
    ours = ProtectedWholeWordCollator(tokenizer=tokenizer, seed=0)
    print(f"{'batch':>5} {'stock ms/batch':>15} {'ppmlm ms/batch':>15} {'ratio':>7}  (median of {args.rounds} rounds "
          f"x {args.batches} batches, interleaved batch by batch)")
    rows = []
    for bs in args.batch_sizes:
        batches = make_batches(examples, bs, args.batches, seed=bs)
        stock_batches = [[{k: v for k, v in e.items() if k != "word_ids"} for e in b] for b in batches]
        w = args.warmup
        time_interleaved(stock, ours, stock_batches[:w], batches[:w])
        runs = [time_interleaved(stock, ours, stock_batches, batches) for _ in range(args.rounds)]
        s = statistics.median(r[0] for r in runs)
        o = statistics.median(r[1] for r in runs)
        rows.append((bs, masking_only(stock, ours, tokenizer, batches)))
        print(f"{bs:>5} {s:>15.3f} {o:>15.3f} {o / s:>7.3f}  (per-round ratios "
              f"{', '.join(f'{b / a:.3f}' for a, b in runs)})")
    print("masking step alone (torch_mask_tokens on padded tensors), ms/batch:")
    for bs, (s, o) in rows:
        print(f"{bs:>5} {s:>15.3f} {o:>15.3f} {o / s:>7.3f}")


if __name__ == "__main__":
    main()
