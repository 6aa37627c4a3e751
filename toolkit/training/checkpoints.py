"""Checkpoints of a training run (layout in :mod:`toolkit.training.trainer`): the exported ``epoch-N`` / ``step-S``
weights the audits load, the schedule of step checkpoints, and the full-state checkpoints a run resumes from.

Every export is written to a hidden temporary folder beside its target and renamed into place, so a folder named
``epoch-N`` or ``step-S`` holding a ``config.json`` is always complete.
"""

from __future__ import annotations

import json
import math
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from toolkit.io import atomic_write_json, restrict_tree


@contextmanager
def quiet_hf_progress():
    """Hide the Hugging Face loading / saving progress bars inside the block (restored afterwards)."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def checkpoint_dirs(run_dir: str | Path) -> list[tuple[int, Path]]:
    """``(epoch, path)`` of the finished ``epoch-N`` checkpoints of a run, sorted by epoch."""
    out = []
    for p in Path(run_dir).glob("epoch-*"):
        if p.is_dir() and (p / "config.json").is_file() and p.name[6:].isdigit():
            out.append((int(p.name[6:]), p))
    return sorted(out)


def step_checkpoint_dirs(run_dir: str | Path) -> list[tuple[int, Path]]:
    """``(global step, path)`` of the finished ``step-S`` checkpoints of a run (``checkpoints_per_epoch > 0``)."""
    out = []
    for p in Path(run_dir).glob("step-*"):
        if p.is_dir() and (p / "config.json").is_file() and p.name[5:].isdigit():
            out.append((int(p.name[5:]), p))
    return sorted(out)


def checkpoint_steps(n_examples: int, batch_size: int, epochs: int, per_epoch: int) -> dict[int, int]:
    """``{global step: checkpoint number}`` of step checkpoints: ``per_epoch`` per epoch at steps
    ``e·n + ceil(j·n / per_epoch)`` (``n`` = optimizer steps per epoch, ``j`` = 1..per_epoch), numbered 1, 2, … in
    order; duplicates (an epoch shorter than ``per_epoch`` steps) collapse."""
    n = math.ceil(n_examples / batch_size)
    steps = sorted({e * n + -(-j * n // per_epoch) for e in range(epochs) for j in range(1, per_epoch + 1)} - {0})
    return {s: i for i, s in enumerate(steps, 1)}


def save_checkpoint(model, tokenizer, out: Path, log_entry: dict[str, Any]) -> None:
    """Export ``model`` + ``tokenizer`` + ``training_log.json`` (``log_entry``) to ``out``, owner-only, atomically."""
    tmp = out.with_name(f".{out.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    with quiet_hf_progress():  # no "Writing model shards" bar for every checkpoint
        model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    atomic_write_json(log_entry, tmp / "training_log.json")
    restrict_tree(tmp)  # owner-only like the run directory: 0700 folder, 0600 files
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)


def last_state(state_dir: Path) -> Path | None:
    """The newest complete full-state checkpoint. The Trainer writes ``trainer_state.json`` last and not atomically,
    so a run killed while saving leaves a folder without it, or with a truncated one: such a folder is skipped (the
    previous checkpoint is only deleted after the new one is complete)."""
    def complete(p: Path) -> bool:
        try:
            json.loads((p / "trainer_state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return p.name.split("-")[-1].isdigit()

    cands = [p for p in state_dir.glob("checkpoint-*") if complete(p)]
    return max(cands, key=lambda p: int(p.name.split("-")[1])) if cands else None


def export_missing_epoch(resume: Path, model, tokenizer, run: Path, strategy_name: str, wanted: set[int]) -> None:
    """Re-export ``epoch-N`` from the full-state checkpoint when a kill fell between the two saves of epoch N.

    The Trainer saves its checkpoint first and the ``epoch-N`` export follows in ``on_save``; a run killed between
    them would resume after epoch N and never write ``epoch-N``. Its weights are the checkpoint's weights.
    """
    state = json.loads((resume / "trainer_state.json").read_text(encoding="utf-8"))
    epoch = round(state.get("epoch") or 0)
    if epoch not in wanted or any(e == epoch for e, _ in checkpoint_dirs(run)):
        return
    if not (resume / "config.json").is_file():
        return
    saved = type(model).from_pretrained(resume)  # the weights exactly as the Trainer will restore them
    save_checkpoint(saved, tokenizer, run / f"epoch-{epoch}",
                    {"strategy": strategy_name, "epoch": epoch, "global_step": state.get("global_step"),
                     "log_history": state.get("log_history", []), "exported_from": resume.name})


__all__ = ["checkpoint_dirs", "checkpoint_steps", "export_missing_epoch", "last_state", "quiet_hf_progress",
           "save_checkpoint", "step_checkpoint_dirs"]
