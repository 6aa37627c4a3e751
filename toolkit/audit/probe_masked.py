"""Fill-mask probing of a masked language model on its own training documents (methods.md §4, paper 000 §5.1).

Every word position of every probed document is masked exactly once. Documents are cut into chunks of at most
``max_length`` tokens (:func:`~toolkit.strategies.encoding.encode_corpus`, never inside a word); the words of a chunk
are spread over ``ceil(1 / mask_rate)`` *passes* (7 for the default 15%), each pass being one copy of the chunk in
which about ``mask_rate`` of its words are masked — every sub-token of a masked word is replaced by the mask token.
The predicted word is the decoded arg-max token at each of its positions (``tokenizer.decode(ids).strip()``, then
NFKC + lower-case); for words of a single token the ``top_k`` alternatives are kept too.

Choices (methods.md §4):

* **all occurrences of a protected word type in a chunk are masked in the same pass**: otherwise the model copies a
  name from its other, visible occurrence, and even a model that never saw the document "leaks" it. A type is
  *protected in a chunk* when at least one of its occurrences in that chunk is a protected position (from
  ``positions``); then all its occurrences in the chunk (protected or not) form one group. Every other word is a
  group of its own.
* groups are assigned to passes by a seeded shuffle followed by a greedy balance (largest groups first, each to the
  least-loaded pass; singletons therefore go round-robin in shuffled order), so pass sizes differ by at most the
  size of the largest group. The shuffle of a chunk is seeded by ``(seed, crc32(doc_id), chunk number in the
  document)``: the result is deterministic and the passes of a document do not depend on which other documents are
  probed with it.
* a word longer than a whole window is the only one ``encode_corpus`` splits across chunks; it is probed once, in its
  first chunk, from the tokens it has there.
* special tokens in a prediction are skipped when decoding; a prediction that decodes to nothing (e.g. only
  ``[UNK]``/``[PAD]``) is ``None`` ("predicts no type", as :mod:`toolkit.metrics` expects).

Speed: all (chunk, pass) masked copies are sorted by length and run through the model in batches of ``batch_size``
padded sequences under ``torch.inference_mode()``. When the model splits into a base model and a single LM-head
module (``BertForMaskedLM``: ``bert`` + ``cls``; ``RobertaForMaskedLM``: ``roberta`` + ``lm_head``; ALBERT, ...),
only the hidden states of masked positions go through the head (the vocabulary projection is most of the cost of a
small model); this split is checked once against the full model's logits on the first sequence and abandoned for
the plain ``model(...).logits`` route if they disagree or the model has no such split (DistilBERT, ELECTRA).
``benchmarks/probe.py`` compares the probe with the ``transformers`` fill-mask pipeline.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.identifiers.words import normalize_term, segment_corpus
from toolkit.models import split_lm_head
from toolkit.strategies import word_rows_of_positions
from toolkit.strategies.encoding import encode_corpus
from toolkit.progress import progress_bar

COLUMNS = ["doc_id", "person_id", "word_row", "start", "end", "original", "predicted", "correct", "protected",
           "direct", "indirect", "n_tokens", "top_k", "pass_index", "chunk"]


# ---------------------------------------------------------------------------------------------------------------------
# pass assignment


def n_passes(mask_rate: float) -> int:
    """Number of passes that mask every word once at ``mask_rate`` words per pass: ``ceil(1 / mask_rate)``."""
    return max(1, math.ceil(1.0 / mask_rate - 1e-9))


def assign_passes(group_sizes: np.ndarray, n_pass: int, rng: np.random.Generator) -> np.ndarray:
    """Pass index of every group: seeded shuffle, then largest groups first, each to the least-loaded pass.

    Ties go to the lowest pass index. Groups of size 1 (most words) are placed by water-filling, vectorised: the
    greedy choice for the s-th singleton is the s-th smallest free "slot" ``(load level, pass)``.
    """
    G = len(group_sizes)
    out = np.zeros(G, dtype=np.int64)
    if G == 0:
        return out
    P = max(1, min(n_pass, G))
    perm = rng.permutation(G)
    order = perm[np.argsort(-group_sizes[perm], kind="stable")]
    loads = np.zeros(P, dtype=np.int64)
    multi = order[group_sizes[order] > 1]
    for g in multi:
        p = int(np.argmin(loads))
        out[g] = p
        loads[p] += group_sizes[g]
    single = order[group_sizes[order] <= 1]
    S = len(single)
    if S:
        levels = loads[:, None] + np.arange(S)[None, :]  # (P, S): slot s of pass p sits at load level loads[p] + s
        passes = np.broadcast_to(np.arange(P)[:, None], levels.shape)
        key = levels.ravel() * P + passes.ravel()
        take = np.argpartition(key, S - 1)[:S] if S < key.size else np.arange(key.size)
        take = take[np.argsort(key[take], kind="stable")]
        out[single] = passes.ravel()[take]
    return rng.permutation(P)[out]  # ties favour low pass numbers: relabel so no pass is systematically larger


# ---------------------------------------------------------------------------------------------------------------------
# model helpers


def max_positions(model, tokenizer, max_length: int) -> int:
    limits = [max_length]
    tml = getattr(tokenizer, "model_max_length", None)
    if isinstance(tml, int) and 0 < tml < 1_000_000:
        limits.append(tml)
    mpe = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    if isinstance(mpe, int) and mpe > 0:
        # RoBERTa-style embeddings number positions from padding_idx + 1
        emb = getattr(getattr(model, "base_model", None), "embeddings", None)
        pad = getattr(emb, "padding_idx", None)
        limits.append(mpe - (pad + 1) if isinstance(pad, int) and mpe > pad + 1 else mpe)
    return min(limits)


def topk_at_masks(model, sequences: list[tuple[np.ndarray, np.ndarray]], *, mask_id: int, pad_id: int, k: int,
                  batch_size: int = 64, progress: bool = False, device=None, desc: str = "fill-mask",
                  with_probs: bool = False):
    """Top-``k`` token ids (and, ``with_probs``, their softmax probabilities) at masked positions, batched.

    ``sequences[j] = (ids, t)``: token ids (special tokens included) and the positions ``t`` to replace by ``mask_id``.
    Sequences are sorted by length and run ``batch_size`` at a time, padded with ``pad_id``, under
    ``torch.inference_mode()``; when the model splits into a base model and one LM-head module
    (:func:`toolkit.models.split_lm_head`) only the masked positions go through the head (checked once against the
    full model's logits, abandoned if they disagree). Returns ``(tops, head_only)`` — ``tops[j]`` an array
    ``(len(t), k)`` of ids, best first (``(ids, probs)`` pairs when ``with_probs``), in the order of ``sequences``.
    """
    import torch

    if device is not None:
        model.to(device)
    dev = next(model.parameters()).device
    was_training = model.training
    model.eval()
    split = split_lm_head(model)
    order = sorted(range(len(sequences)), key=lambda s: -len(sequences[s][0]))
    out: list = [None] * len(sequences)
    head_checked = False
    try:
        with torch.inference_mode():
            for b0 in progress_bar(range(0, len(order), batch_size), desc=desc, unit="batch", enabled=progress):
                idx = order[b0:b0 + batch_size]
                batch = [sequences[s] for s in idx]
                L = max(len(ids) for ids, _ in batch)
                x = np.full((len(batch), L), pad_id, dtype=np.int64)
                att = np.zeros((len(batch), L), dtype=np.int64)
                bi, ti = [], []
                for j, (ids, t) in enumerate(batch):
                    x[j, :len(ids)] = ids
                    x[j, t] = mask_id
                    att[j, :len(ids)] = 1
                    bi.append(np.full(len(t), j))
                    ti.append(np.asarray(t, dtype=np.int64))
                b_idx = torch.from_numpy(np.concatenate(bi)).to(dev)
                t_idx = torch.from_numpy(np.concatenate(ti)).to(dev)
                xt, at = torch.from_numpy(x).to(dev), torch.from_numpy(att).to(dev)
                logits = None
                if split is not None:
                    try:
                        hidden = split[0](input_ids=xt, attention_mask=at)[0]
                        logits = split[1](hidden[b_idx, t_idx])
                    except Exception:  # noqa: BLE001 - an unusual head signature: use the full model instead
                        split, logits = None, None
                    if split is not None and not head_checked:
                        head_checked = True
                        first = b_idx == 0
                        full = model(input_ids=xt[:1], attention_mask=at[:1]).logits[0, t_idx[first]]
                        if full.shape != logits[first].shape or not torch.allclose(
                                full.float(), logits[first].float(), rtol=1e-3, atol=1e-3):
                            split, logits = None, None
                if logits is None:
                    logits = model(input_ids=xt, attention_mask=at).logits[b_idx, t_idx]
                logits = logits.float()
                top = torch.topk(logits, min(k, logits.shape[-1]), dim=-1)
                ids_np = top.indices.cpu().numpy()
                probs_np = (top.values - torch.logsumexp(logits, dim=-1, keepdim=True)).exp().cpu().numpy() \
                    if with_probs else None
                bounds = np.cumsum([0] + [len(t) for _, t in batch])
                for j, s in enumerate(idx):
                    lo, hi = bounds[j], bounds[j + 1]
                    out[s] = (ids_np[lo:hi], probs_np[lo:hi]) if with_probs else ids_np[lo:hi]
    finally:
        if was_training:
            model.train()
    return out, split is not None


# ---------------------------------------------------------------------------------------------------------------------
# the probe


def word_normaliser(lowercase: bool):
    """``norm(text)``: stripped, NFKC (and lower-cased) word, ``None`` for an empty prediction; cached per string."""
    cache: dict[str, str] = {}

    def norm(s: str) -> str | None:
        s = s.strip()
        if not s:
            return None
        v = cache.get(s)
        if v is None:
            v = cache[s] = normalize_term(s, lowercase)
        return v

    return norm


def prediction_frame(docs, doc_ids, words, w_rows: np.ndarray, predicted: np.ndarray, topk_col: np.ndarray,
                     n_tok: np.ndarray, protected: np.ndarray, direct: np.ndarray, indirect: np.ndarray, *,
                     pass_index: np.ndarray, chunk: np.ndarray) -> pd.DataFrame:
    """The probes' output: one row per probed word-table row ``w_rows``, in the :data:`COLUMNS` layout."""
    person = np.asarray([d.person_id for d in docs], dtype=object)
    doc_arr = np.asarray(doc_ids, dtype=object)
    wd = words.doc[w_rows] if len(w_rows) else np.zeros(0, dtype=np.int64)
    original = words.vocab[words.term[w_rows]] if len(w_rows) else np.zeros(0, dtype=object)
    return pd.DataFrame({
        "doc_id": doc_arr[wd], "person_id": person[wd], "word_row": w_rows.astype(np.int64),
        "start": words.start[w_rows].astype(np.int64), "end": words.end[w_rows].astype(np.int64),
        "original": pd.Series(original, dtype=object).to_numpy(), "predicted": predicted,
        "correct": np.asarray([p == o for p, o in zip(predicted, original)], dtype=bool),
        "protected": protected[w_rows], "direct": direct[w_rows], "indirect": indirect[w_rows],
        "n_tokens": n_tok.astype(np.int64), "top_k": topk_col, "pass_index": pass_index, "chunk": chunk,
    }, columns=COLUMNS)


def decode_word_predictions(tokenizer, top_ids: np.ndarray, first: np.ndarray, n_tok: np.ndarray, top_k: int,
                            norm) -> tuple[np.ndarray, np.ndarray]:
    """Predicted word and top-k alternatives of every probed word (shared by the masked and causal probes).

    ``top_ids[t]`` holds the top token ids predicted at token ``t`` (column 0: the arg-max); word ``j`` covers tokens
    ``first[j] : first[j] + n_tok[j]``. The predicted word is the decoded arg-max tokens (special tokens skipped),
    normalised by ``norm``; single-token words also get their ``top_k`` alternatives, multi-token words ``[]``.
    Each distinct single token is decoded once.
    """
    single = n_tok == 1
    argmax = top_ids[:, 0]
    uniq_ids = np.unique(top_ids[first[single]])
    one = dict(zip(uniq_ids.tolist(),
                   tokenizer.batch_decode([[i] for i in uniq_ids.tolist()], skip_special_tokens=True)))
    predicted = np.empty(len(first), dtype=object)
    topk_col = np.empty(len(first), dtype=object)
    for j in np.flatnonzero(single):
        predicted[j] = norm(one[int(argmax[first[j]])])
        topk_col[j] = [norm(one[int(i)]) or "" for i in top_ids[first[j], :top_k]] if top_k else []
    multi = np.flatnonzero(~single)
    if len(multi):
        decoded = tokenizer.batch_decode([argmax[first[j]:first[j] + n_tok[j]].tolist() for j in multi],
                                         skip_special_tokens=True)
        for j, text in zip(multi, decoded):
            predicted[j] = norm(text)
            topk_col[j] = []
    return predicted, topk_col


def probe_masked(model, tokenizer, corpus, *, positions: pd.DataFrame | None, max_length: int = 256,
                 mask_rate: float = 0.15, seed: int = 0, top_k: int = 5, batch_size: int = 64,
                 progress: bool = True, device=None, lowercase: bool = True) -> pd.DataFrame:
    """Fill-mask probe of ``model`` on the documents of ``corpus`` (methods.md §4); one row per word occurrence.

    Parameters
    ----------
    model, tokenizer:
        A masked LM and its fast tokenizer (``toolkit.models.load_model``).
    corpus:
        A :class:`~toolkit.corpus.Corpus` (or sequence of documents) — the training documents to probe.
    positions:
        Protected word occurrences (``IdentifierAnalysis.positions()`` / ``positions.parquet``: doc_id, start,
        direct, indirect); rows of documents outside ``corpus`` are ignored. ``None``: nothing is protected (no
        grouping; the protected/direct/indirect columns are all False).
    max_length:
        Chunk length in tokens, special tokens included (capped by the tokenizer's and the model's limits).
    mask_rate:
        Share of a chunk's words masked per pass; ``ceil(1 / mask_rate)`` passes. A tiny rate (``1e-9``) masks one
        word (group) per pass.
    seed:
        Seed of the pass assignment.
    top_k:
        Number of alternatives kept for single-token words (0: none).
    batch_size:
        Sequences per forward pass.
    device:
        Where to run (the model is moved there); default: the model's current device.
    lowercase:
        Compare words after lower-casing (always after NFKC), as the identifier analysis (methods.md §1).

    Returns
    -------
    DataFrame with columns doc_id, person_id, word_row (row of the probed corpus' ``WordTable``, in corpus order),
    start, end, original, predicted (normalised; ``None`` when nothing decodable was predicted), correct, protected,
    direct, indirect, n_tokens, top_k (list of ``top_k`` normalised alternatives, best first — the first is the
    prediction —, ``""`` for a special token, for single-token words; empty otherwise), pass_index (the pass that masked
    the word, 0-based within its chunk), chunk (the chunk of the document it was probed in, 0-based). Rows are in corpus
    order. ``df.attrs``: ``n_words_without_tokens`` (words no token was assigned to: dropped), ``n_sequences``,
    ``n_chunks``, ``head_only`` (whether the LM head was applied only at masked positions).
    """
    if not 0.0 < float(mask_rate) <= 1.0:
        raise ToolkitError(f"mask_rate must lie in (0, 1], got {mask_rate!r}")
    if top_k < 0 or batch_size < 1:
        raise ToolkitError(f"top_k must be >= 0 and batch_size >= 1, got top_k={top_k}, batch_size={batch_size}")
    mask_id = getattr(tokenizer, "mask_token_id", None)
    if mask_id is None:
        raise ToolkitError("the tokenizer has no mask token: fill-mask probing needs a masked language model")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    docs = list(corpus)
    doc_ids = [d.doc_id for d in docs]
    texts = [d.text for d in docs]
    words = segment_corpus(texts, lowercase=lowercase, progress=False)
    n_words = len(words)

    # protected / direct / indirect per word row
    direct = np.zeros(n_words, dtype=bool)
    indirect = np.zeros(n_words, dtype=bool)
    protected = np.zeros(n_words, dtype=bool)
    if positions is not None and len(positions) and n_words:
        pos = positions[positions["doc_id"].isin(set(doc_ids))]
        if len(pos):
            rows = word_rows_of_positions(words, doc_ids, pos)
            protected[rows] = True  # positions lists the protected occurrences
            if "direct" in pos:
                direct[rows] = pos["direct"].to_numpy(dtype=bool)
            if "indirect" in pos:
                indirect[rows] = pos["indirect"].to_numpy(dtype=bool)

    max_length = max_positions(model, tokenizer, max_length)
    enc = encode_corpus(texts, tokenizer, max_length=max_length, words=words, progress=progress)

    # ---- passes: one masked copy per (chunk, pass) -------------------------------------------------------------------
    P_max = n_passes(mask_rate)
    word_pass = np.full(n_words, -1, dtype=np.int64)
    word_chunk = np.full(n_words, -1, dtype=np.int64)
    seen = np.zeros(n_words, dtype=bool)
    seqs: list[tuple[int, np.ndarray]] = []  # (chunk index, token positions to mask)
    chunk_in_doc = 0
    for c, (ids, rows_tok) in enumerate(zip(enc.input_ids, enc.word_row)):
        d = int(enc.chunk_doc[c])
        chunk_in_doc = chunk_in_doc + 1 if c and enc.chunk_doc[c - 1] == d else 0
        in_word = rows_tok >= 0
        u = np.unique(rows_tok[in_word])
        u = u[~seen[u]]  # a word split across chunks (longer than a window) is probed in its first chunk only
        if len(u) == 0:
            continue
        seen[u] = True
        term = words.term[u].astype(np.int64)
        prot_terms = np.unique(term[protected[u]])
        key = np.where(np.isin(term, prot_terms), term, -1 - np.arange(len(u)))
        _, group = np.unique(key, return_inverse=True)
        sizes = np.bincount(group)
        rng = np.random.default_rng([int(seed), zlib.crc32(doc_ids[d].encode("utf-8")), chunk_in_doc])
        gpass = assign_passes(sizes, P_max, rng)
        word_pass[u] = gpass[group]
        word_chunk[u] = chunk_in_doc
        tok_pass = np.full(len(rows_tok), -1, dtype=np.int64)
        loc = np.searchsorted(u, rows_tok)
        ok = in_word & (loc < len(u))
        ok[ok] &= u[loc[ok]] == rows_tok[ok]
        tok_pass[ok] = word_pass[rows_tok[ok]]
        for p in range(int(gpass.max()) + 1):
            t = np.flatnonzero(tok_pass == p)
            if len(t):
                seqs.append((c, t))

    # ---- forward passes -------------------------------------------------------------------------------------------
    tops, head_only = topk_at_masks(model, [(enc.input_ids[c], t) for c, t in seqs], mask_id=mask_id, pad_id=pad_id,
                                    k=max(1, int(top_k)), batch_size=batch_size, progress=progress, device=device,
                                    desc="probing (fill-mask)")
    k = max(1, int(top_k))

    # ---- words from tokens ------------------------------------------------------------------------------------------
    if seqs:
        t_row = np.concatenate([enc.word_row[c][t] for c, t in seqs])
        t_top = np.concatenate(tops)
    else:
        t_row = np.zeros(0, dtype=np.int64)
        t_top = np.zeros((0, k), dtype=np.int64)
    srt = np.argsort(t_row, kind="stable")  # tokens of one word come from one sequence, in order
    t_row, t_top = t_row[srt], t_top[srt]
    w_rows, first, n_tok = np.unique(t_row, return_index=True, return_counts=True)
    norm = word_normaliser(lowercase)

    predicted, topk_col = decode_word_predictions(tokenizer, t_top, first, n_tok, top_k, norm)

    out = prediction_frame(docs, doc_ids, words, w_rows, predicted, topk_col, n_tok, protected, direct, indirect,
                           pass_index=word_pass[w_rows], chunk=word_chunk[w_rows])
    out.attrs.update({"n_words_without_tokens": int(n_words - len(w_rows)), "n_sequences": len(seqs),
                      "n_chunks": len(enc), "head_only": head_only, "mask_rate": float(mask_rate),
                      "seed": int(seed)})
    return out


__all__ = ["COLUMNS", "assign_passes", "n_passes", "probe_masked", "topk_at_masks"]
