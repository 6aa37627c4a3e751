"""Per-token losses of documents under a language model, computed once and shared by every attack (methods.md §10).

Definitions
-----------
* causal LM: :math:`\\ell_t = -\\log p_f(x_t \\mid x_{<t})` for every token after the first;
* masked LM: the pseudo-log-likelihood term :math:`\\ell_t = -\\log p_f(x_t \\mid x_{\\setminus t})` with token ``t``
  alone replaced by the mask token (Salazar et al., "Masked Language Model Scoring", ACL 2020).

Special tokens (CLS, SEP, BOS, EOS added by the tokenizer) are never scored. Documents are cut to the *audit window*:
at most ``window`` tokens, special tokens included (so the window fits a model whose position table has ``window``
rows), and never more than the model's own limit. For causal models the mean and standard deviation of
:math:`\\log p(v)` under :math:`p(\\cdot \\mid x_{<t})` are kept as well (the Min-K%++ normalisation):

.. math:: \\mu_t = \\sum_v p(v) \\log p(v), \\qquad \\sigma_t^2 = \\sum_v p(v) (\\log p(v))^2 - \\mu_t^2

(as ``mimir/attacks/min_k_plus_plus.py`` in iamgroot42/mimir; Zhang et al., "Min-K%++", 2024).

Speed: causal documents are sorted by length and run in padded batches (attention mask), one forward pass per batch.
For the pseudo-log-likelihood every scored position is one masked copy of its document; copies of many documents
are stacked into batches of ``batch_size`` rows (no attention mask when a batch needs no padding), and when the model
is a base model plus one LM head (BERT, RoBERTa) the head is applied only at the masked positions. On a CUDA
out-of-memory error the batch size is halved and the batch retried. ``benchmarks/attacks.py`` compares this with one
forward per masked position.

Reuse: the losses depend only on the model's weights and the token ids, so a process computes them once per (model
files, token ids, kind, moments). A model loaded by :func:`load_audit_model` from a local folder carries a signature
of its files (paths, sizes, modification times); the reference model of every audited checkpoint of a run is the
same base model scoring the same windows, so its losses are computed for the first checkpoint and reused for the
others (and the base model's own audit serves them when the windows are tokenised alike). Models from elsewhere (a
hub id, a model built in memory) are never reused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from toolkit.corpus import ToolkitError
from toolkit.audit.reuse import files_signature, remember, reuse_key, reused
from toolkit.models import load_model, model_kind

__all__ = ["TokenLosses", "load_audit_model", "model_max_tokens", "model_name", "sequence_log_likelihoods",
           "span_log_likelihoods", "token_losses"]

#: default causal batch: documents per forward pass so that a batch holds about this many tokens
_CAUSAL_TOKENS = 2048
#: models whose position ids start after the padding index (``max_position_embeddings - padding_idx - 1`` usable)
_OFFSET_POSITION_MODELS = ("roberta", "xlm-roberta", "camembert", "longformer", "bart", "mpnet")


@dataclass
class TokenLosses:
    """Per-document, per-token losses of one model (all arrays aligned with the scored tokens of each document).

    Attributes
    ----------
    kind : {"clm", "mlm"}
    losses : list of ndarray
        :math:`\\ell_t` of each scored token (float64).
    token_ids : list of ndarray
        The scored tokens' ids.
    offsets : list of ndarray
        ``(n, 2)`` character offsets of the scored tokens in the document.
    window_texts : list of str
        The audited window of each document (the text up to the end of its last token in the window).
    mu, sigma : list of ndarray or None
        Causal only: mean and standard deviation of :math:`\\log p(v)` under the predictive distribution.
    """

    kind: str
    losses: list[np.ndarray]
    token_ids: list[np.ndarray]
    offsets: list[np.ndarray]
    window_texts: list[str]
    model_name: str = ""
    window: int | None = None
    n_truncated: int = 0
    mu: list[np.ndarray] | None = None
    sigma: list[np.ndarray] | None = None
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.losses)

    @property
    def n_tokens(self) -> np.ndarray:
        return np.array([a.size for a in self.losses], dtype=np.int64)

    def log_probs(self, i: int) -> np.ndarray:
        """:math:`\\log p(x_t)` of document ``i``'s scored tokens."""
        return -self.losses[i]

    def mean_loss(self) -> np.ndarray:
        """Mean token loss per document (nan for a document without scored tokens)."""
        return np.array([a.mean() if a.size else np.nan for a in self.losses])


def model_name(model) -> str:
    cfg = getattr(model, "config", None)
    return str(getattr(cfg, "_name_or_path", "") or getattr(cfg, "name_or_path", "") or type(model).__name__)


def model_max_tokens(model) -> int | None:
    """Longest sequence the model's position table accepts (``None``: no limit known, e.g. rotary only)."""
    cfg = model.config
    n = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
    if n is None:
        return None
    if getattr(cfg, "model_type", "") in _OFFSET_POSITION_MODELS:
        n -= (getattr(cfg, "pad_token_id", None) or 0) + 1
    return int(n)


def load_audit_model(name_or_path, kind: str | None = None, *, dtype=None, device_map=None):
    """``(model, tokenizer)`` in evaluation mode, optionally in ``dtype`` (``"bf16"``, ``"fp16"``, ``"fp32"``, a
    ``torch.dtype`` or ``"auto"``) and dispatched with ``device_map`` (e.g. ``"auto"``); both are passed to
    ``from_pretrained``. Without them this is :func:`toolkit.models.load_model` (with all its checks)."""
    import torch

    if dtype is None and device_map is None:
        model, tok = load_model(name_or_path, kind)
        model.toolkit_files = files_signature(name_or_path)
        return model.eval(), tok
    names = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
             "fp32": torch.float32, "float32": torch.float32}
    dt = names.get(dtype, dtype) if isinstance(dtype, str) else dtype
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    src = str(name_or_path)
    try:
        archs = AutoConfig.from_pretrained(src).architectures or []
        if kind is None:
            kind = "clm" if any(a.endswith(("LMHeadModel", "ForCausalLM")) for a in archs) else "mlm"
        tok = AutoTokenizer.from_pretrained(src)
        auto = AutoModelForCausalLM if kind == "clm" else AutoModelForMaskedLM
        kwargs = {k: v for k, v in (("dtype", dt), ("device_map", device_map)) if v is not None}
        model = auto.from_pretrained(src, **kwargs)
    except (OSError, ValueError, RuntimeError) as exc:
        raise ToolkitError(f"{src}: cannot load the model ({type(exc).__name__}: {exc})") from exc
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model.toolkit_files = files_signature(src, dt)
    return model.eval(), tok


# ---------------------------------------------------------------------------------------------------------------------
# tokenisation and batching helpers


def _device(model):
    return model.get_input_embeddings().weight.device


def _encode(tokenizer, texts: Sequence[str], max_tokens: int | None):
    """Token ids, special-token masks and offsets of each text, cut to ``max_tokens`` tokens (specials included)."""
    if not getattr(tokenizer, "is_fast", False):
        raise ToolkitError("a fast tokenizer (tokenizer.json) is required: token offsets locate the audited window")
    enc = tokenizer(list(texts), add_special_tokens=True, truncation=max_tokens is not None, max_length=max_tokens,
                    return_offsets_mapping=True, return_special_tokens_mask=True)
    out = []
    for i, text in enumerate(texts):
        ids = np.asarray(enc["input_ids"][i], dtype=np.int64)
        special = np.asarray(enc["special_tokens_mask"][i], dtype=bool)
        offs = np.asarray(enc["offset_mapping"][i], dtype=np.int64).reshape(-1, 2)
        content_end = int(offs[~special, 1].max()) if (~special).any() else 0
        truncated = bool(text[content_end:].strip())  # the tokens stop before the end of the text
        out.append((ids, special, offs, text[:content_end] if truncated else text, truncated))
    return out


def _max_tokens(model, window: int | None) -> int | None:
    limits = [n for n in (window, model_max_tokens(model)) if n is not None]
    return min(limits) if limits else None


def _adaptive(jobs: Sequence, batch_size: int, run: Callable, bar) -> None:
    """Run ``run(chunk)`` over consecutive chunks of ``jobs``; halve the chunk on a CUDA out-of-memory error."""
    import torch

    i, bs = 0, max(1, int(batch_size))
    while i < len(jobs):
        chunk = jobs[i:i + bs]
        try:
            run(chunk)
        except torch.OutOfMemoryError:
            if bs == 1:
                raise
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            bs = max(1, bs // 2)
            continue
        i += len(chunk)
        if bar is not None:
            bar.update(len(chunk))


def _head_split(model):
    """``(base, head)`` when the model is a base model plus one LM-head module holding the output embeddings."""
    base = getattr(model, "base_model", None)
    out_emb = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if base is None or base is model or out_emb is None:
        return None
    heads = [m for _, m in model.named_children() if m is not base and next(m.parameters(), None) is not None]
    if len(heads) != 1 or not any(m is out_emb for m in heads[0].modules()):
        return None
    return base, heads[0]


def _bar(total: int, desc: str, progress: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not progress, unit="seq", leave=False)


# ---------------------------------------------------------------------------------------------------------------------
# causal and masked passes


def _causal(model, encoded, batch_size: int, moments: bool, progress: bool):
    import torch

    n = len(encoded)
    losses: list = [None] * n
    mus: list = [None] * n
    sigmas: list = [None] * n
    keep = [np.flatnonzero(~e[1][1:]) + 1 for e in encoded]  # targets: after the first token, not special
    order = sorted(range(n), key=lambda i: len(encoded[i][0]))
    pad = 0
    dev = _device(model)

    def run(chunk):
        L = max(len(encoded[i][0]) for i in chunk)
        x = torch.full((len(chunk), L), pad, dtype=torch.long)
        att = torch.zeros((len(chunk), L), dtype=torch.long)
        for r, i in enumerate(chunk):
            ids = encoded[i][0]
            x[r, :len(ids)] = torch.from_numpy(ids)
            att[r, :len(ids)] = 1
        with torch.inference_mode():
            logits = model(input_ids=x.to(dev), attention_mask=att.to(dev)).logits
            for r, i in enumerate(chunk):
                t = torch.from_numpy(keep[i])
                lp = torch.log_softmax(logits[r, (t - 1).to(logits.device)].float(), dim=-1)
                tgt = x[r, t].to(logits.device)
                losses[i] = (-lp.gather(1, tgt[:, None])[:, 0]).double().cpu().numpy()
                if moments:
                    p = lp.exp()
                    mu = (p * lp).sum(-1)
                    var = (p * (lp - mu[:, None]).square()).sum(-1)  # = Σ p (log p)² − μ², without cancellation
                    mus[i] = mu.double().cpu().numpy()
                    sigmas[i] = var.clamp_min(0).sqrt().double().cpu().numpy()

    bar = _bar(n, f"LL {model_name(model)}", progress)
    _adaptive(order, batch_size, run, bar)
    bar.close()
    return losses, keep, (mus if moments else None), (sigmas if moments else None)


def _masked_jobs(model, tokenizer, encoded, groups, batch_size: int, progress: bool) -> list[np.ndarray]:
    """Log-probabilities of masked tokens. ``groups[i]`` is a list of position arrays of document ``i``: every array
    is one masked copy (its positions masked together); returns, per document, the concatenated log p of the
    positions in group order."""
    import torch

    mask_id = tokenizer.mask_token_id
    if mask_id is None:
        raise ToolkitError(f"{model_name(model)}: the tokenizer has no mask token; a masked LM needs one")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    split = _head_split(model)
    dev = _device(model)
    jobs = [(i, g) for i in sorted(range(len(encoded)), key=lambda i: len(encoded[i][0]))
            for g in range(len(groups[i]))]
    res: dict = {}

    def run(chunk):
        L = max(len(encoded[i][0]) for i, _ in chunk)
        x = torch.full((len(chunk), L), pad, dtype=torch.long)
        att = torch.zeros((len(chunk), L), dtype=torch.long)
        rows, cols = [], []
        for r, (i, g) in enumerate(chunk):
            ids = encoded[i][0]
            x[r, :len(ids)] = torch.from_numpy(ids)
            att[r, :len(ids)] = 1
            pos = groups[i][g]
            rows += [r] * len(pos)
            cols += pos.tolist()
        rows_t, cols_t = torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long)
        target = x[rows_t, cols_t].clone()
        x[rows_t, cols_t] = mask_id
        # copies of one document have one length: without padding, no mask (the fused attention's fast path)
        att_d = None if bool(att.all()) else att.to(dev)
        with torch.inference_mode():
            if split is not None:
                hidden = split[0](input_ids=x.to(dev), attention_mask=att_d)[0]
                logits = split[1](hidden[rows_t.to(hidden.device), cols_t.to(hidden.device)])
            else:
                logits = model(input_ids=x.to(dev), attention_mask=att_d).logits
                logits = logits[rows_t.to(logits.device), cols_t.to(logits.device)]
            lp = torch.log_softmax(logits.float(), dim=-1)
            got = lp.gather(1, target.to(lp.device)[:, None])[:, 0].double().cpu().numpy()
        k = 0
        for i, g in chunk:
            m = len(groups[i][g])
            res[(i, g)] = got[k:k + m]
            k += m

    bar = _bar(len(jobs), f"PLL {model_name(model)}", progress)
    _adaptive(jobs, batch_size, run, bar)
    bar.close()
    return [np.concatenate([res[(i, g)] for g in range(len(groups[i]))]) if groups[i] else np.zeros(0)
            for i in range(len(encoded))]


def _resolve_kind(model, kind):
    kind = kind or model_kind(model)
    if kind not in ("clm", "mlm"):
        raise ToolkitError(f"model kind must be 'clm' or 'mlm', got {kind!r}")
    return kind


def token_losses(model, tokenizer, texts: Sequence[str], *, kind: str | None = None, window: int | None = 256,
                 batch_size: int | None = None, moments: bool = True, progress: bool = True) -> TokenLosses:
    """Per-token losses :math:`\\ell_t` of every text under ``model`` (see the module docstring).

    Parameters
    ----------
    kind : {"clm", "mlm"}, optional
        Read from the model's class when omitted (:func:`toolkit.models.model_kind`).
    window : int or None
        Audit window in tokens, special tokens included (also capped by the model's position table).
    batch_size : int, optional
        Sequences per forward pass: documents (causal; default as many as hold ~2,048 tokens, 8 to 512) or
        masked copies (masked; default 64).
    moments : bool
        Causal only: also compute :math:`\\mu_t, \\sigma_t` (Min-K%++).
    """
    kind = _resolve_kind(model, kind)
    model.eval()
    encoded = _encode(tokenizer, texts, _max_tokens(model, window))
    key = reuse_key(model, kind, encoded)
    found = None if key is None else (reused(key + (moments,)) or (None if moments else reused(key + (True,))))
    if found is not None:
        losses, keep, mus, sigmas = found
        mus, sigmas = (mus, sigmas) if moments else (None, None)
    else:
        keep = [np.flatnonzero(~e[1]) for e in encoded]
        mus = sigmas = None
        if kind == "clm":
            longest = max((len(e[0]) for e in encoded), default=1)
            bs = batch_size or int(np.clip(_CAUSAL_TOKENS // max(longest, 1), 8, 512))
            losses, keep, mus, sigmas = _causal(model, encoded, bs, moments, progress)
        else:
            groups = [[np.array([p]) for p in k] for k in keep]
            losses = [-a for a in _masked_jobs(model, tokenizer, encoded, groups, batch_size or 64, progress)]
        if key is not None:  # kept read-only: every caller gets the same arrays
            for arrays in (losses, keep, mus or [], sigmas or []):
                for a in arrays:
                    a.setflags(write=False)
            remember(key + (moments,), (losses, keep, mus, sigmas))
    return TokenLosses(
        kind=kind, losses=[np.asarray(a, dtype=np.float64) for a in losses],
        token_ids=[e[0][k] for e, k in zip(encoded, keep)], offsets=[e[2][k] for e, k in zip(encoded, keep)],
        window_texts=[e[3] for e in encoded], model_name=model_name(model), window=window,
        n_truncated=sum(e[4] for e in encoded), mu=mus, sigma=sigmas)


def sequence_log_likelihoods(model, tokenizer, texts: Sequence[str], *, kind: str | None = None,
                             window: int | None = None, batch_size: int | None = None,
                             progress: bool = True) -> np.ndarray:
    """Log-likelihood of each text: :math:`\\sum_t \\log p(x_t \\mid x_{<t})` (causal) or its pseudo-log-likelihood
    :math:`\\sum_t \\log p(x_t \\mid x_{\\setminus t})` (masked), special tokens not scored (Salazar et al. 2020)."""
    tl = token_losses(model, tokenizer, texts, kind=kind, window=window, batch_size=batch_size, moments=False,
                      progress=progress)
    return np.array([-a.sum() for a in tl.losses])


def span_log_likelihoods(model, tokenizer, texts: Sequence[str], spans: Sequence[tuple[int, int]], *,
                         kind: str | None = None, window: int | None = None, batch_size: int | None = None,
                         progress: bool = True) -> np.ndarray:
    """Log-likelihood of the tokens of ``texts[i][start:end]`` in their slot, summed over all of them.

    Causal: :math:`\\sum_{t \\in S} \\log p(x_t \\mid x_{<t})` (from one forward pass of the text). Masked: the
    tokens of the span are masked *together* (so one token of a multi-token identifier cannot be read off the others)
    and :math:`\\sum_{t \\in S} \\log p(x_t \\mid x_{\\setminus S})`. ``S`` = the non-special tokens whose character
    offsets overlap ``[start, end)``; a span with no scored token gets nan (e.g. the first token of a causal text).
    """
    kind = _resolve_kind(model, kind)
    model.eval()
    if len(spans) != len(texts):
        raise ValueError("texts and spans differ in length")
    if kind == "clm":
        tl = token_losses(model, tokenizer, texts, kind=kind, window=window, batch_size=batch_size, moments=False,
                          progress=progress)
        out = []
        for (s, e), off, loss in zip(spans, tl.offsets, tl.losses):
            sel = (off[:, 0] < e) & (off[:, 1] > s)
            out.append(-loss[sel].sum() if sel.any() else np.nan)
        return np.array(out, dtype=float)
    encoded = _encode(tokenizer, texts, _max_tokens(model, window))
    groups = []
    for (s, e), (_, special, offs, _, _) in zip(spans, encoded):
        sel = np.flatnonzero(~special & (offs[:, 0] < e) & (offs[:, 1] > s))
        groups.append([sel] if sel.size else [])
    # the positions masked together are part of what is computed (a document without a span: none)
    key = reuse_key(model, "mlm-spans", encoded, [g[0] if g else () for g in groups])
    found = None if key is None else reused(key)
    if found is not None:
        return found.copy()
    got = _masked_jobs(model, tokenizer, encoded, groups, batch_size or 64, progress)
    out = np.array([g.sum() if g.size else np.nan for g in got], dtype=float)
    if key is not None:
        remember(key, out.copy())
    return out
