"""Settings of the e-mail extraction experiment (paper 002; methods.md §3 "RMFT" row and §6).

A profile's ``email`` section (``toolkit/configs/*.yaml``) fills :class:`EmailProfile`: the fine-tuning schedule
shared by the baseline, RMFT and dedup runs, the extraction attack and the held-out perplexity settings, and how
much of the sample a small machine uses. The paper profile follows 002 §3–4: 3 epochs, constant lr 2e-5, a
checkpoint every 10% of an epoch's steps (30 checkpoints; the paper averages "over the 30 checkpoints"), prompts of
50 tokens, greedy decoding to at most 256 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from toolkit.audit.extraction import ExtractionConfig  # the attack's own settings (toolkit.audit.extraction)
from toolkit.errors import ToolkitError
from toolkit.training import TrainConfig


@dataclass
class EmailProfile:
    """The ``email`` section of a profile.

    ``base``: the causal base model (HF id or path) — ``None``: the profile's ``base.clm`` (the tiny model built
    from scratch in the CPU profile). ``pretrain`` / ``public_documents``: how that tiny base is pre-trained, on
    ``public_documents`` synthetic messages among *other* people (:func:`~toolkit.samples.email.public_email_corpus`,
    given to :func:`~toolkit.pipelines.email_extraction.ensure_email_base`). ``finetune``: schedule of the
    baseline / RMFT / dedup runs (``checkpoints_per_epoch`` > 0 for step checkpoints). ``train_documents`` /
    ``heldout_documents``: use only the first N training / held-out
    messages (``None``: all; the CPU profile's time budget). ``corpus_prompts``: prompts cut from the training
    messages right before an address (:func:`~toolkit.audit.prompts.address_prompts`; 0: none), used with the
    prompt file. ``rmft_seed``: RMFT's seed.
    """

    finetune: TrainConfig = field(default_factory=lambda: TrainConfig(
        epochs=[1, 2, 3], batch_size=16, learning_rate=2e-5, lr_schedule="constant", max_length=512,
        checkpoints_per_epoch=10))
    extraction: ExtractionConfig = field(default_factory=ExtractionConfig)
    base: str | None = None
    pretrain: TrainConfig = field(default_factory=lambda: TrainConfig(
        epochs=[3], batch_size=16, learning_rate=2e-3, lr_schedule="constant", max_length=256))
    public_documents: int = 1000
    train_documents: int | None = None
    heldout_documents: int | None = None
    corpus_prompts: int = 300
    rmft_seed: int = 0

    @classmethod
    def from_dict(cls, data: dict, where: str) -> "EmailProfile":
        from toolkit.config import check_keys, typed_section  # lazy: toolkit.config imports this module

        check_keys(cls, data, where)
        kw = dict(data)
        try:
            for key in ("finetune", "pretrain"):
                if key in kw:
                    kw[key] = typed_section(TrainConfig, kw[key], f"{where}.{key}")
            if "extraction" in kw:
                kw["extraction"] = typed_section(ExtractionConfig, kw["extraction"], f"{where}.extraction")
            out = cls(**kw)
        except (TypeError, ValueError) as exc:
            raise ToolkitError(f"{where}: {exc}") from exc
        for name in ("train_documents", "heldout_documents"):
            v = getattr(out, name)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise ToolkitError(f"{where}.{name}: a positive integer or null, got {v!r}")
        for name in ("public_documents", "corpus_prompts"):
            v = getattr(out, name)
            if not isinstance(v, int) or v < 0:
                raise ToolkitError(f"{where}.{name}: an integer >= 0, got {v!r}")
        return out


__all__ = ["EmailProfile", "ExtractionConfig"]
