"""ReCaLL (Xie et al., "ReCaLL: Membership Inference via Relative Conditional Log-Likelihoods", EMNLP 2024; as
``mimir/attacks/recall.py`` in iamgroot42/mimir).

A non-member prefix :math:`P` changes how likely the model finds a text; for a text it memorised it changes that
more. With the text's first :math:`m` scored tokens,

.. math:: s_{\\mathrm{ReCaLL}}(x) = \\frac{\\frac{1}{m} \\sum_{t \\le m} -\\log p_f(x_t \\mid P, x_{<t})}
          {\\frac{1}{m} \\sum_{t \\le m} -\\log p_f(x_t \\mid x_{<t})}

— mimir's ``LL(x | P) / LL(x)``, a ratio of two negative log-likelihoods, the same number. Higher = more likely a
member. **The prefix is made of the public split's texts** (the base model's data, which the audited model was not
fine-tuned on: non-members by construction, never the audited notes), in a seeded order, joined as mimir joins its
shots (no separator), until ``prefix_tokens`` tokens (default: a quarter of the model's context, at most 128; cut
there). The text keeps the first :math:`m` = context − prefix of its audited tokens, and both means run over those
same tokens (mimir scores the whole text with the prefix in sliding windows; here the prefix and the text fit in one
window). The unconditional term is the battery's own token loss (its first token given the BOS alone,
:mod:`toolkit.audit.losses`); with the prefix, the first token is predicted from the prefix's last one, as in mimir.

Needs a causal model, its token losses and the public split; one extra forward pass per document. Limits: the
paper's prefixes are non-members of the *audited* distribution; a public split far from the notes makes a weaker
prefix (its figure is to be measured, not assumed).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from toolkit.audit.losses import TokenLosses, model_max_tokens

#: the prefix's longest length in tokens, and its default share of the model's context
MAX_PREFIX = 128
BATCH = 8


def recall_prefix(tokenizer, public: Sequence[str], n_tokens: int, *, seed: int = 0) -> np.ndarray:
    """The prefix's token ids: the public texts in a seeded order, concatenated, cut to ``n_tokens``."""
    order = np.random.default_rng(seed).permutation(len(public))
    ids: list[int] = []
    for i in order:
        ids += tokenizer(public[int(i)], add_special_tokens=False)["input_ids"]
        if len(ids) >= n_tokens:
            break
    return np.asarray(ids[:n_tokens], dtype=np.int64)


def conditional_losses(model, prefix: np.ndarray, token_ids: Sequence[np.ndarray], *,
                       batch_size: int = BATCH) -> list[np.ndarray]:
    """:math:`-\\log p_f(x_t \\mid P, x_{<t})` of each document's tokens ``token_ids[i]`` after ``prefix``."""
    import torch

    dev = model.get_input_embeddings().weight.device
    out: list[np.ndarray] = [np.zeros(0)] * len(token_ids)
    p = len(prefix)
    order = sorted(range(len(token_ids)), key=lambda i: len(token_ids[i]))
    for b in range(0, len(order), batch_size):
        chunk = [i for i in order[b:b + batch_size] if len(token_ids[i])]
        if not chunk:
            continue
        L = p + max(len(token_ids[i]) for i in chunk)
        x = torch.zeros((len(chunk), L), dtype=torch.long)
        att = torch.zeros((len(chunk), L), dtype=torch.long)
        for r, i in enumerate(chunk):
            seq = np.r_[prefix, token_ids[i]]
            x[r, :len(seq)] = torch.from_numpy(seq)
            att[r, :len(seq)] = 1
        with torch.inference_mode():
            logits = model(input_ids=x.to(dev), attention_mask=att.to(dev)).logits
        for r, i in enumerate(chunk):
            n = len(token_ids[i])
            lp = torch.log_softmax(logits[r, p - 1:p - 1 + n].double(), dim=-1)
            tgt = x[r, p:p + n].to(lp.device)
            out[i] = (-lp.gather(1, tgt[:, None])[:, 0]).cpu().numpy()
    return out


def recall_score(losses: TokenLosses, model, tokenizer, public: Sequence[str], *, prefix_tokens: int | None = None,
                 seed: int = 0, **_) -> np.ndarray:
    """ReCaLL score of each document (module docstring); nan without a scored token."""
    context = model_max_tokens(model) or (losses.window or 256) * 2
    n = prefix_tokens if prefix_tokens is not None else min(MAX_PREFIX, context // 4)
    prefix = recall_prefix(tokenizer, public, n, seed=seed)
    if not len(prefix):
        return np.full(len(losses), np.nan)
    keep = context - len(prefix)
    cut = [t[:keep] for t in losses.token_ids]
    cond = conditional_losses(model, prefix, cut)
    out = np.full(len(losses), np.nan)
    for i, (c, a) in enumerate(zip(cond, losses.losses)):
        m = len(c)
        if m and a[:m].mean() > 0:
            out[i] = c.mean() / a[:m].mean()
    return out


__all__ = ["conditional_losses", "recall_prefix", "recall_score"]
