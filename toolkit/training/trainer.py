"""One training entry point for every strategy (SPEC §3): Hugging Face ``Trainer`` for the standard strategies,
an Opacus DP-SGD loop for ``*_dp``; checkpoints at chosen epochs; an interrupted run resumes.

Layout of a run directory::

    RUN_DIR/
      run.json              strategy, config, data fingerprint, status (written atomically)
      epoch-4/              a Hugging Face model + tokenizer + training_log.json, for every checkpoint epoch
      epoch-8/ ...
      trainer/checkpoint-*  the full training state of the last checkpoint epoch (optimizer, scheduler, RNG): resume

Only the last full-state checkpoint is kept; ``epoch-N`` folders hold the weights the audits load.

Step checkpoints (``TrainConfig.checkpoints_per_epoch = k > 0``, paper 002 §4: "checkpointing the LLM at every 10%
training steps" and "the data seen until every checkpoint"): besides the epoch checkpoints, the weights are exported
every ``1/k`` of an epoch's optimizer steps as ``RUN_DIR/step-S/`` (``S`` = global step); its
``training_log.json`` holds ``checkpoint`` (1, 2, … in training order), ``epoch`` (``S`` / steps per epoch) and
``consumed_examples``: the sorted indices of the training examples (chunks, in the order
:func:`~toolkit.strategies.training_examples` builds them) of every batch actually consumed up to step ``S``. The
indices are recorded inside the trainer's ``training_step`` (not at collation, which runs a batch ahead), stored
with every full-state checkpoint and restored on resume, so an interrupted run records what an uninterrupted one
would. The step exports are weights only; a run resumes from the last full state (an epoch in ``epochs``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import shutil
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


from toolkit.corpus import Corpus
from toolkit.errors import ToolkitError
from toolkit.io import atomic_write_json, make_private_dir, restrict_tree
from toolkit.strategies import Strategy, get_strategy, training_examples

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
    ``checkpoints_per_epoch`` = k > 0 adds step checkpoints every ``1/k`` of an epoch's optimizer steps with the
    examples consumed so far (``RUN_DIR/step-S``, see the module docstring; paper 002: k = 10); 0 (default) keeps
    the epoch checkpoints only. Not available with DP-SGD. ``group_by_length`` draws batches of chunks of similar
    length (Hugging Face's ``LengthGroupedSampler``: random mega-batches of 50 batches, sorted inside), so less
    compute goes to padding; every example is still seen once per epoch.
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
    checkpoints_per_epoch: int = 0  # k > 0: also export RUN_DIR/step-S every 1/k epoch with the consumed examples
    group_by_length: bool = False  # batches of similar lengths (HF LengthGroupedSampler): less padding, same data
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
        if isinstance(self.checkpoints_per_epoch, bool) or not isinstance(self.checkpoints_per_epoch, int) \
                or self.checkpoints_per_epoch < 0:
            raise ToolkitError(f"checkpoints_per_epoch must be an integer >= 0, got {self.checkpoints_per_epoch!r}")


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


def train(corpus: Corpus, base: str | Path, run_dir: str | Path, strategy: str | Strategy,
          config: TrainConfig | None = None, *, positions=None, spans=None, progress: bool = True,
          model=None, tokenizer=None, callbacks=()) -> list[tuple[int, Path]]:
    """Fine-tune ``base`` (HF id or directory) on ``corpus`` with ``strategy``; returns the checkpoints.

    ``positions`` / ``spans`` are the identifiers step's ``positions.parquet`` / ``spans.parquet`` frames (needed by
    the protecting and pseudonymising strategies). A run directory with finished checkpoints resumes from the last
    full training state; a run whose ``run.json`` names another strategy or corpus is refused.
    ``model``/``tokenizer`` may be passed instead of loading ``base`` (used to pre-train a base from scratch).
    """
    from toolkit.models import load_model, model_kind

    cfg = config or TrainConfig()
    strat = get_strategy(strategy) if isinstance(strategy, str) else strategy
    run = make_private_dir(run_dir)
    run.chmod(0o700)
    fingerprint = corpus_fingerprint(corpus)
    meta_path = run / "run.json"
    if meta_path.is_file():
        try:
            old = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # written atomically by the toolkit: this file was edited or damaged
            raise ToolkitError(f"{meta_path}: unreadable ({exc}); use a new run directory") from exc
        if old.get("strategy") != strat.name or old.get("corpus") != fingerprint:
            raise ToolkitError(f"{run} holds a run of strategy {old.get('strategy')!r} on another corpus or strategy; "
                               f"use a new run directory")
        done = {e for e, _ in checkpoint_dirs(run)}
        if old.get("status") == "done" and _same_config(old.get("config") or {}, cfg) and set(cfg.epochs) <= done:
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
        from toolkit.training.dp import train_dp

        if cfg.checkpoints_per_epoch:
            raise ToolkitError("checkpoints_per_epoch (step checkpoints) is not available with DP-SGD strategies")

        stats = train_dp(model, tokenizer, examples, strat, cfg, run, progress=progress)
    else:
        stats = _train_hf(model, tokenizer, examples, strat, cfg, run, progress=progress, callbacks=callbacks)
    if stats.get("steps") is None and meta_path.is_file():  # nothing left to train: keep the first run's figures
        earlier = json.loads(meta_path.read_text(encoding="utf-8"))
        stats = {**stats, **{k: earlier[k] for k in ("seconds", "train_seconds", "tokens_per_second", "steps")
                              if earlier.get(k) is not None}}
    meta.update({"status": "done", "seconds": round(time.perf_counter() - t0, 1), **stats})
    atomic_write_json(meta, meta_path)
    return checkpoint_dirs(run)


def _same_config(saved: dict[str, Any], cfg: TrainConfig) -> bool:
    """A saved run's config equals ``cfg``; a field added to ``TrainConfig`` after the run was saved counts as equal
    when ``cfg`` keeps its default (so upgrading the toolkit does not retrain finished runs)."""
    current, default = asdict(cfg), asdict(TrainConfig())
    return all(current.get(k) == v for k, v in saved.items()) and \
        all(current[k] == default[k] for k in current.keys() - saved.keys())


def _model_max_length(model) -> int:
    c = model.config
    return int(getattr(c, "max_position_embeddings", None) or getattr(c, "n_positions", None) or 512)


def make_collator(tokenizer, strat: Strategy, cfg: TrainConfig):
    """The collator of a strategy kind: protected whole-word masking (MLM) or padding with -100 labels (CLM)."""
    if strat.kind == "mlm":
        from toolkit.strategies.masked import ProtectedWholeWordCollator

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

    SparseHeadTrainer = sparse_head_trainer()

    class ListDataset(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return len(examples)

        def __getitem__(self, i: int) -> dict:
            return dict(examples[i])

    state_dir = run / "trainer"
    wanted = set(cfg.epochs)
    history: list[dict[str, Any]] = []
    record = cfg.checkpoints_per_epoch > 0
    consumed: set[int] = set()  # indices of the examples of every batch consumed so far (step checkpoints only)
    steps_per_epoch = math.ceil(len(examples) / cfg.batch_size)
    step_index = checkpoint_steps(len(examples), cfg.batch_size, max(cfg.epochs), cfg.checkpoints_per_epoch) \
        if record else {}

    if record:
        class IndexedDataset(ListDataset):
            def __getitem__(self, i: int) -> dict:
                return {**examples[i], "example_index": i}

        dataset = IndexedDataset()
    else:
        dataset = ListDataset()

    def consumed_log() -> dict[str, Any]:
        return {"consumed_examples": sorted(consumed), "n_examples": len(examples)} if record else {}

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
            if not state.is_world_process_zero:  # several processes (accelerate launch): the first one exports
                return
            epoch = round(state.epoch)
            if record:  # the consumed examples travel with the full state, for resume
                ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                if ckpt.is_dir():
                    atomic_write_json(consumed_log(), ckpt / "consumed_examples.json")
            if epoch in wanted:
                save_checkpoint(model, tokenizer, run / f"epoch-{epoch}",
                                 {"strategy": strat.name, "epoch": epoch, "global_step": state.global_step,
                                  "log_history": history + [h for h in state.log_history if h not in history],
                                  **consumed_log()})

    class StepCheckpoints(TrainerCallback):
        """Export ``step-S`` (weights + consumed examples) every ``1/checkpoints_per_epoch`` of an epoch."""

        def on_step_end(self, args, state, control, model=None, **kw):
            if state.global_step in step_index and state.is_world_process_zero:
                save_checkpoint(model, tokenizer, run / f"step-{state.global_step}",
                                 {"strategy": strat.name, "checkpoint": step_index[state.global_step],
                                  "global_step": state.global_step,
                                  "epoch": round(state.global_step / steps_per_epoch, 6),
                                  "checkpoints_per_epoch": cfg.checkpoints_per_epoch,
                                  "log_history": list(history), **consumed_log()})

    args = TrainingArguments(
        output_dir=str(state_dir), num_train_epochs=max(cfg.epochs), per_device_train_batch_size=cfg.batch_size,
        learning_rate=cfg.learning_rate, lr_scheduler_type=cfg.lr_schedule if cfg.lr_schedule == "linear"
        else "constant_with_warmup", warmup_steps=cfg.warmup_steps, weight_decay=cfg.weight_decay,
        save_strategy="no", save_total_limit=1, save_only_model=False, logging_steps=max(1, steps_per_epoch), report_to="none",
        train_sampling_strategy="group_by_length" if cfg.group_by_length else "random",
        seed=cfg.seed, data_seed=cfg.seed, remove_unused_columns=False, disable_tqdm=not progress, use_cpu=not
        torch.cuda.is_available(), dataloader_num_workers=0, log_level="error")
    trainer_cls = SparseHeadTrainer if (strat.kind == "mlm" and cfg.sparse_mlm_head) else Trainer
    collator = make_collator(tokenizer, strat, cfg)
    extra_callbacks = []
    if record:
        trainer_cls = _recording_trainer(trainer_cls, consumed)
        collator = _IndexedCollator(collator)
        extra_callbacks.append(StepCheckpoints())
    trainer = trainer_cls(model=model, args=args, train_dataset=dataset, data_collator=collator,
                          callbacks=[EpochCheckpoints(), *extra_callbacks, *callbacks])
    resume = _last_state(state_dir)
    if resume is not None:
        _export_missing_epoch(resume, model, tokenizer, run, strat, wanted)
    if resume is not None and round(json.loads((resume / "trainer_state.json").read_text())["epoch"]) >= max(wanted):
        return {"resumed_from": str(resume), "steps": None}
    if resume is not None and record:
        saved = resume / "consumed_examples.json"
        if not saved.is_file():
            raise ToolkitError(f"{resume} has no consumed_examples.json (the run was interrupted while saving); "
                               f"delete {state_dir} to restart the run from scratch")
        consumed.update(json.loads(saved.read_text())["consumed_examples"])
    out = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    tokens = int(sum(len(e["input_ids"]) for e in examples)) * max(cfg.epochs)
    return {"resumed_from": str(resume) if resume else None, "steps": out.global_step,
            "train_seconds": round(out.metrics.get("train_runtime", 0.0), 1),
            "tokens_per_second": round(tokens / max(out.metrics.get("train_runtime", 1e-9), 1e-9), 1)}


class _IndexedCollator:
    """Wraps a collator: takes each feature's ``example_index`` out before collating and returns the batch's
    indices as the tensor ``batch["example_index"]`` (read and removed by :func:`_recording_trainer`)."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, features):
        import torch

        features = [dict(f) for f in features]
        idx = [int(f.pop("example_index")) for f in features]
        batch = self.inner(features)
        batch["example_index"] = torch.tensor(idx, dtype=torch.long)
        return batch


def _recording_trainer(base_cls, consumed: set[int]):
    """A subclass of ``base_cls`` whose ``training_step`` adds the batch's example indices to ``consumed`` (the
    batch actually trained on: the dataloader prefetches, so collation time would be one batch early)."""

    class RecordingTrainer(base_cls):
        def training_step(self, model, inputs, num_items_in_batch=None):
            idx = inputs.pop("example_index", None)
            if idx is not None:
                consumed.update(int(i) for i in idx.tolist())
            return super().training_step(model, inputs, num_items_in_batch)

    return RecordingTrainer


def sparse_head_trainer():
    import torch
    from transformers import Trainer

    from toolkit.models import split_lm_head

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




def _last_state(state_dir: Path) -> Path | None:
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


def _export_missing_epoch(resume: Path, model, tokenizer, run: Path, strat: Strategy, wanted: set[int]) -> None:
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
                     {"strategy": strat.name, "epoch": epoch, "global_step": state.get("global_step"),
                      "log_history": state.get("log_history", []), "exported_from": resume.name})


def build_base(corpus: Corpus, out_dir: str | Path, kind: str, *, tiny=None, config: TrainConfig | None = None,
               progress: bool = True) -> Path:
    """Build a base model offline: a tokenizer trained on ``corpus`` and a tiny model pre-trained from scratch on it
    with the plain ``mlm``/``clm`` objective (CPU profile). Saved in Hugging Face format at ``out_dir``."""
    from toolkit.models import TinyModelConfig, init_model, train_tokenizer

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
