"""DP low-rank adaptation (DP-LoRA) for the ``*_dp_lora*`` strategies (methods.md §3).

Yu et al., ICLR 2022 ("Differentially Private Fine-tuning of Language Models") freeze the pre-trained weights and
train, with DP-SGD, only a low-rank update of chosen weight matrices (LoRA, Hu et al., ICLR 2022): a matrix
``W0 ∈ R^{d×k}`` of the base becomes

    W = W0 + (α / r) · B · A,      B ∈ R^{d×r} (initialised to 0),  A ∈ R^{r×k} (random),  r ≪ min(d, k),

so training starts from the base model exactly, and only ``A`` and ``B`` are parameters of the optimizer. DP-SGD
(:mod:`toolkit.training.dp`: per-example clipping to ``C``, Gaussian noise ``N(0, σ²C²)`` per coordinate, the same
per-individual sampler and RDP accountant) then clips and noises the adapters' gradients only: the noise vector has
``D = Σ r·(d + k)`` coordinates (over the adapted matrices) instead of all ``P`` of the model, its expected norm
``σ·C·√D`` instead of ``σ·C·√P``, while the clipped signal keeps its norm ``≤ C``. The privacy accounting is that of
any DP-SGD run of the same sampling rate, noise multiplier and steps: what is released (the adapters, and the merged
model computed from them and the public base) is a post-processing of the noised gradients.

Adapted matrices (:data:`TARGET_MODULES`): every attention and MLP projection of the transformer blocks — GPT-2's
``c_attn`` (query, key, value), ``c_proj`` (attention output and MLP output) and ``c_fc`` (MLP input); BERT's /
RoBERTa's ``query``, ``key``, ``value`` and the ``dense`` layers of the encoder blocks (not the MLM head's). The
embeddings, layer norms, biases and the head stay the base's. ``α`` is :data:`LORA_ALPHA` = 32 whatever the rank, as
in the authors' GPT-2 runs (r = 4, α = 32) and Microsoft's ``dp-transformers`` (LoRA with Opacus); no dropout on the
adapters (their per-sample gradients are written for ``lora_dropout = 0``).

Checkpoints hold the merged weights (:func:`merged_model`: peft's ``merge_and_unload`` on a copy of the base), so
every audit reads an ordinary Hugging Face model directory and no adapter file.
"""

from __future__ import annotations

import copy
from typing import Any

from toolkit.errors import ToolkitError

#: LoRA's α (the update is scaled by α / r), the same for every rank (Yu et al. 2022's GPT-2 runs: r = 4, α = 32)
LORA_ALPHA = 32
#: the adapted projections per model type: peft's ``target_modules`` (a list of module-name suffixes, or a regex the
#: full module name must match)
TARGET_MODULES: dict[str, list[str] | str] = {
    "gpt2": ["c_attn", "c_proj", "c_fc"],
    "bert": r".*encoder\.layer\.\d+\..*(query|key|value|dense)",
    "roberta": r".*encoder\.layer\.\d+\..*(query|key|value|dense)",
}


def lora_config(model, rank: int, alpha: float = LORA_ALPHA):
    """peft's ``LoraConfig`` of rank ``rank`` on ``model``'s attention and MLP projections (:data:`TARGET_MODULES`);
    GPT-2's ``Conv1D`` stores ``W`` transposed (``fan_in_fan_out``)."""
    from peft import LoraConfig

    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ToolkitError(f"LoRA rank must be a positive integer, got {rank!r}")
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in TARGET_MODULES:
        raise ToolkitError(f"DP-LoRA knows the projections of {', '.join(TARGET_MODULES)} models, not {model_type!r}")
    return LoraConfig(r=rank, lora_alpha=alpha, target_modules=TARGET_MODULES[model_type], lora_dropout=0.0,
                      bias="none", fan_in_fan_out=model_type == "gpt2", init_lora_weights=True)


def add_adapters(model, rank: int, alpha: float = LORA_ALPHA):
    """``model`` (changed in place) with rank-``rank`` adapters, wrapped in a peft ``PeftModel``; only the adapters'
    ``A`` and ``B`` require gradients (``B = 0``: the wrapped model computes the base's outputs exactly)."""
    from peft import get_peft_model

    adapted = get_peft_model(model, lora_config(model, rank, alpha))
    if not adapter_parameters(adapted):
        raise ToolkitError(f"no projection of the {model.config.model_type} model matched the LoRA targets")
    return adapted


def adapter_parameters(adapted) -> dict[str, Any]:
    """The trainable parameters of an adapted model, by name: the adapters' ``lora_A`` / ``lora_B`` weights (a
    :class:`ToolkitError` if anything else is trainable — DP-LoRA's noise dimension would not be what it says)."""
    trainable = {n: p for n, p in adapted.named_parameters() if p.requires_grad}
    other = [n for n in trainable if ".lora_A." not in n and ".lora_B." not in n]
    if other:
        raise ToolkitError(f"DP-LoRA trains the adapters only, but {other[0]} is trainable")
    return trainable


def merged_model(base, adapted):
    """A new model: ``base`` (an untouched copy of the base model, not modified) with ``adapted``'s adapters merged,
    ``W = W0 + (α / r)·B·A`` for every adapted matrix (peft's ``merge_and_unload``), every other weight the base's —
    an ordinary Hugging Face model."""
    from peft import get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict

    config = copy.deepcopy(adapted.peft_config["default"])
    fresh = get_peft_model(copy.deepcopy(base), config)
    state = {k: v.detach().to("cpu") for k, v in get_peft_model_state_dict(adapted).items()}
    result = set_peft_model_state_dict(fresh, state)
    if getattr(result, "unexpected_keys", None):
        raise ToolkitError(f"adapter weights do not fit the base model: {result.unexpected_keys[0]}")
    return fresh.merge_and_unload()


__all__ = ["LORA_ALPHA", "TARGET_MODULES", "adapter_parameters", "add_adapters", "lora_config", "merged_model"]
