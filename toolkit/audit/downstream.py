"""Downstream utility (methods.md §8): does the fine-tuned model still serve its purpose?

A sequence-classification head is put on the audited checkpoint's encoder (``AutoModelForSequenceClassification``:
BERT / RoBERTa masked-LM checkpoints and GPT-2 causal ones alike), every parameter is frozen except the last
transformer layer(s) and the head, and the model is trained with the Hugging Face ``Trainer`` on a document label
(``Document.labels["smoking"]`` in the clinical sample): 6 epochs, learning rate warmed up linearly over the first 10%
of the steps to 2e-5, then linear decay to 0. The figure is the macro F1 on a held-out corpus.

One example per document, truncated to ``max_length`` tokens (no chunking). The label set is the training corpus's;
:func:`majority_baseline_f1` gives the macro F1 of always predicting the most frequent training label, so that a
reader can tell whether the (tiny, CPU-profile) model learns anything at all.
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from toolkit.errors import ToolkitError

# where the list of transformer blocks lives, relative to the model's base (``model.base_model``)
_LAYER_PATHS = ("encoder.layer", "h", "transformer.layer", "layers", "decoder.layers")


def _doc_labels(corpus: Iterable, label: str, what: str) -> tuple[list[str], list[str]]:
    """``(texts, labels)`` of a corpus; a document without ``label`` is an error naming it."""
    texts, labels = [], []
    for doc in corpus:
        value = doc.labels.get(label) if doc.labels else None
        if value is None or (isinstance(value, str) and not value.strip()):
            have = sorted(doc.labels) if doc.labels else []
            raise ToolkitError(f"{what} document {doc.doc_id!r} has no {label!r} label "
                               f"(its labels: {have or 'none'}); every document needs one for the downstream task")
        texts.append(doc.text)
        labels.append(str(value))
    if not texts:
        raise ToolkitError(f"the {what} corpus is empty")
    return texts, labels


def _label_set(train_labels: list[str], eval_labels: list[str], label: str) -> list[str]:
    classes = sorted(set(train_labels))
    if len(classes) < 2:
        raise ToolkitError(f"the training corpus has a single {label!r} value ({classes[0]!r}); "
                           f"a classifier needs at least two")
    unseen = sorted(set(eval_labels) - set(classes))
    if unseen:
        raise ToolkitError(f"evaluation {label!r} value(s) {unseen} never occur in the training corpus "
                           f"(training values: {classes})")
    return classes


def _scores(gold: list[str], pred: list[str]) -> dict[str, Any]:
    """Macro F1, accuracy and per-class F1 over the classes present in the gold or the predictions (sklearn's
    default class set for ``average="macro"``)."""
    from sklearn.metrics import accuracy_score, f1_score

    present = sorted(set(gold) | set(pred))
    per_class = f1_score(gold, pred, labels=present, average=None, zero_division=0)
    return {"macro_f1": float(f1_score(gold, pred, labels=present, average="macro", zero_division=0)),
            "accuracy": float(accuracy_score(gold, pred)),
            "per_class_f1": {c: float(f) for c, f in zip(present, per_class)}}


def majority_baseline_f1(train_corpus, eval_corpus, label: str = "smoking") -> dict[str, Any]:
    """Scores of always predicting the most frequent training value of ``label`` (ties: the first in sorted order).

    Returns ``{"macro_f1", "accuracy", "majority", "n_train", "n_eval", "labels", "per_class_f1"}``.
    """
    _, train_labels = _doc_labels(train_corpus, label, "training")
    _, eval_labels = _doc_labels(eval_corpus, label, "evaluation")
    classes = _label_set(train_labels, eval_labels, label)
    counts = Counter(train_labels)
    majority = max(classes, key=lambda c: (counts[c], -classes.index(c)))
    return {**_scores(eval_labels, [majority] * len(eval_labels)), "majority": majority,
            "n_train": len(train_labels), "n_eval": len(eval_labels), "labels": classes}


def transformer_layers(model):
    """The ``ModuleList`` of transformer blocks of a (sequence-classification) model, found generically:
    ``encoder.layer`` (BERT, RoBERTa), ``h`` (GPT-2), ``transformer.layer`` (DistilBERT), ``layers`` ..."""
    import torch

    base = getattr(model, "base_model", model)
    for path in _LAYER_PATHS:
        obj = base
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, torch.nn.ModuleList) and len(obj):
            return obj
    raise ToolkitError(f"cannot find the transformer layers of {type(model).__name__} (looked for "
                       f"{', '.join(_LAYER_PATHS)} under its base model); only the last layers can be trained "
                       f"on architectures laid out like BERT, RoBERTa or GPT-2")


def freeze_all_but_last(model, train_last_layers: int = 1, new_parameters: Iterable[str] = ()) -> list[str]:
    """Freeze every parameter except the last ``train_last_layers`` transformer layers, the classification head
    (every parameter outside the base model: ``classifier``, ``score``) and ``new_parameters`` (weights absent from
    the checkpoint, e.g. the pooler of a BERT masked-LM checkpoint, which would otherwise stay a frozen random
    projection). Returns the names of the trainable parameters."""
    if train_last_layers < 0:
        raise ToolkitError(f"train_last_layers must be >= 0, got {train_last_layers}")
    layers = transformer_layers(model)
    if train_last_layers > len(layers):
        raise ToolkitError(f"train_last_layers={train_last_layers} but the model has only {len(layers)} layers")
    keep = {id(p) for layer in list(layers)[len(layers) - train_last_layers:] for p in layer.parameters()}
    prefix = getattr(model, "base_model_prefix", "") + "."
    new = set(new_parameters)
    trainable = []
    for name, param in model.named_parameters():
        train = id(param) in keep or not name.startswith(prefix) or name in new
        param.requires_grad_(train)
        if train:
            trainable.append(name)
    return trainable


def _model_max_length(model, tokenizer, max_length: int) -> int:
    c = model.config
    limits = [max_length, getattr(c, "max_position_embeddings", None) or getattr(c, "n_positions", None)]
    tok_max = getattr(tokenizer, "model_max_length", None)
    if tok_max and tok_max < 1_000_000:
        limits.append(tok_max)
    return int(min(x for x in limits if x))


def downstream_f1(checkpoint: str | Path, train_corpus, eval_corpus, *, label: str = "smoking", epochs: int = 6,
                  learning_rate: float = 2e-5, warmup_ratio: float = 0.1, batch_size: int = 16,
                  max_length: int = 256, seed: int = 0, train_last_layers: int = 1,
                  progress: bool = True) -> dict[str, Any]:
    """Train a classification head (plus the last ``train_last_layers`` layers) of ``checkpoint`` on
    ``train_corpus``'s ``label`` and score it on ``eval_corpus`` (methods.md §8).

    ``checkpoint`` is a Hugging Face id or a saved model directory (an ``epoch-N`` folder of a run). The learning
    rate rises linearly over the first ``warmup_ratio`` of the steps, then decays linearly to 0.

    Returns ``{"macro_f1", "accuracy", "n_train", "n_eval", "labels", "per_class_f1", "epochs", "learning_rate",
    "trainable_parameters", "total_parameters", ...}``. ``labels`` is the training label set; the macro average and
    ``per_class_f1`` cover the classes present in the evaluation gold or the predictions. A document without
    ``label``, or an evaluation value never seen in training, is a :class:`ToolkitError`.
    """
    import numpy as np
    import torch
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, Trainer,
                              TrainingArguments)
    from transformers import set_seed as hf_set_seed

    from toolkit.training.hf import labelled_progress, quiet_trainer

    if epochs < 1 or batch_size < 1 or learning_rate <= 0 or not 0 <= warmup_ratio < 1 or max_length < 2:
        raise ToolkitError("epochs >= 1, batch_size >= 1, learning_rate > 0, 0 <= warmup_ratio < 1 and "
                           "max_length >= 2 are required")
    train_texts, train_labels = _doc_labels(train_corpus, label, "training")
    eval_texts, eval_labels = _doc_labels(eval_corpus, label, "evaluation")
    classes = _label_set(train_labels, eval_labels, label)
    label2id = {c: i for i, c in enumerate(classes)}

    src = str(checkpoint)
    if Path(src).exists() and not (Path(src) / "config.json").is_file():
        raise ToolkitError(f"{src}: no config.json — not a saved Hugging Face model directory")
    try:
        tokenizer = AutoTokenizer.from_pretrained(src)
    except (OSError, ValueError) as exc:
        raise ToolkitError(f"{src}: cannot load the tokenizer ({exc})") from exc
    if tokenizer.pad_token is None:  # GPT-2: pad with end-of-text (the head reads the last non-pad token)
        if tokenizer.eos_token is None:
            raise ToolkitError(f"{src}: the tokenizer has neither a padding nor an end-of-text token")
        tokenizer.pad_token = tokenizer.eos_token

    hf_set_seed(seed)  # the new head's initialisation
    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(
            src, num_labels=len(classes), id2label=dict(enumerate(classes)), label2id=label2id,
            pad_token_id=tokenizer.pad_token_id, output_loading_info=True)
    except (OSError, ValueError, RuntimeError) as exc:
        raise ToolkitError(f"{src}: cannot load it as a sequence classifier ({exc})") from exc
    model.config.pad_token_id = tokenizer.pad_token_id
    trainable = freeze_all_but_last(model, train_last_layers, new_parameters=info.get("missing_keys", ()))
    n_trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    n_total = sum(p.numel() for p in model.parameters())

    limit = _model_max_length(model, tokenizer, max_length)

    def encode(texts: list[str], labels: list[str]) -> list[dict]:
        enc = tokenizer(texts, truncation=True, max_length=limit)
        return [{**{k: enc[k][i] for k in enc.keys()}, "labels": label2id[y]} for i, y in enumerate(labels)]

    class ListDataset(torch.utils.data.Dataset):
        def __init__(self, rows: list[dict]):
            self.rows = rows

        def __len__(self) -> int:
            return len(self.rows)

        def __getitem__(self, i: int) -> dict:
            return dict(self.rows[i])

    train_ds, eval_ds = ListDataset(encode(train_texts, train_labels)), ListDataset(encode(eval_texts, eval_labels))
    total_steps = math.ceil(len(train_ds) / batch_size) * epochs
    warmup_steps = int(math.ceil(warmup_ratio * total_steps))
    with tempfile.TemporaryDirectory(prefix="downstream-") as tmp:
        args = TrainingArguments(
            output_dir=tmp, num_train_epochs=epochs, per_device_train_batch_size=batch_size,
            per_device_eval_batch_size=batch_size, learning_rate=learning_rate, lr_scheduler_type="linear",
            warmup_steps=warmup_steps, weight_decay=0.0, save_strategy="no", eval_strategy="no",
            logging_strategy="no", report_to="none", seed=seed, data_seed=seed, disable_tqdm=not progress,
            use_cpu=not torch.cuda.is_available(), dataloader_num_workers=0, log_level="error")
        trainer = Trainer(model=model, args=args, train_dataset=train_ds,
                          data_collator=DataCollatorWithPadding(tokenizer))
        # one labelled bar (in a log: a line every 30 s) in place of the Trainer's own, and no metrics dict printed
        quiet_trainer(trainer, labelled_progress(f"downstream {label}", epochs, math.ceil(len(train_ds) / batch_size),
                                                 enabled=progress))
        out = trainer.train()
        logits = trainer.predict(eval_ds).predictions
    if isinstance(logits, tuple):
        logits = logits[0]
    pred = [classes[i] for i in np.asarray(logits).argmax(-1)]
    return {**_scores(eval_labels, pred), "n_train": len(train_ds), "n_eval": len(eval_ds), "labels": classes,
            "label": label, "epochs": epochs, "learning_rate": learning_rate, "warmup_steps": warmup_steps,
            "steps": out.global_step, "max_length": limit, "train_last_layers": train_last_layers,
            "trainable_parameters": n_trainable, "total_parameters": n_total,
            "trainable_parameter_names": trainable, "train_seconds": round(out.metrics.get("train_runtime", 0.0), 1)}
