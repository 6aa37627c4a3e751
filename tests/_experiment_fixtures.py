"""A tiny causal-LM experiment shared by test_experiment.py, test_report.py and test_notebooks_report.py.

The run is made once per test session under pytest's base temporary folder; a second caller finds every step cached
(``python -m toolkit run`` semantics), so the three test files share one training. About 20–40 s on the 2-core
machine: a 2×64 GPT-2 pre-trained 1 epoch on 20 public patients, clm and ppclm fine-tuned on 8 members for 4 and 8
epochs (batch 4, enough for clm to start leaking identifiers), audits with 20 bootstrap resamples.
"""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "data_samples" / "clinical" / "notes.jsonl"

TINY = {
    "name": "tiny_causal",
    "description": "test run",
    "profile": "cpu",
    "seed": 0,
    "corpus": {"path": str(CORPUS), "n_individuals": 8, "n_public": 20},
    "identifiers": {"detector": "oracle", "k": 2, "n": 1},
    "model": {"kind": "clm",
              "architecture": {"hidden_size": 64, "num_layers": 2, "num_heads": 2, "intermediate_size": 64,
                               "vocab_size": 1000, "max_length": 128},
              "pretrain": {"epochs": [1]}},
    "training": {"strategies": ["clm", "ppclm"], "epochs": [4, 8], "batch_size": 4, "max_length": 128},
    "audit": {"n_bootstrap": 20, "max_length": 128, "regurgitation": {"prefix_tokens": 16, "max_new_tokens": 8}},
}


def write_config(path: Path, data: dict | None = None) -> Path:
    path.write_text(yaml.safe_dump(data or TINY, sort_keys=False), encoding="utf-8")
    return path


def tiny_run(tmp_path_factory) -> Path:
    """The shared tiny run directory (made on first use, cached afterwards)."""
    import torch

    from toolkit.config.experiment import load_experiment
    from toolkit.pipelines.lm_experiment import run_experiment

    base = tmp_path_factory.getbasetemp()
    cfg_path = write_config(base / "tiny_causal.yaml")
    out = base / "tiny_causal_run"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run_experiment(load_experiment(cfg_path), out, progress=False, echo=False)
    finally:
        torch.set_num_threads(threads)
    return out
