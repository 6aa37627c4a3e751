"""Notebook 04 (RMFT, dedup, extraction, MaxTER) runs headless with reduced parameters and a tiny profile."""

from __future__ import annotations

import pytest
from test_notebooks import execute

TINY_PROFILE = """name: tiny-email
base:
  clm: {kind: clm, vocab_size: 400, hidden_size: 32, num_layers: 1, num_heads: 2, intermediate_size: 64, max_length: 128}
email:
  pretrain: {epochs: [1], batch_size: 8, learning_rate: 2.0e-3, lr_schedule: constant, max_length: 128}
  public_documents: 24
  finetune: {epochs: [1, 2], checkpoints_per_epoch: 1, batch_size: 8, learning_rate: 5.0e-3, lr_schedule: constant, max_length: 128}
  train_documents: 24
  heldout_documents: 4
  corpus_prompts: 8
  extraction: {prompt_tokens: 20, max_total_tokens: 32, batch_size: 16, perplexity_max_length: 128}
"""


@pytest.mark.slow
def test_notebook_04_rmft_and_extraction(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the kernel inherits it: tiny models run fastest on one thread
    profile = tmp_path / "tiny_email.yaml"
    profile.write_text(TINY_PROFILE)
    work = tmp_path / "work"
    text = execute(tmp_path, "04_rmft_and_extraction.ipynb",
                   {"profile": str(profile), "file_prompts": 8, "tau": 50.0, "work_dir": str(work)})
    assert "AURC" in text and "TER" in text and "look-alike" in text
    for tech in ("baseline", "rmft", "dedup"):
        assert (work / "extraction" / tech / "extraction.parquet").is_file()
        assert len(list((work / "runs" / tech).glob("step-*"))) == 2
    assert (tmp_path / "04_rmft_and_extraction.html").stat().st_size > 10_000
