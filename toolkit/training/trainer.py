"""One training entry point for every strategy (methods.md §3): Hugging Face ``Trainer`` for the standard strategies,
an Opacus DP-SGD loop for ``*_dp``; checkpoints at chosen epochs; an interrupted run resumes.

Layout of a run directory::

    RUN_DIR/
      run.json              strategy, config, fingerprints of the corpus, the base and the identifiers (a resume
                            with others is refused: toolkit.training.provenance), status; DP runs: "dp" with the
                            privacy unit, spent ε and δ (written atomically)
      epoch-4/              a Hugging Face model + tokenizer + training_log.json, for every checkpoint epoch
      epoch-8/ ...
      trainer/checkpoint-*  the full training state of the last checkpoint epoch (optimizer, scheduler, RNG): resume
      surrogate.key         *_surrogate strategies: the secret key of the run's surrogates (owner-only; a resume
                            reuses it: toolkit.strategies.surrogates.run_surrogate_key)

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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from toolkit.corpus import Corpus
from toolkit.errors import ToolkitError
from toolkit.io import atomic_write_json, make_private_dir
from toolkit.strategies import Strategy, get_strategy, require_identifiers, training_set
from toolkit.training.checkpoints import (checkpoint_dirs, checkpoint_steps, export_missing_epoch, last_state,
                                          save_checkpoint)
from toolkit.training.hf import (IndexedCollator, labelled_progress, make_collator, quiet_trainer, recording_trainer,
                                 sparse_head_trainer)
from toolkit.training.provenance import TrainingInputs, check_same_inputs

log = logging.getLogger(__name__)


@dataclass
class DPConfig:
    """DP-SGD parameters (methods.md §3: ε = 8, δ = 1e-5, C = 10) and the privacy unit the (ε, δ) guarantee is about.

    ``unit = "individual"`` (default; a clinical corpus holds several notes per patient): each step Poisson-samples
    individuals and trains on one chunk of each, so ε bounds what the model reveals about a *patient*.
    ``unit = "chunk"``: Poisson-samples chunks; ε then bounds one chunk, and a patient with m chunks is only
    protected at about m·ε (group privacy). See :mod:`toolkit.training.dp`.
    """

    epsilon: float = 8.0
    delta: float = 1e-5
    max_grad_norm: float = 10.0
    unit: str = "individual"  # "individual" | "chunk"

    def __post_init__(self) -> None:
        if self.unit not in ("individual", "chunk"):
            raise ToolkitError(f"dp.unit must be 'individual' or 'chunk', got {self.unit!r}")


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


def train(corpus: Corpus, base: str | Path, run_dir: str | Path, strategy: str | Strategy,
          config: TrainConfig | None = None, *, positions=None, spans=None, progress: bool = True,
          model=None, tokenizer=None, callbacks=(), public: Corpus | None = None) -> list[tuple[int, Path]]:
    """Fine-tune ``base`` (HF id or directory) on ``corpus`` with ``strategy``; returns the checkpoints.

    ``positions`` / ``spans`` are the identifiers step's ``positions.parquet`` / ``spans.parquet`` frames (needed by
    the protecting and pseudonymising strategies), as ``load_identifiers`` returns them: they must cover every
    document of ``corpus``, made from exactly its text, or training is refused
    (:func:`~toolkit.strategies.require_identifiers`). A run directory with finished checkpoints resumes from the
    last full training state; a run whose ``run.json`` names another strategy or corpus, or another base model or
    other identifiers (:mod:`toolkit.training.provenance`), is refused.
    ``model``/``tokenizer`` may be passed instead of loading ``base`` (used to pre-train a base from scratch).
    ``public``: public documents (the run pipeline passes the public reserve, ``corpus.public_reserve``, else the
    base's pre-training split), needed by the gradient-subspace strategies (``Strategy.subspace``,
    :mod:`toolkit.training.subspace`), whose basis is computed from them and from nothing else.
    """
    from toolkit.models import load_model, model_kind

    cfg = config or TrainConfig()
    strat = get_strategy(strategy) if isinstance(strategy, str) else strategy
    require_identifiers(corpus, strat, positions, spans)
    if strat.subspace and not public:
        raise ToolkitError(f"strategy {strat.name} needs the public split's documents (corpus.public_split)")
    run = make_private_dir(run_dir)
    run.chmod(0o700)
    fingerprint = corpus_fingerprint(corpus)
    made_from = TrainingInputs.of(base, strat, positions, spans, model, tokenizer)  # run.json's resume check
    meta_path = run / "run.json"
    if meta_path.is_file():
        try:
            old = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # written atomically by the toolkit: this file was edited or damaged
            raise ToolkitError(f"{meta_path}: unreadable ({exc}); use a new run directory") from exc
        if old.get("strategy") != strat.name or old.get("corpus") != fingerprint:
            raise ToolkitError(f"{run} holds a run of strategy {old.get('strategy')!r} on another corpus or strategy; "
                               f"use a new run directory")
        if checkpoint_dirs(run) or last_state(run / "trainer") is not None:  # something trained that could mix
            check_same_inputs(old, base=made_from.base_fingerprint,
                              identifiers=made_from.identifiers_fingerprint, run=run)
        done = {e for e, _ in checkpoint_dirs(run)}
        if old.get("status") == "done" and _same_config(old.get("config") or {}, cfg, uses_dp=strat.dp) \
                and set(cfg.epochs) <= done:
            return checkpoint_dirs(run)  # finished earlier with the same settings: nothing to do
    if model is None:
        model, tokenizer = load_model(base, kind=strat.kind)
    if model_kind(model) != strat.kind:
        raise ToolkitError(f"strategy {strat.name} needs a {'masked' if strat.kind == 'mlm' else 'causal'} LM, "
                           f"{base} is a {model_kind(model)} model")
    meta = {"strategy": strat.name, "kind": strat.kind, "base": str(base), "config": asdict(cfg),
            "corpus": fingerprint, **({"public": corpus_fingerprint(public)} if strat.subspace else {}),
            **asdict(made_from), "status": "running", "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    atomic_write_json(meta, meta_path)
    max_length = min(cfg.max_length, _model_max_length(model))
    key = None
    if strat.text == "surrogate":  # secret, kept in the run directory so that a resume draws the same surrogates
        from toolkit.strategies.surrogates import run_surrogate_key

        key = run_surrogate_key(run, resuming=bool(checkpoint_dirs(run)) or last_state(run / "trainer") is not None)
    data = training_set(corpus, tokenizer, strat, positions=positions, spans=spans, max_length=max_length,
                        progress=progress, surrogate_key=key)
    examples = data.examples
    t0 = time.perf_counter()
    if strat.dp:
        from toolkit.training.dp import train_dp

        if cfg.checkpoints_per_epoch:
            raise ToolkitError("checkpoints_per_epoch (step checkpoints) is not available with DP-SGD strategies")

        anchors = None if not strat.subspace else training_set(  # plain text, every token a target: public data
            public, tokenizer, get_strategy(strat.kind), positions=None, max_length=max_length, progress=False).examples
        stats = train_dp(model, tokenizer, examples, strat, cfg, run, individuals=data.person_ids, public=anchors,
                         progress=progress)
    else:
        stats = _train_hf(model, tokenizer, examples, strat, cfg, run, progress=progress, callbacks=callbacks)
    if stats.get("steps") is None and meta_path.is_file():  # nothing left to train: keep the first run's figures
        earlier = json.loads(meta_path.read_text(encoding="utf-8"))
        stats = {**stats, **{k: earlier[k] for k in ("seconds", "train_seconds", "tokens_per_second", "steps")
                              if earlier.get(k) is not None}}
    meta.update({"status": "done", "seconds": round(time.perf_counter() - t0, 1), **stats})
    atomic_write_json(meta, meta_path)
    return checkpoint_dirs(run)


def _same_config(saved: dict[str, Any], cfg: TrainConfig, *, uses_dp: bool = True) -> bool:
    """A saved run's config equals ``cfg``; a field added to ``TrainConfig`` (or ``DPConfig``) after the run was
    saved counts as equal when ``cfg`` keeps its default (so upgrading the toolkit does not retrain finished runs).

    The DP settings only count for DP strategies (``uses_dp``). ``dp.unit`` is the exception to the rule: a run saved
    before it existed sampled chunks, so it counts as ``"chunk"``, not as the default."""
    current, default = asdict(cfg), asdict(TrainConfig())
    if not uses_dp:
        saved, current = {k: v for k, v in saved.items() if k != "dp"}, {k: v for k, v in current.items() if k != "dp"}
    elif isinstance(saved.get("dp"), dict) and "unit" not in saved["dp"]:
        saved = {**saved, "dp": {**saved["dp"], "unit": "chunk"}}

    def same(old: dict[str, Any], new: dict[str, Any], dflt: dict[str, Any]) -> bool:
        for k, v in old.items():
            if isinstance(v, dict) and isinstance(new.get(k), dict):
                if not same(v, new[k], dflt.get(k) or {}):
                    return False
            elif new.get(k) != v:
                return False
        return all(new[k] == dflt.get(k) for k in new.keys() - old.keys())

    return same(saved, current, default)


def _model_max_length(model) -> int:
    c = model.config
    return int(getattr(c, "max_position_embeddings", None) or getattr(c, "n_positions", None) or 512)


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
        trainer_cls = recording_trainer(trainer_cls, consumed)
        collator = IndexedCollator(collator)
        extra_callbacks.append(StepCheckpoints())
    trainer = trainer_cls(model=model, args=args, train_dataset=dataset, data_collator=collator,
                          callbacks=[EpochCheckpoints(), *extra_callbacks, *callbacks])
    quiet_trainer(trainer, labelled_progress(f"train {strat.name}", max(cfg.epochs), steps_per_epoch,
                                             enabled=progress))
    resume = last_state(state_dir)
    if resume is not None:
        export_missing_epoch(resume, model, tokenizer, run, strat.name, wanted)
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


def build_base(corpus: Corpus, out_dir: str | Path, kind: str, *, tiny=None, config: TrainConfig | None = None,
               progress: bool = True) -> Path:
    """Build a base model offline: a tokenizer trained on ``corpus`` and a tiny model pre-trained from scratch on it
    with the plain ``mlm``/``clm`` objective (CPU profile). Saved in Hugging Face format at ``out_dir``.

    The work folder ``.NAME.pretrain`` keeps the tokenizer beside the run: an interrupted build resumes with the
    tokenizer its weights were trained with (tokenizer training is not bit-reproducible, and the run's base
    fingerprint covers the tokenizer, so a new one would be refused as another base)."""
    from transformers import PreTrainedTokenizerFast

    from toolkit.io import restrict_tree
    from toolkit.models import TinyModelConfig, init_model, train_tokenizer

    tiny = tiny or TinyModelConfig(kind=kind)
    if tiny.kind != kind:
        raise ToolkitError(f"tiny model config is for {tiny.kind!r}, asked for {kind!r}")
    cfg = config or TrainConfig(epochs=[15], batch_size=8, learning_rate=2e-3, warmup_steps=50,
                                max_length=tiny.max_length)
    out = Path(out_dir)
    work = out.with_name(f".{out.name}.pretrain")
    saved = work / "tokenizer"
    if (saved / "tokenizer.json").is_file():
        tokenizer = PreTrainedTokenizerFast.from_pretrained(saved)
    else:
        tokenizer = train_tokenizer((d.text for d in corpus), kind, tiny.vocab_size)
        tmp = make_private_dir(work) / ".tokenizer.tmp"
        if tmp.exists():
            shutil.rmtree(tmp)
        tokenizer.save_pretrained(tmp)
        restrict_tree(tmp).rename(saved)
    model = init_model(tokenizer, tiny, seed=cfg.seed)
    ckpts = train(corpus, "scratch", work, "mlm" if kind == "mlm" else "clm", cfg, model=model,
                  tokenizer=tokenizer, progress=progress)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(ckpts[-1][1], out)
    shutil.rmtree(work)
    return out
