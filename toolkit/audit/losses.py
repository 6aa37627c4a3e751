"""Per-token losses of documents under a language model, computed once and shared by every attack (methods.md §10).

Definitions
-----------
* causal LM: :math:`\\ell_t = -\\log p_f(x_t \\mid x_{<t})` for every content token: when the tokenizer starts a
  text with no special token (GPT-2), the first content token is scored as :math:`-\\log p_f(x_0 \\mid
  \\mathrm{BOS})` — the BOS (else EOS; ``<|endoftext|>``, :func:`leading_token`) alone, one forward pass shared by
  every document — and every later token exactly as without it. The BOS is *not* put in front of the sequence:
  that would move every token one position from where the model saw it in training (a toolkit-trained GPT-2 never
  saw a BOS; measured: PII-inference top-1 of the quick start's ``clm`` 0.39 → 0.29 with a prepended BOS), so the
  window and the positions are the tokenizer's own;
* masked LM: the pseudo-log-likelihood term :math:`\\ell_t = -\\log p_f(x_t \\mid x_{\\setminus t})` with token ``t``
  alone replaced by the mask token (Salazar et al., "Masked Language Model Scoring", ACL 2020).

Special tokens (CLS, SEP, BOS, EOS added by the tokenizer) are never scored. Documents are cut to the *audit window*:
at most ``window`` tokens, special tokens included (so the window fits a model whose position table has ``window``
rows), and never more than the model's own limit. The mean and standard deviation of :math:`\\log p(v)` under the
predictive distribution — :math:`p(\\cdot \\mid x_{<t})` (causal) or :math:`p(\\cdot \\mid x_{\\setminus t})` at the
masked position (masked) — are kept as well (the Min-K%++ normalisation):

.. math:: \\mu_t = \\sum_v p(v) \\log p(v), \\qquad \\sigma_t^2 = \\sum_v p(v) (\\log p(v))^2 - \\mu_t^2

(as ``mimir/attacks/min_k_plus_plus.py`` in iamgroot42/mimir; Zhang et al., "Min-K%++", 2024).

Speed: causal documents run in padded batches sorted by length, one forward pass per batch. For the PLL every scored
position is one masked copy of its document; copies of many documents are stacked into batches of ``batch_size`` rows
(no attention mask when a batch needs no padding), the LM head applied only at the masked positions when the model is a
base model plus one head (BERT, RoBERTa); on a CUDA out-of-memory error the batch is halved and retried. Budgeted PLL
(``pll_positions=N``) scores N positions per window drawn by :func:`toolkit.audit.pll.draw_positions` (unbiased for the
mean loss, paired across models); strided PLL (``pll_copies=K``) scores every position from K masked copies per window
(:func:`toolkit.audit.pll.strided_groups`). ``benchmarks/attacks.py`` compares exact, budgeted, strided and one
forward per position.

Reuse (:mod:`toolkit.audit.reuse`): a process computes the losses once per (model files, token ids, kind, moments,
estimator) for a model :func:`load_audit_model` loaded from a local folder — the reference model of every audited
checkpoint of a run is scored once; budgeted losses are a subsample of kept exact ones. Models built in memory or
from a hub id are never reused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from toolkit.corpus import ToolkitError
from toolkit.audit.pll import adaptive as _adaptive
from toolkit.audit.pll import check_budget, draw_positions, estimator, masked_log_probs, strided_groups
from toolkit.audit.reuse import files_signature, remember, reuse_key, reused
from toolkit.heap import release_heap
from toolkit.models import load_model, model_kind
from toolkit.progress import progress_bar

__all__ = ["TokenLosses", "candidate_log_likelihoods", "load_audit_model", "model_max_tokens", "model_name", "sequence_log_likelihoods",
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
        Mean and standard deviation of :math:`\\log p(v)` under the predictive distribution (None without moments).
    top1 : list of ndarray or None
        Per scored token: is the model's most likely token the true one (bool; computed with the moments)?
    meta : dict
        Masked: ``meta["pll"]`` = :func:`toolkit.audit.pll.estimator` (exact, or budgeted with N and the seed).
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
    top1: list[np.ndarray] | None = None

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


def leading_token(tokenizer) -> int | None:
    """The context of a causal text's first content token: the BOS (else EOS) id when the tokenizer itself starts a
    text with no special token (GPT-2: ``<|endoftext|>``), so that the first token is scored as
    :math:`-\\log p(x_0 \\mid \\mathrm{BOS})`; ``None`` when the tokenizer adds its own (``[CLS]``, ``<s>``) or has
    neither. It is never put into the sequence (positions stay the tokenizer's)."""
    first = tokenizer("a", add_special_tokens=True, return_special_tokens_mask=True)["special_tokens_mask"]
    if first and first[0]:
        return None
    for name in ("bos_token_id", "eos_token_id"):
        v = getattr(tokenizer, name, None)
        if v is not None:
            return int(v)
    return None


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


def _desc(label: str | None, kind: str, model) -> str:
    """``"<label> PLL · <model>"`` (masked; ``LL`` causal), the model named by its path's last two parts."""
    short = "/".join(model_name(model).replace("\\", "/").rstrip("/").split("/")[-2:])
    return " ".join(filter(None, (label, "PLL" if kind == "mlm" else "LL"))) + f" · {short}"


# ---------------------------------------------------------------------------------------------------------------------
# causal and masked passes


def _causal(model, encoded, batch_size: int, moments: bool, progress: bool, label: str | None = None,
            lead: int | None = None):
    import torch

    n = len(encoded)
    losses: list = [None] * n
    mus: list = [None] * n
    sigmas: list = [None] * n
    tops: list = [None] * n
    # targets after position 0, not special; a content token at position 0 is scored below, given the BOS alone
    keep = [np.flatnonzero(~e[1][1:]) + 1 for e in encoded]
    order = sorted(range(n), key=lambda i: len(encoded[i][0]))
    pad = 0
    dev = _device(model)

    def stats(lp, tgt):
        """(losses, mu, sigma, top-1 right) of the rows of ``lp`` (log-probabilities) at the targets ``tgt``."""
        loss = (-lp.gather(1, tgt[:, None])[:, 0]).double().cpu().numpy()
        if not moments:
            return loss, None, None, None
        p = lp.exp()
        mu = (p * lp).sum(-1)
        var = (p * (lp - mu[:, None]).square()).sum(-1)  # = Σ p (log p)² − μ², without cancellation
        return (loss, mu.double().cpu().numpy(), var.clamp_min(0).sqrt().double().cpu().numpy(),
                (lp.argmax(-1) == tgt).cpu().numpy())

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
                losses[i], mus[i], sigmas[i], tops[i] = stats(lp, x[r, t].to(logits.device))

    bar = progress_bar(total=n, desc=_desc(label, "clm", model), unit="doc", enabled=progress)
    _adaptive(order, batch_size, run, bar)
    bar.close()
    release_heap()  # the passes' freed tensors back to the system (toolkit.heap)
    first = [i for i, e in enumerate(encoded) if lead is not None and len(e[0]) and not e[1][0]]
    if first:  # the first content token of a text without a special start: -log p(x0 | BOS), one forward pass
        with torch.inference_mode():
            bos = torch.tensor([[lead]], device=dev)
            lp0 = torch.log_softmax(model(input_ids=bos, attention_mask=torch.ones_like(bos)).logits[0, -1].float(), -1)
        for i in first:
            loss, mu, sigma, top = stats(lp0[None], torch.tensor([int(encoded[i][0][0])], device=lp0.device))
            keep[i] = np.r_[0, keep[i]]
            losses[i] = np.r_[loss, losses[i]]
            if moments:
                mus[i], sigmas[i], tops[i] = np.r_[mu, mus[i]], np.r_[sigma, sigmas[i]], np.r_[top, tops[i]]
    return (losses, keep, (mus if moments else None), (sigmas if moments else None), (tops if moments else None))


def _resolve_kind(model, kind):
    kind = kind or model_kind(model)
    if kind not in ("clm", "mlm"):
        raise ToolkitError(f"model kind must be 'clm' or 'mlm', got {kind!r}")
    return kind


def _lookup(key, moments: bool, tag: tuple):
    """A kept result for ``key`` and the estimator ``tag`` (one with moments serves a request without them)."""
    if key is None:
        return None
    return reused(key + (moments,) + tag) or (None if moments else reused(key + (True,) + tag))


def token_losses(model, tokenizer, texts: Sequence[str], *, kind: str | None = None, window: int | None = 256,
                 batch_size: int | None = None, moments: bool = True, progress: bool = True,
                 pll_positions: int | str | None = None, pll_seed: int = 0, pll_copies: int | str | None = None,
                 label: str | None = None) -> TokenLosses:
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
        Also compute :math:`\\mu_t, \\sigma_t` (Min-K%++): under :math:`p(\\cdot \\mid x_{<t})` (causal) or
        :math:`p(\\cdot \\mid x_{\\setminus t})` at the masked position (masked).
    pll_positions : int, "all" or None
        Masked only: score N positions per window (:func:`toolkit.audit.pll.draw_positions`, seeded by ``pll_seed``
        and the token ids: the same for every model), the arrays holding those only; ``"all"``/None: exact.
    pll_copies : int, "all" or None
        Masked only: every position scored from ``K`` masked copies per window, copy ``j`` masking every ``K``-th
        position from ``j`` (:func:`toolkit.audit.pll.strided_groups`; an approximation of exact PLL); not together
        with ``pll_positions``.
    label : str, optional
        What the scores are for, in the progress bar: ``"<label> PLL · <model>"`` (e.g. ``"membership"``).
    """
    kind = _resolve_kind(model, kind)
    budget = check_budget(pll_positions) if kind == "mlm" else None
    copies = check_budget(pll_copies, "pll_copies") if kind == "mlm" else None
    if budget is not None and copies is not None:
        raise ToolkitError("pll_positions and pll_copies: give one estimator of the pseudo-log-likelihood, not both")
    model.eval()
    encoded = _encode(tokenizer, texts, _max_tokens(model, window))
    key = reuse_key(model, kind, encoded)
    scorable = [np.flatnonzero(~e[1]) for e in encoded]
    draws = None if budget is None else [draw_positions(e[0][k], budget, pll_seed) for e, k in zip(encoded, scorable)]
    tag = ("copies", copies) if copies is not None else ("all",) if budget is None else (budget, int(pll_seed))
    found = _lookup(key, moments, tag)
    if found is None and draws is not None and (exact := _lookup(key, moments, ("all",))) is not None:
        found = tuple(None if a is None else [x[d] for x, d in zip(a, draws)] for a in exact)  # the same subsample
    if found is not None:
        losses, keep, mus, sigmas, tops = found
        mus, sigmas, tops = (mus, sigmas, tops) if moments else (None, None, None)
    else:
        keep = scorable if draws is None else [k[d] for k, d in zip(scorable, draws)]
        mus = sigmas = tops = None
        if kind == "clm":
            longest = max((len(e[0]) for e in encoded), default=1)
            bs = batch_size or int(np.clip(_CAUSAL_TOKENS // max(longest, 1), 8, 512))
            losses, keep, mus, sigmas, tops = _causal(model, encoded, bs, moments, progress, label,
                                                     leading_token(tokenizer))
        else:
            groups = [[k[g] for g in strided_groups(len(k), copies)] for k in keep]
            lp, mus, sigmas, tops = masked_log_probs(model, tokenizer, encoded, groups, batch_size or 64,
                                                     progress=progress, moments=moments,
                                                     desc=_desc(label, kind, model), with_top1=True)
            tops = tops if moments else None
            # back to position order (the copies return their positions group after group)
            order = [np.argsort(np.concatenate(g), kind="stable") if g else np.zeros(0, np.int64) for g in groups]
            lp, mus, sigmas, tops = ([a[o] for a, o in zip(arrays, order)] if arrays is not None else None
                                     for arrays in (lp, mus, sigmas, tops))
            losses = [-a for a in lp]
        if key is not None:  # kept read-only: every caller gets the same arrays
            for arrays in (losses, keep, mus or [], sigmas or [], tops or []):
                for a in arrays:
                    a.setflags(write=False)
            remember(key + (moments,) + tag, (losses, keep, mus, sigmas, tops))
    return TokenLosses(
        kind=kind, losses=[np.asarray(a, dtype=np.float64) for a in losses],
        token_ids=[e[0][k] for e, k in zip(encoded, keep)], offsets=[e[2][k] for e, k in zip(encoded, keep)],
        window_texts=[e[3] for e in encoded], model_name=model_name(model), window=window,
        n_truncated=sum(e[4] for e in encoded), mu=mus, sigma=sigmas, top1=tops,
        meta={"pll": estimator(budget, pll_seed, copies)} if kind == "mlm" else {})


def sequence_log_likelihoods(model, tokenizer, texts: Sequence[str], *, kind: str | None = None,
                             window: int | None = None, batch_size: int | None = None,
                             progress: bool = True, label: str | None = None,
                             pll_copies: int | str | None = None) -> np.ndarray:
    """Log-likelihood of each text: :math:`\\sum_t \\log p(x_t \\mid x_{<t})` (causal) or its pseudo-log-likelihood
    :math:`\\sum_t \\log p(x_t \\mid x_{\\setminus t})` (masked), special tokens not scored (Salazar et al.
    2020); ``label`` names the progress bar (:func:`token_losses`). Masked: exact by default, or strided with
    ``pll_copies = K`` (every position scored from K masked copies of the text,
    :func:`toolkit.audit.pll.strided_groups`; ignored for a causal model)."""
    tl = token_losses(model, tokenizer, texts, kind=kind, window=window, batch_size=batch_size, moments=False,
                      progress=progress, label=label, pll_copies=pll_copies)
    return np.array([-a.sum() for a in tl.losses])


def span_log_likelihoods(model, tokenizer, texts: Sequence[str], spans: Sequence[tuple[int, int]], *,
                         kind: str | None = None, window: int | None = None, batch_size: int | None = None,
                         progress: bool = True, label: str | None = None) -> np.ndarray:
    """Log-likelihood of the tokens of ``texts[i][start:end]`` in their slot, summed over all of them.

    Causal: :math:`\\sum_{t \\in S} \\log p(x_t \\mid x_{<t})` (from one forward pass of the text). Masked: the
    tokens of the span are masked *together* (so one token of a multi-token identifier cannot be read off the others)
    and :math:`\\sum_{t \\in S} \\log p(x_t \\mid x_{\\setminus S})`. ``S`` = the non-special tokens whose character
    offsets overlap ``[start, end)``; a span with no scored token gets nan (e.g. one cut off by the window).
    """
    kind = _resolve_kind(model, kind)
    if len(spans) != len(texts):
        raise ValueError("texts and spans differ in length")
    if kind == "clm":
        model.eval()
        tl = token_losses(model, tokenizer, texts, kind=kind, window=window, batch_size=batch_size, moments=False,
                          progress=progress, label=label)
        out = []
        for (s, e), off, loss in zip(spans, tl.offsets, tl.losses):
            sel = (off[:, 0] < e) & (off[:, 1] > s)
            out.append(-loss[sel].sum() if sel.any() else np.nan)
        return np.array(out, dtype=float)
    return _masked_spans(model, tokenizer, texts, [[sp] for sp in spans], together=True, window=window,
                         batch_size=batch_size, progress=progress, label=label)


def candidate_log_likelihoods(model, tokenizer, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]], *,
                              kind: str | None = None, window: int | None = None, batch_size: int | None = None,
                              progress: bool = True, label: str | None = None) -> np.ndarray:
    """Candidate-token pseudo-log-likelihood of each text (:mod:`toolkit.audit.pll`):
    :math:`\\sum_{t \\in C} \\log p(x_t \\mid x_{\\setminus t})`, ``C`` the tokens overlapping ``spans[i]`` (character
    ranges of ``texts[i]``: the candidate and its copies), each masked alone — one masked copy per candidate token.
    A causal model: the whole text's log-likelihood (:func:`sequence_log_likelihoods`; its cost does not depend on
    the positions scored). A text with no candidate token gets nan."""
    if _resolve_kind(model, kind) == "clm":
        return sequence_log_likelihoods(model, tokenizer, texts, kind="clm", window=window, batch_size=batch_size,
                                        progress=progress, label=label)
    return _masked_spans(model, tokenizer, texts, spans, together=False, window=window, batch_size=batch_size,
                         progress=progress, label=label)


def _masked_spans(model, tokenizer, texts, spans, *, together: bool, window, batch_size, progress, label) -> np.ndarray:
    """Summed masked log p of the tokens overlapping each text's spans: masked together in one copy
    (``together``, :func:`span_log_likelihoods`) or each alone (:func:`candidate_log_likelihoods`)."""
    from toolkit.audit.pll import candidate_groups, candidate_positions

    if len(spans) != len(texts):
        raise ValueError("texts and spans differ in length")
    model.eval()
    encoded = _encode(tokenizer, texts, _max_tokens(model, window))
    sel = [candidate_positions(special, offs, sp) for sp, (_, special, offs, _, _) in zip(spans, encoded)]
    groups = [([p] if p.size else []) if together else candidate_groups(p) for p in sel]
    # the positions scored and how they are masked are part of what is computed (a document without a span: none)
    key = reuse_key(model, "mlm-spans" if together else "mlm-candidate", encoded, sel)
    found = None if key is None else reused(key)
    if found is not None:
        return found.copy()
    got = masked_log_probs(model, tokenizer, encoded, groups, batch_size or 64, progress=progress,
                           desc=_desc(label, "mlm", model))[0]
    out = np.array([g.sum() if g.size else np.nan for g in got], dtype=float)
    if key is not None:
        remember(key, out.copy())
    return out
