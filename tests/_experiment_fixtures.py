"""A tiny causal-LM experiment shared by test_experiment.py, test_report.py and test_notebooks_report.py.

The run is made once per test session under pytest's base temporary folder; a second caller finds every step cached
(``python -m toolkit run`` semantics), so the three test files share one training. About 20–40 s on the 2-core
machine: a 2×64 GPT-2 pre-trained 1 epoch on 20 public patients, clm and ppclm fine-tuned on 8 members for 4 and 8
epochs (batch 4, enough for clm to start leaking identifiers), audits with 20 bootstrap resamples and the attacks at
a test's size.
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
    "audit": {"n_bootstrap": 20, "max_length": 128, "regurgitation": {"prefix_tokens": 16, "max_new_tokens": 8},
              # the attacks at a test's size (each figure is checked elsewhere against an independent computation;
              # here the steps, files and verdicts): the defaults score 100 occurrences x 50 candidates x 256 tokens
              # and 10,000 random secrets per canary, for both groups and the reference model
              "attacks": {"pii_candidates": 5, "pii_occurrences": 20, "pii_window": 64,
                          "memorisation_occurrences": 50, "canary_references": 100}},
}


def write_config(path: Path, data: dict | None = None) -> Path:
    path.write_text(yaml.safe_dump(data or TINY, sort_keys=False), encoding="utf-8")
    return path


def shared_base(tmp_path_factory) -> Path:
    """The session's base temporary folder, shared by every pytest-xdist worker (their own folders are its
    children): what one worker builds there, the others find (under :func:`built_once`'s lock)."""
    import os

    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory, name: str, build) -> Path:
    """``build(folder)`` once per test session, whichever worker asks first; the others wait for it (a file lock)
    and then find it done: nothing writes into it afterwards, so a test that changes the run works on a copy."""
    import json

    from filelock import FileLock

    base = shared_base(tmp_path_factory)
    done = base / f"{name}.done"
    with FileLock(str(base / f"{name}.lock")):
        if not done.is_file():
            done.write_text(json.dumps(str(build(base))), encoding="utf-8")
        return Path(json.loads(done.read_text(encoding="utf-8")))


def tiny_run(tmp_path_factory) -> Path:
    """The shared tiny run directory (made on first use, one for all xdist workers; read it, or copy it to change
    it)."""
    import torch

    from toolkit.config.experiment import load_experiment
    from toolkit.pipelines.lm_experiment import run_experiment

    def build(base: Path) -> Path:
        cfg_path = write_config(base / "tiny_causal.yaml")
        out = base / "tiny_causal_run"
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            run_experiment(load_experiment(cfg_path), out, progress=False, echo=False)
        finally:
            torch.set_num_threads(threads)
        return out

    return built_once(tmp_path_factory, "tiny_causal_run", build)
