"""What a training run was made from, recorded in ``run.json`` so that a resume cannot mix inputs.

A run resumes from its last full training state; resumed with another base model or other identifiers it would
continue training one model on two different inputs (a hybrid that matches neither). ``run.json`` therefore holds,
besides the corpus fingerprint and the strategy:

* ``base_fingerprint`` — the base model's: :func:`model_fingerprint` of a local model
  folder (SHA-256 of its files; name and size of files over 64 MiB), of the locally cached snapshot of a hub id,
  or a SHA-256 of the weights and the tokenizer's vocabulary of a model passed as objects;
* ``identifiers_fingerprint`` — a SHA-256 of the identifier rows the strategy reads (``positions``: doc_id, start,
  end, direct, indirect for the protecting strategies; ``spans``: doc_id, start, end for the pseudonymising ones),
  sorted, so the same identifiers give the same fingerprint whether computed now or read from disk; ``None`` for
  strategies that read no identifiers.

:func:`check_same_inputs` refuses a resume whose fingerprints differ from the recorded ones. A ``run.json``
written before these fields existed records neither; such a run resumes as before (nothing to compare with).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError

POSITION_COLUMNS = ("doc_id", "start", "end", "direct", "indirect")
SPAN_COLUMNS = ("doc_id", "start", "end")


def _frame_digest(frame: pd.DataFrame, columns: tuple[str, ...], name: str) -> str:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ToolkitError(f"identifier {name} table lacks the column(s) {', '.join(missing)}")
    canon = pd.DataFrame({c: (frame[c].astype(str).astype(object) if c == "doc_id" else
                              frame[c].to_numpy(dtype=bool) if c in ("direct", "indirect") else
                              frame[c].to_numpy(dtype=np.int64)) for c in columns})
    canon = canon.sort_values(list(columns[:3]), kind="stable", ignore_index=True)
    h = hashlib.sha256(f"{name}:{','.join(columns)}:{len(canon)}\0".encode())
    h.update(pd.util.hash_pandas_object(canon, index=False).to_numpy().tobytes())
    return h.hexdigest()


def identifiers_fingerprint(positions: pd.DataFrame | None, spans: pd.DataFrame | None) -> str | None:
    """SHA-256 of the identifier rows a strategy reads (pass ``None`` for a table it does not read); ``None`` when
    it reads none."""
    if positions is None and spans is None:
        return None
    h = hashlib.sha256()
    if positions is not None:
        h.update(_frame_digest(positions, POSITION_COLUMNS, "positions").encode())
    h.update(b"\0")
    if spans is not None:
        h.update(_frame_digest(spans, SPAN_COLUMNS, "spans").encode())
    return h.hexdigest()


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def model_fingerprint(path: str | Path, full_hash_limit: int = 64 << 20) -> str:
    """A local model directory's fingerprint: SHA-256 of every file up to ``full_hash_limit`` bytes (configs,
    tokenizer, small weights) and of the name and size of larger files (weights of big models)."""
    p = Path(path)
    h = hashlib.sha256()
    for f in sorted(q for q in p.rglob("*") if q.is_file() and q.name != "step.json"):
        size = f.stat().st_size
        h.update(str(f.relative_to(p)).encode() + b"\0" + str(size).encode() + b"\0")
        if size <= full_hash_limit:
            h.update(file_sha256(f).encode())
    return h.hexdigest()


def _weights_digest(model, tokenizer=None) -> str:
    import json

    import torch

    h = hashlib.sha256()
    if tokenizer is not None:
        h.update(json.dumps(sorted(tokenizer.get_vocab().items()), ensure_ascii=False).encode("utf-8") + b"\0")
    for name, tensor in model.state_dict().items():
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}\0".encode())
        if t.numel():
            h.update(t.view(-1).view(torch.uint8).numpy().tobytes())
    return "weights:" + h.hexdigest()


def base_fingerprint(base: str | Path, model=None, tokenizer=None) -> str:
    """Fingerprint of the base a run starts from: the weights of ``model`` and the vocabulary of ``tokenizer`` when
    they are passed, else the files of the local folder ``base``, else those of the locally cached snapshot of hub
    id ``base`` (its name when none is cached: nothing is downloaded)."""
    if model is not None:
        return _weights_digest(model, tokenizer)
    p = Path(base)
    if p.is_dir():
        return "files:" + model_fingerprint(p)
    try:
        from huggingface_hub import snapshot_download

        local = snapshot_download(str(base), local_files_only=True)
    except Exception:  # not cached, not a hub id, or no huggingface_hub: the name is all there is
        return f"name:{base}"
    return "files:" + model_fingerprint(local)


@dataclass(frozen=True)
class TrainingInputs:
    """The two fingerprints a run records in ``run.json`` and a resume must match (see the module docstring): the
    trainer's own resume check, not a cache key (the pipelines' ``train`` step is keyed by
    :class:`toolkit.pipelines.registry.TrainInputs`). ``dataclasses.asdict`` gives ``run.json``'s fields."""

    base_fingerprint: str
    identifiers_fingerprint: str | None

    @classmethod
    def of(cls, base: str | Path, strategy, positions: pd.DataFrame | None, spans: pd.DataFrame | None,
           model=None, tokenizer=None) -> TrainingInputs:
        """``strategy``'s: the positions count when it protects them, the spans when it reads them."""
        return cls(base_fingerprint(base, model, tokenizer),
                   identifiers_fingerprint(positions if strategy.protect else None,
                                           spans if strategy.reads_spans else None))


def check_same_inputs(recorded: dict[str, Any], *, base: str, identifiers: str | None, run: Path) -> None:
    """Refuse to resume ``run`` (whose ``run.json`` is ``recorded``) with another base model or other identifiers."""
    if "base_fingerprint" in recorded and recorded["base_fingerprint"] != base:
        raise ToolkitError(f"{run} was trained from another base model (base_fingerprint in run.json differs from "
                           f"the base given now, {recorded.get('base')!r} then); resuming would mix two models: "
                           f"pass the same base or use a new run directory")
    if "identifiers_fingerprint" in recorded and recorded["identifiers_fingerprint"] != identifiers:
        raise ToolkitError(f"{run} was trained with other identifiers (identifiers_fingerprint in run.json differs "
                           f"from the positions/spans given now); resuming would protect other words than the "
                           f"epochs already trained: pass the same identifiers or use a new run directory")


__all__ = ["TrainingInputs", "base_fingerprint", "check_same_inputs", "file_sha256", "identifiers_fingerprint", "model_fingerprint"]
