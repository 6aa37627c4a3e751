"""Benchmark: training throughput (tokens/s) of every masked-LM strategy, and the sparse MLM head against the full
head, in one run on the same data and base model.

Usage: ``python benchmarks/training.py [--documents 120] [--epochs 2] [--base DIR]`` (a tiny base is built from the
public split when ``--base`` is not given).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from toolkit.corpus import load_corpus
from toolkit.identifiers import analyze, load_identifiers
from toolkit.training import TrainConfig, build_base, train

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--documents", type=int, default=120)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--base", help="a masked-LM base directory (default: build a tiny one, 2 epochs)")
    args = ap.parse_args()
    corpus = load_corpus(ROOT / "data_samples/clinical/notes.jsonl")
    docs = corpus.filter(split="train")[: args.documents]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base = args.base or build_base(corpus.filter(split="public"), tmp / "base", "mlm",
                                       config=TrainConfig(epochs=[2], batch_size=8, learning_rate=2e-3,
                                                          max_length=256), progress=False)
        analyze(docs, detector="oracle", progress=False).save(tmp / "ids")
        ids = load_identifiers(tmp / "ids")
        rows = []
        for name, strategy, sparse in [("mlm (full head)", "mlm", False), ("mlm", "mlm", True),
                                       ("mlm_pseudo", "mlm_pseudo", True), ("ppmlm", "ppmlm", True),
                                       ("dppmlm", "dppmlm", True), ("ippmlm", "ippmlm", True),
                                       ("mlm_dp (Opacus)", "mlm_dp", False)]:
            cfg = TrainConfig(epochs=[args.epochs], batch_size=8, learning_rate=2e-3, max_length=256,
                              sparse_mlm_head=sparse)
            run = tmp / name.split()[0].replace("(", "") / str(sparse)
            train(docs, base, run, strategy, cfg, positions=ids["positions"], spans=ids["spans"], progress=False)
            meta = json.loads((run / "run.json").read_text())
            rows.append((name, meta["tokens_per_second"], meta["train_seconds"]))
            print(f"  {name:<18} {meta['tokens_per_second']:>9,.0f} tokens/s", flush=True)
    full = rows[0][1]
    print(f"\n{len(docs)} documents, {args.epochs} epochs, batch 8, max_length 256")
    print(f"{'strategy':<18} {'tokens/s':>10} {'seconds':>8} {'vs mlm full head':>17}")
    for name, tps, sec in rows:
        print(f"{name:<18} {tps:>10,.0f} {sec:>8.1f} {tps / full:>16.2f}x")


if __name__ == "__main__":
    main()
