"""Hugging Face pieces of the training loop: the collator of each strategy kind, the sparse-head masked-LM trainer,
and the wrappers that record which examples each optimizer step consumed (step checkpoints)."""

from __future__ import annotations

from toolkit.strategies import Strategy


def make_collator(tokenizer, strat: Strategy, cfg):
    """The collator of a strategy kind: protected whole-word masking (MLM) or padding with -100 labels (CLM)."""
    if strat.kind == "mlm":
        from toolkit.strategies.masked import ProtectedWholeWordCollator

        # no private generator: the global torch RNG (seeded by the Trainer, saved and restored with its checkpoints)
        # drives the masks, so a resumed run draws exactly the masks an uninterrupted run would have drawn
        return ProtectedWholeWordCollator(tokenizer=tokenizer, mlm_probability=cfg.mlm_probability)
    from transformers import DataCollatorForSeq2Seq

    # pads input_ids with the pad token and labels with -100; protected tokens already carry -100
    return DataCollatorForSeq2Seq(tokenizer=tokenizer, label_pad_token_id=-100, padding=True)


class IndexedCollator:
    """Wraps a collator: takes each feature's ``example_index`` out before collating and returns the batch's
    indices as the tensor ``batch["example_index"]`` (read and removed by :func:`recording_trainer`)."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, features):
        import torch

        features = [dict(f) for f in features]
        idx = [int(f.pop("example_index")) for f in features]
        batch = self.inner(features)
        batch["example_index"] = torch.tensor(idx, dtype=torch.long)
        return batch


def recording_trainer(base_cls, consumed: set[int]):
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


def labelled_progress(label: str, n_epochs: int, steps_per_epoch: int, *, enabled: bool):
    """A Trainer callback that replaces the Hugging Face progress bar and its printed log dictionaries with one
    labelled bar per run (``train clm epoch 3/12``), or with nothing when ``enabled`` is false."""
    from transformers import TrainerCallback

    from toolkit.progress import progress_bar

    class LabelledProgress(TrainerCallback):
        bar = None

        def on_train_begin(self, args, state, control, **kw):
            if enabled and state.is_world_process_zero:
                self.bar = progress_bar(
                    total=n_epochs * steps_per_epoch, initial=state.global_step, unit="step",
                    desc=f"{label} epoch {int(state.global_step // steps_per_epoch) + 1}/{n_epochs}")

        def on_step_end(self, args, state, control, **kw):
            if self.bar is not None:
                epoch = min(n_epochs, int((state.global_step - 1) // steps_per_epoch) + 1)
                self.bar.set_description(f"{label} epoch {epoch}/{n_epochs}", refresh=False)
                self.bar.update(state.global_step - self.bar.n)

        def on_train_end(self, args, state, control, **kw):
            if self.bar is not None:
                self.bar.close()
                self.bar = None

    return LabelledProgress()


def quiet_trainer(trainer, progress_callback) -> None:
    """Remove the Trainer's own progress bar and its printing of log dictionaries; add ``progress_callback``."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(progress_callback)


__all__ = ["IndexedCollator", "labelled_progress", "make_collator", "quiet_trainer", "recording_trainer",
           "sparse_head_trainer"]
