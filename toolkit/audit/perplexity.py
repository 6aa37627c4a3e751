"""Held-out perplexity of a causal LM (methods.md §6, paper 002 §3 "Perplexity Evaluation", eq. 3 and 5).

Each document is cut into chunks of at most ``max_length`` tokens exactly as training cuts them
(:func:`~toolkit.strategies.encoding.encode_corpus`: no BOS token, never inside a word), and every chunk goes
through the model once, teacher-forced. Token ``t`` of a chunk is scored by ``−log p(x_t | x_<t)`` from the logits
at ``t − 1``; the first token of a chunk has no context and is not scored (as in training, where it is never a
target). Per document:

``PPL(doc) = exp(Σ NLL / n_scored_tokens)`` — the per-prompt perplexity of 002 eq. 3;

and for the split, ``PPL = exp(Σ_docs Σ NLL / Σ_docs n_scored_tokens)`` (token-weighted, the usual corpus
perplexity) **(choice: eq. 5's PPL)**. Chunks are sorted by length and run in right-padded batches under
``torch.inference_mode()``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.strategies.encoding import encode_corpus
from toolkit.progress import progress_bar

PERPLEXITY_COLUMNS = ["doc_id", "n_tokens", "nll", "perplexity"]


def document_perplexities(model, tokenizer, corpus, *, max_length: int = 512, batch_size: int = 16,
                          progress: bool = True, device=None) -> pd.DataFrame:
    """Per-document perplexity of ``corpus`` under ``model`` (module docstring).

    Returns a frame with :data:`PERPLEXITY_COLUMNS` (``nll``: summed negative log-likelihood in nats over the
    ``n_tokens`` scored tokens; ``perplexity`` NaN for a document with no scored token), in corpus order;
    ``attrs["perplexity"]`` is the token-weighted perplexity of the whole corpus.
    """
    import torch

    if batch_size < 1:
        raise ToolkitError(f"batch_size must be >= 1, got {batch_size}")
    docs = list(corpus)
    limit = int(getattr(model.config, "n_positions", None) or getattr(model.config, "max_position_embeddings", None)
                or max_length)
    enc = encode_corpus([d.text for d in docs], tokenizer, max_length=min(max_length, limit), progress=False)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    if device is not None:
        model.to(device)
    dev = next(model.parameters()).device
    nll = np.zeros(len(docs))
    ntok = np.zeros(len(docs), dtype=np.int64)
    order = sorted(range(len(enc)), key=lambda c: -len(enc.input_ids[c]))
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for b0 in progress_bar(range(0, len(order), batch_size), desc="perplexity", unit="batch",
                                   enabled=progress):
                batch = order[b0:b0 + batch_size]
                L = max(len(enc.input_ids[c]) for c in batch)
                if L < 2:
                    continue
                x = np.full((len(batch), L), pad, dtype=np.int64)
                att = np.zeros((len(batch), L), dtype=np.int64)
                for j, c in enumerate(batch):
                    ids = enc.input_ids[c]
                    x[j, :len(ids)] = ids
                    att[j, :len(ids)] = 1
                xt, at = torch.from_numpy(x).to(dev), torch.from_numpy(att).to(dev)
                logits = model(input_ids=xt, attention_mask=at, use_cache=False).logits[:, :-1].float()
                loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), xt[:, 1:], reduction="none")
                mask = at[:, 1:].to(loss.dtype)
                per_seq = (loss * mask).sum(1).cpu().numpy()
                counts = at[:, 1:].sum(1).cpu().numpy()
                for j, c in enumerate(batch):
                    d = int(enc.chunk_doc[c])
                    nll[d] += float(per_seq[j])
                    ntok[d] += int(counts[j])
    finally:
        if was_training:
            model.train()
    with np.errstate(divide="ignore", invalid="ignore"):
        ppl = np.where(ntok > 0, np.exp(nll / np.maximum(ntok, 1)), np.nan)
    out = pd.DataFrame({"doc_id": [d.doc_id for d in docs], "n_tokens": ntok, "nll": nll, "perplexity": ppl},
                       columns=PERPLEXITY_COLUMNS)
    total = int(ntok.sum())
    out.attrs["perplexity"] = math.exp(float(nll.sum()) / total) if total else float("nan")
    out.attrs["n_tokens"] = total
    return out


def corpus_perplexity(frame: pd.DataFrame) -> float:
    """Token-weighted perplexity of a :func:`document_perplexities` frame: ``exp(Σ nll / Σ n_tokens)``."""
    total = int(frame["n_tokens"].sum())
    return math.exp(float(frame["nll"].sum()) / total) if total else float("nan")


__all__ = ["PERPLEXITY_COLUMNS", "corpus_perplexity", "document_perplexities"]
