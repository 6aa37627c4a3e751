"""One training entry point for every strategy (SPEC §3): Hugging Face ``Trainer`` for the standard strategies,
an Opacus DP-SGD loop for ``*_dp``; checkpoints at chosen epochs; an interrupted run resumes.

Layout of a run directory::

    RUN_DIR/
      run.json              strategy, config, data fingerprint, status (written atomically)
      epoch-4/              a Hugging Face model + tokenizer + training_log.json, for every checkpoint epoch
      epoch-8/ ...
      trainer/checkpoint-*  the full training state of the last checkpoint epoch (optimizer, scheduler, RNG): resume

Only the last full-state checkpoint is kept; ``epoch-N`` folders hold the weights the audits load.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


from .corpus import Corpus
from .corpus.errors import ToolkitError
from .io import atomic_write_json
from .strategies import Strategy, get_strategy, training_examples

log = logging.getLogger(__name__)


@dataclass
class DPConfig:
    """DP-SGD parameters (SPEC §3: ε = 8, δ = 1e-5, C = 10)."""

    epsilon: float = 8.0
    delta: float = 1e-5
    max_grad_norm: float = 10.0


@dataclass
class TrainConfig:
    """Schedule shared by every strategy (a named profile fills it; see ``toolkit/configs``).

    ``epochs`` are the checkpoint epochs (``[4, 8, 16, 32]`` in the papers); training runs to the largest.
    """

    epochs: list[int] = field(default_factory=lambda: [4, 8, 16, 32])
    batch_size: int = 8
    learning_rate: float = 1e-4
    lr_schedule: str = "linear"  # "linear" (decay to 0) | "constant"
    warmup_steps: int = 0
    weight_decay: float = 0.0
    max_length: int = 512
    mlm_probability: float = 0.15
    sparse_mlm_head: bool = True  # apply the MLM head only at target positions (same loss, less compute)
    seed: int = 0
    dp: DPConfig = field(default_factory=DPConfig)

    def __post_init__(self) -> None:
        if isinstance(self.dp, dict):
            self.dp = DPConfig(**self.dp)
        eps = sorted(set(int(e) for e in self.epochs)) if self.epochs else []
        if not eps or eps[0] < 1:
            raise ToolkitError(f"epochs must be a non-empty list of positive integers, got {self.epochs!r}")
        self.epochs = eps
        if self.lr_schedule not in ("linear", "constant"):
            raise ToolkitError(f"lr_schedule must be 'linear' or 'constant', got {self.lr_schedule!r}")
        if self.batch_size < 1 or self.learning_rate <= 0 or self.max_length < 8:
            raise ToolkitError("batch_size >= 1, learning_rate > 0 and max_length >= 8 are required")


def corpus_fingerprint(corpus: Corpus) -> dict[str, Any]:
    """Counts and a SHA-256 over doc ids and texts: what a run was trained on, without storing the text."""
    h = hashlib.sha256()
    for d in corpus:
        h.update(d.doc_id.encode("utf-8", "surrogatepass") + b"\0" + d.text.encode("utf-8", "surrogatepass") + b"\0")
    return {"n_documents": len(corpus), "n_individuals": len(corpus.person_ids), "sha256": h.hexdigest()}


def checkpoint_dirs(run_dir: str | Path) -> list[tuple[int, Path]]:
    """``(epoch, path)`` of the finished ``epoch-N`` checkpoints of a run, sorted by epoch."""
    out = []
    for p in Path(run_dir).glob("epoch-*"):
        if p.is_dir() and (p / "config.json").is_file() and p.name[6:].isdigit():
            out.append((int(p.name[6:]), p))
    return sorted(out)


def _save_checkpoint(model, tokenizer, out: Path, log_entry: dict[str, Any]) -> None:
    tmp = out.with_name(f".{out.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    atomic_write_json(log_entry, tmp / "training_log.json")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)


def train(corpus: Corpus, base: str | Path, run_dir: str | Path, strategy: str | Strategy,
          config: TrainConfig | None = None, *, positions=None, spans=None, progress: bool = True,
          model=None, tokenizer=None, callbacks=()) -> list[tuple[int, Path]]:
    """Fine-tune ``base`` (HF id or directory) on ``corpus`` with ``strategy``; returns the checkpoints.

    ``positions`` / ``spans`` are the identifiers step's ``positions.parquet`` / ``spans.parquet`` frames (needed by
    the protecting and pseudonymising strategies). A run directory with finished checkpoints resumes from the last
    full training state; a run whose ``run.json`` names another strategy or corpus is refused.
    ``model``/``tokenizer`` may be passed instead of loading ``base`` (used to pre-train a base from scratch).
    """
    from .models import load_model, model_kind

    cfg = config or TrainConfig()
    strat = get_strategy(strategy) if isinstance(strategy, str) else strategy
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    run.chmod(0o700)
    fingerprint = corpus_fingerprint(corpus)
    meta_path = run / "run.json"
    if meta_path.is_file():
        old = json.loads(meta_path.read_text())
        if old.get("strategy") != strat.name or old.get("corpus") != fingerprint:
            raise ToolkitError(f"{run} holds a run of strategy {old.get('strategy')!r} on another corpus or strategy; "
                               f"use a new run directory")
        done = {e for e, _ in checkpoint_dirs(run)}
        if old.get("status") == "done" and old.get("config") == asdict(cfg) and set(cfg.epochs) <= done:
            return checkpoint_dirs(run)  # finished earlier with the same settings: nothing to do
    if model is None:
        model, tokenizer = load_model(base, kind=strat.kind)
    if model_kind(model) != strat.kind:
        raise ToolkitError(f"strategy {strat.name} needs a {'masked' if strat.kind == 'mlm' else 'causal'} LM, "
                           f"{base} is a {model_kind(model)} model")
    meta = {"strategy": strat.name, "kind": strat.kind, "base": str(base), "config": asdict(cfg),
            "corpus": fingerprint, "status": "running", "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    atomic_write_json(meta, meta_path)
    max_length = min(cfg.max_length, _model_max_length(model))
    examples = training_examples(corpus, tokenizer, strat, positions=positions, spans=spans,
                                 max_length=max_length, progress=progress)
    t0 = time.perf_counter()
    if strat.dp:
        from .strategies.dp import train_dp

        stats = train_dp(model, tokenizer, examples, strat, cfg, run, progress=progress)
    else:
        stats = _train_hf(model, tokenizer, examples, strat, cfg, run, progress=progress, callbacks=callbacks)
    meta.update(status="done", seconds=round(time.perf_counter() - t0, 1), **stats)
    atomic_write_json(meta, meta_path)
    return checkpoint_dirs(run)


def _model_max_length(model) -> int:
    c = model.config
    return int(getattr(c, "max_position_embeddings", None) or getattr(c, "n_positions", None) or 512)


def make_collator(tokenizer, strat: Strategy, cfg: TrainConfig):
    """The collator of a strategy kind: protected whole-word masking (MLM) or padding with -100 labels (CLM)."""
    if strat.kind == "mlm":
        from .strategies.masked import ProtectedWholeWordCollator

        # no private generator: the global torch RNG (seeded by the Trainer, saved and restored with its checkpoints)
        # drives the masks, so a resumed run draws exactly the masks an uninterrupted run would have drawn
        return ProtectedWholeWordCollator(tokenizer=tokenizer, mlm_probability=cfg.mlm_probability)
    from transformers import DataCollatorForSeq2Seq

    # pads input_ids with the pad token and labels with -100; protected tokens already carry -100
    return DataCollatorForSeq2Seq(tokenizer=tokenizer, label_pad_token_id=-100, padding=True)


def _train_hf(model, tokenizer, examples: list[dict], strat: Strategy, cfg: TrainConfig, run: Path, *,
              progress: bool, callbacks=()) -> dict[str, Any]:
    import torch
    from transformers import Trainer, TrainerCallback, TrainingArguments

    SparseHeadTrainer = _sparse_head_trainer()

    class ListDataset(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return len(examples)

        def __getitem__(self, i: int) -> dict:
            return dict(examples[i])

    state_dir = run / "trainer"
    wanted = set(cfg.epochs)
    history: list[dict[str, Any]] = []

    class EpochCheckpoints(TrainerCallback):
        """Save the full state and export ``epoch-N`` at the configured epochs only."""

        def on_log(self, args, state, control, logs=None, **kw):
            if logs:
                history.append({"step": state.global_step, "epoch": round(state.epoch or 0, 3), **logs})

        def on_epoch_end(self, args, state, control, **kw):
            if round(state.epoch) in wanted:
                control.should_save = True
            return control

        def on_save(self, args, state, control, model=None, **kw):
            epoch = round(state.epoch)
            if epoch in wanted:
                _save_checkpoint(model, tokenizer, run / f"epoch-{epoch}",
                                 {"strategy": strat.name, "epoch": epoch, "global_step": state.global_step,
                                  "log_history": history + [h for h in state.log_history if h not in history]})

    steps_per_epoch = math.ceil(len(examples) / cfg.batch_size)
    args = TrainingArguments(
        output_dir=str(state_dir), num_train_epochs=max(cfg.epochs), per_device_train_batch_size=cfg.batch_size,
        learning_rate=cfg.learning_rate, lr_scheduler_type=cfg.lr_schedule if cfg.lr_schedule == "linear"
        else "constant_with_warmup", warmup_steps=cfg.warmup_steps, weight_decay=cfg.weight_decay,
        save_strategy="no", save_total_limit=1, save_only_model=False, logging_steps=max(1, steps_per_epoch), report_to="none",
        seed=cfg.seed, data_seed=cfg.seed, remove_unused_columns=False, disable_tqdm=not progress, use_cpu=not
        torch.cuda.is_available(), dataloader_num_workers=0, log_level="error")
    trainer_cls = SparseHeadTrainer if (strat.kind == "mlm" and cfg.sparse_mlm_head) else Trainer
    trainer = trainer_cls(model=model, args=args, train_dataset=ListDataset(),
                      data_collator=make_collator(tokenizer, strat, cfg), callbacks=[EpochCheckpoints(), *callbacks])
    resume = _last_state(state_dir)
    if resume is not None and round(json.loads((resume / "trainer_state.json").read_text())["epoch"]) >= max(wanted):
        return {"resumed_from": str(resume), "steps": None}
    out = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    tokens = int(sum(len(e["input_ids"]) for e in examples)) * max(cfg.epochs)
    return {"resumed_from": str(resume) if resume else None, "steps": out.global_step,
            "train_seconds": round(out.metrics.get("train_runtime", 0.0), 1),
            "tokens_per_second": round(tokens / max(out.metrics.get("train_runtime", 1e-9), 1e-9), 1)}


def _sparse_head_trainer():
    import torch
    from transformers import Trainer

    from .models import split_lm_head

    class SparseHeadTrainer(Trainer):
        """Masked-LM loss with the LM head applied only at target positions (ModernBERT's "sparse prediction").

        The loss equals ``BertForMaskedLM``'s (mean cross-entropy over tokens whose label is not -100); the head's
        vocabulary projection, most of a small model's compute, runs on ~15% of the tokens instead of all of them.
        Models without a separable head fall back to the standard loss.
        """

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            split = split_lm_head(self.accelerator.unwrap_model(model)) if "labels" in inputs else None
            if split is None or return_outputs:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            inputs = dict(inputs)
            labels = inputs.pop("labels")
            base, head = split
            hidden = base(**inputs).last_hidden_state
            sel = labels != -100
            logits = head(hidden[sel])
            loss = torch.nn.functional.cross_entropy(logits.float(), labels[sel], reduction="sum")
            return loss / (num_items_in_batch if num_items_in_batch is not None else sel.sum().clamp(min=1))

    return SparseHeadTrainer


def __getattr__(name: str):
    if name == "SparseHeadTrainer":  # built lazily: importing transformers' Trainer costs seconds
        return _sparse_head_trainer()
    raise AttributeError(name)


def _last_state(state_dir: Path) -> Path | None:
    cands = [p for p in state_dir.glob("checkpoint-*") if (p / "trainer_state.json").is_file()]
    return max(cands, key=lambda p: int(p.name.split("-")[1])) if cands else None


def build_base(corpus: Corpus, out_dir: str | Path, kind: str, *, tiny=None, config: TrainConfig | None = None,
               progress: bool = True) -> Path:
    """Build a base model offline: a tokenizer trained on ``corpus`` and a tiny model pre-trained from scratch on it
    with the plain ``mlm``/``clm`` objective (CPU profile). Saved in Hugging Face format at ``out_dir``."""
    from .models import TinyModelConfig, init_model, train_tokenizer

    tiny = tiny or TinyModelConfig(kind=kind)
    if tiny.kind != kind:
        raise ToolkitError(f"tiny model config is for {tiny.kind!r}, asked for {kind!r}")
    cfg = config or TrainConfig(epochs=[15], batch_size=8, learning_rate=2e-3, warmup_steps=50,
                                max_length=tiny.max_length)
    tokenizer = train_tokenizer((d.text for d in corpus), kind, tiny.vocab_size)
    model = init_model(tokenizer, tiny, seed=cfg.seed)
    out = Path(out_dir)
    work = out.with_name(f".{out.name}.pretrain")
    ckpts = train(corpus, "scratch", work, "mlm" if kind == "mlm" else "clm", cfg, model=model,
                  tokenizer=tokenizer, progress=progress)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(ckpts[-1][1], out)
    shutil.rmtree(work)
    return out
