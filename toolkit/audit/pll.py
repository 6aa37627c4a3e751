"""The masked pass of :mod:`toolkit.audit.losses` (:func:`masked_log_probs`: one masked copy of a window per group of
positions, copies of many windows batched) and the budgeted pseudo-log-likelihood: which positions of a window a
masked model scores (methods.md §10).

Exact pseudo-log-likelihood (Salazar et al., "Masked Language Model Scoring", ACL 2020) masks every one of the ``n``
scorable positions of a window, one forward pass of the whole window each. The budgeted estimator scores ``N``
positions per window, drawn once per document by *systematic sampling with a random start*:

.. math:: u \\sim U(0, 1), \\qquad t_j = \\lfloor (u + j)\\, n / N \\rfloor, \\quad j = 0, \\dots, N - 1

(0-based indices into the window's scorable positions). The stride :math:`n / N \\ge 1` makes the :math:`t_j` distinct
and :math:`t_{N-1} < n`, one per stratum: :math:`\\lfloor jn/N \\rfloor \\le t_j < (j+1)n/N`. Position ``i`` is drawn iff
:math:`u \\in \\bigcup_j [iN/n - j, (i+1)N/n - j)`: integer translates of one interval of length :math:`N/n \\le 1`,
which meet :math:`[0, 1)` in a set of total length exactly :math:`N/n`. So every position is drawn with probability
:math:`\\pi_i = N/n`, and the plain mean over the drawn positions is unbiased for the exact mean:

.. math:: \\mathbb{E}\\Big[\\frac{1}{N} \\sum_j \\ell_{t_j}\\Big] = \\frac{1}{N} \\sum_{i=1}^{n} \\pi_i \\ell_i
          = \\frac{1}{n} \\sum_{i=1}^{n} \\ell_i

(Horvitz-Thompson with equal inclusion probabilities; Cochran, *Sampling Techniques*, 3rd ed., ch. 8). Scores linear
in the mean loss (``loss``, ``zlib``, ``reference``) are therefore unbiased; ``min_k`` and ``min_k_plus_plus``
(means of the lowest-k% tail) are estimated from the drawn positions' tail, not unbiased — their agreement with exact
is measured (``benchmarks/attacks.py``). With :math:`N \\ge n` every position is scored (exact).

Strided copies (``pll_copies = K``): every scorable position is scored, but a window is masked in only ``K`` copies,
copy ``j`` masking the positions ``j, j + K, j + 2K, ...`` together (:func:`strided_groups`), so each position is
predicted from the window with every ``K``-th token around it masked too: :math:`-\\log p_f(x_t \\mid x_{\\setminus
\\{t' : t' \\equiv t \\bmod K\\}})`. This is an approximation of exact PLL, not an unbiased estimate (a
position sees ``1/K`` fewer context tokens, about as many as a BERT sees masked in training at ``K = 8``), with no
sampling noise: ``K`` forward passes per window instead of ``n``, deterministic, the same for every model. With
``K ≥ n`` every copy masks one position (exact). Its agreement with exact PLL is measured on notebook 02's models
(``benchmarks/attacks.py``, docs/performance.md): the CPU profile's choice.

Candidate-token pseudo-log-likelihood (``pii_pll_copies = "candidate"``; PII inference and canaries only): where
the texts compared differ only in a few tokens — PII inference's candidate windows differ by the candidate put in the
slot (and its other copies in the window), a canary's records by the secret — each text is scored over *its own*
tokens only, every one of them masked alone:

.. math:: \\mathrm{PLL}_C(w) = \\sum_{t \\in C(w)} \\log p_f(w_t \\mid w_{\\setminus t}) ,

``C(w)`` the non-special tokens whose character offsets overlap the candidate's spans in ``w``
(:func:`candidate_positions`); one masked copy of the whole window per candidate token (:func:`candidate_groups`),
the copies of all texts batched. It is exact PLL restricted to ``C(w)``: the terms of the context tokens, which
depend on the candidate only through their context, are left out (so it is not an estimate of exact PLL, and its
ranking of the candidates is compared with exact PLL's in docs/performance.md). With a window that is the candidate
alone it *is* exact PLL. Cost: ``|C(w)|`` forward passes per text (a few tokens) instead of ``n`` (exact) or ``K``
(strided).

Pairing: ``u`` comes from a generator seeded by (``seed``, SHA-256 of the document's scored token ids and their
count), so every model scoring the same tokens — each audited checkpoint of a run and its reference model — scores
the same positions, whatever the model and the order, and the scores stay paired.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np

from toolkit.errors import ToolkitError
from toolkit.heap import release_heap, release_heap_often
from toolkit.models import split_lm_head
from toolkit.progress import progress_bar

__all__ = ["ALL", "CANDIDATE", "adaptive", "candidate_groups", "candidate_positions", "check_budget",
           "check_pii_estimator", "draw_positions", "estimator", "masked_log_probs", "strided_groups"]

#: the YAML / argument value of exact pseudo-log-likelihood (every position)
ALL = "all"
#: the YAML / argument value of candidate-token pseudo-log-likelihood (PII inference and canaries; module docstring)
CANDIDATE = "candidate"


def check_budget(value, where: str = "pll_positions") -> int | None:
    """``None`` for exact (``"all"`` or ``None``), else the positive integer budget ``N``; anything else is a one-line
    :class:`~toolkit.errors.ToolkitError` naming ``where``."""
    if value is None or value == ALL:
        return None
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1:
        return int(value)
    raise ToolkitError(f"{where}: must be 'all' or an integer >= 1, got {value!r}")


def check_pii_estimator(value, where: str = "pii_pll_copies") -> int | str | None:
    """PII inference's and the canaries' estimator: ``None`` for exact (``"all"`` or ``None``), :data:`CANDIDATE`
    for candidate-token PLL, else the positive integer ``K`` of strided PLL; anything else is a one-line
    :class:`~toolkit.errors.ToolkitError` naming ``where``."""
    if value == CANDIDATE:
        return CANDIDATE
    try:
        return check_budget(value, where)
    except ToolkitError:
        raise ToolkitError(f"{where}: must be 'all', 'candidate' or an integer >= 1, got {value!r}") from None


def candidate_positions(special: np.ndarray, offsets: np.ndarray, spans) -> np.ndarray:
    """Indices (sorted) of a window's candidate tokens: the non-special tokens whose character offsets
    ``[offsets[t, 0], offsets[t, 1])`` overlap one of ``spans`` (``(start, end)`` character ranges of the text)."""
    special = np.asarray(special, dtype=bool)
    offs = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    hit = np.zeros(len(offs), dtype=bool)
    for s, e in spans:
        hit |= (offs[:, 0] < int(e)) & (offs[:, 1] > int(s))
    return np.flatnonzero(hit & ~special).astype(np.int64)


def candidate_groups(positions: np.ndarray) -> list[np.ndarray]:
    """The masked copies of candidate-token PLL: one per candidate token, that token alone masked."""
    return [np.array([int(p)], dtype=np.int64) for p in positions]


def draw_positions(token_ids: np.ndarray, budget: int | None, seed: int) -> np.ndarray:
    """Indices (sorted, 0-based) of the positions scored among a window's ``n = len(token_ids)`` scorable ones: all of
    them when ``budget`` is None or ≥ n, else ``floor((u + j) n / N)``, ``j = 0..N-1``, with ``u`` drawn from a
    generator seeded by ``seed`` and a digest of ``token_ids`` (see the module docstring)."""
    ids = np.ascontiguousarray(token_ids, dtype=np.int64)
    n = ids.size
    if budget is None or budget >= n:
        return np.arange(n, dtype=np.int64)
    h = hashlib.sha256(n.to_bytes(8, "little") + ids.tobytes()).digest()
    rng = np.random.default_rng([int(seed), int.from_bytes(h[:8], "little")])
    u = rng.random()
    return np.minimum(np.floor((u + np.arange(budget)) * n / budget), n - 1).astype(np.int64)  # u < 1: t < n


def strided_groups(n: int, copies: int | None) -> list[np.ndarray]:
    """The masked copies of a window with ``n`` scorable positions (0-based indices): copy ``j`` masks ``j, j + K, j +
    2K, ...`` (``K = copies``); one position per copy when ``copies`` is None or ≥ n (exact)."""
    if copies is None or copies >= n:
        return [np.array([i], dtype=np.int64) for i in range(n)]
    return [np.arange(j, n, copies, dtype=np.int64) for j in range(copies)]


def estimator(budget: int | None, seed: int, copies: int | None = None) -> dict:
    """What ``TokenLosses.meta["pll"]`` and ``attacks.json`` record: ``{"estimator": "exact", "positions": "all"}``,
    ``{"estimator": "budgeted", "positions": N, "seed": seed}``, ``{"estimator": "strided", "copies": K,
    "positions": "all"}`` or (``copies = "candidate"``) ``{"estimator": "candidate-token", "positions":
    "candidate"}``."""
    if copies == CANDIDATE:
        return {"estimator": "candidate-token", "positions": CANDIDATE}
    if copies is not None:
        return {"estimator": "strided", "copies": int(copies), "positions": ALL}
    if budget is None:
        return {"estimator": "exact", "positions": ALL}
    return {"estimator": "budgeted", "positions": int(budget), "seed": int(seed)}


# ---------------------------------------------------------------------------------------------------------------------
# the masked pass (one masked copy per group of positions)


def adaptive(jobs: Sequence, batch_size: int, run: Callable, bar) -> None:
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
        release_heap_often()  # freed tensors back to the system during a long pass too (toolkit.heap)
        if bar is not None:
            bar.update(len(chunk))


def masked_log_probs(model, tokenizer, encoded, groups, batch_size: int, *, progress: bool = True,
                     moments: bool = False, desc: str = "PLL", with_top1: bool = False) -> tuple:
    """Log-probabilities of masked tokens. ``groups[i]`` is a list of position arrays of document ``i``: every array
    is one masked copy (its positions masked together); returns, per document, the concatenated log p of the
    positions in group order, and with ``moments`` the mean and standard deviation of log p(v) under each masked
    position's distribution (else None, None); ``with_top1``: a fourth list, per position whether the masked
    distribution's most likely token is the true one (1.0) or not (0.0)."""
    import torch

    mask_id = tokenizer.mask_token_id
    if mask_id is None:
        raise ToolkitError(f"{type(model).__name__}: the tokenizer has no mask token; a masked LM needs one")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    split = split_lm_head(model)
    dev = model.get_input_embeddings().weight.device
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
            lp = torch.log_softmax(logits.double(), dim=-1)  # rows x vocab at masked positions only: cheap
            got = [lp.gather(1, target.to(lp.device)[:, None])[:, 0]]
            if moments:  # as the causal pass, under p(. | x without the masked positions)
                p = lp.exp()
                mu = (p * lp).sum(-1)
                got += [mu, (p * (lp - mu[:, None]).square()).sum(-1).clamp_min(0).sqrt()]
            if with_top1:
                got.append((lp.argmax(-1) == target.to(lp.device)).double())
            got = [a.double().cpu().numpy() for a in got]
        k = 0
        for i, g in chunk:
            m = len(groups[i][g])
            res[(i, g)] = [a[k:k + m] for a in got]
            k += m

    bar = progress_bar(total=len(jobs), desc=desc, unit="copy", enabled=progress)
    adaptive(jobs, batch_size, run, bar)
    bar.close()
    release_heap()  # the passes' freed tensors back to the system (toolkit.heap: else ~1 MB per text kept)
    out = [[np.concatenate([res[(i, g)][c] for g in range(len(groups[i]))]) if groups[i] else np.zeros(0)
            for i in range(len(encoded))] for c in range((3 if moments else 1) + with_top1)]
    top1 = [a > 0.5 for a in out[-1]] if with_top1 else None
    head = (out[0], out[1], out[2]) if moments else (out[0], None, None)
    return (*head, top1) if with_top1 else head
