"""Child processes for the crash tests of ``tests/test_reliability.py`` (run as ``python reliability_child.py MODE``).

``train BASE CORPUS IDS RUN EPOCHS [--slow]``
    Fine-tunes with ``toolkit.training.train`` (strategy ppmlm, one CPU thread). ``--slow`` sleeps after every
    optimizer step of the second epoch on, and writes ``RUN/../progress`` (the global step), so that the parent can
    kill the process in the middle of an epoch, after the first checkpoint is on disk.
``write DIR``
    Rewrites ``DIR/doc.json`` and ``DIR/table.parquet`` in a loop through ``toolkit.io`` with two alternating
    contents (versions 0 and 1); prints ``ready`` once both files exist.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def train_main(base: str, corpus_path: str, ids: str, run: str, epochs: str, slow: bool) -> None:
    import torch

    torch.set_num_threads(1)
    from transformers import TrainerCallback

    from toolkit.corpus import load_corpus
    from toolkit.identifiers import load_identifiers
    from toolkit.training import TrainConfig, train

    progress = Path(run).parent / "progress"

    class Slow(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.epoch is not None and state.epoch > 1:
                progress.write_text(str(state.global_step))
                time.sleep(0.4)

    identifiers = load_identifiers(ids)
    cfg = TrainConfig(epochs=[int(e) for e in epochs.split(",")], batch_size=8, learning_rate=2e-3, max_length=128,
                      seed=0)
    train(load_corpus(corpus_path), base, run, "ppmlm", cfg, positions=identifiers["positions"],
          spans=identifiers["spans"], progress=False, callbacks=[Slow()] if slow else [])


def write_main(folder: str) -> None:
    import numpy as np
    import pandas as pd

    from toolkit.io import atomic_write_json, atomic_write_parquet

    out = Path(folder)
    docs = [{"version": v, "rows": [{"i": i, "text": f"v{v} row {i} " + "x" * 40} for i in range(40_000)]}
            for v in (0, 1)]
    tables = [pd.DataFrame({"i": np.arange(300_000), "v": v, "s": [f"v{v}-{i % 1000}" for i in range(300_000)]})
              for v in (0, 1)]
    v = 0
    ready = False
    while True:
        atomic_write_json(docs[v], out / "doc.json")
        atomic_write_parquet(tables[v], out / "table.parquet")
        if not ready:
            print("ready", flush=True)
            ready = True
        v = 1 - v


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "train":
        train_main(*rest[:5], slow="--slow" in rest)
    elif mode == "write":
        write_main(rest[0])
    else:
        raise SystemExit(f"unknown mode {mode!r}")
