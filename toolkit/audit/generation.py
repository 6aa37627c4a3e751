"""Greedy generation from a causal language model: the one batched decoding loop of the toolkit.

Used by free-running regurgitation (:func:`toolkit.audit.probe_causal.regurgitation_rate`), the e-mail extraction
attack (:func:`toolkit.audit.extraction.extract_checkpoint`) and :func:`generate_continuations` for notebooks.

:func:`generate_ids` — greedy decoding (``do_sample=False``, one beam) with a KV cache, batched with left padding;
prompts are sorted by length so that a batch pads little, and every continuation is cut at its first EOS token
(:func:`eos_ids`: the model's generation config, else its config, else the tokenizer). Batched and prompt-by-prompt
generation give the same strings; ``benchmarks/probe_causal.py`` measured batched generation ~10x faster than
prompt by prompt on CPU, and ``benchmarks/extraction.py`` compares the two on the extraction prompts.
"""

from __future__ import annotations


from toolkit.audit.probe_masked import max_positions
from toolkit.errors import ToolkitError
from toolkit.progress import progress_bar


def context_token(tokenizer) -> int | None:
    """BOS, else EOS: the "start of document" token of a causal tokenizer (``None`` when it has neither)."""
    for name in ("bos_token_id", "eos_token_id"):
        v = getattr(tokenizer, name, None)
        if v is not None:
            return int(v)
    return None


def eos_ids(model, tokenizer) -> list[int]:
    """The token ids that end a continuation: the model's generation config, else its config, else the tokenizer's."""
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos is None:
        eos = getattr(getattr(model, "config", None), "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    if eos is None:
        return []
    return [int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])]


def generate_ids(model, tokenizer, prompt_ids: list[list[int]], *, max_new_tokens: int = 64, batch_size: int = 32,
                 progress: bool = True, device=None) -> list[list[int]]:
    """Greedy continuations (token ids, up to and excluding the first EOS) of prompts given as token ids.

    Batched with left padding (the prompts are sorted by length, so a batch pads little), KV cache on. A prompt that
    leaves fewer than ``max_new_tokens`` positions in the model's window keeps only its last tokens; an empty prompt
    starts from the BOS (else EOS) token.
    """
    import torch
    from transformers import GenerationConfig

    if max_new_tokens < 1 or batch_size < 1:
        raise ToolkitError(f"max_new_tokens and batch_size must be >= 1, got {max_new_tokens}, {batch_size}")
    eos = eos_ids(model, tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos[0] if eos else 0)
    room = max_positions(model, tokenizer, 1 << 30) - max_new_tokens
    if room < 1:
        raise ToolkitError(f"max_new_tokens {max_new_tokens} does not fit in the model's window")
    start = context_token(tokenizer)
    prompts = []
    for ids in prompt_ids:
        ids = [int(i) for i in ids][-room:]
        if not ids:
            if start is None:
                raise ToolkitError("an empty prompt needs a BOS or EOS token to start from")
            ids = [start]
        prompts.append(ids)
    if device is not None:
        model.to(device)
    dev = next(model.parameters()).device
    config = GenerationConfig(max_new_tokens=int(max_new_tokens), do_sample=False, num_beams=1, use_cache=True,
                              pad_token_id=int(pad), eos_token_id=eos or None)
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    out: list[list[int] | None] = [None] * len(prompts)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for b0 in progress_bar(range(0, len(order), batch_size), desc="generating", unit="batch",
                                   enabled=progress):
                batch = order[b0:b0 + batch_size]
                L = max(len(prompts[i]) for i in batch)
                x = torch.full((len(batch), L), int(pad), dtype=torch.long)
                att = torch.zeros((len(batch), L), dtype=torch.long)
                for j, i in enumerate(batch):
                    n = len(prompts[i])
                    x[j, L - n:] = torch.tensor(prompts[i], dtype=torch.long)
                    att[j, L - n:] = 1
                gen = model.generate(input_ids=x.to(dev), attention_mask=att.to(dev), generation_config=config)
                new = gen[:, L:].cpu().tolist()
                for j, i in enumerate(batch):
                    seq = new[j]
                    stop = next((p for p, tok in enumerate(seq) if tok in eos), len(seq))
                    out[i] = seq[:stop]
    finally:
        if was_training:
            model.train()
    return out  # type: ignore[return-value]


def generate_continuations(model, tokenizer, prompts: list[str], *, max_new_tokens: int = 64, batch_size: int = 32,
                           progress: bool = True, device=None) -> list[str]:
    """Greedy continuations of ``prompts`` (the generated text only, special tokens skipped), KV cache on, batched
    with left padding: the same strings as generating prompt by prompt (``batch_size=1``).

    Prompts are encoded as the tokenizer encodes a sequence (``add_special_tokens=True``: nothing added for GPT-2,
    ``<s>`` for Llama-style tokenizers). For prompts cut from a training document, :func:`regurgitation_rate`.
    """
    enc = tokenizer(list(prompts), add_special_tokens=True)["input_ids"] if prompts else []
    ids = generate_ids(model, tokenizer, enc, max_new_tokens=max_new_tokens, batch_size=batch_size,
                       progress=progress, device=device)
    return tokenizer.batch_decode(ids, skip_special_tokens=True) if ids else []


__all__ = ["context_token", "eos_ids", "generate_continuations", "generate_ids"]
