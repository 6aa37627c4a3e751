"""Benchmark: the battery's batched pseudo-log-likelihood against a naive per-token loop, in one run.

On the first ``--documents`` training notes of ``data_samples/clinical/notes.jsonl`` (cut to the audit window,
``--window`` tokens) and a tiny BERT (WordPiece 4k trained on the public split, 2 layers x 128 hidden, random
weights: timing only) it measures

* ``battery`` — :func:`toolkit.audit.losses.token_losses`: one masked copy per token, copies of many documents
  stacked into batches of ``--batch-size`` rows, LM head applied only at the masked positions;
* ``naive``   — one forward pass of the whole model per masked position (batch of 1, full logits), as a per-token
  loop would do;

checks that both give the same token losses (``numpy.allclose``, atol 1e-4) and prints both times and the ratio.
``--naive-docs`` limits the naive loop to the first documents (its time is then extrapolated per token).

Measured on a shared 2-core CPU (other jobs running, load 4-8), 8 notes / 1,851 tokens, both routes agreeing to
1e-6: 1 thread — battery 156 tokens/s, naive 83 tokens/s (1.9x); 2 threads — 45 vs 4 tokens/s (11.6x, the naive
loop's many small forwards suffer most from the contention). On a CPU exact PLL stays compute-bound: every masked
copy runs the whole encoder over the window, so batching saves only the per-position vocabulary projection and the
per-call overhead; the 20x target was not reached there. Batching is meant to pay off on an accelerator (not measured).

It then times a run's reference scoring: the same base model scoring the same windows for ``--checkpoints``
audited checkpoints, computed for each against computed once and reused (same losses checked).

Usage: ``python benchmarks/attacks.py [--documents 40] [--window 256] [--threads 2] [--device cpu] [--checkpoints 7]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from toolkit.audit.losses import token_losses
from toolkit.corpus import Corpus, load_corpus
from toolkit.models import TinyModelConfig, init_model, train_tokenizer

DATA = Path(__file__).resolve().parent.parent / "data_samples" / "clinical" / "notes.jsonl"


def naive_pll(model, tokenizer, texts, window: int, device) -> list[np.ndarray]:
    """Token losses by one forward per masked position (the reference the battery must reproduce)."""
    out = []
    for text in texts:
        enc = tokenizer(text, truncation=True, max_length=window, return_special_tokens_mask=True)
        x = torch.tensor(enc["input_ids"], device=device)[None]
        losses = []
        for t in np.flatnonzero(~np.array(enc["special_tokens_mask"], dtype=bool)):
            y = x.clone()
            y[0, t] = tokenizer.mask_token_id
            with torch.inference_mode():
                logits = model(input_ids=y).logits[0, t]
            losses.append(-torch.log_softmax(logits.float(), -1)[x[0, t]].item())
        out.append(np.array(losses))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--documents", type=int, default=40)
    ap.add_argument("--naive-docs", type=int, default=None, help="documents the naive loop runs on (default all)")
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--checkpoints", type=int, default=7,
                    help="checkpoints audited against one reference model (0: skip that comparison)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    corpus = load_corpus(DATA)
    tokenizer = train_tokenizer([d.text for d in corpus.filter(split="public")], "mlm", 4000)
    docs = Corpus(list(corpus.filter(split="train"))[:args.documents])
    model = init_model(tokenizer, TinyModelConfig(kind="mlm", hidden_size=128, num_layers=2, num_heads=2,
                                                  intermediate_size=512, max_length=args.window),
                       seed=args.seed).eval().to(device)
    texts = [d.text for d in docs]

    t0 = time.perf_counter()
    tl = token_losses(model, tokenizer, texts, window=args.window, batch_size=args.batch_size, progress=False)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t_batch = time.perf_counter() - t0
    n_tok = int(tl.n_tokens.sum())
    print(f"{len(texts)} documents, {n_tok} scored tokens (window {args.window}, {tl.n_truncated} truncated), "
          f"device {device}, {torch.get_num_threads()} threads")

    k = args.naive_docs or len(texts)
    t0 = time.perf_counter()
    naive = naive_pll(model, tokenizer, texts[:k], args.window, device)
    t_naive_part = time.perf_counter() - t0
    n_naive = sum(a.size for a in naive)
    t_naive = t_naive_part * n_tok / n_naive
    ok = all(np.allclose(a, b, atol=1e-4) for a, b in zip(tl.losses[:k], naive))
    diff = max(float(np.abs(a - b).max()) for a, b in zip(tl.losses[:k], naive) if a.size)
    print(f"battery PLL : {t_batch:8.2f} s  ({n_tok / t_batch:8.0f} tokens/s, batch {args.batch_size})")
    print(f"naive loop  : {t_naive:8.2f} s  ({n_naive / t_naive_part:8.0f} tokens/s"
          + (f", measured on {k} documents / {n_naive} tokens, extrapolated)" if k < len(texts) else ")"))
    print(f"ratio       : {t_naive / t_batch:8.1f}x   scores agree (allclose, atol 1e-4): {ok}  "
          f"max |diff| = {diff:.2e}")
    if not ok:
        raise SystemExit("the battery's PLL differs from the naive loop")
    if args.checkpoints:
        reference_reuse(model, tokenizer, texts, args)


def reference_reuse(model, tokenizer, texts, args) -> None:
    """A run audits several checkpoints against one reference (the base model): its losses on the same windows are
    computed for the first checkpoint and reused for the others (:mod:`toolkit.audit.losses`, "Reuse") — against
    computing them for every checkpoint, in the same run."""
    import tempfile

    from toolkit.audit.losses import load_audit_model

    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        tokenizer.save_pretrained(d)
        times = {}
        for label, load in (("every checkpoint", lambda: (model, tokenizer)),  # in memory: never reused
                            ("reused", lambda: load_audit_model(d))):
            t0, first = time.perf_counter(), None
            for _ in range(args.checkpoints):
                ref, tok = load()
                tl = token_losses(ref, tok, texts, window=args.window, batch_size=args.batch_size, progress=False)
                first = first or tl
                assert all(np.allclose(a, b, atol=1e-5) for a, b in zip(tl.losses, first.losses))
            times[label] = time.perf_counter() - t0
    print(f"reference PLL for {args.checkpoints} checkpoints: computed each time {times['every checkpoint']:.2f} s, "
          f"reused {times['reused']:.2f} s ({times['every checkpoint'] / times['reused']:.1f}x)")


if __name__ == "__main__":
    main()
