"""Training: one Hugging Face Trainer path for every strategy, checkpoints per epoch, resume, DP-SGD (Opacus)."""

from __future__ import annotations

from toolkit.training.checkpoints import (checkpoint_dirs, checkpoint_steps, quiet_hf_progress, save_checkpoint,
                                          step_checkpoint_dirs)
from toolkit.training.hf import make_collator, sparse_head_trainer
from toolkit.training.trainer import DPConfig, TrainConfig, build_base, corpus_fingerprint, train

__all__ = ['DPConfig', 'TrainConfig', 'build_base', 'checkpoint_dirs', 'checkpoint_steps', 'corpus_fingerprint',
           'make_collator', 'quiet_hf_progress', 'save_checkpoint', 'sparse_head_trainer', 'step_checkpoint_dirs',
           'train']


def __getattr__(name: str):
    if name == "SparseHeadTrainer":  # built lazily: importing transformers' Trainer costs seconds
        return sparse_head_trainer()
    raise AttributeError(name)
