"""Next-word probing of a causal language model on its own training documents (methods.md §4, paper 001 §5.3), and
free-running regurgitation of identifiers.

:func:`probe_causal` — teacher forcing. Documents are cut into chunks of at most ``max_length`` tokens
(:func:`~toolkit.strategies.encoding.encode_corpus`, never inside a word) and every chunk goes through the model
once. The prediction for token ``t`` is the arg-max of the logits at ``t - 1``; the predicted word at a word position
is the decoded arg-max tokens over that word's token positions (``tokenizer.decode(ids).strip()``, then NFKC +
lower-case, as :func:`~toolkit.audit.probe_masked.probe_masked`). The output has the fill-mask probe's columns, so
:mod:`toolkit.audit.evaluate` and :mod:`toolkit.metrics` take it unchanged.

Choices:

* **only the first occurrence of a protected type in a document counts** (methods.md §4): a later occurrence can be
  copied from the prefix, so even a model that never saw the document would "leak" it. A type is protected in a
  document when at least one of its occurrences there is a protected position (``positions``); then only its first
  occurrence in the document (protected or not) is counted, the later ones (protected or not) are not. By default
  those rows are dropped (``include_uncounted=False``; their number is ``attrs["n_uncounted"]``), so every metric
  computed on the result already follows the choice; with ``include_uncounted=True`` they are kept with
  ``counted=False`` and callers must filter ``df[df["counted"]]`` before computing metrics.
* **sequences as training saw them** (measured, see below): by default (``add_bos=False``) a chunk is exactly the
  chunk :func:`~toolkit.strategies.training_examples` trains on when ``max_length`` is the training ``max_length``
  (256 in the CPU profile): the toolkit's CLM training adds no BOS token, so a document's tokens sit at positions
  0, 1, ... The first token of a chunk then has no prediction: the word at the start of every chunk (a document's
  first word, and the first word of any later chunk) is not probed (dropped; ``attrs["n_words_unpredicted"]``).
  ``add_bos=True`` instead reserves one slot per window for a context token — the tokenizer's BOS (else EOS;
  ``<|endoftext|>`` for GPT-2) before a document's first chunk, the previous chunk's last token before a later one
  — so every word is predicted; use it for models trained with BOS-delimited documents (GPT-2's own pre-training).
  Measured on a tiny GPT-2 that memorised 3 sentences *without* BOS: word accuracy 1.00 as trained, 0.04 with a
  BOS token prepended (every token shifted one position); trained *with* BOS: 0.96 with, 0.10 without. When the
  tokenizer adds its own prefix (``<s>`` for Llama-style tokenizers), every chunk keeps it, so every word is
  predicted, and nothing is added.
* a word longer than a whole window is the only one split across chunks; it is probed once, in its first chunk,
  from the tokens it has there (as the fill-mask probe).
* ``top_k``: the ``top_k`` alternatives of single-token words are kept (first = the prediction); empty for words of
  several tokens.

Token accuracy (methods.md §4 "for CLM also token accuracy") is ``attrs["token_accuracy"]``: the share of tokens of
counted non-protected words whose arg-max is the actual token; per word, ``n_tokens_correct`` holds the numerator so
that it can be recomputed on any subset (``df.n_tokens_correct.sum() / df.n_tokens.sum()`` over non-protected rows).

Speed: chunks are sorted by length and run in batches of ``batch_size`` right-padded sequences under
``torch.inference_mode()`` without a KV cache; when the model is a base model plus one LM-head module
(``GPT2LMHeadModel``: ``transformer`` + ``lm_head``, Llama: ``model`` + ``lm_head``), the vocabulary projection is
applied only at the positions that predict a word token (checked once against the full logits, as the fill-mask
probe) and in slices of ``_HEAD_SLICE`` positions, keeping only the top-k ids. ``benchmarks/probe_causal.py``
compares with a per-document loop: on this CPU (1 thread, 100 notes, GPT-2 2x128) both run at 50-60 documents/s
with identical predictions (the tiny model is compute-bound there; batching should pay off on an accelerator, not
measured).

:func:`regurgitation_rate` — the share of a document's later identifiers that the greedy continuation of its first
tokens reproduces verbatim (the continuations come from :func:`toolkit.audit.generation.generate_ids`).
"""

from __future__ import annotations

import secrets

import numpy as np
import pandas as pd

from toolkit.errors import ToolkitError
from toolkit.identifiers.words import iter_words, normalize_term, segment_corpus
from toolkit.models import split_lm_head
from toolkit.strategies import word_rows_of_positions
from toolkit.strategies.encoding import encode_corpus, special_template
from toolkit.audit.probe_masked import COLUMNS as MASKED_COLUMNS
from toolkit.audit.probe_masked import max_positions, decode_word_predictions, prediction_frame, word_normaliser
from toolkit.audit.generation import context_token, generate_ids
from toolkit.audit.hashing import SCHEME, active_key, hash_term
from toolkit.progress import progress_bar

COLUMNS = MASKED_COLUMNS + ["counted", "n_tokens_correct"]

#: Positions per slice when the LM head is applied (bounds the ``positions x vocabulary`` logits in memory).
_HEAD_SLICE = 1024


def _protection(words, doc_ids, positions):
    """protected / direct / indirect per word row from an identifiers ``positions`` frame (None: nothing)."""
    n = len(words)
    direct, indirect, protected = (np.zeros(n, dtype=bool) for _ in range(3))
    if positions is not None and len(positions) and n:
        pos = positions[positions["doc_id"].isin(set(doc_ids))]
        if len(pos):
            rows = word_rows_of_positions(words, doc_ids, pos)
            protected[rows] = True
            if "direct" in pos:
                direct[rows] = pos["direct"].to_numpy(dtype=bool)
            if "indirect" in pos:
                indirect[rows] = pos["indirect"].to_numpy(dtype=bool)
    return protected, direct, indirect


def counted_occurrences(words, protected: np.ndarray) -> np.ndarray:
    """Boolean per word row: False for every occurrence of a protected type in a document but its first (methods.md §4).

    A type is protected in a document when one of its occurrences there is protected; its first occurrence in the
    document counts whether or not that occurrence is itself protected.
    """
    n = len(words)
    if n == 0:
        return np.ones(0, dtype=bool)
    key = words.doc.astype(np.int64) * np.int64(max(len(words.vocab), 1)) + words.term.astype(np.int64)
    prot_keys = np.unique(key[protected])
    if len(prot_keys) == 0:
        return np.ones(n, dtype=bool)
    _, first = np.unique(key, return_index=True)  # rows are in corpus order: the first row of a key is its first use
    is_first = np.zeros(n, dtype=bool)
    is_first[first] = True
    return ~np.isin(key, prot_keys) | is_first


# ---------------------------------------------------------------------------------------------------------------------
# teacher-forced probe


def probe_causal(model, tokenizer, corpus, *, positions: pd.DataFrame | None, max_length: int = 256,
                 batch_size: int = 32, progress: bool = True, device=None, lowercase: bool = True,
                 top_k: int = 5, add_bos: bool = False, include_uncounted: bool = False) -> pd.DataFrame:
    """Teacher-forced next-word probe of a causal LM on the documents of ``corpus`` (methods.md §4); one row per word.

    Parameters
    ----------
    model, tokenizer:
        A causal LM and its fast tokenizer (``toolkit.models.load_model(..., kind="clm")``).
    corpus:
        A :class:`~toolkit.corpus.Corpus` (or sequence of documents) — the training documents to probe.
    positions:
        Protected word occurrences (``IdentifierAnalysis.positions()`` / ``positions.parquet``: doc_id, start,
        direct, indirect); rows of documents outside ``corpus`` are ignored. ``None``: nothing is protected.
    max_length:
        Window in tokens, context token included (capped by the tokenizer's and the model's limits).
    batch_size:
        Chunks per forward pass.
    device:
        Where to run (the model is moved there); default: the model's current device.
    lowercase:
        Compare words after lower-casing (always after NFKC), as the identifier analysis (methods.md §1).
    top_k:
        Alternatives kept for single-token words (0: none).
    add_bos:
        Put the BOS (else EOS) token before each document, and the previous chunk's last token before a later chunk,
        so that every word is predicted. Default False: sequences exactly as the toolkit's CLM training built them,
        the first word of every chunk unpredicted (module docstring: the model must see what it was trained on).
    include_uncounted:
        Keep the later occurrences of protected types (``counted=False``); callers must then filter on ``counted``.

    Returns
    -------
    DataFrame with the columns of :func:`~toolkit.audit.probe_masked.probe_masked` — doc_id, person_id, word_row
    (row of the probed corpus' ``WordTable``), start, end, original, predicted (normalised; ``None`` when nothing
    decodable was predicted), correct, protected, direct, indirect, n_tokens, top_k, pass_index (always 0), chunk
    (chunk of the document, 0-based) — plus ``counted`` and ``n_tokens_correct`` (tokens of the word whose arg-max
    is the actual token). Rows are in corpus order. ``df.attrs``: ``token_accuracy`` (None without scored tokens),
    ``n_tokens_scored``, ``n_uncounted`` (later occurrences of protected types; dropped unless
    ``include_uncounted``), ``n_words_without_tokens``, ``n_words_unpredicted`` (words at a sequence's first
    position: no prediction; dropped), ``n_chunks``, ``n_sequences``, ``head_only``, ``context`` (``"bos"``,
    ``"template"`` or ``"none"``: what precedes a document's first token).
    """
    import torch

    if top_k < 0 or batch_size < 1:
        raise ToolkitError(f"top_k must be >= 0 and batch_size >= 1, got top_k={top_k}, batch_size={batch_size}")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (context_token(tokenizer) or 0)

    docs = list(corpus)
    doc_ids = [d.doc_id for d in docs]
    texts = [d.text for d in docs]
    words = segment_corpus(texts, lowercase=lowercase, progress=False)
    n_words = len(words)
    protected, direct, indirect = _protection(words, doc_ids, positions)
    counted = counted_occurrences(words, protected)

    max_length = max_positions(model, tokenizer, max_length)
    prefix, _ = special_template(tokenizer)
    reserve = 1 if add_bos and not prefix else 0  # one slot for the context token (BOS / previous chunk's last)
    if max_length - reserve < 1:
        raise ToolkitError(f"max_length {max_length} leaves no room for tokens")
    bos = context_token(tokenizer) if add_bos and not prefix else None
    context = "template" if prefix else ("bos" if bos is not None else "none")
    enc = encode_corpus(texts, tokenizer, max_length=max_length - reserve, words=words, progress=progress)
    _, suffix = special_template(tokenizer)

    # ---- sequences: (ids, positions t >= 1 whose token is predicted, word rows of those tokens) ----------------------
    seqs: list[np.ndarray] = []
    seq_rows: list[np.ndarray] = []
    targets: list[np.ndarray] = []
    word_chunk = np.full(n_words, -1, dtype=np.int64)
    seen = np.zeros(n_words, dtype=bool)
    unpredicted = np.zeros(n_words, dtype=bool)
    chunk_in_doc = 0
    for c, (ids, rows) in enumerate(zip(enc.input_ids, enc.word_row)):
        d = int(enc.chunk_doc[c])
        first_chunk = not (c and enc.chunk_doc[c - 1] == d)
        chunk_in_doc = 0 if first_chunk else chunk_in_doc + 1
        if reserve:
            if first_chunk:
                ctx = [bos] if bos is not None else []
            else:
                prev = enc.input_ids[c - 1]
                prev = prev[len(prefix):len(prev) - len(suffix)]
                ctx = [int(prev[-1])] if len(prev) else ([bos] if bos is not None else [])
            if ctx:
                ids = np.concatenate([np.asarray(ctx, dtype=np.int64), ids])
                rows = np.concatenate([np.full(len(ctx), -1, dtype=np.int64), rows])
        in_word = rows >= 0
        u = np.unique(rows[in_word])
        u = u[~seen[u]]  # a word split across chunks (longer than a window) is probed in its first chunk only
        if len(u) == 0:
            continue
        seen[u] = True
        word_chunk[u] = chunk_in_doc
        if in_word[0]:
            unpredicted[rows[0]] = True  # nothing precedes it: the word has no prediction
        t = np.flatnonzero(in_word)
        t = t[np.isin(rows[t], u) & ~unpredicted[rows[t]]]
        if len(t) == 0:
            continue
        seqs.append(ids)
        seq_rows.append(rows)
        targets.append(t)

    # ---- forward passes -------------------------------------------------------------------------------------------
    if device is not None:
        model.to(device)
    dev = next(model.parameters()).device
    was_training = model.training
    model.eval()
    split = split_lm_head(model)
    k = max(1, int(top_k))
    order = sorted(range(len(seqs)), key=lambda s: -len(seqs[s]))
    tok_rows, tok_top, tok_true = [], [], []
    head_checked = False

    def top_of(logits_of, n):
        """Top-k token ids of ``n`` positions, the logits computed ``_HEAD_SLICE`` positions at a time."""
        parts = []
        for i in range(0, n, _HEAD_SLICE):
            lg = logits_of(i, min(i + _HEAD_SLICE, n)).float()
            parts.append(torch.topk(lg, min(k, lg.shape[-1]), dim=-1).indices)
        return torch.cat(parts).cpu().numpy()

    try:
        with torch.inference_mode():
            for b0 in progress_bar(range(0, len(order), batch_size), desc="probing (next word)", unit="batch",
                                   enabled=progress):
                batch = order[b0:b0 + batch_size]
                L = max(len(seqs[s]) for s in batch)
                x = np.full((len(batch), L), pad_id, dtype=np.int64)
                att = np.zeros((len(batch), L), dtype=np.int64)
                bi, ti = [], []
                for j, s in enumerate(batch):
                    ids, t = seqs[s], targets[s]
                    x[j, :len(ids)] = ids
                    att[j, :len(ids)] = 1
                    bi.append(np.full(len(t), j))
                    ti.append(t - 1)  # the logits at t - 1 predict token t
                    tok_true.append(ids[t])
                    tok_rows.append(seq_rows[s][t])
                b_idx = torch.from_numpy(np.concatenate(bi)).to(dev)
                t_idx = torch.from_numpy(np.concatenate(ti)).to(dev)
                xt, at = torch.from_numpy(x).to(dev), torch.from_numpy(att).to(dev)
                top = None
                if split is not None:
                    try:
                        hidden = split[0](input_ids=xt, attention_mask=at, use_cache=False)[0][b_idx, t_idx]
                        if not head_checked:
                            head_checked = True
                            first = b_idx == 0
                            n0 = int(at[0].sum())
                            full = model(input_ids=xt[:1, :n0], attention_mask=at[:1, :n0],
                                         use_cache=False).logits[0, t_idx[first]].float()
                            mine = split[1](hidden[first]).float()
                            if full.shape != mine.shape or not torch.allclose(full, mine, rtol=1e-3, atol=1e-3):
                                raise ValueError("the base model + head split does not reproduce the logits")
                        top = top_of(lambda i, j: split[1](hidden[i:j]), len(hidden))
                    except Exception:  # noqa: BLE001 - unusual base/head signatures: use the full model instead
                        split, top = None, None
                if top is None:
                    logits = model(input_ids=xt, attention_mask=at, use_cache=False).logits
                    top = top_of(lambda i, j: logits[b_idx[i:j], t_idx[i:j]], len(b_idx))
                tok_top.append(top)
    finally:
        if was_training:
            model.train()

    # ---- words from tokens ------------------------------------------------------------------------------------------
    if tok_rows:
        t_row = np.concatenate(tok_rows)
        t_top = np.concatenate(tok_top)
        t_true = np.concatenate(tok_true)
    else:
        t_row = np.zeros(0, dtype=np.int64)
        t_top = np.zeros((0, k), dtype=np.int64)
        t_true = np.zeros(0, dtype=np.int64)
    srt = np.argsort(t_row, kind="stable")  # the tokens of a word come from one sequence, in order
    t_row, t_top, t_true = t_row[srt], t_top[srt], t_true[srt]
    argmax = t_top[:, 0]
    w_rows, first, n_tok = np.unique(t_row, return_index=True, return_counts=True)
    n_ok = np.add.reduceat((argmax == t_true).astype(np.int64), first) if len(first) else np.zeros(0, np.int64)
    norm = word_normaliser(lowercase)

    predicted, topk_col = decode_word_predictions(tokenizer, t_top, first, n_tok, top_k, norm)

    out = prediction_frame(docs, doc_ids, words, w_rows, predicted, topk_col, n_tok, protected, direct, indirect,
                           pass_index=np.zeros(len(w_rows), dtype=np.int64), chunk=word_chunk[w_rows])
    out["counted"] = counted[w_rows]
    out["n_tokens_correct"] = n_ok.astype(np.int64)
    out = out[COLUMNS]
    scored = out["counted"].to_numpy() & ~out["protected"].to_numpy()
    n_scored = int(out["n_tokens"].to_numpy()[scored].sum())
    n_uncounted = int((~out["counted"]).sum())
    if not include_uncounted:
        out = out[out["counted"].to_numpy()].reset_index(drop=True)
    out.attrs.update({
        "token_accuracy": float(out.loc[out["counted"] & ~out["protected"], "n_tokens_correct"].sum() / n_scored)
        if n_scored else None,
        "n_tokens_scored": n_scored, "n_uncounted": n_uncounted,
        "n_words_without_tokens": int(n_words - int(seen.sum())), "n_words_unpredicted": int(unpredicted.sum()),
        "n_chunks": len(enc), "n_sequences": len(seqs), "head_only": split is not None, "context": context,
        "include_uncounted": bool(include_uncounted),
    })
    return out


# ---------------------------------------------------------------------------------------------------------------------
# free-running regurgitation


def regurgitation_rate(model, tokenizer, corpus, identifiers: set[str], *, prefix_tokens: int = 32,
                       max_new_tokens: int = 64, batch_size: int = 32, progress: bool = True, device=None,
                       lowercase: bool = True, add_bos: bool = False, n_examples: int = 5,
                       hash_key: bytes | None = None, by_type: bool = False) -> dict:
    """Free-running regurgitation: the share of a document's later identifiers that the greedy continuation of its
    first tokens reproduces verbatim (issue 001; methods.md §4 *Regurgitation* for the teacher-forced counterpart).

    For each document the prompt is its first ``prefix_tokens`` tokens, cut back to the end of the last whole word
    (a prompt never ends inside a word or with a space; when the first word alone is longer, the prompt is that
    word), starting at position 0 as in training; ``add_bos`` puts the BOS (else EOS) token first when the tokenizer
    adds no prefix of its own (as :func:`probe_causal`). The *targets* are the identifier types (normalised members
    of ``identifiers``) occurring as words after the prompt, **except those already in the prompt** (they
    could be copied, as methods.md §4's first-occurrence choice). A target is *reproduced* when it is a word of the
    greedy continuation (``max_new_tokens`` tokens). Documents without a target are not generated.

    Returns ``{"n_documents", "n_prompted" (documents with a target), "n_identifier_occurrences" (targets: distinct
    types per document, summed), "n_reproduced", "share_reproduced" (None without targets), "n_excluded_in_prompt",
    "prefix_tokens", "max_new_tokens", "examples_hashed", "examples_hash", "by_person"}`` — ``by_person``: per
    person id (the documents' ``person_id``) ``[targets, reproduced]``, what :func:`with_nonmembers` tests over;
    ``examples_hashed``: keyed
    :func:`~toolkit.audit.hashing.hash_term` of up to ``n_examples`` reproduced types under ``hash_key`` (default: the
    run's :func:`~toolkit.audit.hashing.active_key`, else a one-off key nobody keeps); ``examples_hash`` says which.
    With ``by_type``, also ``by_type``: per target type ``[documents it was a target in, reproduced]`` — in memory
    only, for :mod:`toolkit.audit.missed`, which hashes the types before anything is written.
    """
    if prefix_tokens < 1:
        raise ToolkitError(f"prefix_tokens must be >= 1, got {prefix_tokens}")
    key = hash_key if hash_key is not None else active_key()
    scheme = f"{SCHEME} with " + ("the run's key" if key is not None else "a one-off key nobody kept")
    key = key if key is not None else secrets.token_bytes(32)
    ids_norm = {normalize_term(str(t), lowercase) for t in identifiers}
    docs = list(corpus)
    texts = [d.text for d in docs]
    prefix, _ = special_template(tokenizer)
    bos = context_token(tokenizer) if add_bos and not prefix else None
    prompts, targets, people, n_excluded = [], [], [], 0
    for b0 in range(0, len(texts), 256):
        enc = tokenizer(texts[b0:b0 + 256], add_special_tokens=True, return_offsets_mapping=True)
        for doc, text, ids, offs in zip(docs[b0:b0 + 256], texts[b0:b0 + 256], enc["input_ids"],
                                        enc["offset_mapping"]):
            spans = iter_words(text)
            content = [(i, o) for i, o in zip(ids, offs) if o[1] > o[0]]
            if len(content) <= prefix_tokens:
                continue
            cut = content[prefix_tokens - 1][1][1]
            for s, e in spans:
                if s < cut < e:  # never end the prompt inside a word: cut before it, or after it if it is the first
                    cut = s if text[:s].strip() else e
                    break
            cut = len(text[:cut].rstrip())
            before = {normalize_term(text[s:e], lowercase) for s, e in spans if e <= cut}
            after = {normalize_term(text[s:e], lowercase) for s, e in spans if s >= cut} & ids_norm
            n_excluded += len(after & before)
            after -= before
            if not after:
                continue
            p_ids = tokenizer(text[:cut], add_special_tokens=True)["input_ids"] if cut else []
            prompts.append(([bos] if bos is not None else []) + list(p_ids))
            targets.append(after)
            people.append(str(getattr(doc, "person_id", "")))
    conts = generate_ids(model, tokenizer, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size,
                         progress=progress, device=device) if prompts else []
    reproduced: set[str] = set()
    n_targets = n_rep = 0
    by_person: dict[str, list[int]] = {}
    per_type: dict[str, list[int]] = {}
    for ids, want, person in zip(conts, targets, people):
        text = tokenizer.decode(ids, skip_special_tokens=True)
        got = {normalize_term(text[s:e], lowercase) for s, e in iter_words(text)}
        hit = want & got
        n_targets += len(want)
        n_rep += len(hit)
        reproduced |= hit
        counts = by_person.setdefault(person, [0, 0])
        counts[0] += len(want)
        counts[1] += len(hit)
        for t in want:
            c = per_type.setdefault(t, [0, 0])
            c[0] += 1
            c[1] += t in hit
    out = {
        "n_documents": len(docs), "n_prompted": len(prompts), "n_identifier_occurrences": n_targets,
        "n_reproduced": n_rep, "share_reproduced": n_rep / n_targets if n_targets else None,
        "n_excluded_in_prompt": n_excluded, "prefix_tokens": int(prefix_tokens), "max_new_tokens": int(max_new_tokens),
        "examples_hashed": sorted(hash_term(t, key) for t in reproduced)[:max(0, int(n_examples))],
        "examples_hash": scheme, "by_person": by_person,
    }
    if by_type:
        out["by_type"] = per_type
    return out


def with_nonmembers(members: dict, nonmembers: dict, *, seed: int = 0, n_permutations: int = 9999) -> dict:
    """The members' :func:`regurgitation_rate` result with the non-members' (``nonmembers``: its totals) and the
    members' advantage over them (``member_advantage``: :func:`toolkit.metrics.significance.member_advantage_test`
    over individuals, the verdict's test, methods.md §11). The per-person counts are used, not kept."""
    from toolkit.metrics.significance import member_advantage_test

    bm, bn = members.get("by_person") or {}, nonmembers.get("by_person") or {}
    test = member_advantage_test([v[1] for v in bm.values()], [v[0] for v in bm.values()],
                                 [v[1] for v in bn.values()], [v[0] for v in bn.values()], seed=seed,
                                 n_permutations=n_permutations)
    out = {k: v for k, v in members.items() if k not in ("by_person", "by_type")}
    out["nonmembers"] = {k: v for k, v in nonmembers.items() if k not in ("by_person", "by_type", "examples_hashed")}
    out["member_advantage"] = test
    return out


__all__ = ["COLUMNS", "counted_occurrences", "probe_causal", "regurgitation_rate", "with_nonmembers"]
