"""Benchmark: the attack battery on a model of realistic size (a GPU run; the CPU can do the tiny sizes only).

A Llama-architecture model with random weights (default about 1.1B parameters: 16 layers, hidden 2048, MLP 5632,
vocabulary 32k) and a second one of the same shape as the reference model, both in bf16, audit the clinical sample
notes: ``--members`` train-split individuals against as many held-out ones. Timed, in one run:

* the membership battery (:func:`toolkit.audit.attacks.run_battery`: one teacher-forced pass per document and model
  shared by loss, zlib, min-k%, min-k%++ and reference), documents/s;
* PII inference (:func:`toolkit.audit.attacks.pii_inference`: the true name and 49 same-category candidates put into
  each sampled occurrence's window and scored by both models), windows/s;
* peak GPU memory (``torch.cuda.max_memory_allocated``).

Random weights: the scores mean nothing, the cost is the real one. The tokenizer is a byte-level BPE trained on the
sample's public split (its vocabulary is smaller than the model's embedding table, which only wastes a little
memory). Usage: ``python benchmarks/attacks_scale.py [--members 100] [--layers 16] [--hidden 2048]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from toolkit.audit.attacks import pii_inference, run_battery
from toolkit.corpus import Corpus, load_corpus
from toolkit.models import train_tokenizer

DATA = Path(__file__).resolve().parent.parent / "data_samples" / "clinical" / "notes.jsonl"


def random_llama(args, tokenizer, seed: int, device):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=max(len(tokenizer), 32000), hidden_size=args.hidden,
                      intermediate_size=args.intermediate, num_hidden_layers=args.layers,
                      num_attention_heads=args.hidden // 128, num_key_value_heads=args.hidden // 128,
                      max_position_embeddings=2048, bos_token_id=tokenizer.bos_token_id,
                      eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return LlamaForCausalLM(cfg).to(device=device, dtype=torch.bfloat16).eval()


def gold_positions(corpus: Corpus) -> pd.DataFrame:
    """Direct-identifier occurrences from the gold spans (the oracle detector), in the positions-table layout."""
    rows = [{"doc_id": d.doc_id, "start": s.start, "end": s.end, "term": d.text[s.start:s.end].lower(),
             "direct": True, "indirect": False, "category": s.label} for d in corpus for s in d.spans]
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=int, default=100)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--intermediate", type=int, default=5632)
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--pii-occurrences", type=int, default=100)
    args = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    corpus = load_corpus(DATA)
    tokenizer = train_tokenizer([d.text for d in corpus.filter(split="public")], "clm", 8000)
    train, held = corpus.filter(split="train"), corpus.filter(split="heldout")
    members = train.filter(person_ids=train.person_ids[:args.members])
    nonmembers = held.filter(person_ids=held.person_ids[:args.members])
    model = random_llama(args, tokenizer, 0, device)
    reference = random_llama(args, tokenizer, 1, device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: Llama {args.layers} layers x {args.hidden}, {n_params / 1e9:.2f}B parameters, bf16, "
          f"{torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}")
    print(f"documents: {len(members)} member + {len(nonmembers)} non-member notes "
          f"({args.members} individuals each), window {args.window} tokens")

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    result = run_battery(model, tokenizer, members, nonmembers, reference=(reference, tokenizer),
                         window=args.window, progress=False)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t_battery = time.perf_counter() - t0
    n_docs = len(members) + len(nonmembers)
    print(f"membership battery ({', '.join(result.to_json()['attacks'])}): {t_battery:.1f} s, "
          f"{n_docs / t_battery:.1f} documents/s (two models)")

    t0 = time.perf_counter()
    pii = pii_inference(model, tokenizer, members, gold_positions(members), reference=(reference, tokenizer),
                        max_occurrences=args.pii_occurrences, window=args.window, progress=False)
    if device.type == "cuda":
        torch.cuda.synchronize()
    t_pii = time.perf_counter() - t0
    n_windows = pii["n_occurrences"] * pii["n_candidates"] * 2 if "n_occurrences" in pii else None
    print(f"PII inference: {t_pii:.1f} s for {pii.get('n_occurrences')} occurrences x {pii.get('n_candidates')} "
          f"candidates x 2 models" + (f" ({n_windows / t_pii:.0f} windows/s)" if n_windows else ""))
    if device.type == "cuda":
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")


if __name__ == "__main__":
    main()
